//! `plait send FILE` and `plait recv`: the socket and file I/O around plait-fec's sans-IO
//! transfer state machines (plait_fec::transfer). They run as an ordinary UDP application
//! between the two tunnel addresses, so the tunnel authenticates, encrypts and spreads the
//! datagrams over the paths (docs/fec.md, "plait send and plait recv").

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, IsTerminal, Read, Write};
use std::net::{SocketAddr, UdpSocket};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use plait_fec::transfer::receiver::RecvEvent;
use plait_fec::transfer::wire::{self, Header};
use plait_fec::transfer::{ChunkSource, RateLimits, Receiver, Sender, Transmit};

/// `plait send FILE`.
#[derive(Debug, clap::Args)]
pub struct SendArgs {
    /// The file to send.
    pub file: PathBuf,
    /// The receiver's address (`plait recv --listen`), e.g. the far tunnel address.
    #[arg(long)]
    pub to: SocketAddr,
    /// Local address to send from.
    #[arg(long)]
    pub bind: Option<SocketAddr>,
    /// Symbols per chunk (k).
    #[arg(short, long, default_value_t = 1024)]
    pub k: u16,
    /// Bytes per symbol (datagrams are 30 bytes longer; the tunnel's MTU is 1380).
    #[arg(long, default_value_t = 1280)]
    pub symbol_size: u16,
    /// Highest sending rate, Mbit/s.
    #[arg(long, default_value_t = 1000.0)]
    pub max_rate: f64,
    /// Give up when the receiver is silent this many seconds.
    #[arg(long, default_value_t = 15)]
    pub timeout: u64,
    /// No progress output.
    #[arg(long)]
    pub quiet: bool,
}

/// `plait recv`.
#[derive(Debug, clap::Args)]
pub struct RecvArgs {
    /// Address to listen on, e.g. this end's tunnel address and a port.
    #[arg(long)]
    pub listen: SocketAddr,
    /// Directory for the received file (`NAME.part` and `NAME.plait-state` while running).
    #[arg(long, default_value = ".")]
    pub out: PathBuf,
    /// Give up when the sender is silent this many seconds during a transfer.
    #[arg(long, default_value_t = 15)]
    pub timeout: u64,
    /// No progress output.
    #[arg(long)]
    pub quiet: bool,
}

/// A progress bar on a terminal, a plain line per second otherwise.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    label: &'static str,
    total: u64,
    start: Instant,
    last_line: Instant,
    quiet: bool,
}

impl Progress {
    fn new(label: &'static str, total: u64, quiet: bool) -> Self {
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let b = indicatif::ProgressBar::new(total);
            b.set_style(
                indicatif::ProgressStyle::with_template(
                    "{prefix} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta} {msg}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            b.set_prefix(label);
            b
        });
        Self {
            bar,
            label,
            total,
            start: Instant::now(),
            last_line: Instant::now(),
            quiet,
        }
    }

    fn set(&mut self, done: u64, msg: impl FnOnce() -> String) {
        let done = done.min(self.total);
        if let Some(b) = &self.bar {
            b.set_position(done);
            b.set_message(msg());
        } else if !self.quiet && self.last_line.elapsed() >= Duration::from_secs(1) {
            self.last_line = Instant::now();
            let secs = self.start.elapsed().as_secs_f64();
            eprintln!(
                "plait {}: {:.1}/{:.1} MB ({:.1} %) in {:.1} s, {}",
                self.label,
                done as f64 / 1e6,
                self.total as f64 / 1e6,
                100.0 * done as f64 / self.total.max(1) as f64,
                secs,
                msg()
            );
        }
    }

    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish();
        }
    }
}

fn sha256_file(path: &Path) -> Result<[u8; 32]> {
    let mut f = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f
            .read(&mut buf)
            .with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            break;
        }
        ctx.update(&buf[..n]);
    }
    let mut out = [0u8; 32];
    out.copy_from_slice(ctx.finish().as_ref());
    Ok(out)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The transfer id: the first 8 bytes of SHA-256 over the file's digest, size, k, symbol
/// size and name, so a restarted sender or receiver finds the same transfer again.
fn transfer_id(h: &Header) -> u64 {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    ctx.update(&h.sha256);
    ctx.update(&h.file_size.to_be_bytes());
    ctx.update(&h.k.to_be_bytes());
    ctx.update(&h.symbol_size.to_be_bytes());
    ctx.update(h.name.as_bytes());
    let d = ctx.finish();
    let mut id = [0u8; 8];
    id.copy_from_slice(&d.as_ref()[..8]);
    u64::from_be_bytes(id)
}

struct FileSource(File);

impl ChunkSource for FileSource {
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.0.read_exact_at(buf, offset)
    }
}

fn mbit(bytes: u64, d: Duration) -> f64 {
    bytes as f64 * 8.0 / d.as_secs_f64().max(1e-9) / 1e6
}

/// `plait send FILE --to ADDR`.
pub fn send(args: SendArgs) -> Result<()> {
    let meta = std::fs::metadata(&args.file)
        .with_context(|| format!("cannot read {}", args.file.display()))?;
    if !meta.is_file() {
        bail!("{} is not a regular file", args.file.display());
    }
    let name = args
        .file
        .file_name()
        .and_then(|n| n.to_str())
        .context("the file name is not UTF-8")?
        .to_owned();
    wire::check_name(&name).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    let sha256 = sha256_file(&args.file)?;
    let mut header = Header {
        transfer_id: 0,
        file_size: meta.len(),
        k: args.k,
        symbol_size: args.symbol_size,
        sha256,
        name,
    };
    header.check().context("bad --k or --symbol-size")?;
    header.transfer_id = transfer_id(&header);
    let file =
        File::open(&args.file).with_context(|| format!("cannot open {}", args.file.display()))?;

    let bind = args.bind.unwrap_or(if args.to.is_ipv4() {
        "0.0.0.0:0".parse()?
    } else {
        "[::]:0".parse()?
    });
    let sock = UdpSocket::bind(bind).with_context(|| format!("cannot bind {bind}"))?;
    sock.connect(args.to)
        .with_context(|| format!("cannot reach {}", args.to))?;
    sock.set_nonblocking(true)?;

    let limits = RateLimits {
        max: args.max_rate * 1e6 / 8.0,
        ..RateLimits::default()
    };
    let total = header.file_size;
    let chunk_bytes = header.chunk_bytes();
    let mut sender = Sender::new(header.clone(), FileSource(file), limits);
    let mut progress = Progress::new("send", total, args.quiet);
    if !args.quiet {
        eprintln!(
            "plait send: {} ({} bytes, sha256 {}…) to {} in {} chunks of {} x {} bytes",
            header.name,
            total,
            &hex(&sha256)[..16],
            args.to,
            header.chunks(),
            header.k,
            header.symbol_size
        );
    }
    let start = Instant::now();
    let timeout = Duration::from_secs(args.timeout);
    let mut buf = Vec::with_capacity(2048);
    let mut rbuf = vec![0u8; 2048];
    let mut sent_since_drain = 0u32;
    let (mut send_errors, mut bad_reports) = (0u64, 0u64);
    let mut first_done = None;
    loop {
        let now = start.elapsed();
        let heard = sender.last_heard().unwrap_or(Duration::ZERO);
        if now.saturating_sub(heard) > timeout {
            bail!(
                "the receiver at {} has been silent for {} s (is `plait recv` running and the tunnel up?)",
                args.to,
                args.timeout
            );
        }
        let mut drain = false;
        match sender.poll_transmit(now, &mut buf)? {
            Transmit::Send => {
                match sock.send(&buf) {
                    Ok(_) => {}
                    // Nobody listening yet (ICMP port unreachable), or a full socket buffer:
                    // the datagram is lost like any other, the fountain does not care.
                    Err(_) => send_errors += 1,
                }
                sent_since_drain += 1;
                if sent_since_drain >= 16 {
                    drain = true;
                }
            }
            Transmit::Wait(t) => {
                let d = t.saturating_sub(now).min(Duration::from_millis(2));
                if !d.is_zero() {
                    std::thread::sleep(d);
                }
                drain = true;
            }
            Transmit::Done => break,
        }
        if drain {
            sent_since_drain = 0;
            loop {
                match sock.recv(&mut rbuf) {
                    Ok(n) => {
                        if sender.handle(start.elapsed(), &rbuf[..n]).is_err() {
                            bad_reports += 1;
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(_) => break, // e.g. ECONNREFUSED from an earlier send
                }
            }
            let (done, _) = sender.progress();
            if first_done.is_none() && sender.last_heard().is_some() {
                first_done = Some(done);
            }
            let rate = sender.rate().rate();
            progress.set(done as u64 * chunk_bytes, || {
                format!("pacing {:.1} Mbit/s", rate * 8.0 / 1e6)
            });
        }
    }
    progress.set(total, String::new);
    progress.finish();
    let elapsed = start.elapsed();
    let skipped = first_done.unwrap_or(0) as u64 * chunk_bytes;
    let symbols = total.div_ceil(header.symbol_size as u64);
    if !args.quiet {
        eprintln!(
            "plait send: {} bytes verified by the receiver in {:.2} s: {:.1} Mbit/s; {} symbols sent for {} source symbols ({:.1} % extra{}), {} send errors, {} bad reports",
            total,
            elapsed.as_secs_f64(),
            mbit(total - skipped.min(total), elapsed),
            sender.symbols_sent(),
            symbols,
            100.0 * (sender.symbols_sent() as f64 / symbols.max(1) as f64 - 1.0),
            if skipped > 0 {
                format!(", resumed with {skipped} bytes already there")
            } else {
                String::new()
            },
            send_errors,
            bad_reports
        );
        let st = sender.stats();
        eprintln!(
            "plait send: symbols: {} that chunks' estimates asked for, {} tail extras, {} top-ups; the receiver reported {} received before the end ({} not reported: lost, or still in flight at the end)",
            st.needed,
            st.extra,
            st.top_ups,
            st.received,
            sender.symbols_sent().saturating_sub(st.received),
        );
        let rc = sender.rate().counters();
        eprintln!(
            "plait send: rate control: {} rounds, congested by excess loss in {}, by queueing in {}; base loss {:.3}, min RTT {:?}, smoothed RTT {:?}",
            rc.rounds,
            rc.loss_decreases,
            rc.queue_decreases,
            sender.rate().base_loss(),
            sender.rate().min_rtt(),
            sender.rate().srtt()
        );
    }
    Ok(())
}

/// What `plait recv` keeps next to the partial file so a restart resumes: the transfer id
/// and one character per chunk (`1` = on disk).
struct ResumeState {
    path: PathBuf,
}

impl ResumeState {
    fn load(&self, h: &Header) -> Option<Vec<bool>> {
        let text = std::fs::read_to_string(&self.path).ok()?;
        let mut lines = text.lines();
        if lines.next()? != "plait-recv 1" {
            return None;
        }
        if lines.next()? != format!("id {:016x}", h.transfer_id) {
            return None;
        }
        let done = lines.next()?.strip_prefix("done ")?;
        if done.len() != h.chunks() as usize {
            return None;
        }
        Some(done.bytes().map(|b| b == b'1').collect())
    }

    fn save(&self, h: &Header, done: &[bool]) -> Result<()> {
        let tmp = self.path.with_extension("plait-state.tmp");
        let bits: String = done.iter().map(|d| if *d { '1' } else { '0' }).collect();
        let mut f =
            File::create(&tmp).with_context(|| format!("cannot write {}", tmp.display()))?;
        writeln!(f, "plait-recv 1\nid {:016x}\ndone {bits}", h.transfer_id)?;
        drop(f);
        std::fs::rename(&tmp, &self.path)
            .with_context(|| format!("cannot write {}", self.path.display()))?;
        Ok(())
    }
}

/// Receive buffer of `plait recv`'s socket (the kernel caps it at `net.core.rmem_max`).
const RECV_BUFFER: usize = 4 << 20;

/// `plait recv --listen ADDR --out DIR`: receives one file, then exits.
pub fn recv(args: RecvArgs) -> Result<()> {
    let dir = &args.out;
    let meta = std::fs::metadata(dir)
        .with_context(|| format!("output directory {} is not readable", dir.display()))?;
    if !meta.is_dir() {
        bail!("{} is not a directory", dir.display());
    }
    let probe = dir.join(format!(".plait-recv-probe-{}", std::process::id()));
    File::create(&probe)
        .with_context(|| format!("output directory {} is not writable", dir.display()))?;
    let _ = std::fs::remove_file(&probe);
    let sock = UdpSocket::bind(args.listen).map_err(|e| {
        if e.kind() == ErrorKind::AddrInUse {
            anyhow::anyhow!("{} is already in use (another plait recv?)", args.listen)
        } else {
            anyhow::anyhow!("cannot listen on {}: {e}", args.listen)
        }
    })?;
    // The tunnel's reorder buffer releases symbols in bursts (everything a slower path held
    // back) while a chunk decodes: room for a few hundred milliseconds of them.
    let _ = socket2::SockRef::from(&sock).set_recv_buffer_size(RECV_BUFFER);
    if !args.quiet {
        eprintln!("plait recv: listening on {}", args.listen);
    }
    let start = Instant::now();
    let timeout = Duration::from_secs(args.timeout);
    let mut rx = Receiver::new();
    let mut peer: Option<SocketAddr> = None;
    let mut last_heard = Duration::ZERO;
    let mut file: Option<(File, PathBuf, PathBuf, ResumeState)> = None;
    let mut progress: Option<Progress> = None;
    let mut finished: Option<(bool, Duration)> = None;
    let mut dropped_logged = 0u64;
    let mut buf = vec![0u8; 4096];
    let mut out = Vec::with_capacity(256);
    let mut began = Duration::ZERO;
    let mut resumed_chunks = 0u32;
    loop {
        let now = start.elapsed();
        if let Some((ok, at)) = finished {
            // Linger so the sender hears "complete" even if reports are lost; leave once it
            // has been quiet for a second.
            if now.saturating_sub(at) > Duration::from_secs(3)
                || now.saturating_sub(last_heard) > Duration::from_secs(1)
            {
                if ok {
                    return Ok(());
                }
                bail!("SHA-256 of the received file does not match the sender's");
            }
        } else if peer.is_some() && now.saturating_sub(last_heard) > timeout {
            bail!(
                "the sender has been silent for {} s; run plait recv again to resume",
                args.timeout
            );
        }
        let wait = rx
            .next_report_at()
            .map_or(Duration::from_millis(200), |t| t.saturating_sub(now))
            .clamp(Duration::from_millis(1), Duration::from_millis(200));
        sock.set_read_timeout(Some(wait))?;
        match sock.recv_from(&mut buf) {
            Ok((n, from)) => {
                let now = start.elapsed();
                if let Some(p) = peer
                    && p.ip() != from.ip()
                {
                    continue; // one sender at a time
                }
                match rx.handle(now, &buf[..n]) {
                    Ok(RecvEvent::Offer(h)) => {
                        peer = Some(from);
                        last_heard = now;
                        began = now;
                        let part = dir.join(format!("{}.part", h.name));
                        let fin = dir.join(&h.name);
                        let state = ResumeState {
                            path: dir.join(format!("{}.plait-state", h.name)),
                        };
                        let on_disk = state.load(&h).filter(|_| {
                            std::fs::metadata(&part).is_ok_and(|m| m.len() == h.file_size)
                        });
                        let f = OpenOptions::new()
                            .read(true)
                            .write(true)
                            .create(true)
                            .truncate(on_disk.is_none())
                            .open(&part)
                            .and_then(|f| f.set_len(h.file_size).map(|()| f));
                        match f {
                            Ok(f) => {
                                let on_disk = on_disk.unwrap_or_default();
                                resumed_chunks = on_disk.iter().filter(|d| **d).count() as u32;
                                if !args.quiet {
                                    eprintln!(
                                        "plait recv: {} ({} bytes, {} chunks) from {from}{}",
                                        h.name,
                                        h.file_size,
                                        h.chunks(),
                                        if resumed_chunks > 0 {
                                            format!(
                                                ", resuming with {resumed_chunks} chunks on disk"
                                            )
                                        } else {
                                            String::new()
                                        }
                                    );
                                }
                                progress = Some(Progress::new("recv", h.file_size, args.quiet));
                                rx.begin(h.clone(), &on_disk, now);
                                state.save(&h, rx.done())?;
                                file = Some((f, part, fin, state));
                                if rx.all_decoded() {
                                    // Everything was on disk already: check and finish.
                                    let (_, part, fin, state) = file.as_ref().expect("file");
                                    let ok = finish_file(&h, part, fin, &state.path)?;
                                    rx.finish(ok, now);
                                    finished = Some((ok, now));
                                }
                            }
                            Err(e) => {
                                eprintln!("plait recv: cannot write {}: {e}", part.display());
                                rx.reject(h, now);
                            }
                        }
                    }
                    Ok(RecvEvent::Decoded { offset, data, .. }) => {
                        last_heard = now;
                        let (f, part, fin, state) = file.as_ref().expect("a transfer has begun");
                        f.write_all_at(&data, offset)
                            .with_context(|| format!("writing {}", part.display()))?;
                        let h = rx.header().expect("begun").clone();
                        state.save(&h, rx.done())?;
                        if rx.all_decoded() {
                            let ok = finish_file(&h, part, fin, &state.path)?;
                            rx.finish(ok, now);
                            finished = Some((ok, now));
                            if let Some(p) = &mut progress {
                                p.set(h.file_size, String::new);
                                p.finish();
                            }
                            let secs = now.saturating_sub(began);
                            if !args.quiet {
                                eprintln!(
                                    "plait recv: {} {} in {:.2} s ({:.1} Mbit/s), {} symbols accepted, {} after their chunk decoded, {} dropped",
                                    fin.display(),
                                    if ok {
                                        "written, SHA-256 verified"
                                    } else {
                                        "FAILED: SHA-256 mismatch"
                                    },
                                    secs.as_secs_f64(),
                                    mbit(h.file_size, secs),
                                    rx.stats().accepted,
                                    rx.stats().duplicate_or_done,
                                    rx.stats().dropped
                                );
                            }
                        }
                    }
                    Ok(RecvEvent::None) => last_heard = now,
                    Err(e) => {
                        let dropped = rx.stats().dropped;
                        if dropped <= 10 || dropped >= dropped_logged * 2 {
                            tracing_log(&format!(
                                "dropped datagram from {from}: {e} ({dropped} so far)"
                            ));
                            dropped_logged = dropped;
                        }
                    }
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => return Err(e).context("receiving"),
        }
        let now = start.elapsed();
        if let Some(p) = peer {
            while rx.poll_report(now, &mut out) {
                let _ = sock.send_to(&out, p);
            }
        }
        if let (Some(pr), Some(h)) = (&mut progress, rx.header())
            && finished.is_none()
        {
            let (done, _) = rx.progress();
            let bytes = done as u64 * h.chunk_bytes();
            let new = (done - resumed_chunks.min(done)) as u64 * h.chunk_bytes();
            let el = now.saturating_sub(began);
            pr.set(bytes, || format!("{:.1} Mbit/s", mbit(new, el)));
        }
    }
}

fn tracing_log(msg: &str) {
    eprintln!("plait recv: {msg}");
}

/// Checks the whole file's SHA-256; on success moves it to its final name and removes the
/// resume state; on failure removes the state too (the data cannot be trusted).
fn finish_file(h: &Header, part: &Path, fin: &Path, state: &Path) -> Result<bool> {
    let got = sha256_file(part)?;
    let _ = std::fs::remove_file(state);
    if got != h.sha256 {
        eprintln!(
            "plait recv: SHA-256 mismatch: got {}, sender announced {}",
            hex(&got),
            hex(&h.sha256)
        );
        return Ok(false);
    }
    std::fs::rename(part, fin)
        .with_context(|| format!("cannot move {} to {}", part.display(), fin.display()))?;
    Ok(true)
}
