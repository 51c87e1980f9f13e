//! A metric over seeds: its mean and 95 % confidence half-width (Student's t). A leaf
//! module, so the summaries that use it (`sweep`, `handover_report`) need not import
//! each other.

use serde::Serialize;

/// Mean and 95 % confidence half-width of one metric over seeds.
#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub struct Stat {
    /// Mean.
    pub mean: f64,
    /// Half-width of the 95 % confidence interval (Student's t); 0 for one seed.
    pub ci95: f64,
}

impl Stat {
    /// Mean and CI of `xs`.
    pub fn of(xs: &[f64]) -> Stat {
        let n = xs.len();
        if n == 0 {
            return Stat {
                mean: f64::NAN,
                ci95: f64::NAN,
            };
        }
        let mean = xs.iter().sum::<f64>() / n as f64;
        if n == 1 {
            return Stat { mean, ci95: 0.0 };
        }
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        Stat {
            mean,
            ci95: t_975(n - 1) * (var / n as f64).sqrt(),
        }
    }
}

/// Student's t quantile 0.975 for `df` degrees of freedom.
fn t_975(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    T.get(df.saturating_sub(1)).copied().unwrap_or(1.960)
}
