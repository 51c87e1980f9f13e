//! What no value's type can check alone, on a file serde has read: exactly one private key
//! (inline or in a file, which is read here), keys and names not reused, list elements
//! (placed at the element) and duplicates, address families, client prefixes that do not
//! overlap, the SOCKS5 listener and its credentials (the password file is read here); and
//! the public types built from the result.
//!
//! Invariant: runs only on what serde accepted, so a bad value, a missing or an unknown
//! field is reported before any problem found here. Every error points at the value it is
//! about; only a missing private key, which is top-level, has no position.

use std::fmt::Display;
use std::net::{Ipv4Addr, SocketAddr};

use ipnet::IpNet;
use plait_proto::EngineSettings;
use plait_proto::policy::{FlowRule, MAX_MATCH_ITEMS, MAX_RULES, Prefix as PolicyPrefix};
use toml::Spanned as S;
use tracing::warn;

use super::error::{ConfigError, Doc};
use super::file::SecurityFile;
use super::file::{ClientEntryFile, ClientFile, ClientStreamsFile, ControlFile, EngineFile};
use super::file::{List, PathFile, PolicyFile, ServerFile, ServerStreamsFile, TunFile};
use super::secrets::readable_by_others;
use super::values::{ByteSize, FileName, KeyText, PeerAddr, Port, Prefix, ResetDay};
use super::values::{PortAddr, Socks5Username, credential_len};
use super::values::{Socks5Password, TunAddress};
use super::*;

impl Doc<'_> {
    pub(super) fn client(&self, f: ClientFile) -> Result<ClientConfig, ConfigError> {
        let private_key = self.private_key(f.private_key, f.private_key_file)?;
        let server_public_key = f.server_public_key.get_ref().0.clone();
        if server_public_key == private_key.public() {
            return Err(self.at(
                "server_public_key",
                &f.server_public_key,
                "is this client's own public key; give the server's",
            ));
        }
        let preshared_key = self.key("", "preshared_key", f.preshared_key, f.preshared_key_file)?;
        let route = match &f.route {
            Some(list) => self.list::<Prefix, _, _>("route", list, None)?,
            None => Vec::new(),
        };
        let mut engine = engine(f.engine);
        engine.flow_policy = self.policies(f.policy)?;
        let state_dir = f.state_dir.map_or_else(
            || PathBuf::from(DEFAULT_STATE_DIR),
            |d| self.dir.join(d.into_inner().0),
        );
        let link_signal_file = f.link_signal_file.map_or_else(
            || PathBuf::from(DEFAULT_LINK_SIGNAL_FILE),
            |d| self.dir.join(d.into_inner().0),
        );
        Ok(ClientConfig {
            private_key,
            server_public_key,
            preshared_key,
            state_dir,
            link_signal_file,
            tun: self.tun(f.tun)?,
            engine,
            control: self.control(f.control, DEFAULT_CLIENT_STATUS_SOCKET)?,
            security: security(f.security),
            route,
            paths: self.paths(f.path)?,
            streams: f.streams.map(|s| self.client_streams(s)).transpose()?,
            test_key_lifetime: f.test_only.rekey_after_s.map(|r| r.0),
        })
    }

    fn paths(&self, list: S<Vec<S<PathFile>>>) -> Result<Vec<PathConfig>, ConfigError> {
        if list.get_ref().is_empty() {
            return Err(self.at("path", &list, "at least one [[path]] table is required"));
        }
        let mut paths: Vec<PathConfig> = Vec::new();
        for (i, p) in list.into_inner().into_iter().enumerate() {
            if i >= plait_proto::MAX_PATHS {
                let max = plait_proto::MAX_PATHS;
                let message = format!("too many paths: at most {max} [[path]] tables");
                return Err(self.at(&format!("path[{i}]"), &p, message));
            }
            let p = p.into_inner();
            let server = p.server.get_ref().0.clone();
            let bind = match (p.bind, server.ip()) {
                (Some(v), Some(server)) if v.get_ref().0.is_ipv4() != server.is_ipv4() => {
                    let bind = v.get_ref().0;
                    let message = format!(
                        "is an {} address but `server` ({server}) is {}; \
                         both must be the same family",
                        family(bind.is_ipv4()),
                        family(server.is_ipv4())
                    );
                    return Err(self.at(&format!("path[{i}].bind"), &v, message));
                }
                (Some(v), _) if p.devices.is_some() => {
                    let message = "cannot be used with `devices`: each interface a pattern \
                                   opens a path on binds to that interface and its own address";
                    return Err(self.at(&format!("path[{i}].bind"), &v, message));
                }
                (v, _) => v.map(|v| v.into_inner().0),
            };
            if let (Some(d), Some(_)) = (&p.device, &p.devices) {
                let message = "give either `device` (one interface) or `devices` (a pattern), \
                               not both";
                return Err(self.at(&format!("path[{i}].device"), d, message));
            }
            let name = p.name.get_ref().0.clone();
            if let Some(j) = paths.iter().position(|q| q.name == name) {
                let message = format!("`{name}` is already the name of path[{j}]");
                return Err(self.at(&format!("path[{i}].name"), &p.name, message));
            }
            let cost = p.cost.as_ref().map(|c| c.get_ref().0).unwrap_or_default();
            let budget = self.budget(i, cost, p.budget, p.budget_reset_day)?;
            paths.push(PathConfig {
                name,
                server,
                bind,
                device: p.device.map(|d| d.into_inner().0),
                devices: p.devices.map(|d| d.into_inner().0),
                mtu: p.mtu.0,
                rate_mbit: p.rate_mbit.map(|r| r.0),
                backup: p.backup.unwrap_or(false),
                attributes: crate::registration::PathAttributes {
                    link: p.link.map(|l| l.0).unwrap_or_default(),
                    cost,
                    priority: p.priority.map_or(0, |p| p.0),
                },
                budget,
            });
        }
        Ok(paths)
    }

    /// `budget` and `budget_reset_day` of `path[i]`: only on a metered path, the day only
    /// with a budget (docs/tunnel-config.md#budget).
    fn budget(
        &self,
        i: usize,
        cost: crate::registration::CostClass,
        budget: Option<S<ByteSize>>,
        reset_day: Option<S<ResetDay>>,
    ) -> Result<Option<crate::budget::BudgetConfig>, ConfigError> {
        let Some(budget) = budget else {
            if let Some(day) = reset_day {
                let message = "a reset day without a `budget`: give the path a `budget` or \
                               leave `budget_reset_day` out";
                return Err(self.at(&format!("path[{i}].budget_reset_day"), &day, message));
            }
            return Ok(None);
        };
        if cost != crate::registration::CostClass::Metered {
            let message = "only a metered path has a budget: add `cost = \"metered\"` to the \
                           path or leave `budget` out";
            return Err(self.at(&format!("path[{i}].budget"), &budget, message));
        }
        Ok(Some(crate::budget::BudgetConfig {
            bytes: budget.into_inner().0,
            reset_day: reset_day.map_or(DEFAULT_BUDGET_RESET_DAY, |d| d.into_inner().0),
        }))
    }

    pub(super) fn server(&self, f: ServerFile) -> Result<ServerConfig, ConfigError> {
        let private_key = self.private_key(f.private_key, f.private_key_file)?;
        let listen = match &f.listen {
            Some(list) => self.listen(list)?,
            None => vec![SocketAddr::from((Ipv4Addr::UNSPECIFIED, DEFAULT_PORT))],
        };
        let tun = self.tun(f.tun)?;
        let control = self.control(f.control, DEFAULT_SERVER_STATUS_SOCKET)?;
        let clients = self.clients(f.client, &private_key.public())?;
        let mut engine = engine(f.engine);
        engine.flow_policy = self.policies(f.policy)?;
        Ok(ServerConfig {
            private_key,
            listen,
            path_mtu: f.path_mtu.0,
            tun,
            engine,
            control,
            security: security(f.security),
            nat: f.nat.map(|n| n.0),
            clients,
            streams: f.streams.map(|s| self.server_streams(s)).transpose()?,
        })
    }

    fn client_streams(&self, f: ClientStreamsFile) -> Result<ClientStreams, ConfigError> {
        let d = ClientStreams::default();
        let transparent = f.transparent.unwrap_or(d.transparent);
        let transparent_port = f.transparent_port.map_or(d.transparent_port, |p| p.0);
        if let Some(v) = &f.socks5 {
            let addr = v.get_ref().0;
            // The transparent listener holds the port on every address of both families.
            if transparent && addr.port() == transparent_port {
                let message = format!(
                    "{addr} takes the transparent listener's port: `streams.transparent_port` \
                     is {transparent_port}, bound on every address; give `streams.socks5` \
                     another port or change `streams.transparent_port`"
                );
                return Err(self.at("streams.socks5", v, message));
            }
        }
        let socks5_auth = self.socks5_auth(
            f.socks5.as_ref(),
            f.socks5_username,
            f.socks5_password,
            f.socks5_password_file,
        )?;
        let socks5 = f.socks5.map(|v| v.into_inner().0);
        if let Some(addr) = socks5
            && socks5_auth.is_none()
            && let Some(warning) = open_socks5(addr)
        {
            warn!("{warning}");
        }
        let destinations = match &f.destinations {
            Some(list) => {
                let field = "streams.destinations";
                let empty = "at least one prefix is required; leave `destinations` out for \
                             every destination";
                let nets: Vec<IpNet> = self.list::<Prefix, _, _>(field, list, Some(empty))?;
                self.unique(field, &nets, list)?;
                nets
            }
            None => d.destinations,
        };
        let ports = match &f.ports {
            Some(list) => {
                let ports: Vec<u16> = self.list::<Port, _, _>("streams.ports", list, None)?;
                self.unique("streams.ports", &ports, list)?;
                ports
            }
            None => d.ports,
        };
        Ok(ClientStreams {
            transparent,
            transparent_port,
            socks5,
            socks5_auth,
            destinations,
            ports,
            idle_timeout: f.idle_timeout_s.map_or(d.idle_timeout, |t| t.0),
            max_connections: f.max_connections.map_or(d.max_connections, |n| n.0),
        })
    }

    /// `socks5_username` with `socks5_password` or `socks5_password_file` (one of the two),
    /// only with `socks5`; `None` if none of the three is given.
    fn socks5_auth(
        &self,
        socks5: Option<&S<PortAddr>>,
        username: Option<S<Socks5Username>>,
        inline: Option<S<Socks5Password>>,
        file: Option<S<FileName>>,
    ) -> Result<Option<(String, Zeroizing<String>)>, ConfigError> {
        let field = |name: &str| format!("streams.{name}");
        let password = match (inline, file) {
            (Some(_), Some(f)) => {
                let message = "give either `socks5_password` or `socks5_password_file`, not both";
                return Err(self.at(&field("socks5_password_file"), &f, message));
            }
            (Some(v), None) => Some(Password::Inline(v)),
            (None, Some(f)) => Some(Password::File(f)),
            (None, None) => None,
        };
        let (username, password) = match (username, password) {
            (None, None) => return Ok(None),
            (Some(u), None) => {
                let message = "a username needs a password: give `socks5_password` or \
                               `socks5_password_file` too";
                return Err(self.at(&field("socks5_username"), &u, message));
            }
            (None, Some(Password::Inline(v))) => {
                let message = "a password needs a username: give `socks5_username` too";
                return Err(self.at(&field("socks5_password"), &v, message));
            }
            (None, Some(Password::File(f))) => {
                let message = "a password needs a username: give `socks5_username` too";
                return Err(self.at(&field("socks5_password_file"), &f, message));
            }
            (Some(u), Some(p)) => (u, p),
        };
        if socks5.is_none() {
            let message = "SOCKS5 credentials without a SOCKS5 listener: set `streams.socks5` \
                           or leave the credentials out";
            return Err(self.at(&field("socks5_username"), &username, message));
        }
        let password = match password {
            Password::Inline(v) => {
                warn_if_readable(self.file, "socks5_password");
                v.into_inner().0
            }
            Password::File(f) => self.password_file(&f)?,
        };
        Ok(Some((username.into_inner().0, password)))
    }

    /// The password in `streams.socks5_password_file`, without its trailing newline.
    fn password_file(&self, f: &S<FileName>) -> Result<Zeroizing<String>, ConfigError> {
        let field = "streams.socks5_password_file";
        let path = self.dir.join(&f.get_ref().0);
        warn_if_readable(&path, "socks5_password");
        let mut password = std::fs::read_to_string(&path)
            .map(Zeroizing::new)
            .map_err(|e| self.at(field, f, format!("cannot read {}: {e}", path.display())))?;
        if password.ends_with('\n') {
            password.pop();
            if password.ends_with('\r') {
                password.pop();
            }
        }
        credential_len("password", password.len())
            .map_err(|e| self.at(field, f, format!("{}: {e}", path.display())))?;
        Ok(password)
    }

    fn server_streams(&self, f: ServerStreamsFile) -> Result<ServerStreams, ConfigError> {
        let d = ServerStreams::default();
        let allow = match &f.allow {
            Some(list) => {
                let empty = "at least one prefix is required; to carry no streams, leave out \
                             [streams]";
                let nets: Vec<IpNet> =
                    self.list::<Prefix, _, _>("streams.allow", list, Some(empty))?;
                self.unique("streams.allow", &nets, list)?;
                nets
            }
            None => d.allow,
        };
        let deny = match &f.deny {
            Some(list) => {
                let nets: Vec<IpNet> = self.list::<Prefix, _, _>("streams.deny", list, None)?;
                self.unique("streams.deny", &nets, list)?;
                nets
            }
            None => d.deny,
        };
        Ok(ServerStreams {
            allow,
            deny,
            connect_timeout: f.connect_timeout_s.map_or(d.connect_timeout, |t| t.0),
            idle_timeout: f.idle_timeout_s.map_or(d.idle_timeout, |t| t.0),
            max_streams_per_client: f
                .max_streams_per_client
                .map_or(d.max_streams_per_client, |n| n.0),
            max_buffered_per_client: f
                .max_buffered_mib_per_client
                .map_or(d.max_buffered_per_client, |b| b.0),
        })
    }

    fn listen(&self, list: &List) -> Result<Vec<SocketAddr>, ConfigError> {
        let empty = "at least one address is required";
        let listen: Vec<SocketAddr> = self.list::<PeerAddr, _, _>("listen", list, Some(empty))?;
        self.unique("listen", &listen, list)?;
        Ok(listen)
    }

    fn clients(
        &self,
        list: S<Vec<ClientEntryFile>>,
        server_public: &Key,
    ) -> Result<Vec<ClientEntry>, ConfigError> {
        if list.get_ref().is_empty() {
            return Err(self.at("client", &list, "at least one [[client]] table is required"));
        }
        let mut clients: Vec<ClientEntry> = Vec::new();
        for (i, c) in list.into_inner().into_iter().enumerate() {
            let field = |name: &str| format!("client[{i}].{name}");
            let name = c.name.get_ref().0.clone();
            if let Some(j) = clients.iter().position(|o| o.name == name) {
                let message = format!("`{name}` is already the name of client[{j}]");
                return Err(self.at(&field("name"), &c.name, message));
            }
            let public_key = c.public_key.get_ref().0.clone();
            if public_key == *server_public {
                let message = "is the server's own public key; give the client's";
                return Err(self.at(&field("public_key"), &c.public_key, message));
            }
            if let Some((j, other)) = clients
                .iter()
                .enumerate()
                .find(|(_, o)| o.public_key == public_key)
            {
                let message = format!(
                    "is already the key of client[{j}] (`{}`); each client needs its own key",
                    other.name
                );
                return Err(self.at(&field("public_key"), &c.public_key, message));
            }
            let (psk, psk_file) = (c.preshared_key, c.preshared_key_file);
            let preshared_key = self.key(&field(""), "preshared_key", psk, psk_file)?;
            let ips = &c.allowed_ips;
            let empty = "at least one prefix is required";
            let allowed_ips: Vec<IpNet> =
                self.list::<Prefix, _, _>(&field("allowed_ips"), ips, Some(empty))?;
            // Prefixes of one client may overlap; another client's may not.
            for (k, (net, v)) in allowed_ips.iter().zip(ips.get_ref()).enumerate() {
                for (j, other) in clients.iter().enumerate() {
                    let mut theirs = other.allowed_ips.iter().enumerate();
                    if let Some((l, theirs)) = theirs.find(|(_, o)| overlap(net, o)) {
                        let message = format!(
                            "{net} overlaps {theirs} (client[{j}].allowed_ips[{l}]): \
                             clients `{}` and `{name}` would both own those addresses",
                            other.name
                        );
                        return Err(self.at(&field(&format!("allowed_ips[{k}]")), v, message));
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

    fn tun(&self, t: TunFile) -> Result<TunConfig, ConfigError> {
        let list = &t.addresses;
        if let Some(v) = list.get_ref().get(2) {
            let message = "at most two addresses: one IPv4 and one IPv6";
            return Err(self.at("tun.addresses[2]", v, message));
        }
        let empty = "at least one address is required";
        let addresses: Vec<IpNet> =
            self.list::<TunAddress, _, _>("tun.addresses", list, Some(empty))?;
        if let [a, b] = addresses.as_slice()
            && a.addr().is_ipv4() == b.addr().is_ipv4()
            && let Some(v) = list.get_ref().get(1)
        {
            let v4 = b.addr().is_ipv4();
            let message = format!(
                "a second {} address; at most one IPv4 and one IPv6",
                family(v4)
            );
            return Err(self.at("tun.addresses[1]", v, message));
        }
        if let Some(mtu) = &t.mtu {
            let got = mtu.get_ref().0;
            if got < MIN_IPV6_MTU && addresses.iter().any(|a| a.addr().is_ipv6()) {
                let message = format!(
                    "must be at least {MIN_IPV6_MTU} when the tunnel has an IPv6 address, \
                     got {got}"
                );
                return Err(self.at("tun.mtu", mtu, message));
            }
        }
        Ok(TunConfig {
            name: t.name.0,
            addresses,
            mtu: t.mtu.map(|m| m.into_inner().0),
        })
    }

    fn control(&self, c: ControlFile, default_socket: &str) -> Result<ControlConfig, ConfigError> {
        let status_socket = match &c.status_socket {
            Some(v) => {
                let path = self.dir.join(&v.get_ref().0);
                if path.as_os_str().len() > MAX_SOCKET_PATH {
                    let message = format!(
                        "{} is too long for a Unix socket (at most {MAX_SOCKET_PATH} bytes)",
                        path.display()
                    );
                    return Err(self.at("control.status_socket", v, message));
                }
                path
            }
            None => PathBuf::from(default_socket),
        };
        Ok(ControlConfig {
            status_socket,
            metrics: c.metrics.map(|m| m.0),
        })
    }

    /// `private_key` / `private_key_file`: exactly one.
    fn private_key(
        &self,
        inline: Option<S<KeyText>>,
        file: Option<S<FileName>>,
    ) -> Result<Key, ConfigError> {
        self.key("", "private_key", inline, file)?.ok_or_else(|| {
            let message = "missing: give `private_key` (base64) or `private_key_file` \
                           (see `plait genkey`)";
            self.invalid("private_key", None, message)
        })
    }

    /// `{prefix}{name}` inline or `{prefix}{name}_file`: at most one; `None` if neither.
    /// A key readable by other users is warned about.
    fn key(
        &self,
        prefix: &str,
        name: &str,
        inline: Option<S<KeyText>>,
        file: Option<S<FileName>>,
    ) -> Result<Option<Key>, ConfigError> {
        let file_field = format!("{prefix}{name}_file");
        match (inline, file) {
            (None, None) => Ok(None),
            (Some(_), Some(f)) => {
                let message = format!("give either `{name}` or `{name}_file`, not both");
                Err(self.at(&file_field, &f, message))
            }
            (Some(v), None) => {
                warn_if_readable(self.file, name);
                Ok(Some(v.into_inner().0))
            }
            (None, Some(f)) => {
                let path = self.dir.join(&f.get_ref().0);
                warn_if_readable(&path, name);
                let key =
                    Key::read_file(&path).map_err(|e| self.at(&file_field, &f, e.to_string()));
                key.map(Some)
            }
        }
    }

    /// List `field`, each element (read as an `R`) checked by its type `T` (an error is the
    /// type's, named `route[1]` and placed at the element); `if_empty` is the message
    /// refusing `[]`.
    fn list<T, U, R>(
        &self,
        field: &str,
        list: &S<Vec<S<R>>>,
        if_empty: Option<&str>,
    ) -> Result<Vec<U>, ConfigError>
    where
        R: Clone,
        T: TryFrom<R, Error = String> + Into<U>,
    {
        if let Some(message) = if_empty.filter(|_| list.get_ref().is_empty()) {
            return Err(self.at(field, list, message));
        }
        let check = |(i, v): (usize, &S<R>)| match T::try_from(v.get_ref().clone()) {
            Ok(value) => Ok(value.into()),
            Err(e) => Err(self.at(&format!("{field}[{i}]"), v, e)),
        };
        list.get_ref().iter().enumerate().map(check).collect()
    }

    /// The `[[policy]]` rules (docs/protocol.md#flow-policy), in file order.
    fn policies(&self, rules: Vec<S<PolicyFile>>) -> Result<Vec<FlowRule>, ConfigError> {
        if let Some(extra) = rules.get(MAX_RULES) {
            let message = format!("at most {MAX_RULES} [[policy]] rules");
            return Err(self.at(&format!("policy[{MAX_RULES}]"), extra, message));
        }
        let mut out = Vec::with_capacity(rules.len());
        for (i, rule) in rules.into_iter().enumerate() {
            let field = |name: &str| format!("policy[{i}].{name}");
            let too_many = |name: &str, n: usize| {
                (n > MAX_MATCH_ITEMS).then(|| {
                    self.at(
                        &field(name),
                        &rule,
                        format!("at most {MAX_MATCH_ITEMS} values, not {n}"),
                    )
                })
            };
            let r = rule.get_ref();
            let prefixes: Vec<IpNet> = match &r.prefixes {
                Some(list) => self.list::<Prefix, _, _>(
                    &field("prefixes"),
                    list,
                    Some(
                        "an empty list matches nothing; leave `prefixes` out to match any address",
                    ),
                )?,
                None => Vec::new(),
            };
            let ports: Vec<u16> = r.ports.iter().flatten().map(|p| p.0).collect();
            let dscp: Vec<u8> = r.dscp.iter().flatten().map(|d| d.0).collect();
            for (name, n) in [
                ("ports", ports.len()),
                ("prefixes", prefixes.len()),
                ("dscp", dscp.len()),
            ] {
                if let Some(e) = too_many(name, n) {
                    return Err(e);
                }
            }
            for (name, empty) in [
                ("ports", r.ports.as_ref().is_some_and(Vec::is_empty)),
                ("dscp", r.dscp.as_ref().is_some_and(Vec::is_empty)),
            ] {
                if empty {
                    let message =
                        format!("an empty list matches nothing; leave `{name}` out to match any");
                    return Err(self.at(&field(name), &rule, message));
                }
            }
            out.push(FlowRule {
                protocol: r.protocol.as_ref().map(|p| p.0),
                ports,
                prefixes: prefixes
                    .into_iter()
                    .map(|n| PolicyPrefix {
                        addr: n.addr(),
                        len: n.prefix_len(),
                    })
                    .collect(),
                dscp,
                action: r.action.0,
            });
        }
        Ok(out)
    }

    /// Refuses an element of list `field` equal to an earlier one, as checked (`values`,
    /// from `list`): `"10.0.0.1/8"` repeats `"10.0.0.0/8"`.
    fn unique<U, R>(
        &self,
        field: &str,
        values: &[U],
        list: &S<Vec<S<R>>>,
    ) -> Result<(), ConfigError>
    where
        U: PartialEq + Display,
    {
        for (i, (value, v)) in values.iter().zip(list.get_ref()).enumerate() {
            if let Some(j) = values.iter().take(i).position(|other| other == value) {
                let message = format!("{value} is listed twice ({field}[{j}])");
                return Err(self.at(&format!("{field}[{i}]"), v, message));
            }
        }
        Ok(())
    }
}

/// The engine's defaults, with what the file sets.
fn engine(f: EngineFile) -> EngineSettings {
    let d = EngineSettings::default();
    EngineSettings {
        scheduler: f.scheduler.map_or(d.scheduler, |s| s.0),
        reorder: f.reorder.map_or(d.reorder, |r| r.0),
        max_hold: f.max_hold_ms.map_or(d.max_hold, |ms| ms.0),
        repair: f.repair.unwrap_or(d.repair),
        congestion: f.congestion.map_or(d.congestion, |c| c.0),
        stream_scheduler: f.stream_scheduler.map_or(d.stream_scheduler, |s| s.0),
        packet_pacing: f.packet_pacing.unwrap_or(d.packet_pacing),
        unordered_below_bps: f
            .unordered_below_kbps
            .map_or(d.unordered_below_bps, |k| u64::from(k.0) * 1000),
        flow_policy: Vec::new(),
        fec: f.fec.map_or(d.fec, |p| p.0),
        handover: f.handover.unwrap_or(d.handover),
    }
}

fn security(f: SecurityFile) -> SecurityConfig {
    let d = SecurityConfig::default();
    SecurityConfig {
        seccomp: f.seccomp.map_or(d.seccomp, |m| m.0),
        drop_capabilities: f.drop_capabilities.unwrap_or(d.drop_capabilities),
    }
}

/// A SOCKS5 password, as the file gives it.
enum Password {
    Inline(S<Socks5Password>),
    File(S<FileName>),
}

/// The warning for a SOCKS5 listener on `addr` without authentication, unless only this
/// host can reach it (a loopback address).
pub(super) fn open_socks5(addr: SocketAddr) -> Option<String> {
    (!addr.ip().to_canonical().is_loopback()).then(|| {
        format!(
            "SOCKS5 on {addr} without authentication: anyone who can reach it can use the \
             tunnel"
        )
    })
}

/// Logs a warning if `path`, which holds key `name`, can be read by other users.
fn warn_if_readable(path: &std::path::Path, name: &str) {
    if let Some(warning) = readable_by_others(path, &format!("`{name}`")) {
        warn!("{warning}");
    }
}

fn family(v4: bool) -> &'static str {
    if v4 { "IPv4" } else { "IPv6" }
}

/// Two prefixes overlap iff one contains the other's network address.
fn overlap(a: &IpNet, b: &IpNet) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}
