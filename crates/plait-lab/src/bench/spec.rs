//! A topology file ([`plait_topology::TopologyFile`]) as the test bed builds it: IPv4
//! paths shaped by tbf, delayed and lossy through the NFQUEUE emulators, one router
//! namespace per path.

use std::time::Duration;

use plait_testbed::{Direction, PathSpec, TopologySpec};
use plait_topology::{LossDirection, TopologyFile};

fn ms(v: f64) -> Duration {
    Duration::try_from_secs_f64(v / 1000.0).unwrap_or(Duration::ZERO)
}

/// The test bed spec (IPv4 paths) under namespace prefix `prefix`, loss seeded by
/// `seed`.
pub fn testbed_spec(file: &TopologyFile, prefix: &str, seed: u64) -> TopologySpec {
    let paths = file
        .paths
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut s = PathSpec::v4()
                .rate(p.rate_mbit)
                .queue(p.queue_bytes())
                .delay_in(Direction::Up, ms(p.delay_up_ms()))
                .delay_in(Direction::Down, ms(p.delay_down_ms()))
                .seed(seed.wrapping_add(2 * i as u64));
            let m = p.loss_model();
            match p.loss_direction {
                LossDirection::Both => s = s.loss(m),
                LossDirection::Up => s = s.loss_in(Direction::Up, m),
                LossDirection::Down => s = s.loss_in(Direction::Down, m),
            }
            s
        })
        .collect();
    TopologySpec::new(prefix, paths)
}

#[cfg(test)]
mod tests {
    use super::*;
    use plait_testbed::emulate::LossModel;
    use std::path::Path;

    #[test]
    fn a_file_becomes_a_valid_testbed_spec() {
        let text = "name = \"x\"\nduration_s = 20\n\
                    [[path]]\nrate_mbit = 20\nrtt_ms = 20\n\
                    [[path]]\nrate_mbit = 10\nrtt_ms = 100\nloss = 0.1\nloss_direction = \"up\"\n";
        let t = TopologyFile::parse(text, "x.toml").unwrap();
        let spec = testbed_spec(&t, "pbn", 1);
        spec.validate().unwrap();
        let p = &spec.clients[0].paths[1];
        assert_eq!(p.delay_up, Duration::from_millis(50));
        assert_eq!(p.delay_down, Duration::from_millis(50));
        assert_eq!(p.queue_bytes, 125_000);
        assert_eq!(p.loss_up, LossModel::Bernoulli { p: 0.1 });
        assert_eq!(p.loss_down, LossModel::None);
    }

    #[test]
    fn every_shipped_topology_builds() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../topologies");
        let mut n = 0;
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "toml") {
                let t = TopologyFile::load(&p).unwrap_or_else(|e| panic!("{e}"));
                testbed_spec(&t, "pbn", 0).validate().unwrap();
                n += 1;
            }
        }
        assert!(n >= 4, "{n} topology files");
    }
}
