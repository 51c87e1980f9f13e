//! The ECN field of an inner packet (RFC 3168 §5) and marking it Congestion Experienced,
//! which the send queue does instead of dropping an ECN-capable packet (RFC 3168 §5,
//! RFC 8290 §5.2.6).
//!
//! Invariants: only an IPv4 packet with a whole header (IHL ≥ 5, all IHL words present) or
//! an IPv6 packet with its 40-byte fixed header has an ECN field here; marking changes
//! nothing but the two ECN bits and, in IPv4, the header checksum, which is updated
//! incrementally (RFC 1624 §3, eqn. 3), so a checksum that was right stays right and one
//! that was wrong stays wrong (the receiver still discards it). IPv6 has no header checksum.

/// The ECN codepoint (RFC 3168 §5: the two low bits of the IPv4 TOS byte or IPv6 traffic
/// class).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Ecn {
    /// `00`: the sender does not do ECN.
    NotEct,
    /// `01`: ECN-capable transport, ECT(1).
    Ect1,
    /// `10`: ECN-capable transport, ECT(0).
    Ect0,
    /// `11`: congestion experienced.
    Ce,
}

impl Ecn {
    fn from_bits(bits: u8) -> Ecn {
        match bits & 0b11 {
            0b00 => Ecn::NotEct,
            0b01 => Ecn::Ect1,
            0b10 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }
}

/// Where the ECN bits live: (byte index, shift of the two bits in it).
fn ecn_position(packet: &[u8]) -> Option<(usize, u32)> {
    match packet.first()? >> 4 {
        4 => {
            let ihl = usize::from(packet[0] & 0x0f) * 4;
            (ihl >= 20 && packet.len() >= ihl).then_some((1, 0))
        }
        // Traffic class = low nibble of byte 0, high nibble of byte 1; ECN = its low two
        // bits = bits 4 and 5 of byte 1.
        6 => (packet.len() >= 40).then_some((1, 4)),
        _ => None,
    }
}

/// The packet's ECN codepoint; `None` if it is not an IPv4/IPv6 packet with a whole header.
pub fn ecn(packet: &[u8]) -> Option<Ecn> {
    let (at, shift) = ecn_position(packet)?;
    Some(Ecn::from_bits(packet[at] >> shift))
}

/// Marks an ECN-capable packet (ECT(0), ECT(1)) Congestion Experienced; `true` if the
/// packet now carries CE (it was ECN-capable, or already CE), `false` (untouched) if it is
/// not ECN-capable or not IP: such a packet must be dropped instead.
pub fn mark_ce(packet: &mut [u8]) -> bool {
    let Some((at, shift)) = ecn_position(packet) else {
        return false;
    };
    match Ecn::from_bits(packet[at] >> shift) {
        Ecn::NotEct => return false,
        Ecn::Ce => return true,
        Ecn::Ect0 | Ecn::Ect1 => {}
    }
    if shift == 0 {
        // IPv4: the TOS byte is the low half of the header's first 16-bit word.
        let old = u16::from_be_bytes([packet[0], packet[1]]);
        packet[1] |= 0b11;
        let new = u16::from_be_bytes([packet[0], packet[1]]);
        let checksum = u16::from_be_bytes([packet[10], packet[11]]);
        let updated = incremental_checksum(checksum, old, new);
        packet[10..12].copy_from_slice(&updated.to_be_bytes());
    } else {
        packet[at] |= 0b11 << shift;
    }
    true
}

/// RFC 1624 §3, eqn. 3: `HC' = ~(~HC + ~m + m')` in one's complement arithmetic, for a
/// header whose 16-bit word `m` became `m'`.
pub(crate) fn incremental_checksum(checksum: u16, old: u16, new: u16) -> u16 {
    let sum = u32::from(!checksum) + u32::from(!old) + u32::from(new);
    !fold(sum)
}

/// Folds a 32-bit one's complement sum to 16 bits.
pub(crate) fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}
