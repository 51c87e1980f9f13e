//! Small text formats shared by the benchmark's reports (the TCP modes' and the
//! constant-rate flow's): a leaf module, so the reports need not import each other.

/// Shares as `66/34`.
pub fn shares_text(shares: &[f64]) -> String {
    shares
        .iter()
        .map(|s| format!("{:.0}", s * 100.0))
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_whole_percentages() {
        assert_eq!(shares_text(&[0.664, 0.336]), "66/34");
    }
}
