//! The capability sets after set-up: [`KEPT_CAPABILITIES`] and nothing else.
//!
//! Why CAP_NET_ADMIN stays: at stop the daemon undoes its network configuration (policy
//! rules, routes, nftables tables, a sysctl) by running `ip` and `nft`, which need it; the
//! configuration outlives the process otherwise (the routes through the TUN device go with
//! it, the rules and tables do not). It is in the inheritable and ambient sets so that
//! those children get it whatever the daemon's user id; with no_new_privs a child can never
//! get more. Nothing else is needed after set-up: the TUN device, the sockets (SO_MARK and
//! SO_BINDTODEVICE set on them at bind time), privileged ports and the open-file limit are
//! all taken before; the server's relay `connect`s and the client's SO_ORIGINAL_DST
//! lookups need no capability.
//!
//! Invariant: sets are changed in an order the kernel accepts (the bounding set while
//! CAP_SETPCAP is still effective, the inheritable set before the ambient one, the
//! effective set before the permitted one), and the result is read back and checked.

use ::caps::{CapSet, Capability, CapsHashSet};

/// The capabilities the daemon keeps after set-up.
pub const KEPT_CAPABILITIES: [Capability; 1] = [Capability::CAP_NET_ADMIN];

/// Cuts every capability set of the calling thread to [`KEPT_CAPABILITIES`] (those of
/// them it has). Returns the names kept.
pub(super) fn drop_to_kept() -> Result<Vec<String>, String> {
    let permitted = read(CapSet::Permitted)?;
    let keep: CapsHashSet = KEPT_CAPABILITIES
        .iter()
        .copied()
        .filter(|c| permitted.contains(c))
        .collect();
    // Without CAP_SETPCAP (a non-root daemon with file capabilities) the bounding set
    // stays as it is; no_new_privs still keeps execs from gaining anything.
    if read(CapSet::Effective)?.contains(&Capability::CAP_SETPCAP) {
        for cap in read(CapSet::Bounding)? {
            if !keep.contains(&cap) {
                ::caps::drop(None, CapSet::Bounding, cap)
                    .map_err(|e| format!("bounding set, dropping {cap}: {e}"))?;
            }
        }
    }
    for set in [CapSet::Inheritable, CapSet::Effective, CapSet::Permitted] {
        ::caps::set(None, set, &keep).map_err(|e| format!("{set:?} set: {e}"))?;
    }
    ::caps::clear(None, CapSet::Ambient).map_err(|e| format!("ambient set: {e}"))?;
    for cap in &keep {
        ::caps::raise(None, CapSet::Ambient, *cap)
            .map_err(|e| format!("ambient set, raising {cap}: {e}"))?;
    }
    for set in [CapSet::Effective, CapSet::Permitted] {
        let now = read(set)?;
        if now != keep {
            return Err(format!("the {set:?} set is {now:?} after the drop"));
        }
    }
    let mut names: Vec<String> = keep.iter().map(|c| c.to_string().to_lowercase()).collect();
    names.sort();
    Ok(names)
}

fn read(set: CapSet) -> Result<CapsHashSet, String> {
    ::caps::read(None, set).map_err(|e| format!("reading the {set:?} set: {e}"))
}
