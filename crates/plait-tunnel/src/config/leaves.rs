//! The leaves of both files: keys (inline or from a file), names, interface names, bounded
//! integers, socket addresses with their port rules, and prefixes.

use super::context::PortRule;
use super::raw::S;
use super::*;

impl Ctx<'_> {
    /// `private_key` / `private_key_file`: exactly one.
    pub(super) fn private_key(
        &self,
        inline: Option<S<String>>,
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
        inline: Option<S<String>>,
        file: Option<S<String>>,
    ) -> Result<Option<Key>, ConfigError> {
        let inline_field = format!("{prefix}{name}");
        let file_field = format!("{prefix}{name}_file");
        match (inline, file) {
            (Some(_), Some(f)) => Err(self.at(
                &file_field,
                &f,
                format!("give either `{name}` or `{name}_file`, not both"),
            )),
            (Some(v), None) => Ok(Some(self.key(&inline_field, &v)?)),
            (None, Some(f)) => {
                if f.get_ref().is_empty() {
                    return Err(self.at(&file_field, &f, "must not be empty"));
                }
                let path = self.dir.join(f.get_ref());
                Key::read_file(&path)
                    .map(Some)
                    .map_err(|e| self.at(&file_field, &f, e.to_string()))
            }
            (None, None) => Ok(None),
        }
    }

    pub(super) fn key(&self, field: &str, v: &S<String>) -> Result<Key, ConfigError> {
        Key::from_base64(v.get_ref()).map_err(|e| {
            self.at(
                field,
                v,
                format!("not a key (44 characters of base64): {e}"),
            )
        })
    }

    pub(super) fn required_label(
        &self,
        field: &str,
        v: Option<&S<String>>,
        table: &Range<usize>,
    ) -> Result<String, ConfigError> {
        let Some(v) = v else {
            return Err(self.invalid(
                field,
                Some(table.clone()),
                format!("missing: a name (1 to {MAX_NAME} of A-Z a-z 0-9 _ . -)"),
            ));
        };
        let name = v.get_ref();
        let ok_chars = name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
        if name.is_empty() || name.len() > MAX_NAME || !ok_chars {
            return Err(self.at(
                field,
                v,
                format!("`{name}` is not a valid name: 1 to {MAX_NAME} of A-Z a-z 0-9 _ . -"),
            ));
        }
        Ok(name.clone())
    }

    /// A Linux interface name: 1..=15 bytes, no `/`, `:` or whitespace, not `.` or `..`.
    pub(super) fn iface_name(&self, field: &str, v: &S<String>) -> Result<String, ConfigError> {
        let name = v.get_ref();
        let problem = if name.is_empty() {
            Some("must not be empty".to_owned())
        } else if name.len() > MAX_IFNAME {
            Some(format!(
                "`{name}` is {} bytes; interface names are at most {MAX_IFNAME}",
                name.len()
            ))
        } else if name
            .chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control())
        {
            Some(format!(
                "`{name}` is not a valid interface name (no `/`, `:` or whitespace)"
            ))
        } else if name == "." || name == ".." {
            Some(format!("`{name}` is not a valid interface name"))
        } else {
            None
        };
        match problem {
            Some(message) => Err(self.at(field, v, message)),
            None => Ok(name.clone()),
        }
    }

    pub(super) fn int_in(
        &self,
        field: &str,
        v: &S<i64>,
        lo: i64,
        hi: i64,
    ) -> Result<i64, ConfigError> {
        let n = *v.get_ref();
        if (lo..=hi).contains(&n) {
            Ok(n)
        } else {
            Err(self.at(field, v, format!("must be between {lo} and {hi}, got {n}")))
        }
    }

    pub(super) fn socket_addr(
        &self,
        field: &str,
        v: &S<String>,
        rule: PortRule,
    ) -> Result<SocketAddr, ConfigError> {
        let text = v.get_ref().as_str();
        let parsed = text.parse::<SocketAddr>().ok().or_else(|| {
            let port = match rule {
                PortRule::Default(port) => port,
                PortRule::AnyAllowed => 0,
                PortRule::Required => return None,
            };
            // A bare address; an IPv6 one may be written in brackets.
            let ip = match text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
                Some(v6) => v6.parse::<std::net::Ipv6Addr>().ok().map(IpAddr::V6),
                None => text.parse::<IpAddr>().ok(),
            };
            ip.map(|ip| SocketAddr::new(ip, port))
        });
        let Some(addr) = parsed else {
            let example = match rule {
                PortRule::Required => "\"127.0.0.1:9477\" or \"[::1]:9477\"",
                PortRule::Default(_) => {
                    "\"198.51.100.1:7744\", \"[2001:db8::1]:7744\" or \"198.51.100.1\""
                }
                PortRule::AnyAllowed => "\"192.0.2.10:0\", \"[2001:db8::10]:0\" or \"192.0.2.10\"",
            };
            return Err(self.at(
                field,
                v,
                format!(
                    "`{text}` is not an IP address with port, e.g. {example} \
                     (host names are not resolved)"
                ),
            ));
        };
        if addr.port() == 0 && !matches!(rule, PortRule::AnyAllowed) {
            return Err(self.at(field, v, format!("`{text}`: the port must not be 0")));
        }
        Ok(addr)
    }

    /// A list of prefixes; a bare address is a host prefix; host bits are cleared.
    pub(super) fn prefixes(
        &self,
        field: &str,
        list: &S<Vec<S<String>>>,
    ) -> Result<Vec<IpNet>, ConfigError> {
        list.get_ref()
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let text = v.get_ref().as_str();
                text.parse::<IpNet>()
                    .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
                    .map(|net| net.trunc())
                    .map_err(|_| {
                        self.at(
                            &format!("{field}[{i}]"),
                            v,
                            format!(
                                "`{text}` is not a prefix, \
                                 e.g. \"192.168.1.0/24\" or \"2001:db8::/32\""
                            ),
                        )
                    })
            })
            .collect()
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
