//! The TUN device (layer 3: IPv4 and IPv6 packets, no packet-information header).

use std::io;
use std::os::fd::{AsRawFd, RawFd};

use ipnet::IpNet;
use thiserror::Error;

/// Why the TUN device could not be made.
#[derive(Debug, Error)]
pub enum TunError {
    /// Creating a TUN device needs CAP_NET_ADMIN.
    #[error(
        "cannot create TUN device {name}: permission denied. plait needs CAP_NET_ADMIN: run it as root, or grant it with `setcap cap_net_admin,cap_net_bind_service+ep $(which plait)`"
    )]
    Permission {
        /// Device name.
        name: String,
    },
    /// /dev/net/tun is missing.
    #[error(
        "cannot create TUN device {name}: /dev/net/tun is missing (load the tun module: `modprobe tun`; in a container, pass the device through)"
    )]
    NoDevice {
        /// Device name.
        name: String,
    },
    /// Anything else.
    #[error("cannot create TUN device {name}: {source}")]
    Other {
        /// Device name.
        name: String,
        /// The error.
        source: io::Error,
    },
}

/// A TUN device, up, with its addresses and MTU set.
pub struct Tun {
    dev: tun_rs::SyncDevice,
    name: String,
    mtu: usize,
}

impl std::fmt::Debug for Tun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tun")
            .field("name", &self.name)
            .field("mtu", &self.mtu)
            .finish()
    }
}

impl Tun {
    /// Creates `name` with `addresses` and `mtu`, up and non-blocking. The device goes away
    /// when this is dropped (it is not persistent).
    pub fn create(name: &str, addresses: &[IpNet], mtu: u16) -> Result<Tun, TunError> {
        if !std::path::Path::new("/dev/net/tun").exists() {
            return Err(TunError::NoDevice {
                name: name.to_string(),
            });
        }
        let mut b = tun_rs::DeviceBuilder::new().name(name).mtu(mtu);
        for net in addresses {
            b = match net {
                IpNet::V4(n) => b.ipv4(n.addr(), n.prefix_len(), None),
                IpNet::V6(n) => b.ipv6(n.addr(), n.prefix_len()),
            };
        }
        let dev = b.build_sync().map_err(|e| match e.kind() {
            io::ErrorKind::PermissionDenied => TunError::Permission {
                name: name.to_string(),
            },
            _ => TunError::Other {
                name: name.to_string(),
                source: e,
            },
        })?;
        dev.set_nonblocking(true).map_err(|e| TunError::Other {
            name: name.to_string(),
            source: e,
        })?;
        Ok(Tun {
            dev,
            name: name.to_string(),
            mtu: usize::from(mtu),
        })
    }

    /// The device's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its MTU.
    pub fn mtu(&self) -> usize {
        self.mtu
    }

    /// Reads one packet; `WouldBlock` when there is none.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.dev.recv(buf)
    }

    /// Writes one packet.
    pub fn send(&self, packet: &[u8]) -> io::Result<usize> {
        self.dev.send(packet)
    }
}

impl AsRawFd for Tun {
    fn as_raw_fd(&self) -> RawFd {
        self.dev.as_raw_fd()
    }
}
