//! A topology file (`topologies/*.toml`, plait-topology's [`TopologyFile`]) as a simulator
//! scenario, so `plait sim FILE` runs the very file `plait bench FILE` builds on the test
//! bed.
//!
//! The mapping (each path becomes one proxy – mobile-host path of the seeds' topology):
//! - rate: the path's wireless rate; the wired hop before it runs at 1 Gbit/s, so the
//!   wireless hop is the only bottleneck, as the tbf is on the test bed;
//! - delay: the test bed's one-way delays on the wired hop (half the RTT each way unless the
//!   file gives them), its `up` delay on the simulator's data direction;
//! - queue: the file's queue in bytes over [`WIRE_PACKET_BYTES`], at least one packet (the
//!   simulator's queues count packets; the test bed's tbf counts bytes, so a rate event
//!   makes the test bed's queue longer in time and the simulator's too, by the same factor);
//! - loss: on the data direction only. The test bed's transfer runs client → server (`up`),
//!   the simulator's server → mobile host; `both` and `up` put the model on the simulator's
//!   data direction (with `both`, the ACKs' losses of the test bed are not modelled), and
//!   `down` (the ACK direction alone) is refused: the simulator has no loss there;
//! - events: `blackhole` and `link_down` become outages (the simulator does not tell carrier
//!   loss from silence), `rate` events become rate dips;
//! - the transfer: one NewReno flow (1460-byte segments, window 3000, no delayed ACKs)
//!   against the rows of [`RUNS`], over seeds 1 to 3, in 100 ms bins.
//!
//! Invariant: every file that passed [`TopologyFile::parse`] either converts to a scenario
//! that passes [`Scenario::validate`] or is refused with the field that cannot be modelled.

use plait_topology::{EventKind, LossDirection, TopologyFile};

use crate::scenario::{
    CrossSpec, LossSpell, Mode, PathSpec, RateDip, RunSpec, Scenario, ScenarioError, TcpSpec,
    WiredSpec,
};

/// Bytes of one full-size packet on the test bed's 1500-byte links: the unit a byte queue
/// is counted in here.
pub const WIRE_PACKET_BYTES: f64 = 1500.0;

/// One row every topology file runs.
#[derive(Clone, Copy, Debug)]
pub struct TopologyRow {
    /// Row name.
    pub name: &'static str,
    /// How the transfer crosses the paths.
    pub mode: Mode,
    /// plait's scheduler (mode `plait`).
    pub scheduler: Option<&'static str>,
    /// plait's loss repair (mode `plait`).
    pub repair: bool,
    /// The streams' congestion controller (mode `plait-stream`; `None`: the default).
    pub congestion: Option<&'static str>,
}

const fn row(
    name: &'static str,
    mode: Mode,
    scheduler: Option<&'static str>,
    repair: bool,
    congestion: Option<&'static str>,
) -> TopologyRow {
    TopologyRow {
        name,
        mode,
        scheduler,
        repair,
        congestion,
    }
}

/// The rows every topology file runs.
pub const RUNS: [TopologyRow; 8] = [
    row("one TCP flow per path", Mode::Mtcp, None, false, None),
    row("plait", Mode::Plait, Some("plait"), false, None),
    row("plait + repair", Mode::Plait, Some("plait"), true, None),
    row("edpf", Mode::Plait, Some("edpf"), false, None),
    row(
        "mptcp (default scheduler)",
        Mode::Plait,
        Some("mptcp"),
        false,
        None,
    ),
    row("plait streams", Mode::PlaitStream, None, false, None),
    row(
        "plait streams, bbr",
        Mode::PlaitStream,
        None,
        false,
        Some("bbr"),
    ),
    row(
        "plait streams, newreno",
        Mode::PlaitStream,
        None,
        false,
        Some("newreno"),
    ),
];

/// Whether a TOML document is a topology file (its paths are `[[path]]`) rather than a
/// scenario (`[[paths]]`).
pub fn is_topology_file(doc: &toml::Table) -> bool {
    doc.contains_key("path") && !doc.contains_key("paths")
}

/// The scenario that runs `file` in the simulator.
pub fn scenario_from_topology(file: &TopologyFile) -> Result<Scenario, ScenarioError> {
    let mut paths = Vec::with_capacity(file.paths.len());
    for (i, p) in file.paths.iter().enumerate() {
        let loss = match p.loss_direction {
            LossDirection::Both | LossDirection::Up => p.loss_model(),
            LossDirection::Down if p.loss_model().is_lossless() => p.loss_model(),
            LossDirection::Down => {
                return Err(ScenarioError::Invalid {
                    field: format!("path[{i}].loss_direction"),
                    problem: "\"down\" is the ACK direction of the test bed's transfer; the \
                              simulator models loss only on the data direction"
                        .into(),
                });
            }
        };
        // In time order: the scenario wants each path's spans sorted, the file does not.
        let mut own: Vec<_> = file.events.iter().filter(|e| e.path == i).collect();
        own.sort_by(|a, b| a.from_s.total_cmp(&b.from_s));
        let events = own.into_iter();
        paths.push(PathSpec {
            rate_kbps: p.rate_mbit * 1000.0,
            wired_delay_ms: p.delay_up_ms(),
            wired_delay_back_ms: (p.delay_down_ms() != p.delay_up_ms()).then(|| p.delay_down_ms()),
            wired_rate_mbps: 1000.0,
            wireless_delay_ms: 0.0,
            queue_packets: ((f64::from(p.queue_bytes()) / WIRE_PACKET_BYTES).round() as usize)
                .max(1),
            wfq: false,
            loss,
            cross: CrossSpec::default(),
            fluctuation: None,
            outages: events
                .clone()
                .filter(|e| matches!(e.kind, EventKind::Blackhole | EventKind::LinkDown))
                .map(|e| [e.from_s, e.to_s])
                .collect(),
            loss_spells: events
                .clone()
                .filter(|e| e.kind == EventKind::Loss)
                .filter_map(|e| {
                    e.loss.map(|loss| LossSpell {
                        from_s: e.from_s,
                        to_s: e.to_s,
                        loss,
                    })
                })
                .collect(),
            rate_dips: events
                .filter(|e| e.kind == EventKind::Rate)
                .filter_map(|e| {
                    e.rate_mbit.map(|r| RateDip {
                        from_s: e.from_s,
                        to_s: e.to_s,
                        rate_kbps: r * 1000.0,
                    })
                })
                .collect(),
            cost: None,
        });
    }
    let scenario = Scenario {
        shared_bottleneck: None,
        cbr: None,
        name: format!("{} in simulation", file.name),
        description: format!("{} ({})", file.description, file.summary()),
        note: String::new(),
        duration_s: file.duration_s,
        seeds: vec![1, 2, 3],
        tcp: TcpSpec {
            window: 3000,
            packet_size: 1460,
            ..TcpSpec::default()
        },
        server_proxy: WiredSpec {
            rate_mbps: 100.0,
            delay_ms: 1.0,
            ..WiredSpec::default()
        },
        paths,
        outer_header_bytes: 28,
        runs: RUNS
            .iter()
            .map(
                |&TopologyRow {
                     name,
                     mode,
                     scheduler,
                     repair,
                     congestion,
                 }| RunSpec {
                    name: name.into(),
                    mode,
                    scheduler: scheduler.map(Into::into),
                    reorder: scheduler.map(|_| "bmp".into()),
                    perfect_knowledge: false,
                    repair: scheduler.map(|_| repair),
                    min_pair_bytes: None,
                    congestion: congestion.map(Into::into),
                    stream_scheduler: None,
                    packet_pacing: None,
                    handover: None,
                    fec: None,
                    rwnd_packets: None,
                    ack_every: None,
                    paper_kbps: None,
                    paper_path_kbps: Vec::new(),
                    note: None,
                },
            )
            .collect(),
        bin_s: 0.1,
        per_path_table: false,
        app_delay_table: false,
        handover: None,
    };
    scenario.validate()?;
    Ok(scenario)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn topology(name: &str) -> TopologyFile {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../topologies")
            .join(name);
        TopologyFile::load(&p).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn loss_events_become_loss_spells_and_blackholes_outages() {
        let s = scenario_from_topology(&topology("mobility/fade.toml")).unwrap();
        let p0 = &s.paths[0];
        let spells: Vec<(f64, f64, f64)> = p0
            .loss_spells
            .iter()
            .map(|l| (l.from_s, l.to_s, l.loss))
            .collect();
        assert_eq!(
            spells,
            [
                (5.0, 7.0, 0.02),
                (7.0, 9.0, 0.05),
                (9.0, 11.0, 0.15),
                (11.0, 13.0, 0.3)
            ]
        );
        assert_eq!(p0.outages, [[13.0, 17.0]]);
        assert!(s.paths[1].loss_spells.is_empty());
    }

    #[test]
    fn t5_becomes_the_scenario_it_describes() {
        let s = scenario_from_topology(&topology("T5.toml")).unwrap();
        assert_eq!(s.paths.len(), 2);
        let (p0, p1) = (&s.paths[0], &s.paths[1]);
        assert_eq!((p0.rate_kbps, p0.wired_delay_ms), (20_000.0, 10.0));
        assert_eq!((p1.rate_kbps, p1.wired_delay_ms), (10_000.0, 50.0));
        // 100 ms at 20 Mbit/s is 250 000 bytes: 167 packets of 1500 bytes.
        assert_eq!((p0.queue_packets, p1.queue_packets), (167, 83));
        assert_eq!(p0.rate_dips.len(), 1);
        assert_eq!(p0.rate_dips[0].rate_kbps, 5000.0);
        assert_eq!(p1.rate_dips[0].from_s, 12.0);
        assert_eq!(s.duration_s, 20.0);
        assert_eq!(s.runs.len(), RUNS.len());
    }

    #[test]
    fn every_shipped_topology_converts() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../topologies");
        let mut n = 0;
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "toml") {
                let name = p.file_name().unwrap().to_str().unwrap().to_owned();
                scenario_from_topology(&topology(&name)).unwrap_or_else(|e| panic!("{name}: {e}"));
                n += 1;
            }
        }
        assert!(n >= 5, "{n} topology files");
    }

    #[test]
    fn asymmetric_delays_go_to_their_directions() {
        let text = "name = \"x\"\nduration_s = 20\n\
                    [[path]]\nrate_mbit = 10\ndelay_up_ms = 5\ndelay_down_ms = 30\n";
        let s = scenario_from_topology(&TopologyFile::parse(text, "x.toml").unwrap()).unwrap();
        assert_eq!(s.paths[0].wired_delay_ms, 5.0);
        assert_eq!(s.paths[0].wired_delay_back_ms, Some(30.0));
    }

    #[test]
    fn events_and_loss_map_to_outages_and_the_data_direction() {
        let text = "name = \"x\"\nduration_s = 20\n\
                    [[path]]\nrate_mbit = 10\nrtt_ms = 40\nloss = 0.02\nloss_direction = \"up\"\n\
                    [[event]]\nkind = \"link_down\"\npath = 0\nfrom_s = 3\nto_s = 4\n";
        let f = TopologyFile::parse(text, "x.toml").unwrap();
        let s = scenario_from_topology(&f).unwrap();
        assert_eq!(s.paths[0].outages, vec![[3.0, 4.0]]);
        assert_eq!(
            s.paths[0].loss,
            plait_topology::LossModel::Bernoulli { p: 0.02 }
        );
        let down = TopologyFile::parse(&text.replace("\"up\"", "\"down\""), "x.toml").unwrap();
        let e = scenario_from_topology(&down).unwrap_err().to_string();
        assert!(e.contains("path[0].loss_direction"), "{e}");
    }
}
