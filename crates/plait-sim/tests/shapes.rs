//! The seeds' qualitative results that must hold (shapes, not values).

use plait_sim::run::run_one;
use plait_sim::scenario::Scenario;

/// Two paths at 8 Mbit/s and 8/`ratio` Mbit/s, 14 ms each (seed ETOM §V: WiMax-like 14 ms
/// links), one NewReno flow through plait with `scheduler` and the `bmp` reorder buffer.
/// Like the seeds' other reproductions (`scenarios/petbmp-table1.toml`, `mms-fig8.toml`)
/// it runs the seed's own mechanisms, not the tunnel's additions: no loss repair, every
/// packet pair a rate sample.
fn etom_fig5(ratio: u32, scheduler: &str) -> f64 {
    let text = format!(
        r#"
name = "ETOM Fig. 5, ratio {ratio}"
duration_s = 10
[tcp]
window = 400
packet_size = 1460
max_burst = 4
[server_proxy]
rate_mbps = 100
delay_ms = 2
[[paths]]
rate_kbps = 8000
wired_delay_ms = 14
wired_rate_mbps = 100
queue_packets = 100
[[paths]]
rate_kbps = {slow}
wired_delay_ms = 14
wired_rate_mbps = 100
queue_packets = 100
[[runs]]
name = "{scheduler}"
mode = "plait"
scheduler = "{scheduler}"
reorder = "bmp"
repair = false
min_pair_bytes = 0
"#,
        slow = 8000 / ratio
    );
    let s = Scenario::from_toml(&text).unwrap();
    run_one(&s, &s.runs[0], 1)
        .reorder_mean_ms
        .expect("a plait run measures reorder delay")
}

/// Seed ETOM Fig. 5: as the links' capacity ratio grows, the average reorder-buffer delay
/// of plain striping grows while SWTC keeps it low.
#[test]
fn etom_fig5_swtc_keeps_reorder_delay_low_as_links_diverge() {
    let striping: Vec<f64> = [1, 2, 4, 8]
        .iter()
        .map(|r| etom_fig5(*r, "round-robin"))
        .collect();
    let swtc: Vec<f64> = [1, 2, 4, 8].iter().map(|r| etom_fig5(*r, "swtc")).collect();
    println!("round-robin {striping:?} ms, swtc {swtc:?} ms");
    for w in striping.windows(2) {
        assert!(
            w[1] > w[0],
            "striping's delay grows with the ratio: {striping:?}"
        );
    }
    for (i, (s, r)) in swtc.iter().zip(&striping).enumerate().skip(1) {
        assert!(
            s * 10.0 < *r,
            "ratio index {i}: swtc {s} ms vs striping {r} ms"
        );
    }
    assert!(swtc.iter().all(|d| *d < 20.0), "swtc stays low: {swtc:?}");
}

/// Seed MMS Fig. 8 (`scenarios/mms-fig8.toml`, WiMax alone for 90 s, then WiMax and WLAN
/// at 2:1 with the seed's delays): plain WRR, with no reorder buffer, collapses once WLAN
/// joins; WRR with the seed's buffer (WRRB) carries the flow; IKR, with the same buffer,
/// carries more (the seed: 520 against 400 KB/s).
#[test]
fn mms_fig8_ikr_above_wrrb_above_wrr() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/mms-fig8.toml");
    let text = std::fs::read_to_string(path).expect("scenarios/mms-fig8.toml");
    let s = Scenario::from_toml(&text).unwrap();
    let result = |name: &str| {
        let run = s
            .runs
            .iter()
            .find(|r| r.name == name)
            .unwrap_or_else(|| panic!("run {name} in mms-fig8.toml"));
        run_one(&s, run, 1)
    };
    let (wrr, wrrb, ikr) = (result("WRR"), result("WRR-BUFF"), result("IKR"));
    // WRR's mean over the last 60 s, when both links are up (6000 kbit/s).
    let tail = |r: &plait_sim::run::RunResult| {
        let bins = (60.0 / r.bin_s) as usize;
        let series = &r.goodput_series_kbps;
        series[series.len().saturating_sub(bins)..]
            .iter()
            .sum::<f64>()
            / bins as f64
    };
    let (wrr_tail, wrrb_tail, ikr_tail) = (tail(&wrr), tail(&wrrb), tail(&ikr));
    let (wrrb, ikr) = (wrrb.goodput_kbps, ikr.goodput_kbps);
    println!(
        "means over 180 s (over the last 60 s): WRR {:.0} ({wrr_tail:.0}) kbit/s, WRR-BUFF {wrrb:.0} ({wrrb_tail:.0}), IKR {ikr:.0} ({ikr_tail:.0})",
        wrr.goodput_kbps
    );
    // Means over the run: WiMax alone (4000 kbit/s) for half of it, both (6000) after.
    let capacity = 5000.0;
    // WRR collapses once both links carry it: at its first drop-tail loss after WLAN
    // joins, recovery meets a dupACK every third packet and never ends (about 35 s after
    // the join with seed 1).
    assert!(
        wrr_tail < 0.2 * 6000.0,
        "WRR collapses once WLAN joins: {wrr_tail} kbit/s over the last 60 s"
    );
    for (name, g, g_tail) in [("WRR-BUFF", wrrb, wrrb_tail), ("IKR", ikr, ikr_tail)] {
        assert!(
            g_tail > 3.0 * wrr_tail,
            "{name} {g_tail} kbit/s vs WRR {wrr_tail} over the last 60 s"
        );
        assert!(g > 0.7 * capacity, "{name} carries the flow: {g} kbit/s");
    }
    // The seed's order: IKR 9-11 % above WRRB over seeds 1-5 (docs/reproduction.md),
    // against the seed's 30 %.
    assert!(ikr > wrrb, "IKR above WRRB: {ikr} vs {wrrb} kbit/s");
}

/// Seed ETOM Fig. 3 and 7 (`scenarios/etom-fig3.toml`, `etom-fig7.toml`): under random and
/// bursty loss the split connection (plait-stream, NewReno per path, an ACK per datagram)
/// carries more than the CMT-SCTP-like baseline. One seed, 20 s, the 5 % and 0.6 s
/// variants, to keep the debug build quick.
#[test]
fn etom_split_connection_beats_cmt_sctp_under_loss() {
    for (file, label) in [
        ("etom-fig3.toml", "loss=5 %"),
        ("etom-fig7.toml", "mean bad=0.6 s"),
    ] {
        let path = format!("{}/../../scenarios/{file}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).expect("scenario file");
        let variants = plait_sim::sweep::load_variants(&text).expect("valid");
        let mut s = variants
            .into_iter()
            .find(|v| v.label == label)
            .expect("variant")
            .scenario;
        s.duration_s = 20.0;
        let goodput = |pick: &dyn Fn(&plait_sim::scenario::RunSpec) -> bool| {
            let run = s.runs.iter().find(|r| pick(r)).expect("row");
            run_one(&s, run, 1).goodput_kbps
        };
        let etom = goodput(&|r| r.ack_every == Some(1));
        let cmt = goodput(&|r| r.mode == plait_sim::scenario::Mode::CmtSctp);
        assert!(etom > 1.2 * cmt, "{file} {label}: {etom} vs {cmt}");
    }
}

/// Seed HMTP Fig. 6(a) (`scenarios/hmtp-fig6.toml`) at small scale: as path 2's loss rises
/// from 1 to 30 %, path 1's throughput under HMTP (over either transport) stays within
/// 10 % of its value at 1 %, while the CMT-SCTP-like baseline's path 1 falls by more than
/// 20 % (receive buffer blocking) and ends more than 20 % below HMTP's. Ratios within one
/// run each, one seed, 40 s, the first and last variants.
#[test]
fn hmtp_path1_stays_flat_where_cmt_sctp_falls() {
    let path = format!(
        "{}/../../scenarios/hmtp-fig6.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).expect("scenario file");
    let variants = plait_sim::sweep::load_variants(&text).expect("valid");
    let path1 = |label: &str, mode: plait_sim::scenario::Mode| {
        let mut s = variants
            .iter()
            .find(|v| v.label == label)
            .expect("variant")
            .scenario
            .clone();
        s.duration_s = 40.0;
        let run = s.runs.iter().find(|r| r.mode == mode).expect("row");
        run_one(&s, run, 1).per_path_kbps[0]
    };
    use plait_sim::scenario::Mode::{CmtSctp, Hmtp, HmtpTcp};
    let (c1, c30) = (
        path1("path-2 loss=1 %", CmtSctp),
        path1("path-2 loss=30 %", CmtSctp),
    );
    assert!(c30 < 0.8 * c1, "CMT-SCTP path 1: {c1} -> {c30} kbit/s");
    for mode in [Hmtp, HmtpTcp] {
        let (h1, h30) = (
            path1("path-2 loss=1 %", mode),
            path1("path-2 loss=30 %", mode),
        );
        assert!(h30 > 0.9 * h1, "{mode:?} path 1: {h1} -> {h30} kbit/s");
        assert!(
            h30 > 1.2 * c30,
            "{mode:?} {h30} vs CMT-SCTP {c30} kbit/s on path 1"
        );
    }
}

/// One row of a swept HMTP scenario file: the variant `label`, the row of `mode`, one
/// seed, `duration_s` seconds.
fn hmtp_row(
    file: &str,
    label: &str,
    mode: plait_sim::scenario::Mode,
    duration_s: f64,
) -> plait_sim::run::RunResult {
    let path = format!("{}/../../scenarios/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect("scenario file");
    let variants = plait_sim::sweep::load_variants(&text).expect("valid");
    let mut s = variants
        .into_iter()
        .find(|v| v.label == label)
        .expect("variant")
        .scenario;
    s.duration_s = duration_s;
    let run = s.runs.iter().find(|r| r.mode == mode).expect("row");
    run_one(&s, run, 1)
}

/// Seed HMTP Fig. 10 (`scenarios/hmtp-fig10.toml`: two 5 Mbit/s wireless paths, 0 to 3
/// TCP clients sharing AP-2's): as the clients take path 2, HMTP's path 1 keeps within
/// 5 % of its throughput without them, while the CMT-SCTP-like baseline's path 1 falls by
/// more than 10 % (receive buffer blocking behind path 2's losses) and ends more than
/// 10 % below HMTP's. Ratios within the simulation, one seed, 20 s, 0 and 3 clients.
#[test]
fn hmtp_fig10_path1_keeps_its_rate_as_ap2_fills() {
    use plait_sim::scenario::Mode::{CmtSctp, Hmtp, HmtpTcp};
    let path1 = |clients: &str, mode| {
        hmtp_row(
            "hmtp-fig10.toml",
            &format!("AP-2 clients={clients}"),
            mode,
            20.0,
        )
        .per_path_kbps[0]
    };
    let (c0, c3) = (path1("0", CmtSctp), path1("3", CmtSctp));
    println!("CMT-SCTP path 1: {c0:.0} -> {c3:.0} kbit/s");
    assert!(c3 < 0.9 * c0, "CMT-SCTP path 1: {c0} -> {c3} kbit/s");
    for mode in [Hmtp, HmtpTcp] {
        let (h0, h3) = (path1("0", mode), path1("3", mode));
        println!("{mode:?} path 1: {h0:.0} -> {h3:.0} kbit/s");
        assert!(h3 > 0.95 * h0, "{mode:?} path 1: {h0} -> {h3} kbit/s");
        assert!(
            h3 > 1.1 * c3,
            "{mode:?} {h3} vs CMT-SCTP {c3} kbit/s on path 1"
        );
    }
}

/// Seed HMTP Fig. 8(b) (`scenarios/hmtp-fig8.toml`), the part plait's model shows: the
/// application-layer delay per chunk-sized unit is longer for HMTP than for the
/// CMT-SCTP-like baseline when path 2 loses as little as path 1 (k' = 1137 symbols carry
/// k = 1000 packets) but by less than 30 %, and the baseline's grows by more than half as
/// path 2's loss reaches 30 %. Ratios, one seed, 60 s.
#[test]
fn hmtp_fig8b_delay_costs_little_at_equal_loss_and_the_baselines_grows() {
    use plait_sim::scenario::Mode::{CmtSctp, Hmtp};
    let delay = |label: &str, mode| {
        hmtp_row("hmtp-fig8.toml", label, mode, 60.0)
            .app_delay_mean_s
            .expect("a unit completes")
    };
    let (h1, c1) = (
        delay("path-2 loss=1 %", Hmtp),
        delay("path-2 loss=1 %", CmtSctp),
    );
    assert!(
        h1 > c1 && h1 < 1.3 * c1,
        "at 1 %: HMTP {h1} s, CMT-SCTP {c1} s"
    );
    let c30 = delay("path-2 loss=30 %", CmtSctp);
    println!("HMTP {h1:.2} s, CMT-SCTP {c1:.2} s at 1 %; CMT-SCTP {c30:.2} s at 30 %");
    assert!(c30 > 1.5 * c1, "CMT-SCTP: {c1} s at 1 %, {c30} s at 30 %");
}

/// Seed MMS Fig. 4-6 (`scenarios/mms-fig4.toml`: a 2 Mbit/s TCP stream, WiMax alone, then
/// WLAN joins at 15 s, UMTS at 35 s, UMTS leaves at 55 s, WLAN at 75 s). Round robin over
/// three links delays the stream far beyond one link (one packet in three crosses UMTS,
/// 760 ms one way against WiMax's 27: the seed's 27 against 300 ms); plait keeps it on
/// WiMax, which has room for it, so its delay with three links is its one-link delay and
/// the joins and leaves leave no gap in delivery and cost no retransmission (the seed's
/// "no packet loss during the handover"). One seed.
#[test]
fn mms_fig4_round_robin_delay_rises_with_links_plait_stays_and_hands_over_without_gaps() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/mms-fig4.toml");
    let text = std::fs::read_to_string(path).expect("scenarios/mms-fig4.toml");
    let s = Scenario::from_toml(&text).unwrap();
    let handover = |name: &str| {
        let run = s
            .runs
            .iter()
            .find(|r| r.name == name)
            .unwrap_or_else(|| panic!("run {name} in mms-fig4.toml"));
        run_one(&s, run, 1).handover.expect("[handover] measures")
    };
    let (rr, plait) = (handover("RR"), handover("plait"));
    // Phases: 0-15 WiMax, 15-35 + WLAN, 35-55 + UMTS, 55-75 WiMax + WLAN, 75-95 WiMax.
    let mean = |h: &plait_sim::handover::HandoverResult, i: usize| {
        h.phases[i].delay_mean_ms.expect("packets in the phase")
    };
    let (rr1, rr3, p1, p3) = (mean(&rr, 0), mean(&rr, 2), mean(&plait, 0), mean(&plait, 2));
    println!("end-to-end mean: RR {rr1:.1} -> {rr3:.1} ms, plait {p1:.1} -> {p3:.1} ms");
    // The mean of the three links' one-way delays is 300 ms, eleven times WiMax's 27;
    // reordering waits only add to it, so a quarter of that ratio is a safe floor.
    assert!(rr3 > 3.0 * rr1, "RR: one link {rr1} ms, three {rr3} ms");
    assert!(p3 <= rr3, "plait {p3} ms vs RR {rr3} ms with three links");
    // The stream fits WiMax (2 of 4 Mbit/s): plait's three-link delay is its one-link
    // delay, within one packet's serialisation at 4 Mbit/s (3 ms).
    assert!(p3 < p1 + 3.0, "plait: one link {p1} ms, three {p3} ms");
    // One 1460-byte packet every 5.84 ms: an application that sees no handover waits at
    // most a few packet intervals; three (17.5 ms) bound it.
    for (c, w) in plait.changes.iter().enumerate() {
        assert!(
            w.max_gap_ms < 3.0 * 5.84,
            "plait, change {c}: longest gap {} ms",
            w.max_gap_ms
        );
        assert_eq!(w.retransmissions, 0, "plait, change {c}: retransmissions");
    }
    // A silent leave stalls round robin, which keeps sending on the dead link until the
    // engine finds it down: more than 100 stream packets' worth (0.58 s) without delivery.
    for c in [2, 3] {
        assert!(
            rr.changes[c].max_gap_ms > 100.0 * 5.84,
            "RR, change {c}: longest gap {} ms",
            rr.changes[c].max_gap_ms
        );
    }
}

/// One row of `scenarios/overflow.toml`: the variant `label` of its `load` axis with path 2
/// metered, the row `run`, one seed, `duration_s` seconds.
fn overflow_row(load: &str, run: &str, duration_s: f64) -> plait_sim::run::RunResult {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/overflow.toml");
    let text = std::fs::read_to_string(path).expect("scenarios/overflow.toml");
    let label = format!("load={load},path 2=metered");
    let mut s = plait_sim::sweep::load_variants(&text)
        .expect("valid")
        .into_iter()
        .find(|v| v.label == label)
        .unwrap_or_else(|| panic!("variant {label}"))
        .scenario;
    s.duration_s = duration_s;
    let spec = s.runs.iter().find(|r| r.name == run).expect("row");
    let r = run_one(&s, spec, 1);
    println!(
        "{label}, {run}: path 1 {:.0} kbit/s, path 2 (metered) {:.0} kbit/s",
        r.per_path_kbps[0], r.per_path_kbps[1]
    );
    r
}

/// The mean of a per-second series over the bins of `[from_s, to_s)`.
fn mean_over(series: &[f64], bin_s: f64, from_s: f64, to_s: f64) -> f64 {
    let (a, b) = ((from_s / bin_s) as usize, (to_s / bin_s) as usize);
    let bins = &series[a.min(series.len())..b.min(series.len())];
    bins.iter().sum::<f64>() / bins.len().max(1) as f64
}

/// docs/protocol.md#overflow in the simulator (`scenarios/overflow.toml`: a 10 Mbit/s
/// primary of 20 ms and a faster metered path, 20 Mbit/s of 10 ms, through the tunnel's
/// endpoints). Under light load (a 4 Mbit/s stream) the metered path carries only probes;
/// under heavy load the primary runs near its rate and the metered path carries the
/// excess, where EDPF (for which an overflow path is a backup) leaves it idle; when the
/// primary fails the metered path carries the stream, and after the primary is back it
/// stands by again. One seed; 15 s for the steady loads.
#[test]
fn a_metered_path_carries_nothing_under_light_load_the_excess_under_heavy_and_takes_over() {
    // Light: the stream is 4330 kbit/s on the wire; probes and keepalives are a few
    // kbit/s, so 1 % of the primary's share bounds them.
    let light = overflow_row("light", "plait", 15.0);
    let (p, m) = (light.per_path_kbps[0], light.per_path_kbps[1]);
    assert!(
        p > 4000.0,
        "light: the primary carries the stream ({p} kbit/s)"
    );
    assert!(m < 0.01 * p, "light: the metered path carried {m} kbit/s");

    // Heavy: the primary above 80 % of its 10 Mbit/s (the run counts TCP's ramp), the
    // metered path more than half its own 20.
    let heavy = overflow_row("heavy", "plait", 15.0);
    let (p, m) = (heavy.per_path_kbps[0], heavy.per_path_kbps[1]);
    assert!(p > 0.8 * 10_000.0, "heavy: the primary at {p} kbit/s");
    assert!(
        m > 0.5 * 20_000.0,
        "heavy: the metered path took {m} kbit/s"
    );
    let edpf = overflow_row("heavy", "EDPF", 15.0);
    let (p, m) = (edpf.per_path_kbps[0], edpf.per_path_kbps[1]);
    assert!(
        m < 0.01 * p,
        "heavy, EDPF: the metered path carried {m} kbit/s against the primary's {p}"
    );

    // The primary down over [10, 20) s: from 12 s (the engine finds it down within about
    // a second) the metered path carries the stream; from 22 s the primary has it again.
    let outage = overflow_row("light, primary down 10-20 s", "plait", 30.0);
    let at = |path: usize, from: f64, to: f64| {
        mean_over(&outage.path_series_kbps[path], outage.bin_s, from, to)
    };
    let (p, m) = (at(0, 12.0, 20.0), at(1, 12.0, 20.0));
    println!("primary down: path 1 {p:.0} kbit/s, path 2 {m:.0} kbit/s per second, 12-20 s");
    assert!(
        m > 4000.0 && p < 1.0,
        "primary down: path 1 {p}, path 2 {m} kbit/s"
    );
    let (p, m) = (at(0, 22.0, 30.0), at(1, 22.0, 30.0));
    println!("primary back: path 1 {p:.0} kbit/s, path 2 {m:.0} kbit/s per second, 22-30 s");
    assert!(
        p > 4000.0 && m < 0.01 * p,
        "primary back: path 1 {p}, path 2 {m} kbit/s"
    );
    assert!(
        outage.goodput_kbps > 0.9 * 4000.0,
        "the stream kept up: {} kbit/s",
        outage.goodput_kbps
    );
}
