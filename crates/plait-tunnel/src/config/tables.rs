//! The tables both roles have: `[tun]`, `[engine]`, `[control]`.

use super::leaves::{family, mtu_u16};
use super::raw::*;
use super::values::TunAddress;
use super::*;

impl Ctx<'_> {
    pub(super) fn tun(&self, raw: Option<S<RawTun>>) -> Result<TunConfig, ConfigError> {
        let Some(raw) = raw else {
            return Err(self.invalid(
                "tun",
                None,
                "missing: a [tun] table with at least `addresses` is required",
            ));
        };
        let table = raw.span();
        let raw = raw.into_inner();
        let name = raw
            .name
            .as_ref()
            .map_or_else(|| DEFAULT_TUN_NAME.to_owned(), |v| v.get_ref().0.clone());
        let Some(list) = &raw.addresses else {
            return Err(self.invalid(
                "tun.addresses",
                Some(table),
                "missing: the tunnel's own addresses with prefix length, e.g. [\"10.77.0.2/24\"]",
            ));
        };
        if list.get_ref().is_empty() {
            return Err(self.at("tun.addresses", list, "at least one address is required"));
        }
        let mut addresses: Vec<IpNet> = Vec::new();
        for (i, v) in list.get_ref().iter().enumerate() {
            let field = format!("tun.addresses[{i}]");
            if i >= 2 {
                return Err(self.at(&field, v, "at most two addresses: one IPv4 and one IPv6"));
            }
            let net = self.element::<TunAddress>(&field, v)?.0;
            if addresses
                .iter()
                .any(|a| a.addr().is_ipv4() == net.addr().is_ipv4())
            {
                return Err(self.at(
                    &field,
                    v,
                    format!(
                        "a second {} address; at most one IPv4 and one IPv6",
                        family(net.addr())
                    ),
                ));
            }
            addresses.push(net);
        }
        let has_v6 = addresses.iter().any(|a| a.addr().is_ipv6());
        let mtu = match &raw.mtu {
            Some(v) => {
                let mtu = v.get_ref().0;
                if has_v6 && mtu < MIN_IPV6_MTU {
                    return Err(self.at(
                        "tun.mtu",
                        v,
                        format!(
                            "must be at least {MIN_IPV6_MTU} when the tunnel has an IPv6 \
                             address, got {mtu}"
                        ),
                    ));
                }
                Some(mtu_u16(mtu))
            }
            None => None,
        };
        Ok(TunConfig {
            name,
            addresses,
            mtu,
        })
    }

    pub(super) fn engine(&self, raw: Option<S<RawEngine>>) -> Result<EngineSettings, ConfigError> {
        let mut engine = EngineSettings::default();
        let Some(raw) = raw else {
            return Ok(engine);
        };
        let raw = raw.into_inner();
        if let Some(v) = raw.scheduler {
            engine.scheduler = v.into_inner().0;
        }
        if let Some(v) = raw.reorder {
            engine.reorder = v.into_inner().0;
        }
        if let Some(v) = raw.max_hold_ms {
            engine.max_hold = Duration::from_millis(v.into_inner().0.unsigned_abs());
        }
        if let Some(v) = raw.repair {
            engine.repair = v;
        }
        Ok(engine)
    }

    pub(super) fn control(
        &self,
        raw: Option<S<RawControl>>,
        default_socket: &str,
    ) -> Result<ControlConfig, ConfigError> {
        let mut control = ControlConfig {
            status_socket: PathBuf::from(default_socket),
            metrics: None,
        };
        let Some(raw) = raw else {
            return Ok(control);
        };
        let raw = raw.into_inner();
        if let Some(v) = &raw.status_socket {
            if v.get_ref().is_empty() {
                return Err(self.at("control.status_socket", v, "must not be empty"));
            }
            let path = self.dir.join(v.get_ref());
            if path.as_os_str().len() > MAX_SOCKET_PATH {
                return Err(self.at(
                    "control.status_socket",
                    v,
                    format!(
                        "{} is too long for a Unix socket (at most {MAX_SOCKET_PATH} bytes)",
                        path.display()
                    ),
                ));
            }
            control.status_socket = path;
        }
        if let Some(v) = &raw.metrics {
            control.metrics = Some(v.get_ref().0);
        }
        Ok(control)
    }
}
