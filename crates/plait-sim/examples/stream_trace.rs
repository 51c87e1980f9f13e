//! Traces one `plait-stream` run of a scenario: every step, the reader's goodput, the
//! sender's credit and send buffer, the receiver's windows and resequencing delay
//! (docs/protocol.md#window-auto-tuning), and each path's window, flight and SRTT at both
//! ends. How the receive-window rule was diagnosed on ETOM Fig. 4:
//!
//! `cargo run --release -p plait-sim --example stream_trace -- scenarios/etom-fig4.toml 1:8 0 2 1000`
//!
//! Arguments: scenario file, a substring of the variant label, the row's index, the seed,
//! and the step in ms (default 500). Deterministic like every simulator run.

use plait_proto::Time;
use plait_sim::node::{Node, StreamApp};
use plait_sim::sweep::load_variants;
use plait_sim::topology::build;

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let [_, file, label, row, seed, rest @ ..] = args.as_slice() else {
        return Err("usage: stream_trace SCENARIO LABEL ROW SEED [STEP_MS]".into());
    };
    let number = |s: &str| s.parse::<u64>().map_err(|e| format!("{s}: {e}"));
    let (row, seed) = (number(row)? as usize, number(seed)?);
    let step_ms = rest.first().map_or(Ok(500), |s| number(s))?.max(1);
    let text = std::fs::read_to_string(file).map_err(|e| format!("{file}: {e}"))?;
    let variants = load_variants(&text).map_err(|e| e.to_string())?;
    let variant = variants
        .iter()
        .find(|v| v.label.contains(label.as_str()))
        .ok_or("no such variant")?;
    let run = variant.scenario.runs.get(row).ok_or("no such row")?;
    println!("{} / {} / seed {seed}", variant.label, run.name);
    let (mut world, handles) = build(&variant.scenario, run, seed);
    let (proxy, mobile) = handles.gateways.ok_or("not a plait run")?;
    let end_ms = (variant.scenario.duration_s * 1000.0) as u64;
    let (mut t, mut last_read) = (0, 0);
    while t < end_ms {
        t += step_ms;
        world.run_until(Time::from_millis(t));
        let (Node::Plait(tx), Node::Plait(rx)) = (world.node(proxy), world.node(mobile)) else {
            return Err("gateways are not plait nodes".into());
        };
        let read = match rx.app() {
            Some(StreamApp::Sink { bytes, .. }) => *bytes,
            _ => return Err("not a plait-stream run".into()),
        };
        // The sessions start once the tunnel is up (the server's with the client's
        // first data message).
        let (Some(s), Some(r)) = (tx.session(), rx.session()) else {
            continue;
        };
        let (fs, fr, st) = (
            s.stream_flow_control(),
            r.stream_flow_control(),
            r.stream_stats(),
        );
        let mut line = format!(
            "{t:>6} ms {:>6.0} kb/s | credit {:>5}k sbuf {:>5}k | swin {:>5}k rwin {:>5}k unread {:>5}k reseq {:>4} ms ({} samples) raises {}/{} |",
            (read - last_read) as f64 * 8.0 / step_ms as f64,
            fs.send_max_data.saturating_sub(fs.sent_new) >> 10,
            s.stream_buffered().0 >> 10,
            fr.largest_stream_window >> 10,
            fr.recv_window >> 10,
            r.stream_buffered().1 >> 10,
            st.resequencing_us / 1000,
            st.resequencing_samples,
            st.stream_window_raises,
            st.session_window_raises,
        );
        for (view, rx_view) in s.path_views().iter().zip(r.path_views()) {
            let cc = s.path_congestion(view.id);
            line += &format!(
                " p{} w {:>4}k fl {:>4}k srtt {:>4} ms (rx {:>4} ms)",
                view.id.0,
                cc.map_or(0, |c| c.window >> 10),
                cc.map_or(0, |c| c.bytes_in_flight >> 10),
                view.srtt.map_or(0, |d| d.as_millis()),
                rx_view.srtt.map_or(0, |d| d.as_millis()),
            );
        }
        println!("{line}");
        last_read = read;
    }
    Ok(())
}
