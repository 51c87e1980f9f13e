//! The seeds' qualitative results that issue 4 asks to hold (shapes, not values).

use plait_sim::run::run_one;
use plait_sim::scenario::Scenario;

/// Two paths at 8 Mbit/s and 8/`ratio` Mbit/s, 14 ms each (seed ETOM §V: WiMax-like 14 ms
/// links), one NewReno flow through plait with `scheduler` and the `bmp` reorder buffer.
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

/// Seed MMS Fig. 8 (`scenarios/mms-fig8.toml`, WiMax and WLAN at 2:1 with the seed's
/// delays): plain WRR, with no reorder buffer, collapses under the reordering; WRR with a
/// buffer (WRRB) and IKR carry the flow at several times its goodput. The seed also saw IKR
/// above WRRB (520 against 400 KB/s); here they are within a few percent of each other,
/// IKR slightly below with the seed's buffer (`mms`) or plait's (`bmp`)
/// (docs/scheduler-design.md), so that part is not asserted.
#[test]
fn mms_fig8_wrr_collapses_and_buffered_schedulers_do_not() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/mms-fig8.toml");
    let text = std::fs::read_to_string(path).expect("scenarios/mms-fig8.toml");
    let s = Scenario::from_toml(&text).unwrap();
    let goodput = |name: &str| {
        let run = s
            .runs
            .iter()
            .find(|r| r.name == name)
            .unwrap_or_else(|| panic!("run {name} in mms-fig8.toml"));
        run_one(&s, run, 1).goodput_kbps
    };
    let (wrr, wrrb, ikr) = (goodput("WRR"), goodput("WRR-BUFF"), goodput("IKR"));
    println!("WRR {wrr:.0} kbit/s, WRR-BUFF {wrrb:.0}, IKR {ikr:.0}");
    let capacity = 6000.0;
    assert!(wrr < 0.2 * capacity, "WRR collapses: {wrr} kbit/s");
    for (name, g) in [("WRR-BUFF", wrrb), ("IKR", ikr)] {
        assert!(g > 5.0 * wrr, "{name} {g} kbit/s vs WRR {wrr}");
        assert!(g > 0.7 * capacity, "{name} carries the flow: {g} kbit/s");
    }
}
