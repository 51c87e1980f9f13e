//! Prometheus metrics: [`encode_metrics`] turns a [`StatusSnapshot`] into OpenMetrics
//! text, and [`MetricsServer`] serves it over a minimal HTTP/1.1 endpoint (`GET /metrics`).
//!
//! Metrics are built from a snapshot at scrape time (a prometheus-client [`Collector`]
//! over a copy of the snapshot), so nothing in the event loop is instrumented and a
//! scrape never touches live state. All names carry the `plait_` prefix:
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `plait_build_info` | info | `role`, `version`, `tun` |
//! | `plait_uptime_seconds` | gauge | |
//! | `plait_sessions` | gauge | |
//! | `plait_session_established` (0/1), `_reorder_depth`, `_send_queue` | gauge | `peer` |
//! | `plait_session_handshakes_total`, `_delivered_total`, `_queue_full_total` | counter | `peer` |
//! | `plait_session_handshakes_started_total` (client) | counter | `peer`, `cause` |
//! | `plait_session_send_queue_dropped_total` | counter | `peer`, `reason` (`codel_dropped`, `ce_marked`, `overflow_dropped`) |
//! | `plait_session_path_events_total` | counter | `peer`, `event` (`validated`, `validations_abandoned`, `withdrawn`, `restored`, `withdrawn_ignored`, `opened`, `closed`, `refused`) |
//! | `plait_session_fec_total` | counter | `peer`, `event` (`blocks`, `symbols_sent`, `symbols_dropped`, `symbols_received`, `symbols_refused`, `recovered`, `unrecovered`) |
//! | `plait_path_state`, `plait_path_up` | gauge | `peer`, `path`, `name` |
//! | `plait_path_srtt_seconds`, `_min_rtt_seconds`, `_owd_seconds` | gauge | `peer`, `path`, `name` |
//! | `plait_path_rate_bits_per_second`, `plait_path_loss_ratio` | gauge | `peer`, `path`, `name` |
//! | `plait_path_handed_over` (0 or 1), `plait_path_link_signal_ratio` (where read) | gauge | `peer`, `path`, `name` |
//! | `plait_path_{tx,rx}_{bytes,packets}_total` | counter | `peer`, `path`, `name` |
//! | `plait_path_lost_packets_total`, `plait_path_late_packets_total` | counter | `peer`, `path`, `name` |
//! | `plait_path_cwnd_bytes`, `_in_flight_bytes`, `_pacing_bits_per_second` | gauge | `peer`, `path`, `name` |
//! | `plait_session_streams_open` | gauge | `peer` |
//! | `plait_session_stream_{opened,sent_bytes,retransmitted_bytes,read_bytes,resets}_total` | counter | `peer` |
//! | `plait_relay_connections_open` | gauge | |
//! | `plait_relay_connections_{relayed,refused,reset}_total` | counter | |
//! | `plait_drops_total` | counter | `reason` |
//!
//! `plait_path_state` maps the path state to a number (see [`path_state_value`]):
//! 0 down, 1 probing, 2 degraded, 3 active. `plait_path_up` is 1 while the path carries
//! traffic (active or degraded). `path` is the path id, `name` its configured name.
//!
//! Invariants: a gauge whose snapshot value is `None` (or not finite) is omitted rather
//! than reported as 0; a metric family with no samples is omitted entirely; every drop
//! reason is always present (counters should exist from zero). The HTTP side reads at
//! most 8 KiB of request head with a 1 s timeout, serves each connection on a thread of
//! its own (at most `accept::MAX_CONNECTIONS` at once), and always closes the connection
//! after one response.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

use super::render::{drop_reasons, fec_counts, handshake_causes, path_events, queue_drops};
use super::{ControlError, SharedSnapshot, StatusSnapshot, clone_snapshot};

/// The `Content-Type` of [`encode_metrics`]' output (prometheus-client's text encoder
/// writes OpenMetrics 1.0, ending in `# EOF`).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The only path served.
pub const METRICS_PATH: &str = "/metrics";
/// Largest request head read, bytes.
pub const MAX_REQUEST_HEAD: usize = 8 * 1024;
/// Per-connection read and write timeout.
const IO_TIMEOUT: Duration = Duration::from_secs(1);
/// After responding, how long (at most) to drain what the client still sends, so
/// closing does not reset the connection under the response.
const DRAIN_TIME: Duration = Duration::from_millis(200);
/// After responding, how many bytes (at most) to drain.
const DRAIN_BYTES: usize = 64 * 1024;

/// The numeric value of a path state for `plait_path_state`: 0 `down`, 1 `probing`,
/// 2 `degraded`, 3 `active`; `None` for anything else (the sample is then omitted).
pub fn path_state_value(state: &str) -> Option<u8> {
    match state {
        "down" => Some(0),
        "probing" => Some(1),
        "degraded" => Some(2),
        "active" => Some(3),
        _ => None,
    }
}

/// The snapshot as OpenMetrics text (ends with `# EOF\n`).
pub fn encode_metrics(s: &StatusSnapshot) -> String {
    encode_owned(s.clone())
}

fn encode_owned(s: StatusSnapshot) -> String {
    let mut registry = Registry::with_prefix("plait");
    registry.register_collector(Box::new(SnapshotCollector(s)));
    let mut out = String::new();
    // Writing into a String cannot fail, and the collector fails only if its writer does.
    if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &registry) {
        tracing::warn!(error = %e, "cannot encode metrics");
    }
    out
}

/// Label set of one sample: `(name, value)` pairs in order.
type Labels = Vec<(&'static str, String)>;

/// Emits the metrics of one snapshot on each scrape.
#[derive(Debug)]
struct SnapshotCollector(StatusSnapshot);

impl Collector for SnapshotCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        let s = &self.0;
        let build = Info::new(vec![
            ("role", s.role.clone()),
            ("version", s.version.clone()),
            ("tun", s.tun.clone()),
        ]);
        single(
            &mut enc,
            "build",
            "The daemon's role, version and TUN device",
            &build,
        )?;
        single(
            &mut enc,
            "uptime_seconds",
            "Seconds since the daemon started",
            &ConstGauge::new(s.uptime_s),
        )?;
        single(
            &mut enc,
            "sessions",
            "Peers with a session",
            &ConstGauge::new(s.sessions.len() as u64),
        )?;

        let sessions = |f: &dyn Fn(&super::SessionStatus) -> u64| -> Vec<(Labels, u64)> {
            s.sessions
                .iter()
                .map(|x| (vec![("peer", x.peer.clone())], f(x)))
                .collect()
        };
        gauges(
            &mut enc,
            "session_established",
            "1 if a handshake has completed and keys are current, else 0",
            sessions(&|x| u64::from(x.established)),
        )?;
        counters(
            &mut enc,
            "session_handshakes",
            "Handshakes completed in this session",
            sessions(&|x| x.handshakes),
        )?;
        counters(
            &mut enc,
            "session_handshakes_started",
            "Handshakes the client started, by cause",
            labelled(
                s.sessions
                    .iter()
                    .filter(|x| x.handshake_causes != super::HandshakeCauses::default()),
                "cause",
                &|x| handshake_causes(&x.handshake_causes).to_vec(),
            ),
        )?;
        counters(
            &mut enc,
            "session_send_queue_dropped",
            "Inner packets the send queue dropped (CoDel, byte bound) or marked CE, by reason",
            labelled(s.sessions.iter(), "reason", &|x| {
                queue_drops(&x.send_queue_drops).to_vec()
            }),
        )?;
        counters(
            &mut enc,
            "session_fec",
            "Packet-mode FEC: blocks, repair symbols and rebuilt packets, by event",
            labelled(s.sessions.iter(), "event", &|x| fec_counts(&x.fec).to_vec()),
        )?;
        counters(
            &mut enc,
            "session_path_events",
            "Path validations and the client's withdrawals, by event",
            labelled(s.sessions.iter(), "event", &|x| {
                path_events(&x.path_events).to_vec()
            }),
        )?;
        gauges(
            &mut enc,
            "session_reorder_depth",
            "Packets waiting in the reorder buffer",
            sessions(&|x| x.reorder_depth as u64),
        )?;
        gauges(
            &mut enc,
            "session_send_queue",
            "Packets waiting in the send queue",
            sessions(&|x| x.send_queue as u64),
        )?;
        counters(
            &mut enc,
            "session_delivered",
            "Inner packets delivered to the TUN device",
            sessions(&|x| x.delivered),
        )?;
        counters(
            &mut enc,
            "session_queue_full",
            "Inner packets refused because the send queue was full",
            sessions(&|x| x.queue_full),
        )?;

        gauges(
            &mut enc,
            "session_streams_open",
            "Streams open now (stream mode)",
            sessions(&|x| x.streams.open),
        )?;
        for (name, help, f) in [
            (
                "session_stream_opened",
                "Streams opened by either end",
                (|x| x.streams.opened) as fn(&super::SessionStatus) -> u64,
            ),
            (
                "session_stream_sent_bytes",
                "Stream bytes sent for the first time",
                |x| x.streams.bytes_sent,
            ),
            (
                "session_stream_retransmitted_bytes",
                "Stream bytes sent again after a loss",
                |x| x.streams.bytes_retransmitted,
            ),
            (
                "session_stream_read_bytes",
                "Stream bytes delivered to the relay",
                |x| x.streams.bytes_read,
            ),
            (
                "session_stream_resets",
                "Streams reset by either end",
                |x| x.streams.resets,
            ),
        ] {
            counters(&mut enc, name, help, sessions(&f))?;
        }
        if let Some(r) = &s.relay {
            single(
                &mut enc,
                "relay_connections_open",
                "TCP connections the stream-mode relay holds now",
                &ConstGauge::new(r.open),
            )?;
            for (name, help, v) in [
                (
                    "relay_connections_relayed",
                    "TCP connections relayed",
                    r.relayed,
                ),
                (
                    "relay_connections_refused",
                    "TCP connections or streams refused (limits, policy, failed connects, SOCKS5 errors)",
                    r.refused,
                ),
                (
                    "relay_connections_reset",
                    "TCP connections aborted by a reset",
                    r.reset,
                ),
            ] {
                counters(&mut enc, name, help, vec![(Vec::new(), v)])?;
            }
        }

        let paths = s
            .sessions
            .iter()
            .flat_map(|x| x.paths.iter().map(move |p| (x, p)))
            .collect::<Vec<_>>();
        let labels = |x: &super::SessionStatus, p: &super::PathStatus| -> Labels {
            vec![
                ("peer", x.peer.clone()),
                ("path", p.id.to_string()),
                ("name", p.name.clone()),
            ]
        };
        let path_u64 = |f: &dyn Fn(&super::PathStatus) -> Option<u64>| -> Vec<(Labels, u64)> {
            paths
                .iter()
                .filter_map(|(x, p)| f(p).map(|v| (labels(x, p), v)))
                .collect()
        };
        let path_f64 = |f: &dyn Fn(&super::PathStatus) -> Option<f64>| -> Vec<(Labels, f64)> {
            paths
                .iter()
                .filter_map(|(x, p)| f(p).filter(|v| v.is_finite()).map(|v| (labels(x, p), v)))
                .collect()
        };
        gauges(
            &mut enc,
            "path_state",
            "Path state: 0 down, 1 probing, 2 degraded, 3 active",
            path_u64(&|p| path_state_value(&p.state).map(u64::from)),
        )?;
        gauges(
            &mut enc,
            "path_up",
            "1 while the path carries traffic (active or degraded), else 0",
            path_u64(&|p| Some(u64::from(path_state_value(&p.state).unwrap_or(0) >= 2))),
        )?;
        gauges(
            &mut enc,
            "path_srtt_seconds",
            "Smoothed round-trip time, seconds",
            path_f64(&|p| p.srtt_ms.map(|ms| ms / 1000.0)),
        )?;
        gauges(
            &mut enc,
            "path_min_rtt_seconds",
            "Minimum round-trip time, seconds",
            path_f64(&|p| p.min_rtt_ms.map(|ms| ms / 1000.0)),
        )?;
        gauges(
            &mut enc,
            "path_owd_seconds",
            "Forward one-way delay relative to the fastest path, seconds",
            path_f64(&|p| p.owd_ms.map(|ms| ms / 1000.0)),
        )?;
        gauges(
            &mut enc,
            "path_rate_bits_per_second",
            "Capacity estimate (packet trains or pairs, or the configured rate), bits per second; absent until measured",
            path_f64(&|p| p.rate_mbit.map(|m| m * 1e6)),
        )?;
        gauges(
            &mut enc,
            "path_loss_ratio",
            "Smoothed loss fraction, 0 to 1",
            path_f64(&|p| Some(p.loss)),
        )?;
        gauges(
            &mut enc,
            "path_handed_over",
            "1 while this end has handed the path over for its quality (docs/protocol.md#handover), else 0",
            path_f64(&|p| Some(if p.handover.is_some() { 1.0 } else { 0.0 })),
        )?;
        gauges(
            &mut enc,
            "path_link_signal_ratio",
            "The link layer's signal of the path's interface, 0 to 1 (NetworkManager's scale); absent where none is read",
            path_f64(&|p| p.signal),
        )?;
        counters(
            &mut enc,
            "path_tx_bytes",
            "Bytes sent on the path",
            path_u64(&|p| Some(p.tx_bytes)),
        )?;
        counters(
            &mut enc,
            "path_tx_packets",
            "Datagrams sent on the path",
            path_u64(&|p| Some(p.tx_packets)),
        )?;
        counters(
            &mut enc,
            "path_rx_bytes",
            "Bytes received on the path",
            path_u64(&|p| Some(p.rx_bytes)),
        )?;
        counters(
            &mut enc,
            "path_rx_packets",
            "Datagrams received on the path",
            path_u64(&|p| Some(p.rx_packets)),
        )?;

        counters(
            &mut enc,
            "path_lost_packets",
            "Datagrams declared lost on the path (their stream bytes are sent again)",
            path_u64(&|p| Some(p.lost_packets)),
        )?;
        counters(
            &mut enc,
            "path_late_packets",
            "Of the datagrams declared lost, those acknowledged after all (late, not lost)",
            path_u64(&|p| Some(p.late_packets)),
        )?;
        gauges(
            &mut enc,
            "path_cwnd_bytes",
            "Congestion window (stream mode), bytes",
            path_u64(&|p| Some(p.cwnd_bytes)),
        )?;
        gauges(
            &mut enc,
            "path_in_flight_bytes",
            "Bytes in flight (stream mode)",
            path_u64(&|p| Some(p.in_flight_bytes)),
        )?;
        gauges(
            &mut enc,
            "path_pacing_bits_per_second",
            "Pacing rate (stream mode), bits per second",
            path_f64(&|p| p.pacing_mbit.map(|m| m * 1e6)),
        )?;

        counters(
            &mut enc,
            "drops",
            "Datagrams dropped before reaching a session, by reason",
            drop_reasons(&s.dropped)
                .into_iter()
                .map(|(reason, n)| (vec![("reason", reason.to_owned())], n))
                .collect(),
        )?;
        Ok(())
    }
}

/// One unlabelled metric. `help` gets a full stop appended, like the registry does.
fn single(
    enc: &mut DescriptorEncoder<'_>,
    name: &'static str,
    help: &str,
    metric: &impl EncodeMetric,
) -> fmt::Result {
    let m = enc.encode_descriptor(name, &format!("{help}."), None, metric.metric_type())?;
    metric.encode(m)
}

/// A family of labelled metrics; nothing at all if there are no samples.
fn family<M: EncodeMetric>(
    enc: &mut DescriptorEncoder<'_>,
    name: &'static str,
    help: &str,
    metric_type: MetricType,
    samples: Vec<(Labels, M)>,
) -> fmt::Result {
    if samples.is_empty() {
        return Ok(());
    }
    let mut m = enc.encode_descriptor(name, &format!("{help}."), None, metric_type)?;
    for (labels, metric) in &samples {
        metric.encode(m.encode_family(labels)?)?;
    }
    Ok(())
}

fn gauges<N>(
    enc: &mut DescriptorEncoder<'_>,
    name: &'static str,
    help: &str,
    samples: Vec<(Labels, N)>,
) -> fmt::Result
where
    ConstGauge<N>: EncodeMetric,
{
    let samples = samples
        .into_iter()
        .map(|(l, v)| (l, ConstGauge::new(v)))
        .collect();
    family(enc, name, help, MetricType::Gauge, samples)
}

/// Counters: `name` gets `_total` appended on the samples.
/// One sample per session and named count: labels `peer` and `label` (the count's name).
fn labelled<'s>(
    sessions: impl Iterator<Item = &'s super::SessionStatus>,
    label: &'static str,
    counts: &dyn Fn(&super::SessionStatus) -> Vec<(&'static str, u64)>,
) -> Vec<(Labels, u64)> {
    sessions
        .flat_map(|x| {
            counts(x)
                .into_iter()
                .map(|(name, n)| (vec![("peer", x.peer.clone()), (label, name.to_owned())], n))
        })
        .collect()
}

fn counters(
    enc: &mut DescriptorEncoder<'_>,
    name: &'static str,
    help: &str,
    samples: Vec<(Labels, u64)>,
) -> fmt::Result {
    let samples = samples
        .into_iter()
        .map(|(l, v)| (l, ConstCounter::new(v)))
        .collect();
    family(enc, name, help, MetricType::Counter, samples)
}

/// Serves `GET /metrics` from a background thread.
#[derive(Debug)]
pub struct MetricsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    /// Bound, not yet served (between `bind` and `serve`).
    listener: Option<TcpListener>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Binds `addr` (port 0 picks a free port; see [`MetricsServer::local_addr`]) and
    /// starts serving metrics built from `snapshot` on each scrape.
    pub fn start(
        addr: SocketAddr,
        snapshot: SharedSnapshot,
    ) -> Result<MetricsServer, ControlError> {
        let mut server = MetricsServer::bind(addr)?;
        server.serve(snapshot)?;
        Ok(server)
    }

    /// The first half of [`MetricsServer::start`]: binds `addr` but starts no thread (the
    /// daemon starts it with [`MetricsServer::serve`] once it has dropped its privileges,
    /// so the thread is born without them; a port below 1024 is bound before).
    pub fn bind(addr: SocketAddr) -> Result<MetricsServer, ControlError> {
        let bind_error = |source| ControlError::MetricsBind { addr, source };
        let listener = TcpListener::bind(addr).map_err(bind_error)?;
        let local = listener.local_addr().map_err(bind_error)?;
        Ok(MetricsServer {
            addr: local,
            stop: Arc::new(AtomicBool::new(false)),
            listener: Some(listener),
            thread: None,
        })
    }

    /// Starts serving metrics built from `snapshot` on each scrape, from a background
    /// thread. Does nothing if it is already serving.
    pub fn serve(&mut self, snapshot: SharedSnapshot) -> Result<(), ControlError> {
        let Some(listener) = self.listener.take() else {
            return Ok(());
        };
        let thread = thread::Builder::new()
            .name("plait-metrics".into())
            .spawn({
                let stop = Arc::clone(&self.stop);
                move || serve(&listener, &snapshot, &stop)
            })
            .map_err(|source| ControlError::Spawn {
                what: "metrics endpoint",
                source,
            })?;
        self.thread = Some(thread);
        tracing::debug!(addr = %self.addr, "metrics endpoint listening");
        Ok(())
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        let Some(thread) = self.thread.take() else {
            return;
        };
        // Wake the blocked `accept` with a connection of our own; the thread sees the
        // flag and exits, closing the listener. If that fails the thread is left blocked
        // rather than hanging the caller.
        let wake = SocketAddr::new(reachable_ip(self.addr.ip()), self.addr.port());
        match TcpStream::connect_timeout(&wake, IO_TIMEOUT) {
            Ok(_) => {
                if thread.join().is_err() {
                    tracing::warn!("metrics thread panicked");
                }
            }
            Err(e) => {
                tracing::warn!(addr = %self.addr, error = %e, "metrics thread left running");
            }
        }
    }
}

/// The address to connect to for a listener bound on `ip` (a wildcard means loopback).
fn reachable_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        other => other,
    }
}

/// The accept loop: each connection on its own thread until `stop` is set.
fn serve(listener: &TcpListener, snapshot: &SharedSnapshot, stop: &AtomicBool) {
    let snapshot = Arc::clone(snapshot);
    super::accept::serve_concurrently(listener.incoming(), stop, "metrics", move |s| {
        handle(&s, &snapshot)
    });
}

/// What the request head turned out to be.
#[derive(Debug, PartialEq, Eq)]
enum Head {
    /// The connection closed before sending anything.
    Empty,
    /// A complete head (without the terminating blank line).
    Complete(Vec<u8>),
    /// Closed mid-head, or not HTTP-shaped.
    Malformed,
    /// Longer than [`MAX_REQUEST_HEAD`].
    TooLarge,
}

/// Reads until the blank line ending the request head, at most [`MAX_REQUEST_HEAD`] bytes.
fn read_head(mut r: impl Read) -> io::Result<Head> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    loop {
        let n = match r.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            return Ok(if head.is_empty() {
                Head::Empty
            } else {
                Head::Malformed
            });
        }
        // Only the new bytes (plus 3 before them) can complete the terminator.
        let from = head.len().saturating_sub(3);
        head.extend_from_slice(&buf[..n]);
        if let Some(end) = find_head_end(&head[from..]) {
            head.truncate(from + end);
            return Ok(if head.len() > MAX_REQUEST_HEAD {
                Head::TooLarge
            } else {
                Head::Complete(head)
            });
        }
        if head.len() > MAX_REQUEST_HEAD {
            return Ok(Head::TooLarge);
        }
    }
}

/// Offset of the blank line (`\r\n\r\n` or a bare `\n\n`) ending a head.
fn find_head_end(bytes: &[u8]) -> Option<usize> {
    (0..bytes.len())
        .find(|&i| bytes[i..].starts_with(b"\r\n\r\n") || bytes[i..].starts_with(b"\n\n"))
}

/// A response: status code, reason, extra header lines, body, whether to send the body.
struct Response {
    status: u16,
    reason: &'static str,
    content_type: &'static str,
    extra_headers: &'static str,
    body: String,
    head_only: bool,
}

impl Response {
    fn text(status: u16, reason: &'static str, body: &str) -> Response {
        Response {
            status,
            reason,
            content_type: "text/plain; charset=utf-8",
            extra_headers: "",
            body: format!("{body}\n"),
            head_only: false,
        }
    }

    fn to_bytes(&self) -> Vec<u8> {
        let mut out = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n{}\r\n",
            self.status,
            self.reason,
            self.content_type,
            self.body.len(),
            self.extra_headers
        )
        .into_bytes();
        if !self.head_only {
            out.extend_from_slice(self.body.as_bytes());
        }
        out
    }
}

/// The response to a request head.
fn route(head: &[u8], snapshot: &SharedSnapshot) -> Response {
    let bad = || Response::text(400, "Bad Request", "bad request");
    let Ok(head) = std::str::from_utf8(head) else {
        return bad();
    };
    let request_line = head.lines().next().unwrap_or("").trim_end_matches('\r');
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return bad();
    };
    if method.is_empty() || !target.starts_with('/') || !version.starts_with("HTTP/1.") {
        return bad();
    }
    let path = target.split_once('?').map_or(target, |(path, _)| path);
    if path != METRICS_PATH {
        return Response::text(404, "Not Found", "not found; metrics are at /metrics");
    }
    match method {
        "GET" | "HEAD" => Response {
            status: 200,
            reason: "OK",
            content_type: CONTENT_TYPE,
            extra_headers: "",
            body: encode_owned(clone_snapshot(snapshot)),
            head_only: method == "HEAD",
        },
        _ => Response {
            extra_headers: "Allow: GET, HEAD\r\n",
            ..Response::text(405, "Method Not Allowed", "method not allowed")
        },
    }
}

/// Serves one connection: read the head, write one response, close.
fn handle(stream: &TcpStream, snapshot: &SharedSnapshot) -> io::Result<()> {
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let response = match read_head(stream)? {
        Head::Empty => return Ok(()),
        Head::Complete(head) => route(&head, snapshot),
        Head::Malformed => Response::text(400, "Bad Request", "bad request"),
        Head::TooLarge => Response::text(400, "Bad Request", "request head too large"),
    };
    let mut out = stream;
    out.write_all(&response.to_bytes())?;
    out.flush()?;
    let _ = stream.shutdown(Shutdown::Write);
    drain(stream);
    Ok(())
}

/// Reads and discards what the client still sends, briefly, so that closing with
/// unread data does not reset the connection before the client reads the response.
fn drain(mut stream: &TcpStream) {
    let deadline = Instant::now() + DRAIN_TIME;
    let mut buf = [0u8; 4096];
    let mut total = 0;
    while total < DRAIN_BYTES {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return;
        }
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => total += n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::{DropCounters, PathStatus, SessionStatus};
    use std::sync::Mutex;

    fn sample() -> StatusSnapshot {
        StatusSnapshot {
            role: "server".into(),
            version: "0.1.0".into(),
            uptime_s: 12.5,
            tun: "plait0".into(),
            tun_mtu: 1380,
            sessions: vec![SessionStatus {
                peer: "alice".into(),
                public_key: "AAAA".into(),
                established: true,
                session_id: 0xbeef,
                key_age_s: 3.0,
                handshakes: 2,
                scheduler: "minrtt".into(),
                reorder_depth: 4,
                send_queue: 1,
                delivered: 1000,
                queue_full: 5,
                lost: Default::default(),
                late: 0,
                streams: Default::default(),
                handshake_causes: crate::control::HandshakeCauses {
                    first: 1,
                    hint: 1,
                    ..Default::default()
                },
                send_queue_drops: crate::control::snapshot::QueueDrops {
                    codel_dropped: 7,
                    ce_marked: 3,
                    overflow_dropped: 0,
                },
                fec: crate::control::snapshot::FecCounters {
                    blocks: 40,
                    symbols_sent: 52,
                    recovered: 11,
                    ..Default::default()
                },
                sparse: crate::control::snapshot::SparseCounters {
                    unordered_sent: 5,
                    delivered_unordered: 4,
                    spills_refused: 0,
                },
                path_events: crate::control::snapshot::PathEvents {
                    validated: 2,
                    withdrawn: 1,
                    ..Default::default()
                },
                path_changes: Vec::new(),
                registration: None,
                paths: vec![
                    PathStatus {
                        id: 0,
                        name: "wifi".into(),
                        local: None,
                        remote: Some("192.0.2.1:51820".into()),
                        state: "active".into(),
                        srtt_ms: Some(25.0),
                        min_rtt_ms: Some(20.0),
                        owd_ms: Some(0.0),
                        rate_mbit: Some(12.5),
                        loss: 0.25,
                        handover: Some("weak signal".into()),
                        signal: Some(0.125),
                        tx_bytes: 1_572_864,
                        tx_packets: 1200,
                        rx_bytes: 2048,
                        rx_packets: 3,
                        ..PathStatus::default()
                    },
                    PathStatus {
                        id: 1,
                        name: "lte".into(),
                        state: "probing".into(),
                        ..PathStatus::default()
                    },
                ],
            }],
            dropped: DropCounters {
                auth_failed: 3,
                ..DropCounters::default()
            },
            relay: None,
            budgets: Vec::new(),
        }
    }

    const WIFI: &str = r#"{peer="alice",path="0",name="wifi"}"#;
    const LTE: &str = r#"{peer="alice",path="1",name="lte"}"#;

    fn has_line(text: &str, line: &str) -> bool {
        text.lines().any(|l| l == line)
    }

    #[test]
    fn encodes_known_lines() {
        let text = encode_metrics(&sample());
        let expect = [
            "# HELP plait_uptime_seconds Seconds since the daemon started.".to_owned(),
            "# TYPE plait_uptime_seconds gauge".to_owned(),
            "plait_uptime_seconds 12.5".to_owned(),
            "plait_sessions 1".to_owned(),
            r#"plait_build_info{role="server",version="0.1.0",tun="plait0"} 1"#.to_owned(),
            r#"plait_session_established{peer="alice"} 1"#.to_owned(),
            "# TYPE plait_session_handshakes counter".to_owned(),
            r#"plait_session_handshakes_total{peer="alice"} 2"#.to_owned(),
            r#"plait_session_handshakes_started_total{peer="alice",cause="hint"} 1"#.to_owned(),
            r#"plait_session_handshakes_started_total{peer="alice",cause="silence"} 0"#.to_owned(),
            r#"plait_session_send_queue_dropped_total{peer="alice",reason="codel_dropped"} 7"#
                .to_owned(),
            r#"plait_session_fec_total{peer="alice",event="recovered"} 11"#.to_owned(),
            r#"plait_session_fec_total{peer="alice",event="unrecovered"} 0"#.to_owned(),
            r#"plait_session_send_queue_dropped_total{peer="alice",reason="overflow_dropped"} 0"#
                .to_owned(),
            r#"plait_session_path_events_total{peer="alice",event="validated"} 2"#.to_owned(),
            r#"plait_session_path_events_total{peer="alice",event="withdrawn"} 1"#.to_owned(),
            r#"plait_session_reorder_depth{peer="alice"} 4"#.to_owned(),
            r#"plait_session_send_queue{peer="alice"} 1"#.to_owned(),
            r#"plait_session_delivered_total{peer="alice"} 1000"#.to_owned(),
            r#"plait_session_queue_full_total{peer="alice"} 5"#.to_owned(),
            format!("plait_path_state{WIFI} 3"),
            format!("plait_path_state{LTE} 1"),
            format!("plait_path_up{WIFI} 1"),
            format!("plait_path_up{LTE} 0"),
            format!("plait_path_srtt_seconds{WIFI} 0.025"),
            format!("plait_path_min_rtt_seconds{WIFI} 0.02"),
            format!("plait_path_owd_seconds{WIFI} 0.0"),
            format!("plait_path_rate_bits_per_second{WIFI} 12500000.0"),
            format!("plait_path_loss_ratio{WIFI} 0.25"),
            format!("plait_path_loss_ratio{LTE} 0.0"),
            format!("plait_path_handed_over{WIFI} 1.0"),
            format!("plait_path_handed_over{LTE} 0.0"),
            format!("plait_path_link_signal_ratio{WIFI} 0.125"),
            format!("plait_path_tx_bytes_total{WIFI} 1572864"),
            format!("plait_path_tx_packets_total{WIFI} 1200"),
            format!("plait_path_rx_bytes_total{WIFI} 2048"),
            format!("plait_path_rx_packets_total{WIFI} 3"),
            format!("plait_path_rx_packets_total{LTE} 0"),
            "# TYPE plait_drops counter".to_owned(),
            r#"plait_drops_total{reason="auth_failed"} 3"#.to_owned(),
            r#"plait_drops_total{reason="malformed"} 0"#.to_owned(),
            r#"plait_drops_total{reason="no_route"} 0"#.to_owned(),
        ];
        for line in &expect {
            assert!(has_line(&text, line), "missing {line:?} in\n{text}");
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn none_gauges_are_omitted() {
        let text = encode_metrics(&sample());
        for name in [
            "plait_path_srtt_seconds",
            "plait_path_min_rtt_seconds",
            "plait_path_owd_seconds",
            "plait_path_rate_bits_per_second",
            "plait_path_link_signal_ratio",
        ] {
            assert!(!text.contains(&format!("{name}{LTE}")), "{name} for lte");
        }
        let mut s = sample();
        s.sessions[0].paths[0].srtt_ms = Some(f64::NAN);
        assert!(!encode_metrics(&s).contains("plait_path_srtt_seconds{"));
    }

    #[test]
    fn empty_snapshot_omits_empty_families() {
        let text = encode_metrics(&StatusSnapshot::default());
        assert!(has_line(&text, "plait_sessions 0"), "{text}");
        assert!(!text.contains("plait_session_"), "{text}");
        assert!(!text.contains("plait_path_"), "{text}");
        assert!(has_line(&text, r#"plait_drops_total{reason="replayed"} 0"#));
        // Every line is a comment or a sample; no `{}` empty label sets.
        assert!(!text.contains("{}"), "{text}");
    }

    #[test]
    fn path_state_mapping() {
        assert_eq!(path_state_value("down"), Some(0));
        assert_eq!(path_state_value("probing"), Some(1));
        assert_eq!(path_state_value("degraded"), Some(2));
        assert_eq!(path_state_value("active"), Some(3));
        assert_eq!(path_state_value("weird"), None);
        let mut s = sample();
        s.sessions[0].paths[0].state = "weird".into();
        let text = encode_metrics(&s);
        assert!(!text.contains(&format!("plait_path_state{WIFI}")));
        assert!(has_line(&text, &format!("plait_path_up{WIFI} 0")));
    }

    #[test]
    fn label_values_are_escaped() {
        let mut s = sample();
        s.sessions[0].peer = "a\"b\\c".into();
        let text = encode_metrics(&s);
        assert!(
            has_line(&text, r#"plait_session_established{peer="a\"b\\c"} 1"#),
            "{text}"
        );
    }

    #[test]
    fn read_head_bounds() {
        assert_eq!(read_head(&b""[..]).unwrap(), Head::Empty);
        assert_eq!(
            read_head(&b"GET / HTTP/1.1\r\nHost: x\r\n\r\nrest"[..]).unwrap(),
            Head::Complete(b"GET / HTTP/1.1\r\nHost: x".to_vec())
        );
        assert_eq!(
            read_head(&b"GET / HTTP/1.0\n\n"[..]).unwrap(),
            Head::Complete(b"GET / HTTP/1.0".to_vec())
        );
        assert_eq!(read_head(&b"GET / HTT"[..]).unwrap(), Head::Malformed);
        let big = vec![b'a'; MAX_REQUEST_HEAD + 10];
        assert_eq!(read_head(&big[..]).unwrap(), Head::TooLarge);
    }

    fn start() -> (MetricsServer, SharedSnapshot) {
        let snap = Arc::new(Mutex::new(sample()));
        let server =
            MetricsServer::start("127.0.0.1:0".parse().unwrap(), Arc::clone(&snap)).unwrap();
        (server, snap)
    }

    /// Sends `request` raw and returns the whole response (empty if reset).
    fn fetch(addr: SocketAddr, request: &[u8]) -> String {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let _ = stream.write_all(request);
        let mut response = Vec::new();
        let _ = stream.read_to_end(&mut response);
        String::from_utf8_lossy(&response).into_owned()
    }

    fn split(response: &str) -> (&str, &str) {
        response
            .split_once("\r\n\r\n")
            .expect("a complete response")
    }

    #[test]
    fn idle_connections_do_not_block_a_scrape() {
        let (server, _snap) = start();
        let addr = server.local_addr();
        // Served one at a time, 20 idle connections would hold a scrape for 20 s, past
        // `fetch`'s 5 s timeout; served concurrently, none of them delays it.
        let idle: Vec<TcpStream> = (0..20).map(|_| TcpStream::connect(addr).unwrap()).collect();
        let response = fetch(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
        drop(idle);
    }

    #[test]
    fn serves_metrics() {
        let (server, snap) = start();
        let addr = server.local_addr();
        assert_ne!(addr.port(), 0);
        let response = fetch(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        let (head, body) = split(&response);
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert!(
            head.contains(&format!("\r\nContent-Type: {CONTENT_TYPE}")),
            "{head}"
        );
        assert!(
            head.contains(&format!("\r\nContent-Length: {}", body.len())),
            "{head}"
        );
        assert!(head.contains("\r\nConnection: close"), "{head}");
        assert!(has_line(body, "plait_uptime_seconds 12.5"), "{body}");
        assert!(body.ends_with("# EOF\n"));

        // Each scrape sees the current snapshot.
        snap.lock().unwrap().uptime_s = 60.0;
        let response = fetch(addr, b"GET /metrics?x=1 HTTP/1.0\r\n\r\n");
        assert!(has_line(split(&response).1, "plait_uptime_seconds 60.0"));
    }

    #[test]
    fn head_request_has_no_body() {
        let (server, _snap) = start();
        let response = fetch(server.local_addr(), b"HEAD /metrics HTTP/1.1\r\n\r\n");
        let (head, body) = split(&response);
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert!(!head.contains("Content-Length: 0\r\n"), "{head}");
        assert_eq!(body, "");
    }

    #[test]
    fn other_paths_and_methods() {
        let (server, _snap) = start();
        let addr = server.local_addr();
        let response = fetch(addr, b"GET / HTTP/1.1\r\n\r\n");
        assert!(
            response.starts_with("HTTP/1.1 404 Not Found\r\n"),
            "{response}"
        );
        let response = fetch(addr, b"GET /metricsx HTTP/1.1\r\n\r\n");
        assert!(response.starts_with("HTTP/1.1 404 "), "{response}");
        let response = fetch(addr, b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
        assert!(response.starts_with("HTTP/1.1 405 "), "{response}");
        assert!(response.contains("\r\nAllow: GET, HEAD\r\n"), "{response}");
    }

    #[test]
    fn malformed_requests_get_400() {
        let (server, _snap) = start();
        let addr = server.local_addr();
        for request in [
            &b"hello\r\n\r\n"[..],
            b"GET /metrics\r\n\r\n",
            b"GET /metrics HTTP/2.0\r\n\r\n",
            b"GET metrics HTTP/1.1\r\n\r\n",
            b"GET  /metrics HTTP/1.1\r\n\r\n",
            b"\xff\xfe /metrics HTTP/1.1\r\n\r\n",
        ] {
            let response = fetch(addr, request);
            assert!(
                response.starts_with("HTTP/1.1 400 Bad Request\r\n"),
                "{request:?} -> {response}"
            );
        }
        // Closing mid-head is malformed too.
        let mut stream = TcpStream::connect(addr).unwrap();
        stream.write_all(b"GET /metr").unwrap();
        stream.shutdown(Shutdown::Write).unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        assert!(response.starts_with("HTTP/1.1 400 "), "{response}");
    }

    #[test]
    fn oversized_request_is_refused_and_server_survives() {
        let (server, _snap) = start();
        let addr = server.local_addr();
        let mut request = b"GET /metrics HTTP/1.1\r\n".to_vec();
        while request.len() <= 3 * MAX_REQUEST_HEAD {
            request.extend_from_slice(b"X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
        }
        request.extend_from_slice(b"\r\n");
        let response = fetch(addr, &request);
        assert!(
            response.is_empty() || response.starts_with("HTTP/1.1 400 "),
            "{response}"
        );
        let response = fetch(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
        assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
    }

    #[test]
    fn silent_client_does_not_block_the_server_for_long() {
        let (server, _snap) = start();
        let addr = server.local_addr();
        let stuck = TcpStream::connect(addr).unwrap();
        thread::sleep(Duration::from_millis(50));
        let t = Instant::now();
        let response = fetch(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
        assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
        assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
        drop(stuck);
    }

    #[test]
    fn drop_stops_the_server() {
        let (server, _snap) = start();
        let addr = server.local_addr();
        drop(server);
        assert!(TcpStream::connect(addr).is_err());
    }

    #[test]
    fn bind_error_names_the_address() {
        let (server, _snap) = start();
        let addr = server.local_addr();
        let err = MetricsServer::start(addr, Arc::new(Mutex::new(sample()))).unwrap_err();
        assert!(matches!(err, ControlError::MetricsBind { .. }), "{err:?}");
        assert!(
            err.to_string()
                .starts_with(&format!("cannot bind the metrics endpoint on {addr}: ")),
            "{err}"
        );
    }

    #[test]
    fn wildcard_wakes_via_loopback() {
        assert_eq!(
            reachable_ip("0.0.0.0".parse().unwrap()),
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        );
        assert_eq!(
            reachable_ip("::".parse().unwrap()),
            IpAddr::V6(Ipv6Addr::LOCALHOST)
        );
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        assert_eq!(reachable_ip(ip), ip);
        let server =
            MetricsServer::start("0.0.0.0:0".parse().unwrap(), Arc::new(Mutex::new(sample())))
                .unwrap();
        drop(server); // Must not hang.
    }
}
