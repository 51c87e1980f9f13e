//! What both ends of the `hmtp` mode (seed HMTP §III) agree on out of band: the LT code's
//! parameters, the chunk pipeline's bounds, and how each chunk's seed and source data are
//! derived (so the receiver can check that a decoded chunk is the one that was sent).
//!
//! Invariants: [`HmtpConfig::chunk_seed`] and [`HmtpConfig::source`] are pure functions of
//! (config seed, chunk id): no clock, no global RNG.

use plait_fec::LtParams;

/// The transport under the fountain layer (seed HMTP §III-A step 4: "sequence numbers
/// (SNs) or transmission sequence numbers (TSNs) if the underlying transport protocol is
/// TCP or SCTP, respectively").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HmtpTransport {
    /// One ns-2 NewReno per path, each with its own sequence space and cumulative ACKs.
    Tcp,
    /// The `cmt-sctp` baseline's transport (one TSN space, per-path windows, SACKs,
    /// RTX-CWND) with its receive buffer never filling: the receiver hands every chunk to
    /// the fountain layer at once.
    Sctp,
}

/// The `hmtp` mode's parameters (the seed's values where it gives them).
#[derive(Clone, Debug, PartialEq)]
pub struct HmtpConfig {
    /// Paths, at least 1.
    pub paths: usize,
    /// The transport under the fountain layer.
    pub transport: HmtpTransport,
    /// The SCTP transport's receive window, packets: only sequence-number bookkeeping,
    /// since the fountain layer consumes every chunk at once (the seed: "the receiver
    /// buffer is always available"); large enough never to block.
    pub sctp_rwnd: u32,
    /// The SCTP transport's cap on chunks in flight: the advertised window of a receive
    /// buffer that is always empty (seed HMTP §IV: 64 KB, 64 packets of 1000 bytes).
    pub sctp_flight_cap: u32,
    /// Payload bytes each encoded packet occupies on the wire (the seed's L; ns-2's 1000).
    pub packet_size: u32,
    /// Bytes of each LT symbol the simulator really encodes and decodes. Smaller than
    /// `packet_size` to keep runs fast: the code's behaviour (which symbols decode) does
    /// not depend on the symbol size, only its cost does.
    pub symbol_size: usize,
    /// Source symbols per chunk (seed HMTP §IV: k = 1000).
    pub k: usize,
    /// Robust soliton c. Seed HMTP §IV does not give it (its §V-A test bed uses 0.057);
    /// 0.03 is where plait-fec's decoder needs the seed's 1137 symbols in the median
    /// (docs/fec.md: median 1141, mean 1156; at 0.057 the median is 1199).
    pub c: f64,
    /// Robust soliton delta (seed HMTP §IV: 0.03).
    pub delta: f64,
    /// k' = k(1 + epsilon): symbols the receiver should hold before the sender moves on
    /// (seed HMTP §IV: "once the receiver receives 1137 fountain-encoded packets, it can
    /// reconstruct 1000 original packets").
    pub k_prime: u32,
    /// Seed HMTP §III-A step 6's alpha: more symbols when a chunk has not decoded at its
    /// goal. The seed gives no value.
    pub alpha: u32,
    /// Chunks the sender keeps open (sent but not reported decoded) at once.
    pub max_open: usize,
    /// Chunks the receiver decodes at once, from its lowest undecoded chunk; symbols of
    /// chunks beyond are dropped (the receiver's memory bound).
    pub rx_window: u32,
    /// Segments a path's receiver accepts above its cumulative point (the transport's
    /// window; out-of-window segments are dropped).
    pub seg_window: u64,
    /// Keys every chunk's seed and source data.
    pub seed: u64,
}

impl Default for HmtpConfig {
    fn default() -> Self {
        let lt = LtParams::hmtp(16, 0);
        HmtpConfig {
            paths: 2,
            transport: HmtpTransport::Sctp,
            sctp_rwnd: 4096,
            sctp_flight_cap: 64,
            packet_size: 1000,
            symbol_size: lt.symbol_size,
            k: lt.k,
            c: 0.03,
            delta: lt.delta,
            k_prime: 1137,
            alpha: 20,
            max_open: 8,
            rx_window: 16,
            seg_window: 1024,
            seed: 0,
        }
    }
}

/// SplitMix64's finaliser: a well-mixed 64-bit function.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl HmtpConfig {
    /// Chunk `chunk`'s generator seed (the seed's "seed for the pseudo-random number
    /// generator" of §III-A step 3, derived here rather than carried).
    pub fn chunk_seed(&self, chunk: u32) -> u64 {
        mix(self.seed ^ mix(u64::from(chunk)))
    }

    /// Chunk `chunk`'s LT parameters.
    pub fn lt_params(&self, chunk: u32) -> LtParams {
        LtParams {
            k: self.k,
            symbol_size: self.symbol_size,
            c: self.c,
            delta: self.delta,
            chunk_seed: self.chunk_seed(chunk),
        }
    }

    /// Chunk `chunk`'s k source symbols (the application's data, pseudo-random).
    pub fn source(&self, chunk: u32) -> Vec<u8> {
        let len = self.k * self.symbol_size;
        let base = mix(self.chunk_seed(chunk) ^ 0x5eed_da7a);
        let mut out = Vec::with_capacity(len + 8);
        let mut i = 0u64;
        while out.len() < len {
            out.extend_from_slice(&mix(base.wrapping_add(i)).to_le_bytes());
            i += 1;
        }
        out.truncate(len);
        out
    }
}
