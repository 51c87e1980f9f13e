//! Why a file was refused and where: [`ConfigError`], and [`Doc`], which places an error in
//! the text, whether it comes from toml (with toml's own span) or from a later check.
//!
//! Invariant: every [`ConfigError::Invalid`] made here names the origin file and a field
//! path; its line and column are both set or both unset.

use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// Why a config file was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {}: {source}", .path.display())]
    Io {
        /// The config file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The file was read but is not a valid config. Displayed as
    /// `{file}:{line}:{column}: {field}: {message}`, or `{file}: {field}: {message}` when the
    /// problem has no position (a required field is missing at the top level).
    #[error("{}{}: {field}: {message}", .file.display(), position(.line, .column))]
    Invalid {
        /// The config file (as given to `load_*`/`parse_*`).
        file: PathBuf,
        /// 1-based line of the offending value, key or table header.
        line: Option<usize>,
        /// 1-based column (in characters) of the same.
        column: Option<usize>,
        /// The field's TOML path, e.g. `path[1].server`; `(syntax)` for a TOML syntax error.
        field: String,
        /// What is wrong, and what would be right.
        message: String,
    },
}

impl ConfigError {
    /// The offending field's TOML path (`None` for [`ConfigError::Io`]).
    pub fn field(&self) -> Option<&str> {
        match self {
            ConfigError::Io { .. } => None,
            ConfigError::Invalid { field, .. } => Some(field),
        }
    }

    /// The 1-based line of the offending value, if it has one.
    pub fn line(&self) -> Option<usize> {
        match self {
            ConfigError::Io { .. } => None,
            ConfigError::Invalid { line, .. } => *line,
        }
    }
}

fn position(line: &Option<usize>, column: &Option<usize>) -> String {
    match (line, column) {
        (Some(line), Some(column)) => format!(":{line}:{column}"),
        (Some(line), None) => format!(":{line}"),
        _ => String::new(),
    }
}

/// The text being checked and where it came from.
pub(super) struct Doc<'a> {
    pub(super) text: &'a str,
    pub(super) file: &'a Path,
    /// Directory relative file names are resolved against.
    pub(super) dir: &'a Path,
}

impl<'a> Doc<'a> {
    pub(super) fn new(text: &'a str, origin: &'a Path) -> Doc<'a> {
        Doc {
            text,
            file: origin,
            dir: origin.parent().unwrap_or(Path::new("")),
        }
    }

    /// An error about `field`, at byte range `span` of the text if it has a place there.
    pub(super) fn invalid(
        &self,
        field: impl Into<String>,
        span: Option<Range<usize>>,
        message: impl Into<String>,
    ) -> ConfigError {
        let (line, column) = span.map_or((None, None), |span| {
            let (line, column) = line_column(self.text, span.start);
            (Some(line), Some(column))
        });
        ConfigError::Invalid {
            file: self.file.to_path_buf(),
            line,
            column,
            field: field.into(),
            message: message.into(),
        }
    }

    /// An error about a value that is in the file.
    pub(super) fn at<T>(
        &self,
        field: &str,
        value: &Spanned<T>,
        message: impl Into<String>,
    ) -> ConfigError {
        self.invalid(field, Some(value.span()), message)
    }

    /// The text read as `T` by serde; every check a value's type makes happens here.
    pub(super) fn read<T: DeserializeOwned>(&self) -> Result<T, ConfigError> {
        toml::from_str(self.text).map_err(|e| self.toml_error(&e))
    }

    /// toml's error as ours: its span gives the position, the document tree the field.
    fn toml_error(&self, e: &toml::de::Error) -> ConfigError {
        let span = e.span();
        let Ok(doc) = DeTable::parse(self.text) else {
            // toml's "duplicate key" does not say which; its span is the second occurrence.
            let key = span.clone().and_then(|s| self.text.get(s));
            let message = match key {
                Some(key) if e.message() == "duplicate key" && !key.is_empty() => {
                    format!("duplicate key `{key}`")
                }
                _ => e.message().to_owned(),
            };
            return self.invalid("(syntax)", span, message);
        };
        let Some(span) = span else {
            return self.invalid("(document)", None, tidy(e.message()));
        };
        let at = field_at(doc.get_ref(), span.start).unwrap_or_default();
        if let Some(name) = missing_field(e.message()) {
            // toml places a missing field at its table's header, or nowhere (an empty
            // span) for the top level.
            let message = format!("missing: {}", super::file::required(name));
            if span.is_empty() {
                return self.invalid(name, None, message);
            }
            return self.invalid(join(&at, name), Some(span), message);
        }
        let field = if at.is_empty() { "(document)" } else { &at };
        self.invalid(field, Some(span), tidy(e.message()))
    }
}

/// 1-based line and column (in characters) of byte `offset` in `text`.
pub(super) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = text.get(..offset).unwrap_or_default();
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    (line, column)
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}.{name}")
    }
}

/// `x` of serde's "missing field `x`".
fn missing_field(message: &str) -> Option<&str> {
    message.strip_prefix("missing field `")?.split('`').next()
}

/// serde's wording, in TOML's terms.
fn tidy(message: &str) -> String {
    let mut m = message
        .replace("expected i64", "expected an integer")
        .replace("expected f64", "expected a number")
        .replace("expected a sequence", "expected an array")
        .replace("invalid type: sequence", "invalid type: array")
        .replace("invalid type: map", "invalid type: table");
    // "expected struct TunFile": our type names mean nothing to a user.
    while let Some((before, rest)) = m.split_once("expected struct ") {
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        m = format!(
            "{before}expected a table{}",
            rest.get(end..).unwrap_or_default()
        );
    }
    m
}

/// The TOML path of the smallest key or value whose span holds `pos`.
fn field_at(doc: &DeTable<'_>, pos: usize) -> Option<String> {
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
fn walk_table(table: &DeTable<'_>, prefix: &str, visit: &mut dyn FnMut(Range<usize>, &str)) {
    for (key, value) in table.iter() {
        let path = join(prefix, key.get_ref());
        visit(key.span(), &path);
        walk_value(value, &path, visit);
    }
}

fn walk_value(value: &Spanned<DeValue<'_>>, path: &str, visit: &mut dyn FnMut(Range<usize>, &str)) {
    visit(value.span(), path);
    match value.get_ref() {
        DeValue::Table(table) => walk_table(table, path, visit),
        DeValue::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                walk_value(item, &format!("{path}[{i}]"), visit);
            }
        }
        _ => {}
    }
}
