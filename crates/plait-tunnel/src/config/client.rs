//! A client's file: its keys, routes and `[[path]]` tables.

use super::leaves::{family, mtu_u16};
use super::raw::*;
use super::values::Prefix;
use super::*;

impl Ctx<'_> {
    pub(super) fn client(&self, raw: RawClient) -> Result<ClientConfig, ConfigError> {
        let private_key = self.private_key(raw.private_key, raw.private_key_file)?;
        let Some(spk) = &raw.server_public_key else {
            return Err(self.invalid(
                "server_public_key",
                None,
                "missing: the server's public key (base64, `plait pubkey` of its private key)",
            ));
        };
        let server_public_key = spk.get_ref().0.clone();
        if server_public_key == private_key.public() {
            return Err(self.at(
                "server_public_key",
                spk,
                "is this client's own public key; give the server's",
            ));
        }
        let preshared_key = self.key_source(
            "",
            "preshared_key",
            raw.preshared_key,
            raw.preshared_key_file,
        )?;
        let route = match &raw.route {
            Some(list) => list
                .get_ref()
                .iter()
                .enumerate()
                .map(|(i, v)| Ok(self.element::<Prefix>(&format!("route[{i}]"), v)?.0))
                .collect::<Result<_, ConfigError>>()?,
            None => Vec::new(),
        };
        Ok(ClientConfig {
            private_key,
            server_public_key,
            preshared_key,
            tun: self.tun(raw.tun)?,
            engine: self.engine(raw.engine)?,
            control: self.control(raw.control, DEFAULT_CLIENT_STATUS_SOCKET)?,
            route,
            paths: self.paths(raw.path)?,
        })
    }

    pub(super) fn paths(&self, raw: List<RawPath>) -> Result<Vec<PathConfig>, ConfigError> {
        let Some(list) = raw else {
            return Err(self.invalid(
                "path",
                None,
                "missing: at least one [[path]] table is required",
            ));
        };
        if list.get_ref().is_empty() {
            return Err(self.at("path", &list, "at least one [[path]] table is required"));
        }
        let mut paths: Vec<PathConfig> = Vec::new();
        let mut names: HashMap<String, usize> = HashMap::new();
        for (i, raw) in list.into_inner().into_iter().enumerate() {
            let prefix = format!("path[{i}]");
            if i >= plait_proto::MAX_PATHS {
                return Err(self.at(
                    &prefix,
                    &raw,
                    format!(
                        "too many paths: at most {} [[path]] tables",
                        plait_proto::MAX_PATHS
                    ),
                ));
            }
            let name_span = raw.get_ref().name.as_ref().map(|v| v.span());
            let path = self.path(&prefix, raw)?;
            if let Some(j) = names.insert(path.name.clone(), i) {
                return Err(self.invalid(
                    format!("{prefix}.name"),
                    name_span,
                    format!("`{}` is already the name of path[{j}]", path.name),
                ));
            }
            paths.push(path);
        }
        Ok(paths)
    }

    pub(super) fn path(&self, prefix: &str, raw: S<RawPath>) -> Result<PathConfig, ConfigError> {
        let table = raw.span();
        let raw = raw.into_inner();
        let field = |name: &str| format!("{prefix}.{name}");
        let name = self.required_label(&field("name"), raw.name.as_ref(), &table)?;
        let Some(server_raw) = &raw.server else {
            return Err(self.invalid(
                field("server"),
                Some(table),
                "missing: the server's address for this path, e.g. \"198.51.100.1:7744\"",
            ));
        };
        let server = server_raw.get_ref().0;
        if server.ip().is_unspecified() {
            return Err(self.at(
                &field("server"),
                server_raw,
                "must be the server's address, not the unspecified address",
            ));
        }
        let bind = match &raw.bind {
            Some(v) => {
                let bind = v.get_ref().0;
                if bind.is_ipv4() != server.is_ipv4() {
                    return Err(self.at(
                        &field("bind"),
                        v,
                        format!(
                            "is an {} address but `server` ({server}) is {}; \
                             both must be the same family",
                            family(bind.ip()),
                            family(server.ip())
                        ),
                    ));
                }
                Some(bind)
            }
            None => None,
        };
        let device = raw.device.map(|v| v.into_inner().0);
        let mtu = raw
            .mtu
            .map_or(DEFAULT_PATH_MTU, |v| mtu_u16(v.into_inner().0));
        let rate_mbit = raw.rate_mbit.map(|v| v.into_inner().0);
        Ok(PathConfig {
            name,
            server,
            bind,
            device,
            mtu,
            rate_mbit,
        })
    }
}
