//! Client stream mode's nftables REDIRECT rules ([`NetConfig::redirect_tcp`]), for real, in
//! two throwaway network namespaces (root only; prints "skipped: …" and passes otherwise).
//!
//! - `pnft-r-PID`, the client acting as a router: a TUN device `pt0` (no process attached:
//!   whatever is not redirected and enters it is lost), an "uplink" TUN `up0` with the
//!   main table's default routes, and [`NetConfig::route_into_tunnel`]'s policy routing
//!   (`0.0.0.0/0` and `::/0` into table 0x706c, `not fwmark 0x706c`, `suppress_prefixlength
//!   0`). A dual-stack listener on `[::]:PORT` stands in for the stream listener.
//! - `pnft-l-PID`, a LAN host behind it over a veth pair, default routes via the router.
//!
//! Checked: a connection from the router itself (output hook) and one from the LAN host
//! (prerouting hook, `fib daddr oifname`) towards an address routed into the tunnel reach
//! the listener, and [`original_dst`] returns the destination they were made to, for IPv4
//! and IPv6; connections that the router would not route into the tunnel (a main-table
//! subnet on the uplink, the router's own address), and, with a narrower configuration,
//! other ports and prefixes, are not redirected; deleting the table stops the redirect.
//!
//! Sockets are made in the namespaces by a thread that has joined them with `setns`; a
//! socket stays in the namespace it was created in.

use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use ipnet::IpNet;
use nix::sched::CloneFlags;
use plait_tunnel::io::original_dst::original_dst;
use plait_tunnel::netcfg::{DEFAULT_FWMARK, DEFAULT_TABLE, NetConfig, redirect_table_name};
use socket2::{Domain, Socket, Type};

/// The stream listener's port.
const PORT: u16 = 17443;
const TUN: &str = "pt0";

fn ip_binary() -> &'static str {
    ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .unwrap_or("ip")
}

/// Runs `ip args…`; its stdout, or the error's text.
fn try_ip(args: &[&str]) -> Result<String, String> {
    let out = Command::new(ip_binary())
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Runs `ip args…`, panicking on failure.
fn ip(args: &[&str]) -> String {
    try_ip(args).unwrap()
}

/// Network namespaces deleted by name on drop, also when the test panics.
struct Namespaces {
    names: Vec<String>,
}

impl Namespaces {
    fn add(&mut self, name: String) -> Result<(), String> {
        try_ip(&["netns", "add", &name])?;
        self.names.push(name);
        Ok(())
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for name in self.names.drain(..).rev() {
            if let Err(e) = try_ip(&["netns", "del", &name]) {
                eprintln!("could not delete network namespace {name}: {e}");
            }
        }
    }
}

/// `ip netns exec ns args…`, panicking on failure.
fn exec(ns: &str, args: &[&str]) -> String {
    let mut all = vec!["netns", "exec", ns];
    all.extend_from_slice(args);
    ip(&all)
}

/// Runs `f` on a thread that has joined network namespace `ns`.
fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/var/run/netns/{ns}");
    thread::spawn(move || {
        let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        nix::sched::setns(file.as_fd(), CloneFlags::CLONE_NEWNET).unwrap();
        f()
    })
    .join()
    .unwrap()
}

/// A dual-stack listener on `[::]:PORT` in namespace `ns`, non-blocking.
fn listen(ns: &str) -> TcpListener {
    in_ns(ns, || {
        let s = Socket::new(Domain::IPV6, Type::STREAM, None).unwrap();
        s.set_only_v6(false).unwrap();
        s.set_reuse_address(true).unwrap();
        let addr: SocketAddr = (IpAddr::from([0u16; 8]), PORT).into();
        s.bind(&addr.into()).unwrap();
        s.listen(64).unwrap();
        s.set_nonblocking(true).unwrap();
        TcpListener::from(s)
    })
}

/// Connects from namespace `ns` to `to`; the connected stream, or the error.
fn connect(ns: &str, to: SocketAddr, timeout: Duration) -> std::io::Result<TcpStream> {
    in_ns(ns, move || TcpStream::connect_timeout(&to, timeout))
}

/// Waits up to 2 s for a connection on `listener`.
fn accept(listener: &TcpListener) -> Option<(TcpStream, SocketAddr)> {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        match listener.accept() {
            Ok(conn) => return Some(conn),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() > deadline {
                    return None;
                }
                thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("accept: {e}"),
        }
    }
}

fn canonical(a: SocketAddr) -> SocketAddr {
    (a.ip().to_canonical(), a.port()).into()
}

/// A connection from `ns` to `to` is redirected to `listener`: the listener accepts it,
/// its local address is `redirected_to` (the address REDIRECT chose) and `original_dst`
/// returns `to`.
fn assert_redirected(ns: &str, listener: &TcpListener, to: SocketAddr, redirected_to: IpAddr) {
    let client = connect(ns, to, Duration::from_secs(2))
        .unwrap_or_else(|e| panic!("{ns} → {to}: connect: {e}"));
    let (conn, peer) = accept(listener).unwrap_or_else(|| panic!("{ns} → {to}: not accepted"));
    assert_eq!(canonical(peer), client.local_addr().unwrap(), "{ns} → {to}");
    let local = conn.local_addr().unwrap();
    assert_eq!(local.ip().to_canonical(), redirected_to, "{ns} → {to}");
    assert_eq!(local.port(), PORT);
    // A v4 connection on the dual-stack listener has a v4-mapped peer.
    let v6 = peer.ip().to_canonical().is_ipv6();
    let original = original_dst(&conn, v6).unwrap();
    println!("{ns} → {to}: accepted from {peer} on {local}, original destination {original}");
    assert_eq!(original, to, "{ns}: original destination");
    // The other family's lookup finds nothing.
    assert!(original_dst(&conn, !v6).is_err());
}

/// A connection from `ns` to `to` does not reach `listener` (it times out in the unread
/// TUN devices, or is refused).
fn assert_not_redirected(ns: &str, listener: &TcpListener, to: SocketAddr) {
    let result = connect(ns, to, Duration::from_millis(300));
    println!("{ns} → {to}: not redirected ({result:?})");
    assert!(result.is_err(), "{ns} → {to}: connected: {result:?}");
    match listener.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("{ns} → {to}: listener got {other:?}"),
    }
}

fn sa(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn nets(s: &[&str]) -> Vec<IpNet> {
    s.iter().map(|p| p.parse().unwrap()).collect()
}

#[test]
fn redirect_in_netns() {
    if !nix::unistd::geteuid().is_root() {
        println!("skipped: needs root (network namespaces)");
        return;
    }
    if Command::new("nft").arg("--version").output().is_err()
        && !std::path::Path::new("/usr/sbin/nft").exists()
    {
        println!("skipped: `nft` not installed (Debian package nftables)");
        return;
    }
    let pid = std::process::id();
    let router = format!("pnft-r-{pid}");
    let lan = format!("pnft-l-{pid}");
    let mut namespaces = Namespaces { names: Vec::new() };
    for name in [&router, &lan] {
        if let Err(e) = namespaces.add(name.clone()) {
            println!("skipped: cannot create a network namespace: {e}");
            return;
        }
    }
    let (r, l) = (router.as_str(), lan.as_str());

    for ns in [r, l] {
        exec(ns, &["ip", "link", "set", "lo", "up"]);
    }
    // LAN: veth pair, the LAN host's default routes via the router.
    ip(&[
        "-n", r, "link", "add", "vr", "type", "veth", "peer", "name", "vl", "netns", l,
    ]);
    exec(r, &["ip", "addr", "add", "192.168.77.1/24", "dev", "vr"]);
    exec(
        r,
        &[
            "ip",
            "-6",
            "addr",
            "add",
            "fd00:77::1/64",
            "dev",
            "vr",
            "nodad",
        ],
    );
    exec(l, &["ip", "addr", "add", "192.168.77.2/24", "dev", "vl"]);
    exec(
        l,
        &[
            "ip",
            "-6",
            "addr",
            "add",
            "fd00:77::2/64",
            "dev",
            "vl",
            "nodad",
        ],
    );
    exec(r, &["ip", "link", "set", "vr", "up"]);
    exec(l, &["ip", "link", "set", "vl", "up"]);
    exec(l, &["ip", "route", "add", "default", "via", "192.168.77.1"]);
    exec(
        l,
        &["ip", "-6", "route", "add", "default", "via", "fd00:77::1"],
    );
    // Router: the uplink carries main's default routes; the tunnel device.
    for (dev, v4, v6) in [
        ("up0", "203.0.113.2/24", "2001:db8:ff::2/64"),
        (TUN, "10.66.0.1/24", "fd66::1/64"),
    ] {
        exec(r, &["ip", "tuntap", "add", dev, "mode", "tun"]);
        exec(r, &["ip", "addr", "add", v4, "dev", dev]);
        exec(r, &["ip", "-6", "addr", "add", v6, "dev", dev, "nodad"]);
        exec(r, &["ip", "link", "set", dev, "up"]);
    }
    exec(r, &["ip", "route", "add", "default", "dev", "up0"]);
    exec(r, &["ip", "-6", "route", "add", "default", "dev", "up0"]);
    exec(
        r,
        &[
            "sysctl",
            "-q",
            "-w",
            "net.ipv4.ip_forward=1",
            "net.ipv6.conf.all.forwarding=1",
        ],
    );

    // The client's policy routing: everything into the tunnel, main's specific routes kept.
    let mut routing = NetConfig::in_netns(r);
    routing
        .route_into_tunnel(
            TUN,
            &nets(&["0.0.0.0/0", "::/0"]),
            DEFAULT_FWMARK,
            DEFAULT_TABLE,
        )
        .unwrap();
    let get = exec(r, &["ip", "route", "get", "192.0.2.9"]);
    assert!(get.contains("dev pt0 table 28780"), "{get}");

    let listener = listen(r);
    let loopback4 = IpAddr::from([127, 0, 0, 1]);
    let loopback6: IpAddr = "::1".parse().unwrap();
    let vr4 = IpAddr::from([192, 168, 77, 1]);
    let vr6: IpAddr = "fd00:77::1".parse().unwrap();

    // The default configuration: every destination, every port.
    let mut redirect = NetConfig::in_netns(r);
    redirect
        .redirect_tcp(TUN, PORT, &nets(&["0.0.0.0/0", "::/0"]), &[])
        .unwrap();
    let table = redirect_table_name(TUN);
    println!("{}", exec(r, &["nft", "list", "table", "inet", &table]));

    // (a) Locally generated: output hook, redirected to the loopback address.
    assert_redirected(r, &listener, sa("192.0.2.9:443"), loopback4);
    assert_redirected(r, &listener, sa("[2001:db8:2::9]:80"), loopback6);
    // (b) Forwarded from the LAN: prerouting, redirected to the router's LAN address;
    // `fib daddr oifname` sees the policy routing (table 0x706c through the `not fwmark`
    // rule, after `suppress_prefixlength 0`).
    assert_redirected(l, &listener, sa("192.0.2.9:443"), vr4);
    assert_redirected(l, &listener, sa("[2001:db8:2::9]:80"), vr6);
    // Not into the tunnel: main's subnet on the uplink (kept by suppress_prefixlength 0),
    // and the router's own address.
    assert_not_redirected(l, &listener, sa("203.0.113.9:443"));
    assert_not_redirected(l, &listener, sa("[2001:db8:ff::9]:443"));
    assert_not_redirected(l, &listener, sa("192.168.77.1:443"));
    assert_not_redirected(r, &listener, sa("203.0.113.9:443"));

    // kill -9, then a restart with a narrower configuration: the script replaces the
    // leftover table in one transaction.
    std::mem::forget(redirect);
    let mut narrow = NetConfig::in_netns(r);
    narrow
        .redirect_tcp(TUN, PORT, &nets(&["192.0.2.0/24"]), &[443, 8443])
        .unwrap();
    let listed = exec(r, &["nft", "list", "table", "inet", &table]);
    assert_eq!(listed.matches("redirect to").count(), 2, "{listed}");
    assert_redirected(r, &listener, sa("192.0.2.10:8443"), loopback4);
    assert_redirected(l, &listener, sa("192.0.2.10:443"), vr4);
    assert_not_redirected(r, &listener, sa("192.0.2.10:80"));
    assert_not_redirected(l, &listener, sa("192.0.2.10:80"));
    assert_not_redirected(l, &listener, sa("198.18.0.1:443"));
    assert_not_redirected(l, &listener, sa("[2001:db8:2::9]:443"));

    // Undo removes the table: nothing is redirected any more.
    narrow.undo();
    let tables = exec(r, &["nft", "list", "tables"]);
    assert!(!tables.contains(&table), "{tables}");
    assert_not_redirected(r, &listener, sa("192.0.2.11:443"));
    assert_not_redirected(l, &listener, sa("192.0.2.11:443"));
    routing.undo();
    drop(listener);
    drop(namespaces);
    let left = ip(&["netns", "list"]);
    assert!(!left.contains(&router) && !left.contains(&lan), "{left}");
}
