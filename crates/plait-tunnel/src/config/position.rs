//! Where an error is: 1-based line and column of a byte offset, and the TOML path of the
//! field at an offset (walking toml's spanned document), with toml's messages tidied.

use std::ops::Range;

use toml::Spanned;

/// 1-based line and column (in characters) of byte `offset` in `text`.
pub(super) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    (line, column)
}

pub(super) fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}.{name}")
    }
}

/// The first `` `name` `` of a serde message ("unknown field `x`", "missing field `x`").
pub(super) fn backticked_field(message: &str) -> Option<&str> {
    if !(message.starts_with("missing field `") || message.starts_with("unknown field `")) {
        return None;
    }
    let start = message.find('`')? + 1;
    let len = message[start..].find('`')?;
    Some(&message[start..start + len])
}

/// serde's wording, in TOML's terms.
pub(super) fn tidy(message: &str) -> String {
    let mut m = message
        .replace("expected i64", "expected an integer")
        .replace("expected f64", "expected a number")
        .replace("expected a sequence", "expected an array")
        .replace("invalid type: sequence", "invalid type: array")
        .replace("invalid type: map", "invalid type: table");
    while let Some(at) = m.find("expected struct ") {
        let rest = &m[at + "expected struct ".len()..];
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        m = format!("{}expected a table{}", &m[..at], &rest[end..]);
    }
    m
}

/// The TOML path of the smallest key or value whose span holds `pos`.
pub(super) fn field_at(doc: &toml::de::DeTable<'_>, pos: usize) -> Option<String> {
    let mut best: Option<(usize, String)> = None;
    walk_table(doc, "", &mut |span, path| {
        let holds = span.start <= pos && (pos < span.end || (span.is_empty() && pos == span.start));
        // `<=`: on a tie (an array of tables and its first table share the first header's
        // span) the deeper node, visited later, wins.
        if holds && best.as_ref().is_none_or(|(len, _)| span.len() <= *len) {
            best = Some((span.len(), path.to_owned()));
        }
    });
    best.map(|(_, path)| path)
}

/// Calls `visit(span, path)` for every key and every value under `table`.
pub(super) fn walk_table(
    table: &toml::de::DeTable<'_>,
    prefix: &str,
    visit: &mut dyn FnMut(Range<usize>, &str),
) {
    for (key, value) in table.iter() {
        let path = join(prefix, key.get_ref());
        visit(key.span(), &path);
        walk_value(value, &path, visit);
    }
}

pub(super) fn walk_value(
    value: &Spanned<toml::de::DeValue<'_>>,
    path: &str,
    visit: &mut dyn FnMut(Range<usize>, &str),
) {
    visit(value.span(), path);
    match value.get_ref() {
        toml::de::DeValue::Table(table) => walk_table(table, path, visit),
        toml::de::DeValue::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                walk_value(item, &format!("{path}[{i}]"), visit);
            }
        }
        _ => {}
    }
}
