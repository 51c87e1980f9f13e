//! The robust soliton degree distribution of LT codes, as seed HMTP §III-B writes it.
//!
//! - ideal ("idle" in the seed) soliton, eq. (1): rho(1) = 1/k, rho(d) = 1/(d(d-1));
//! - eq. (2): S(delta, k, c) = c ln(k/delta) sqrt(k), the expected number of degree-1
//!   symbols;
//! - eq. (3): tau(d) = S/(dk) for d < k/S, S ln(S/delta)/k at d = k/S (the "spike"), 0 above;
//! - eq. (4): beta = sum(rho + tau), mu(d) = (rho(d) + tau(d)) / beta.
//!
//! The seed writes k/S as if it were an integer; plait puts the spike at
//! `round(k/S)` clamped to 1..=k (as Luby's and MacKay's reference code do). Luby's theorem
//! (seed ref. [8]) gives k' = k beta received symbols as enough for decoding with
//! probability at least 1 - delta; [`RobustSoliton::luby_symbols`] returns it.
//!
//! Invariant: the sampling table is integer (53-bit thresholds), built once from f64; both
//! ends of a chunk build it with the same code, so they draw the same degree from the same
//! PRNG word. (`f64::ln` and `sqrt` are the only transcendental steps; a platform whose
//! `ln` differs in the last bit could move a threshold by one part in 2^53.)

use crate::codec::ParamError;

/// Largest k plait's LT code accepts: indices and ids are u32, and the decoder's edge
/// lists are sized by k.
pub const MAX_K: usize = 1 << 20;

/// 2^53: the resolution of the sampling table, the width of one PRNG draw.
const ONE: u64 = 1 << 53;

/// The robust soliton distribution mu over degrees 1..=k.
#[derive(Debug, Clone)]
pub struct RobustSoliton {
    k: usize,
    s: f64,
    spike: usize,
    beta: f64,
    /// `cdf[d - 1]` = round(P(degree <= d) * 2^53); the last is exactly 2^53.
    cdf: Vec<u64>,
}

impl RobustSoliton {
    /// The distribution for k source symbols, constant c and target failure rate delta.
    pub fn new(k: usize, c: f64, delta: f64) -> Result<Self, ParamError> {
        if k == 0 || k > MAX_K {
            return Err(ParamError::K { k, max: MAX_K });
        }
        if !(c.is_finite() && c > 0.0) {
            return Err(ParamError::C(c));
        }
        if !(delta > 0.0 && delta < 1.0) {
            return Err(ParamError::Delta(delta));
        }
        let kf = k as f64;
        // seed HMTP §III-B eq. (2)
        let s = c * (kf / delta).ln() * kf.sqrt();
        let spike = ((kf / s).round() as usize).clamp(1, k);
        let mut weights = Vec::with_capacity(k);
        for d in 1..=k {
            weights.push(rho(d, k) + tau(d, k, s, spike, delta));
        }
        // seed HMTP §III-B eq. (4)
        let beta: f64 = weights.iter().sum();
        let mut cdf = Vec::with_capacity(k);
        let mut cum = 0.0;
        for w in &weights {
            cum += w;
            let t = (cum / beta * ONE as f64).round();
            cdf.push((t as u64).min(ONE));
        }
        if let Some(last) = cdf.last_mut() {
            *last = ONE;
        }
        Ok(Self {
            k,
            s,
            spike,
            beta,
            cdf,
        })
    }

    /// Number of source symbols.
    pub fn k(&self) -> usize {
        self.k
    }

    /// S of eq. (2): the expected number of degree-1 symbols.
    pub fn s(&self) -> f64 {
        self.s
    }

    /// The degree that carries tau's spike, round(k/S).
    pub fn spike(&self) -> usize {
        self.spike
    }

    /// beta of eq. (4), the normalising sum.
    pub fn beta(&self) -> f64 {
        self.beta
    }

    /// Luby's k' = ceil(k beta): received symbols enough to decode with probability at
    /// least 1 - delta (Luby 2002, seed ref. [8]).
    pub fn luby_symbols(&self) -> usize {
        (self.k as f64 * self.beta).ceil() as usize
    }

    /// mu(d), the probability of degree d (0 outside 1..=k).
    pub fn mu(&self, d: usize) -> f64 {
        if d == 0 || d > self.k {
            return 0.0;
        }
        let lo = if d == 1 { 0 } else { self.cdf[d - 2] };
        (self.cdf[d - 1] - lo) as f64 / ONE as f64
    }

    /// Mean degree under mu.
    pub fn mean_degree(&self) -> f64 {
        (1..=self.k).map(|d| d as f64 * self.mu(d)).sum()
    }

    /// The degree for one 64-bit PRNG word: its top 53 bits against the integer table.
    pub fn degree_for(&self, word: u64) -> usize {
        let u = word >> 11;
        // first d whose cdf exceeds u; cdf's last entry is 2^53 > u, so this is <= k - 1.
        self.cdf.partition_point(|&t| t <= u) + 1
    }
}

/// seed HMTP §III-B eq. (1): the ideal soliton distribution.
fn rho(d: usize, k: usize) -> f64 {
    if d == 1 {
        1.0 / k as f64
    } else {
        1.0 / (d as f64 * (d as f64 - 1.0))
    }
}

/// seed HMTP §III-B eq. (3).
fn tau(d: usize, k: usize, s: f64, spike: usize, delta: f64) -> f64 {
    let kf = k as f64;
    if d < spike {
        s / (d as f64 * kf)
    } else if d == spike {
        // S < delta only for absurdly small c; a negative weight would break the table.
        (s * (s / delta).ln() / kf).max(0.0)
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_to_one_and_matches_hand_computation() {
        let rs = RobustSoliton::new(1000, 0.03, 0.03).unwrap();
        let total: f64 = (1..=1000).map(|d| rs.mu(d)).sum();
        assert!((total - 1.0).abs() < 1e-12);
        // S = 0.03 ln(1000/0.03) sqrt(1000) = 9.879
        assert!((rs.s() - 9.879).abs() < 1e-3, "{}", rs.s());
        assert_eq!(rs.spike(), 101);
        assert!(rs.beta() > 1.05 && rs.beta() < 1.15, "{}", rs.beta());
    }

    #[test]
    fn degree_covers_extremes() {
        let rs = RobustSoliton::new(100, 0.1, 0.05).unwrap();
        assert_eq!(rs.degree_for(0), 1);
        assert!(rs.degree_for(u64::MAX) <= 100);
        for w in [1u64 << 63, 12345, u64::MAX / 3] {
            let d = rs.degree_for(w);
            assert!((1..=100).contains(&d));
        }
    }

    #[test]
    fn rejects_bad_parameters() {
        assert!(RobustSoliton::new(0, 0.1, 0.1).is_err());
        assert!(RobustSoliton::new(10, 0.0, 0.1).is_err());
        assert!(RobustSoliton::new(10, f64::NAN, 0.1).is_err());
        assert!(RobustSoliton::new(10, 0.1, 1.0).is_err());
        assert!(RobustSoliton::new(MAX_K + 1, 0.1, 0.1).is_err());
    }

    #[test]
    fn large_c_with_small_k_puts_the_spike_at_one() {
        let rs = RobustSoliton::new(4, 5.0, 0.5).unwrap();
        assert_eq!(rs.spike(), 1);
        let total: f64 = (1..=4).map(|d| rs.mu(d)).sum();
        assert!((total - 1.0).abs() < 1e-12);
    }
}
