//! A path's `rate_dips` take effect and end: the flow's goodput follows the link rate.

use plait_sim::run::run_one;
use plait_sim::scenario::Scenario;

fn goodput(dips: &str) -> (f64, Vec<f64>) {
    let text = format!(
        r#"
name = "dip"
duration_s = 20
bin_s = 1.0
[tcp]
window = 400
packet_size = 1460
[[paths]]
rate_kbps = 4000
wired_delay_ms = 10
queue_packets = 50
{dips}
[[runs]]
name = "MTCP"
mode = "mtcp"
"#
    );
    let s = Scenario::from_toml(&text).unwrap();
    let r = run_one(&s, &s.runs[0], 1);
    (r.goodput_kbps, r.goodput_series_kbps)
}

#[test]
fn a_rate_dip_slows_the_link_for_its_span_only() {
    let (full, _) = goodput("");
    let (dipped, series) = goodput("rate_dips = [{ from_s = 5.0, to_s = 15.0, rate_kbps = 1000 }]");
    println!("no dip {full:.0} kbit/s, dip {dipped:.0}; series {series:.0?}");
    // Half the time at a quarter of the rate: about 5/8 of the undipped goodput.
    assert!(
        dipped < 0.75 * full && dipped > 0.5 * full,
        "{dipped} vs {full}"
    );
    // During the dip the flow gets at most the dipped rate; after it, it recovers.
    assert!(series[8..14].iter().all(|g| *g <= 1000.0), "{series:?}");
    assert!(series[18] > 3000.0, "{series:?}");
}
