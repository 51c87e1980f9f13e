//! A server's file: its keys, listen addresses and `[[client]]` tables.

use super::leaves::{mtu_u16, overlap};
use super::raw::*;
use super::values::{PeerAddr, Prefix};
use super::*;

impl Ctx<'_> {
    pub(super) fn server(&self, raw: RawServer) -> Result<ServerConfig, ConfigError> {
        let private_key = self.private_key(raw.private_key, raw.private_key_file)?;
        let listen = match &raw.listen {
            Some(list) => {
                if list.get_ref().is_empty() {
                    return Err(self.at("listen", list, "at least one address is required"));
                }
                let mut out: Vec<SocketAddr> = Vec::new();
                for (i, v) in list.get_ref().iter().enumerate() {
                    let field = format!("listen[{i}]");
                    let addr = self.element::<PeerAddr>(&field, v)?.0;
                    if let Some(j) = out.iter().position(|a| *a == addr) {
                        return Err(self.at(
                            &field,
                            v,
                            format!("{addr} is listed twice (listen[{j}])"),
                        ));
                    }
                    out.push(addr);
                }
                out
            }
            None => vec![DEFAULT_LISTEN.parse().expect("valid default")],
        };
        let path_mtu = raw
            .path_mtu
            .map_or(DEFAULT_PATH_MTU, |v| mtu_u16(v.into_inner().0));
        let nat = raw.nat.map(|v| v.into_inner().0);
        let tun = self.tun(raw.tun)?;
        let engine = self.engine(raw.engine)?;
        let control = self.control(raw.control, DEFAULT_SERVER_STATUS_SOCKET)?;
        let clients = self.clients(raw.client, &private_key.public())?;
        Ok(ServerConfig {
            private_key,
            listen,
            path_mtu,
            tun,
            engine,
            control,
            nat,
            clients,
        })
    }

    pub(super) fn clients(
        &self,
        raw: List<RawClientEntry>,
        server_public: &Key,
    ) -> Result<Vec<ClientEntry>, ConfigError> {
        let Some(list) = raw else {
            return Err(self.invalid(
                "client",
                None,
                "missing: at least one [[client]] table is required",
            ));
        };
        if list.get_ref().is_empty() {
            return Err(self.at("client", &list, "at least one [[client]] table is required"));
        }
        let mut clients: Vec<ClientEntry> = Vec::new();
        for (i, raw) in list.into_inner().into_iter().enumerate() {
            let prefix = format!("client[{i}]");
            let field = |name: &str| format!("{prefix}.{name}");
            let table = raw.span();
            let raw = raw.into_inner();

            let name = self.required_label(&field("name"), raw.name.as_ref(), &table)?;
            if let Some(j) = clients.iter().position(|c| c.name == name) {
                let v = raw.name.as_ref().expect("checked by required_label");
                return Err(self.at(
                    &field("name"),
                    v,
                    format!("`{name}` is already the name of client[{j}]"),
                ));
            }

            let Some(pk) = &raw.public_key else {
                return Err(self.invalid(
                    field("public_key"),
                    Some(table),
                    "missing: the client's public key (base64)",
                ));
            };
            let public_key = pk.get_ref().0.clone();
            if public_key == *server_public {
                return Err(self.at(
                    &field("public_key"),
                    pk,
                    "is the server's own public key; give the client's",
                ));
            }
            if let Some(j) = clients.iter().position(|c| c.public_key == public_key) {
                return Err(self.at(
                    &field("public_key"),
                    pk,
                    format!(
                        "is already the key of client[{j}] (`{}`); each client needs its own key",
                        clients[j].name
                    ),
                ));
            }

            let preshared_key = self.key_source(
                &format!("{prefix}."),
                "preshared_key",
                raw.preshared_key,
                raw.preshared_key_file,
            )?;

            let Some(ips) = &raw.allowed_ips else {
                return Err(self.invalid(
                    field("allowed_ips"),
                    Some(table),
                    "missing: the client's tunnel addresses and the prefixes behind it, \
                     e.g. [\"10.77.0.2/32\"]",
                ));
            };
            if ips.get_ref().is_empty() {
                return Err(self.at(
                    &field("allowed_ips"),
                    ips,
                    "at least one prefix is required",
                ));
            }
            let allowed_ips = ips
                .get_ref()
                .iter()
                .enumerate()
                .map(|(k, v)| {
                    let field = format!("{prefix}.allowed_ips[{k}]");
                    Ok(self.element::<Prefix>(&field, v)?.0)
                })
                .collect::<Result<Vec<IpNet>, ConfigError>>()?;
            for (k, net) in allowed_ips.iter().enumerate() {
                for (j, other) in clients.iter().enumerate() {
                    if let Some((l, theirs)) = other
                        .allowed_ips
                        .iter()
                        .enumerate()
                        .find(|(_, o)| overlap(net, o))
                    {
                        return Err(self.at(
                            &format!("{prefix}.allowed_ips[{k}]"),
                            &ips.get_ref()[k],
                            format!(
                                "{net} overlaps {theirs} (client[{j}].allowed_ips[{l}]): \
                                 clients `{}` and `{name}` would both own those addresses",
                                other.name
                            ),
                        ));
                    }
                }
            }

            clients.push(ClientEntry {
                name,
                public_key,
                preshared_key,
                allowed_ips,
            });
        }
        Ok(clients)
    }
}
