//! How many repair symbols a block gets: the fewest that bring the expected fraction of its
//! packets left unrecovered to the target, from the measured random loss of the paths its
//! packets took and of the path its repairs will take.
//!
//! The loss rates are the paths' `shallow_loss_rate` (losses while the path's queue was
//! short: the link's own loss, not queue overflow; `path/`). Source losses are independent
//! Bernoulli trials with each packet's path rate (their count is Poisson-binomial);
//! repair losses are binomial with the repair path's rate. A Reed-Solomon block with `j`
//! lost sources and `l` lost repairs rebuilds everything when `j + l <= r`, else nothing,
//! so the expected unrecovered fraction is `sum_j j P(j) P(j + L > r) / k`.

/// The count of repair symbols for a block whose source packets were each lost with the
/// probabilities in `source_loss`, repairs lost with `repair_loss`: the smallest `r` in
/// `min..=max` with expected unrecovered fraction at most `target` (else `max`). Rates
/// outside 0..=0.5 (or NaN) are clamped: beyond half, a block code is the wrong tool.
pub fn repair_count(source_loss: &[f64], repair_loss: f64, min: u8, max: u8, target: f64) -> u8 {
    let k = source_loss.len();
    if k == 0 || max == 0 {
        return 0;
    }
    let clamp = |p: f64| if p.is_nan() { 0.0 } else { p.clamp(0.0, 0.5) };
    // dist[j] = P(j sources lost).
    let mut dist = vec![0.0f64; k + 1];
    dist[0] = 1.0;
    for (n, p) in source_loss.iter().map(|p| clamp(*p)).enumerate() {
        for j in (0..=n + 1).rev() {
            let stay = dist.get(j).copied().unwrap_or(0.0) * (1.0 - p);
            let moved = j
                .checked_sub(1)
                .and_then(|i| dist.get(i))
                .copied()
                .unwrap_or(0.0)
                * p;
            if let Some(d) = dist.get_mut(j) {
                *d = stay + moved;
            }
        }
    }
    let q = clamp(repair_loss);
    for r in min.min(max)..=max {
        let r_us = usize::from(r);
        // tail[m] = P(Bin(r, q) >= m).
        let mut pmf = vec![0.0f64; r_us + 1];
        for (l, v) in pmf.iter_mut().enumerate() {
            *v = binomial(r_us, l) * q.powi(l as i32) * (1.0 - q).powi((r_us - l) as i32);
        }
        let residual: f64 = dist
            .iter()
            .enumerate()
            .skip(1)
            .map(|(j, pj)| {
                // P(j + L > r) = P(L >= r - j + 1).
                let fail = if j > r_us {
                    1.0
                } else {
                    pmf.iter().skip(r_us - j + 1).sum::<f64>()
                };
                j as f64 * pj * fail
            })
            .sum::<f64>()
            / k as f64;
        if residual <= target {
            return r;
        }
    }
    max
}

fn binomial(n: usize, k: usize) -> f64 {
    (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_loss_needs_the_floor_only() {
        assert_eq!(repair_count(&[0.0; 8], 0.0, 0, 6, 1e-4), 0);
        assert_eq!(repair_count(&[0.0; 8], 0.0, 1, 6, 1e-4), 1);
        assert_eq!(repair_count(&[], 0.1, 1, 6, 1e-4), 0);
    }

    #[test]
    fn more_loss_needs_more_repairs() {
        // Eight packets, half on a path losing 5 %: one repair leaves about 3e-3 of them
        // unrecovered, two about 1.7e-4.
        let half = [0.05, 0.0, 0.05, 0.0, 0.05, 0.0, 0.05, 0.0];
        assert_eq!(repair_count(&half, 0.0, 0, 6, 2e-4), 2);
        assert_eq!(repair_count(&half, 0.0, 0, 6, 5e-3), 1);
        let ten = [0.1; 16];
        let r = repair_count(&ten, 0.0, 0, 15, 2e-4);
        assert!((5..=9).contains(&r), "{r}");
        assert_eq!(repair_count(&ten, 0.0, 0, 3, 2e-4), 3);
        // Lossy repairs need more of them.
        assert!(repair_count(&half, 0.05, 0, 6, 2e-4) >= 2);
        assert_eq!(repair_count(&[f64::NAN, 2.0], 0.0, 0, 6, 0.0), 1);
    }
}
