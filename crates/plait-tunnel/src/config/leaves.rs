//! What a value's type cannot check alone: keys given inline or in a file (exactly one),
//! required names, and two helpers of the cross-field checks.

use super::raw::S;
use tracing::warn;

use super::secrets::readable_by_others;
use super::values::{KeyText, Label, MAX_NAME};
use super::*;

impl Ctx<'_> {
    /// `private_key` / `private_key_file`: exactly one.
    pub(super) fn private_key(
        &self,
        inline: Option<S<KeyText>>,
        file: Option<S<String>>,
    ) -> Result<Key, ConfigError> {
        self.key_source("", "private_key", inline, file)?
            .ok_or_else(|| {
                self.invalid(
                    "private_key",
                    None,
                    "missing: give `private_key` (base64) or `private_key_file` \
                     (see `plait genkey`)",
                )
            })
    }

    /// `{prefix}{name}` inline or `{prefix}{name}_file`: at most one; `None` if neither.
    pub(super) fn key_source(
        &self,
        prefix: &str,
        name: &str,
        inline: Option<S<KeyText>>,
        file: Option<S<String>>,
    ) -> Result<Option<Key>, ConfigError> {
        let file_field = format!("{prefix}{name}_file");
        match (inline, file) {
            (Some(_), Some(f)) => Err(self.at(
                &file_field,
                &f,
                format!("give either `{name}` or `{name}_file`, not both"),
            )),
            (Some(v), None) => {
                if let Some(warning) = readable_by_others(self.file, &format!("`{name}`")) {
                    warn!("{warning}");
                }
                Ok(Some(v.into_inner().0))
            }
            (None, Some(f)) => {
                if f.get_ref().is_empty() {
                    return Err(self.at(&file_field, &f, "must not be empty"));
                }
                let path = self.dir.join(f.get_ref());
                if let Some(warning) = readable_by_others(&path, &format!("`{name}`")) {
                    warn!("{warning}");
                }
                Key::read_file(&path)
                    .map(Some)
                    .map_err(|e| self.at(&file_field, &f, e.to_string()))
            }
            (None, None) => Ok(None),
        }
    }

    /// List element `v` (field `field`, e.g. `route[1]`) as a checked value of type `T`; the
    /// error is the type's, placed at the element.
    pub(super) fn element<T: TryFrom<String, Error = String>>(
        &self,
        field: &str,
        v: &S<String>,
    ) -> Result<T, ConfigError> {
        T::try_from(v.get_ref().clone()).map_err(|e| self.at(field, v, e))
    }

    /// A required name: its value was checked as it was read ([`Label`]).
    pub(super) fn required_label(
        &self,
        field: &str,
        v: Option<&S<Label>>,
        table: &Range<usize>,
    ) -> Result<String, ConfigError> {
        match v {
            Some(v) => Ok(v.get_ref().0.clone()),
            None => Err(self.invalid(
                field,
                Some(table.clone()),
                format!("missing: a name (1 to {MAX_NAME} of A-Z a-z 0-9 _ . -)"),
            )),
        }
    }
}

/// `IPv4` or `IPv6`.
pub(super) fn family(ip: IpAddr) -> &'static str {
    if ip.is_ipv4() { "IPv4" } else { "IPv6" }
}

/// Two prefixes overlap iff one contains the other's network address.
pub(super) fn overlap(a: &IpNet, b: &IpNet) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

/// An MTU that its type bounded to at most 65535.
pub(super) fn mtu_u16(mtu: i64) -> u16 {
    u16::try_from(mtu).unwrap_or(u16::MAX)
}
