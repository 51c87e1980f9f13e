//! The checking context: the text being checked, where it came from, and how an error is
//! placed in it (toml's own errors included).

use super::position::{backticked_field, field_at, join, line_column, tidy};
use super::raw::S;
use super::*;

/// The text being checked and where it came from.
pub(super) struct Ctx<'a> {
    pub(super) text: &'a str,
    pub(super) file: &'a Path,
    /// Directory relative file names are resolved against.
    pub(super) dir: &'a Path,
}

impl<'a> Ctx<'a> {
    pub(super) fn new(text: &'a str, origin: &'a Path) -> Ctx<'a> {
        Ctx {
            text,
            file: origin,
            dir: origin.parent().unwrap_or(Path::new("")),
        }
    }

    pub(super) fn invalid(
        &self,
        field: impl Into<String>,
        span: Option<Range<usize>>,
        message: impl Into<String>,
    ) -> ConfigError {
        let (line, column) = match span {
            Some(span) => {
                let (line, column) = line_column(self.text, span.start);
                (Some(line), Some(column))
            }
            None => (None, None),
        };
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
        value: &S<T>,
        message: impl Into<String>,
    ) -> ConfigError {
        self.invalid(field, Some(value.span()), message)
    }

    pub(super) fn deserialize<T: DeserializeOwned>(&self) -> Result<T, ConfigError> {
        toml::from_str(self.text).map_err(|e| self.toml_error(&e))
    }

    /// Turns toml's error into ours: position from its span, field from the document tree.
    pub(super) fn toml_error(&self, e: &toml::de::Error) -> ConfigError {
        let mut message = tidy(e.message());
        let span = e.span();
        let named = backticked_field(e.message());
        // toml's "duplicate key" does not say which; its span is the second occurrence.
        if let Some(key) = span
            .as_ref()
            .filter(|_| message == "duplicate key")
            .and_then(|span| self.text.get(span.clone()))
            .filter(|key| !key.is_empty())
        {
            message = format!("duplicate key `{key}`");
        }
        let field = match (toml::de::DeTable::parse(self.text), &span) {
            // The document does not parse: a syntax error.
            (Err(_), _) => "(syntax)".to_owned(),
            (Ok(doc), Some(span)) => {
                let at = field_at(doc.get_ref(), span.start).unwrap_or_default();
                match named {
                    // The span is the table that lacks the field.
                    Some(name) if e.message().starts_with("missing field") => join(&at, name),
                    _ if at.is_empty() => named.unwrap_or("(document)").to_owned(),
                    _ => at,
                }
            }
            (Ok(_), None) => named.unwrap_or("(document)").to_owned(),
        };
        self.invalid(field, span, message)
    }
}
