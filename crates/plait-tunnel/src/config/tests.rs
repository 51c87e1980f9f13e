//! The configuration's checks, one by one, against the reference docs/tunnel-config.md
//! and the examples in docs/examples/.

use plait_proto::reorder::ReorderKind;
use plait_proto::sched::SchedulerKind;
use std::time::Duration;

use super::error::line_column;
use super::*;

const CLIENT_EXAMPLE: &str = include_str!("../../../../docs/examples/client.toml");
const SERVER_EXAMPLE: &str = include_str!("../../../../docs/examples/server.toml");

// Key pairs for the tests (not the examples' keys).
const SK: &str = "WKJKq/lEM1eBNi0Mt8UFDwXVJu6FR42nbNRdUSkmkVU=";
const CK: &str = "sLfU7wjG0ZTBrCAFEKLEXMUJKwxexfkXJhbgQIhuNmc=";

fn public(private: &str) -> String {
    Key::from_base64(private).unwrap().public().to_base64()
}

fn min_client() -> String {
    format!(
        r#"private_key = "{CK}"
server_public_key = "{sp}"

[tun]
addresses = ["10.77.0.2/24"]

[[path]]
name = "a"
server = "198.51.100.1:7744"
"#,
        sp = public(SK)
    )
}

fn min_server() -> String {
    format!(
        r#"private_key = "{SK}"

[tun]
addresses = ["10.77.0.1/24"]

[[client]]
name = "a"
public_key = "{cp}"
allowed_ips = ["10.77.0.2/32"]
"#,
        cp = public(CK)
    )
}

fn origin() -> &'static Path {
    Path::new("/etc/plait/test.toml")
}

/// 1-based line of the first occurrence of `needle`.
fn line_of(text: &str, needle: &str) -> usize {
    let at = text
        .find(needle)
        .unwrap_or_else(|| panic!("`{needle}` not in\n{text}"));
    text[..at].matches('\n').count() + 1
}

fn replaced(text: &str, from: &str, to: &str) -> String {
    assert!(text.contains(from), "`{from}` not in\n{text}");
    text.replacen(from, to, 1)
}

#[track_caller]
fn client_err(text: &str) -> (String, Option<usize>, String) {
    match parse_client(text, origin()) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => {
            let shown = e.to_string();
            match e {
                ConfigError::Invalid {
                    field,
                    line,
                    message,
                    ..
                } => (field, line, format!("{message} [{shown}]")),
                ConfigError::Io { .. } => panic!("io error {shown}"),
            }
        }
    }
}

#[track_caller]
fn server_err(text: &str) -> (String, Option<usize>, String) {
    match parse_server(text, origin()) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => {
            let shown = e.to_string();
            match e {
                ConfigError::Invalid {
                    field,
                    line,
                    message,
                    ..
                } => (field, line, format!("{message} [{shown}]")),
                ConfigError::Io { .. } => panic!("io error {shown}"),
            }
        }
    }
}

/// Asserts the client config `text` fails on `field` at the line holding `needle`.
#[track_caller]
fn client_fails(text: &str, field: &str, needle: &str) -> String {
    let (f, line, message) = client_err(text);
    assert_eq!(f, field, "{message}");
    assert_eq!(line, Some(line_of(text, needle)), "{message}");
    message
}

#[track_caller]
fn server_fails(text: &str, field: &str, needle: &str) -> String {
    let (f, line, message) = server_err(text);
    assert_eq!(f, field, "{message}");
    assert_eq!(line, Some(line_of(text, needle)), "{message}");
    message
}

/// Replaces `from` by `to` in the minimal client and asserts it fails on `field` at
/// the line of `to`'s first line.
#[track_caller]
fn client_edit_fails(from: &str, to: &str, field: &str) -> String {
    let text = replaced(&min_client(), from, to);
    client_fails(&text, field, first_value_line(to))
}

/// The first line of `to` that is not a table header.
fn first_value_line(to: &str) -> &str {
    to.lines().find(|l| !l.starts_with('[')).unwrap()
}

#[track_caller]
fn server_edit_fails(from: &str, to: &str, field: &str) -> String {
    let text = replaced(&min_server(), from, to);
    server_fails(&text, field, first_value_line(to))
}

#[track_caller]
fn client_ok(text: &str) -> ClientConfig {
    parse_client(text, origin()).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

#[track_caller]
fn server_ok(text: &str) -> ServerConfig {
    parse_server(text, origin()).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

// --- examples ---------------------------------------------------------------------

#[test]
fn client_example_parses() {
    let c = client_ok(CLIENT_EXAMPLE);
    assert_eq!(c.paths.len(), 2);
    assert_eq!(c.paths[0].name, "fibre");
    assert_eq!(c.paths[0].device.as_deref(), Some("eth0"));
    assert_eq!(
        c.paths[1].server,
        ServerAddr::Ip("198.51.100.1:7744".parse().unwrap())
    );
    assert_eq!(c.paths[1].bind, Some("0.0.0.0:0".parse().unwrap()));
    assert_eq!(c.paths[1].attributes.priority, 1);
    assert_eq!(
        c.paths[1].attributes.cost,
        crate::registration::CostClass::Metered
    );
    assert_eq!(c.tun.addresses.len(), 2);
    assert_eq!(c.engine, EngineSettings::default());
    assert_eq!(c.control, ControlConfig::client_default());
    assert!(c.route.is_empty());
    assert!(c.preshared_key.is_some());
}

#[test]
fn server_example_parses() {
    let s = server_ok(SERVER_EXAMPLE);
    assert_eq!(s.clients.len(), 2);
    assert_eq!(s.listen, vec!["0.0.0.0:7744".parse().unwrap()]);
    assert_eq!(s.path_mtu, DEFAULT_PATH_MTU);
    assert_eq!(s.engine, EngineSettings::default());
    assert_eq!(s.control, ControlConfig::server_default());
    assert_eq!(s.nat, None);
}

/// The integration tests run the two examples against each other.
#[test]
fn examples_keys_correspond() {
    let c = client_ok(CLIENT_EXAMPLE);
    let s = server_ok(SERVER_EXAMPLE);
    assert_eq!(c.server_public_key, s.private_key.public());
    let entry = s
        .clients
        .iter()
        .find(|e| e.public_key == c.private_key.public())
        .expect("the server example lists the client example's key");
    assert_eq!(entry.preshared_key, c.preshared_key);
    for addr in &c.tun.addresses {
        assert!(
            entry
                .allowed_ips
                .iter()
                .any(|net| net.contains(&addr.addr())),
            "{addr} not in the server's allowed_ips for the client"
        );
    }
    for addr in &s.tun.addresses {
        assert!(
            c.tun.addresses.iter().any(|net| net.contains(&addr.addr())),
            "server tunnel address {addr} is not on the client's tunnel subnet"
        );
    }
}

// --- defaults ---------------------------------------------------------------------

#[test]
fn minimal_client_gets_defaults() {
    let c = client_ok(&min_client());
    assert_eq!(c.private_key, Key::from_base64(CK).unwrap());
    assert_eq!(c.preshared_key, None);
    assert_eq!(c.route, Vec::<IpNet>::new());
    assert_eq!(c.tun.name, "plait0");
    assert_eq!(c.tun.mtu, None);
    assert_eq!(
        c.tun.addresses,
        vec!["10.77.0.2/24".parse::<IpNet>().unwrap()]
    );
    assert_eq!(c.engine.scheduler, SchedulerKind::Plait);
    assert_eq!(c.engine.reorder, ReorderKind::Bmp);
    assert_eq!(c.engine.max_hold, Duration::from_millis(1000));
    assert_eq!(
        c.control.status_socket,
        PathBuf::from("/run/plait/client.sock")
    );
    assert_eq!(c.control.metrics, None);
    assert_eq!(
        c.paths,
        vec![PathConfig {
            name: "a".into(),
            server: ServerAddr::Ip("198.51.100.1:7744".parse().unwrap()),
            bind: None,
            device: None,
            devices: None,
            mtu: 1500,
            rate_mbit: None,
            backup: false,
            attributes: Default::default(),
            budget: None,
        }]
    );
    assert_eq!(c.state_dir, PathBuf::from("/var/lib/plait"));
    assert_eq!(c.link_signal_file, PathBuf::from("/proc/net/wireless"));
}

#[test]
fn minimal_server_gets_defaults() {
    let s = server_ok(&min_server());
    assert_eq!(s.listen, vec!["0.0.0.0:7744".parse().unwrap()]);
    assert_eq!(s.listen, vec![DEFAULT_LISTEN.parse().unwrap()]);
    assert_eq!(s.path_mtu, 1500);
    assert_eq!(s.nat, None);
    assert_eq!(s.tun.name, "plait0");
    assert_eq!(s.engine, EngineSettings::default());
    assert_eq!(
        s.control.status_socket,
        PathBuf::from("/run/plait/server.sock")
    );
    assert_eq!(s.clients.len(), 1);
    assert_eq!(s.clients[0].preshared_key, None);
}

#[test]
fn default_impls() {
    let tun = TunConfig::default();
    assert_eq!(tun.name, "plait0");
    assert!(tun.addresses.is_empty());
    assert_eq!(tun.mtu, None);
    let engine = EngineSettings::default();
    assert_eq!(engine.scheduler.name(), "plait");
    assert_eq!(engine.reorder.name(), "bmp");
    assert_eq!(engine.max_hold, Duration::from_millis(1000));
}

#[test]
fn full_client_values_are_read() {
    let text = format!(
        r#"{}route = ["0.0.0.0/0", "::/0", "192.168.7.9/24", "10.1.2.3"]
[tun]
name = "pt1"
addresses = ["fd77::2/64", "10.77.0.2/24"]
mtu = 1400
[engine]
scheduler = "min-rtt"
reorder = "none"
max_hold_ms = 250
[control]
status_socket = "run/c.sock"
metrics = "[::1]:9477"
[[path]]
name = "x_1.y-2"
server = "[2001:db8::1]"
bind = "2001:db8::10"
device = "wlan0"
mtu = 9000
rate_mbit = 5
backup = true
"#,
        &min_client()[..min_client().find("[tun]").unwrap()]
    );
    let c = client_ok(&text);
    assert_eq!(
        c.route,
        ["0.0.0.0/0", "::/0", "192.168.7.0/24", "10.1.2.3/32"]
            .map(|s| s.parse::<IpNet>().unwrap())
            .to_vec()
    );
    assert_eq!(c.tun.name, "pt1");
    assert_eq!(c.tun.mtu, Some(1400));
    assert_eq!(c.engine.scheduler, SchedulerKind::MinRtt);
    assert_eq!(c.engine.reorder, ReorderKind::None);
    assert_eq!(c.engine.max_hold, Duration::from_millis(250));
    assert_eq!(
        c.control.status_socket,
        PathBuf::from("/etc/plait/run/c.sock")
    );
    assert_eq!(c.control.metrics, Some("[::1]:9477".parse().unwrap()));
    let p = &c.paths[0];
    assert_eq!(p.name, "x_1.y-2");
    assert_eq!(
        p.server,
        ServerAddr::Ip("[2001:db8::1]:7744".parse().unwrap())
    );
    assert_eq!(p.bind, Some("[2001:db8::10]:0".parse().unwrap()));
    assert_eq!(p.device.as_deref(), Some("wlan0"));
    assert_eq!(p.mtu, 9000);
    assert_eq!(p.rate_mbit, Some(5.0));
    assert!(p.backup);
}

#[test]
fn every_scheduler_and_reorder_name_is_accepted() {
    for kind in SchedulerKind::ALL {
        let text = format!(
            "{}[engine]\nscheduler = \"{}\"\n",
            min_client(),
            kind.name()
        );
        assert_eq!(client_ok(&text).engine.scheduler, kind);
    }
    for kind in ReorderKind::ALL {
        let text = format!("{}[engine]\nreorder = \"{}\"\n", min_client(), kind.name());
        assert_eq!(client_ok(&text).engine.reorder, kind);
    }
    for kind in SchedulerKind::ALL {
        let text = format!(
            "{}[engine]\nstream_scheduler = \"{}\"\n",
            min_client(),
            kind.name()
        );
        assert_eq!(client_ok(&text).engine.stream_scheduler, kind);
    }
    for kind in plait_proto::cc::CongestionKind::ALL {
        let text = format!(
            "{}[engine]\ncongestion = \"{}\"\n",
            min_client(),
            kind.name()
        );
        assert_eq!(client_ok(&text).engine.congestion, *kind);
    }
    assert!(
        !client_ok(&min_client()).engine.packet_pacing,
        "off by default"
    );
    let text = format!("{}[engine]\npacket_pacing = true\n", min_client());
    assert!(client_ok(&text).engine.packet_pacing);
    let (m, _, _) = client_err(&format!("{}[engine]\npacket_pacing = 1\n", min_client()));
    assert!(m.contains("packet_pacing") || m.contains("bool"), "{m}");
    assert!(!client_ok(&min_client()).engine.handover, "off by default");
    let text = format!("{}[engine]\nhandover = true\n", min_client());
    assert!(client_ok(&text).engine.handover);
    let (m, _, _) = client_err(&format!("{}[engine]\nhandover = \"yes\"\n", min_client()));
    assert!(m.contains("handover") || m.contains("bool"), "{m}");
    assert_eq!(
        client_ok(&min_client()).engine.unordered_below_bps,
        256_000,
        "on by default, at 256 kbit/s"
    );
    let text = format!("{}[engine]\nunordered_below_kbps = 0\n", min_client());
    assert_eq!(
        client_ok(&text).engine.unordered_below_bps,
        0,
        "0 turns it off"
    );
    let text = format!("{}[engine]\nunordered_below_kbps = 256\n", min_client());
    assert_eq!(client_ok(&text).engine.unordered_below_bps, 256_000);
    for bad in ["-1", "1000001", "\"fast\""] {
        let text = format!("{}[engine]\nunordered_below_kbps = {bad}\n", min_client());
        let (m, _, _) = client_err(&text);
        assert!(
            m.contains("unordered_below_kbps") || m.contains("0 to"),
            "{bad}: {m}"
        );
    }
    use plait_proto::fec::FecPolicy;
    assert_eq!(
        client_ok(&min_client()).engine.fec,
        FecPolicy::All,
        "all by default"
    );
    for (name, policy) in [
        ("sparse", FecPolicy::Sparse),
        ("all", FecPolicy::All),
        ("off", FecPolicy::Off),
    ] {
        let text = format!("{}[engine]\nfec = \"{name}\"\n", min_client());
        assert_eq!(client_ok(&text).engine.fec, policy);
    }
    for bad in ["\"some\"", "1", "true"] {
        let (m, _, _) = client_err(&format!("{}[engine]\nfec = {bad}\n", min_client()));
        assert!(
            m.contains("fec") || m.contains("FEC") || m.contains("string"),
            "{bad}: {m}"
        );
    }
}

// --- keys -------------------------------------------------------------------------

#[test]
fn private_key_and_file_are_exclusive() {
    let text = format!("private_key_file = \"c.key\"\n{}", min_client());
    let m = client_fails(&text, "private_key_file", "private_key_file");
    assert!(m.contains("not both"), "{m}");
}

#[test]
fn private_key_is_required() {
    let text = replaced(&min_client(), &format!("private_key = \"{CK}\"\n"), "");
    let (field, line, m) = client_err(&text);
    assert_eq!((field.as_str(), line), ("private_key", None), "{m}");
    assert!(m.contains("private_key_file"), "{m}");
    assert!(m.starts_with("missing"), "{m}");
    // No position: "{file}: {field}: {message}".
    assert!(
        m.contains("[/etc/plait/test.toml: private_key: missing"),
        "{m}"
    );
}

#[test]
fn bad_private_key_names_the_field() {
    let m = client_edit_fails(
        &format!("private_key = \"{CK}\""),
        "private_key = \"AAAA\"",
        "private_key",
    );
    assert!(m.contains("got 3 bytes, need 32"), "{m}");
    let m = client_edit_fails(
        &format!("private_key = \"{CK}\""),
        "private_key = \"$$$\"",
        "private_key",
    );
    assert!(m.contains("base64"), "{m}");
}

#[test]
fn server_public_key_is_checked() {
    let m = client_edit_fails(
        "server_public_key = ",
        "server_public_key = \"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\"\n#",
        "server_public_key",
    );
    assert!(m.contains("all-zero"), "{m}");
    let own = format!("server_public_key = \"{}\"\n", public(CK));
    let text = replaced(
        &min_client(),
        &format!("server_public_key = \"{}\"\n", public(SK)),
        &own,
    );
    client_fails(&text, "server_public_key", "server_public_key");
    let text = replaced(
        &min_client(),
        &format!("server_public_key = \"{}\"\n", public(SK)),
        "",
    );
    let (field, line, _) = client_err(&text);
    assert_eq!((field.as_str(), line), ("server_public_key", None));
}

#[test]
fn preshared_key_is_checked() {
    let text = format!("preshared_key = \"short\"\n{}", min_client());
    client_fails(&text, "preshared_key", "preshared_key");
    let psk = Key::generate().unwrap().to_base64();
    let text = format!(
        "preshared_key = \"{psk}\"\npreshared_key_file = \"p.key\"\n{}",
        min_client()
    );
    client_fails(&text, "preshared_key_file", "preshared_key_file");
    let text = format!("preshared_key = \"{psk}\"\n{}", min_client());
    assert_eq!(
        client_ok(&text).preshared_key,
        Some(Key::from_base64(&psk).unwrap())
    );
}

#[test]
fn key_files_are_relative_to_the_config_dir() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("keys")).unwrap();
    let psk = Key::generate().unwrap();
    std::fs::write(dir.path().join("keys/client.key"), format!("{CK}\n")).unwrap();
    std::fs::write(dir.path().join("keys/psk"), psk.to_base64()).unwrap();
    let text = replaced(
        &min_client(),
        &format!("private_key = \"{CK}\""),
        "private_key_file = \"keys/client.key\"\npreshared_key_file = \"keys/psk\"",
    );
    let path = dir.path().join("client.toml");
    std::fs::write(&path, &text).unwrap();
    let c = load_client(&path).unwrap();
    assert_eq!(c.private_key, Key::from_base64(CK).unwrap());
    assert_eq!(c.preshared_key, Some(psk.clone()));

    // An absolute name is used as is.
    let abs = dir.path().join("keys/client.key");
    let text2 = replaced(
        &text,
        "\"keys/client.key\"",
        &format!("\"{}\"", abs.display()),
    );
    let c = parse_client(&text2, Path::new("/nonexistent/client.toml")).unwrap_err();
    // The psk is still relative (to /nonexistent), so it fails, naming its field.
    assert_eq!(c.field(), Some("preshared_key_file"));

    // Server: the same for private_key_file and a client's preshared_key_file.
    std::fs::write(dir.path().join("keys/server.key"), SK).unwrap();
    let text = replaced(
        &min_server(),
        &format!("private_key = \"{SK}\""),
        "private_key_file = \"keys/server.key\"",
    );
    let text = replaced(
        &text,
        "allowed_ips",
        "preshared_key_file = \"keys/psk\"\nallowed_ips",
    );
    let path = dir.path().join("server.toml");
    std::fs::write(&path, &text).unwrap();
    let s = load_server(&path).unwrap();
    assert_eq!(s.private_key, Key::from_base64(SK).unwrap());
    assert_eq!(s.clients[0].preshared_key, Some(psk));

    // A missing key file: the field, its line, and the file's full name.
    let text = replaced(&text, "keys/server.key", "keys/nope.key");
    let e = parse_server(&text, &path).unwrap_err();
    assert_eq!(e.field(), Some("private_key_file"));
    assert_eq!(e.line(), Some(1));
    let shown = e.to_string();
    assert!(
        shown.contains(&dir.path().join("keys/nope.key").display().to_string()),
        "{shown}"
    );
    // A key file holding garbage.
    std::fs::write(dir.path().join("keys/bad.key"), "hello\n").unwrap();
    let text = replaced(&text, "keys/nope.key", "keys/bad.key");
    let e = parse_server(&text, &path).unwrap_err();
    assert_eq!(e.field(), Some("private_key_file"));
    assert!(e.to_string().contains("bad.key"), "{e}");
}

// --- paths ------------------------------------------------------------------------

fn path_table(i: usize) -> String {
    format!(
        "[[path]]\nname = \"p{i}\"\nserver = \"198.51.100.1:{}\"\n",
        7000 + i
    )
}

#[test]
fn paths_are_required() {
    let text = &min_client()[..min_client().find("[[path]]").unwrap()];
    let (field, line, _) = client_err(text);
    assert_eq!((field.as_str(), line), ("path", None));
    let text = format!("path = []\n{text}");
    client_fails(&text, "path", "path = []");
}

#[test]
fn at_most_sixteen_paths() {
    let mut text = min_client();
    for i in 1..16 {
        text.push_str(&path_table(i));
    }
    assert_eq!(client_ok(&text).paths.len(), 16);
    text.push_str("# the 17th\n");
    text.push_str(&path_table(16));
    let (field, line, m) = client_err(&text);
    assert_eq!(field, "path[16]");
    assert_eq!(line, Some(line_of(&text, "# the 17th") + 1), "{m}");
    assert!(m.contains("at most 16"), "{m}");
}

#[test]
fn path_names_are_unique() {
    let text = format!(
        "{}[[path]]\nname = \"a\"\nserver = \"198.51.100.2\"\n",
        min_client()
    );
    let (field, line, m) = client_err(&text);
    assert_eq!(field, "path[1].name");
    assert_eq!(line, Some(text.lines().count() - 1), "{m}");
    assert!(m.contains("path[0]"), "{m}");
}

#[test]
fn path_names_are_checked() {
    for bad in ["", "has space", "é", &"x".repeat(33)] {
        client_edit_fails("name = \"a\"", &format!("name = \"{bad}\""), "path[0].name");
    }
    let text = format!(
        "{}name = \"{}\"\n",
        &min_client()[..min_client().find("name").unwrap()],
        "x".repeat(32)
    );
    let text = format!("{text}server = \"198.51.100.1\"\n");
    client_ok(&text);
    // Missing: reported at the [[path]] header.
    let text = replaced(&min_client(), "name = \"a\"\n", "");
    client_fails(&text, "path[0].name", "[[path]]");
}

#[test]
fn path_server_is_checked() {
    let c = client_ok(&replaced(
        &min_client(),
        "198.51.100.1:7744",
        "198.51.100.1",
    ));
    assert_eq!(c.paths[0].server.port(), DEFAULT_PORT);
    let c = client_ok(&replaced(&min_client(), "198.51.100.1:7744", "2001:db8::1"));
    assert_eq!(
        c.paths[0].server,
        ServerAddr::Ip("[2001:db8::1]:7744".parse().unwrap())
    );
    for bad in ["198.51.100.1:0", "198.51.100.1:99999", "0.0.0.0:7744", ""] {
        let m = client_edit_fails(
            "server = \"198.51.100.1:7744\"",
            &format!("server = \"{bad}\""),
            "path[0].server",
        );
        assert!(!m.is_empty());
    }
    let text = replaced(&min_client(), "server = \"198.51.100.1:7744\"\n", "");
    client_fails(&text, "path[0].server", "[[path]]");
}

#[test]
fn path_server_may_be_a_dns_name() {
    let name = |host: &str, port: u16| ServerAddr::Name {
        host: host.into(),
        port,
    };
    for (text, want) in [
        ("vpn.example.net:7744", name("vpn.example.net", 7744)),
        ("vpn.example.net", name("vpn.example.net", DEFAULT_PORT)),
        ("VPN.Example.NET.:443", name("VPN.Example.NET", 443)),
        ("localhost", name("localhost", DEFAULT_PORT)),
        ("xn--bcher-kva.example:1", name("xn--bcher-kva.example", 1)),
        ("a1-b2.c3", name("a1-b2.c3", DEFAULT_PORT)),
    ] {
        let c = client_ok(&replaced(&min_client(), "198.51.100.1:7744", text));
        assert_eq!(c.paths[0].server, want, "{text}");
        assert_eq!(c.paths[0].server.port(), want.port());
    }
    assert_eq!(
        name("vpn.example.net", 7744).to_string(),
        "vpn.example.net:7744"
    );
    let long_label = format!("{}.example", "a".repeat(64));
    let long_name = format!("{}.example", vec!["a".repeat(63); 4].join("."));
    for (bad, says) in [
        ("vpn.example.net:0", "must not be 0"),
        ("vpn.example.net:99999", "is not a port"),
        ("vpn.example.net:", "is not a port"),
        ("vpn..example.net", "1 to 63 bytes"),
        (".example.net", "1 to 63 bytes"),
        ("-vpn.example.net", "not first or last"),
        ("vpn-.example.net", "not first or last"),
        ("vpn_1.example.net", "A-Z a-z 0-9"),
        ("vpn example.net", "A-Z a-z 0-9"),
        ("vpn.exämple.net", "A-Z a-z 0-9"),
        ("198.51.100", "mistyped IP address"),
        ("198.51.100.300:7744", "mistyped IP address"),
        ("2001:db8::1::7744", "is not an IP address or a DNS name"),
        (
            "[vpn.example.net]:7744",
            "is not an IP address or a DNS name",
        ),
        (long_label.as_str(), "1 to 63 bytes"),
        (long_name.as_str(), "at most 253"),
        (".", "the name is empty"),
    ] {
        let m = client_edit_fails(
            "server = \"198.51.100.1:7744\"",
            &format!("server = \"{bad}\""),
            "path[0].server",
        );
        assert!(m.contains(says), "{bad}: {m}");
    }
    // A name has no family yet: any `bind` is accepted (the address of its family is
    // chosen when the name is resolved).
    let text = format!(
        "{}bind = \"[2001:db8::10]:5000\"\n",
        replaced(&min_client(), "198.51.100.1:7744", "vpn.example.net")
    );
    client_ok(&text);
}

#[test]
fn path_devices_is_a_pattern_or_default_route() {
    use crate::mobility::DevicePattern;
    for (text, want) in [
        ("wlan*", DevicePattern::Glob("wlan*".into())),
        ("wwan?", DevicePattern::Glob("wwan?".into())),
        ("eth0", DevicePattern::Glob("eth0".into())),
        ("*", DevicePattern::Glob("*".into())),
        ("default-route", DevicePattern::DefaultRoute),
    ] {
        let c = client_ok(&format!("{}devices = \"{text}\"\n", min_client()));
        assert_eq!(c.paths[0].devices, Some(want), "{text}");
        assert_eq!(c.paths[0].device, None);
    }
    for bad in ["", "wlan 0", "wlan/*", "wlan:*", &"w*".repeat(16)] {
        let text = format!("{}devices = \"{bad}\"\n", min_client());
        let m = client_fails(&text, "path[0].devices", "devices");
        assert!(m.contains("pattern"), "{bad}: {m}");
    }
    let text = format!("{}device = \"eth0\"\ndevices = \"wlan*\"\n", min_client());
    let m = client_fails(&text, "path[0].device", "device =");
    assert!(m.contains("not both"), "{m}");
    let text = format!(
        "{}bind = \"0.0.0.0:5000\"\ndevices = \"wlan*\"\n",
        min_client()
    );
    let m = client_fails(&text, "path[0].bind", "bind");
    assert!(m.contains("cannot be used with `devices`"), "{m}");
    // Pattern paths count among the 16 tables, and a client may have only pattern paths.
    let text = format!("{}devices = \"wwan*\"\nbackup = true\n", min_client());
    let c = client_ok(&text);
    assert!(c.paths[0].backup);
}

/// docs/tunnel-config.md#path: `link`, `cost` and `priority`, registered with the server
/// (docs/protocol.md#registration).
#[test]
fn path_attributes_have_defaults_and_clear_errors() {
    use crate::registration::{CostClass, LinkKind, PathAttributes};
    assert_eq!(
        client_ok(&min_client()).paths[0].attributes,
        PathAttributes::default()
    );
    let text = format!(
        "{}link = \"cellular\"\ncost = \"metered\"\npriority = 7\n",
        min_client()
    );
    let a = client_ok(&text).paths[0].attributes;
    assert_eq!(
        a,
        PathAttributes {
            link: LinkKind::Cellular,
            cost: CostClass::Metered,
            priority: 7
        }
    );
    let text = format!("{}link = \"lte\"\n", min_client());
    let m = client_fails(&text, "path[0].link", "link");
    assert!(
        m.contains("one of: unspecified, wired, wifi, cellular, satellite"),
        "{m}"
    );
    let text = format!("{}cost = \"cheap\"\n", min_client());
    let m = client_fails(&text, "path[0].cost", "cost");
    assert!(m.contains("one of: unmetered, metered"), "{m}");
    for bad in ["8", "-1", "300"] {
        let text = format!("{}priority = {bad}\n", min_client());
        let m = client_fails(&text, "path[0].priority", "priority");
        assert!(m.contains("between 0 and 7"), "{bad}: {m}");
    }
    let text = format!("{}priority = \"high\"\n", min_client());
    client_fails(&text, "path[0].priority", "priority");
}

/// docs/tunnel-config.md#budget: `budget` and `budget_reset_day` of a metered path, and
/// `state_dir`.
#[test]
fn a_metered_path_takes_a_budget_and_nothing_else_does() {
    use crate::budget::BudgetConfig;
    let metered = format!("{}cost = \"metered\"\n", min_client());
    assert_eq!(client_ok(&metered).paths[0].budget, None);
    for (text, bytes) in [
        ("20 GB", 20_000_000_000),
        ("500 MiB", 500 << 20),
        ("1.5TB", 1_500_000_000_000),
        ("2 gib", 2 << 30),
        ("1000", 1000),
        (" 7 B ", 7),
    ] {
        let t = format!("{metered}budget = \"{text}\"\n");
        assert_eq!(
            client_ok(&t).paths[0].budget,
            Some(BudgetConfig {
                bytes,
                reset_day: 1
            }),
            "{text}"
        );
    }
    let t = format!("{metered}budget = \"1 GB\"\nbudget_reset_day = 28\n");
    assert_eq!(client_ok(&t).paths[0].budget.unwrap().reset_day, 28);
    // Malformed, zero and too large: one clear line at the value.
    for (bad, says) in [
        ("20 GBs", "unknown unit `GBs`"),
        ("twenty GB", "is not a size"),
        ("GB", "is not a size"),
        ("1.2.3 GB", "is not a size"),
        ("-5 GB", "is not a size"),
        ("0 GB", "above 0"),
        ("0.1 B", "above 0"),
        ("99999999 TB", "too large"),
        ("", "is not a size"),
    ] {
        let t = format!("{metered}budget = \"{bad}\"\n");
        let m = client_fails(&t, "path[0].budget", "budget");
        assert!(m.contains(says), "{bad}: {m}");
        assert!(!m.contains('\n'), "one line: {m}");
    }
    let t = format!("{metered}budget = 20\n");
    client_fails(&t, "path[0].budget", "budget");
    for bad in ["0", "29", "31", "-1"] {
        let t = format!("{metered}budget = \"1 GB\"\nbudget_reset_day = {bad}\n");
        let m = client_fails(&t, "path[0].budget_reset_day", "budget_reset_day");
        assert!(m.contains("between 1 and 28"), "{bad}: {m}");
    }
    // A budget without `cost = "metered"`, and a reset day without a budget.
    for cost in ["", "cost = \"unmetered\"\n"] {
        let t = format!("{}{cost}budget = \"20 GB\"\n", min_client());
        let m = client_fails(&t, "path[0].budget", "budget");
        assert!(m.contains("only a metered path has a budget"), "{m}");
    }
    let t = format!("{metered}budget_reset_day = 5\n");
    let m = client_fails(&t, "path[0].budget_reset_day", "budget_reset_day");
    assert!(m.contains("without a `budget`"), "{m}");
    // `state_dir`, relative to the config file's directory.
    let t = format!("state_dir = \"state\"\n{}", min_client());
    assert_eq!(
        client_ok(&t).state_dir,
        origin().parent().unwrap().join("state")
    );
    // `link_signal_file`, the same way; an empty name is refused.
    let t = format!("link_signal_file = \"signal\"\n{}", min_client());
    assert_eq!(
        client_ok(&t).link_signal_file,
        origin().parent().unwrap().join("signal")
    );
    let t = format!("link_signal_file = \"\"\n{}", min_client());
    let m = client_fails(&t, "link_signal_file", "link_signal_file");
    assert!(m.contains("must not be empty"), "{m}");
}

#[test]
fn path_bind_family_must_match() {
    let text = format!("{}bind = \"192.0.2.10\"\n", min_client());
    assert_eq!(
        client_ok(&text).paths[0].bind,
        Some("192.0.2.10:0".parse().unwrap())
    );
    let text = format!("{}bind = \"[2001:db8::10]:5000\"\n", min_client());
    let m = client_fails(&text, "path[0].bind", "bind");
    assert!(m.contains("same family"), "{m}");
    let text = format!("{}bind = \"eth0\"\n", min_client());
    client_fails(&text, "path[0].bind", "bind");
}

#[test]
fn path_device_is_checked() {
    for bad in ["", "a-very-long-ifname", "eth/0", "eth 0"] {
        let text = format!("{}device = \"{bad}\"\n", min_client());
        client_fails(&text, "path[0].device", "device");
    }
    let text = format!("{}device = \"{}\"\n", min_client(), "e".repeat(15));
    client_ok(&text);
}

#[test]
fn path_mtu_range() {
    for bad in ["1279", "65536", "0", "-1"] {
        let text = format!("{}mtu = {bad}\n", min_client());
        let m = client_fails(&text, "path[0].mtu", "mtu");
        assert!(m.contains("between 1280 and 65535"), "{m}");
    }
    for good in [1280, 65535] {
        let text = format!("{}mtu = {good}\n", min_client());
        assert_eq!(client_ok(&text).paths[0].mtu, good);
    }
}

#[test]
fn path_rate_range() {
    for bad in ["0", "0.0", "-5.0", "100000.5", "nan", "inf"] {
        let text = format!("{}rate_mbit = {bad}\n", min_client());
        client_fails(&text, "path[0].rate_mbit", "rate_mbit");
    }
    let text = format!("{}rate_mbit = 100000\n", min_client());
    assert_eq!(client_ok(&text).paths[0].rate_mbit, Some(100_000.0));
}

// --- tun --------------------------------------------------------------------------

#[test]
fn tun_is_required() {
    let text = replaced(&min_client(), "[tun]\naddresses = [\"10.77.0.2/24\"]\n", "");
    let (field, line, _) = client_err(&text);
    assert_eq!((field.as_str(), line), ("tun", None));
}

#[test]
fn tun_name_is_checked() {
    for bad in ["", "sixteen-bytes-xx", "a/b", "a b", "a\tb", "a:b", ".."] {
        client_edit_fails("[tun]\n", &format!("[tun]\nname = \"{bad}\"\n"), "tun.name");
    }
}

#[test]
fn tun_addresses_are_checked() {
    let line = "addresses = [\"10.77.0.2/24\"]";
    // Missing: at the [tun] header.
    let text = replaced(&min_client(), &format!("{line}\n"), "");
    client_fails(&text, "tun.addresses", "[tun]");
    client_edit_fails(line, "addresses = []", "tun.addresses");
    client_edit_fails(
        line,
        "addresses = [\"10.77.0.2/24\", \"fd77::2/64\", \"10.9.0.1/24\"]",
        "tun.addresses[2]",
    );
    let m = client_edit_fails(
        line,
        "addresses = [\"10.77.0.2/24\", \"10.9.0.1/24\"]",
        "tun.addresses[1]",
    );
    assert!(m.contains("IPv4"), "{m}");
    client_edit_fails(
        line,
        "addresses = [\"fd77::2/64\", \"fd78::2/64\"]",
        "tun.addresses[1]",
    );
    let m = client_edit_fails(line, "addresses = [\"10.77.0.2\"]", "tun.addresses[0]");
    assert!(m.contains("prefix length"), "{m}");
    client_edit_fails(line, "addresses = [\"10.77.0.2/33\"]", "tun.addresses[0]");
    client_edit_fails(line, "addresses = [\"bogus\"]", "tun.addresses[0]");
    // Host bits are kept: this is the device's own address.
    let c = client_ok(&replaced(
        &min_client(),
        line,
        "addresses = [\"fd77::2/64\"]",
    ));
    assert_eq!(c.tun.addresses[0].to_string(), "fd77::2/64");
}

#[test]
fn tun_mtu_range() {
    for bad in ["575", "65536"] {
        client_edit_fails("[tun]\n", &format!("[tun]\nmtu = {bad}\n"), "tun.mtu");
    }
    // 1279 is fine for IPv4 only, not with an IPv6 address.
    let text = replaced(&min_client(), "[tun]\n", "[tun]\nmtu = 576\n");
    assert_eq!(client_ok(&text).tun.mtu, Some(576));
    let text = replaced(
        &min_client(),
        "[tun]\naddresses = [\"10.77.0.2/24\"]",
        "[tun]\nmtu = 1279\naddresses = [\"10.77.0.2/24\", \"fd77::2/64\"]",
    );
    let m = client_fails(&text, "tun.mtu", "mtu = 1279");
    assert!(m.contains("1280"), "{m}");
}

// --- engine, control, route -------------------------------------------------------

#[test]
fn engine_names_are_checked() {
    let m = client_edit_fails(
        "[tun]",
        "[engine]\nscheduler = \"fastest\"\n[tun]",
        "engine.scheduler",
    );
    for kind in SchedulerKind::ALL {
        assert!(m.contains(kind.name()), "{m}");
    }
    let m = client_edit_fails(
        "[tun]",
        "[engine]\nreorder = \"sort\"\n[tun]",
        "engine.reorder",
    );
    assert!(m.contains("none, bmp"), "{m}");
}

#[test]
fn engine_max_hold_range() {
    for bad in ["0", "10001", "-3"] {
        let text = format!("{}[engine]\nmax_hold_ms = {bad}\n", min_client());
        client_fails(&text, "engine.max_hold_ms", "max_hold_ms");
    }
    for good in [1u64, 10_000] {
        let text = format!("{}[engine]\nmax_hold_ms = {good}\n", min_client());
        assert_eq!(
            client_ok(&text).engine.max_hold,
            Duration::from_millis(good)
        );
    }
}

#[test]
fn control_is_checked() {
    for bad in ["127.0.0.1", "127.0.0.1:0", "localhost:9477"] {
        let text = format!("{}[control]\nmetrics = \"{bad}\"\n", min_client());
        client_fails(&text, "control.metrics", "metrics");
    }
    let text = format!("{}[control]\nstatus_socket = \"\"\n", min_client());
    client_fails(&text, "control.status_socket", "status_socket");
    let text = format!(
        "{}[control]\nstatus_socket = \"/{}\"\n",
        min_client(),
        "s".repeat(107)
    );
    client_fails(&text, "control.status_socket", "status_socket");
}

#[test]
fn route_prefixes_are_checked() {
    let text = format!(
        "route = [\"10.0.0.0/8\", \"10.0.0.0/99\"]\n{}",
        min_client()
    );
    let m = client_fails(&text, "route[1]", "route");
    assert!(m.contains("10.0.0.0/99"), "{m}");
    let text = format!("route = [\"example.com\"]\n{}", min_client());
    client_fails(&text, "route[0]", "route");
}

// --- server -----------------------------------------------------------------------

#[test]
fn server_listen_is_checked() {
    let text = format!("listen = []\n{}", min_server());
    server_fails(&text, "listen", "listen");
    let text = format!("listen = [\"0.0.0.0:7744\", \"0.0.0.0\"]\n{}", min_server());
    let m = server_fails(&text, "listen[1]", "listen");
    assert!(m.contains("twice"), "{m}");
    let text = format!("listen = [\"0.0.0.0:0\"]\n{}", min_server());
    server_fails(&text, "listen[0]", "listen");
    let text = format!("listen = [\"*:7744\"]\n{}", min_server());
    server_fails(&text, "listen[0]", "listen");
    let text = format!("listen = [\"192.0.2.1\", \"[::]:7745\"]\n{}", min_server());
    assert_eq!(
        server_ok(&text).listen,
        vec![
            "192.0.2.1:7744".parse().unwrap(),
            "[::]:7745".parse().unwrap()
        ]
    );
}

#[test]
fn server_path_mtu_range() {
    for bad in ["1279", "65536"] {
        let text = format!("path_mtu = {bad}\n{}", min_server());
        server_fails(&text, "path_mtu", "path_mtu");
    }
    let text = format!("path_mtu = 9000\n{}", min_server());
    assert_eq!(server_ok(&text).path_mtu, 9000);
}

#[test]
fn server_nat_is_checked() {
    let text = format!("nat = \"eth 0\"\n{}", min_server());
    server_fails(&text, "nat", "nat");
    let text = format!("nat = \"eth0\"\n{}", min_server());
    assert_eq!(server_ok(&text).nat.as_deref(), Some("eth0"));
}

#[test]
fn server_private_key_rules() {
    let text = replaced(&min_server(), &format!("private_key = \"{SK}\"\n"), "");
    let (field, line, _) = server_err(&text);
    assert_eq!((field.as_str(), line), ("private_key", None));
    let text = format!("private_key_file = \"s.key\"\n{}", min_server());
    server_fails(&text, "private_key_file", "private_key_file");
}

fn client_table(name: &str, key: &str, ips: &str) -> String {
    format!("[[client]]\nname = \"{name}\"\npublic_key = \"{key}\"\nallowed_ips = [{ips}]\n")
}

#[test]
fn server_needs_a_client() {
    let text = &min_server()[..min_server().find("[[client]]").unwrap()];
    let (field, line, _) = server_err(text);
    assert_eq!((field.as_str(), line), ("client", None));
    let text = format!("client = []\n{text}");
    server_fails(&text, "client", "client = []");
}

#[test]
fn client_names_are_unique_and_valid() {
    let other = Key::generate().unwrap().public().to_base64();
    let text = format!(
        "{}{}",
        min_server(),
        client_table("a", &other, "\"10.77.0.3/32\"")
    );
    let (field, line, m) = server_err(&text);
    assert_eq!(field, "client[1].name");
    assert_eq!(line, Some(text.lines().count() - 2), "{m}");
    server_edit_fails("name = \"a\"", "name = \"a b\"", "client[0].name");
    let text = replaced(&min_server(), "name = \"a\"\n", "");
    server_fails(&text, "client[0].name", "[[client]]");
}

#[test]
fn client_keys_are_unique_and_not_the_servers() {
    let text = format!(
        "{}{}",
        min_server(),
        client_table("b", &public(CK), "\"10.77.0.3/32\"")
    );
    let (field, line, m) = server_err(&text);
    assert_eq!(field, "client[1].public_key");
    assert_eq!(line, Some(text.lines().count() - 1), "{m}");
    assert!(m.contains("client[0]"), "{m}");

    let m = server_edit_fails(
        &format!("public_key = \"{}\"", public(CK)),
        &format!("public_key = \"{}\"", public(SK)),
        "client[0].public_key",
    );
    assert!(m.contains("server's own"), "{m}");
    server_edit_fails(
        &format!("public_key = \"{}\"", public(CK)),
        "public_key = \"nope\"",
        "client[0].public_key",
    );
    let text = replaced(
        &min_server(),
        &format!("public_key = \"{}\"\n", public(CK)),
        "",
    );
    server_fails(&text, "client[0].public_key", "[[client]]");
}

#[test]
fn client_psk_rules() {
    let psk = Key::generate().unwrap().to_base64();
    let text = replaced(
        &min_server(),
        "allowed_ips",
        &format!("preshared_key = \"{psk}\"\npreshared_key_file = \"x\"\nallowed_ips"),
    );
    server_fails(&text, "client[0].preshared_key_file", "preshared_key_file");
    let text = replaced(
        &min_server(),
        "allowed_ips",
        "preshared_key = \"zz\"\nallowed_ips",
    );
    server_fails(&text, "client[0].preshared_key", "preshared_key");
}

#[test]
fn allowed_ips_are_checked() {
    let line = "allowed_ips = [\"10.77.0.2/32\"]";
    let text = replaced(&min_server(), &format!("{line}\n"), "");
    server_fails(&text, "client[0].allowed_ips", "[[client]]");
    server_edit_fails(line, "allowed_ips = []", "client[0].allowed_ips");
    server_edit_fails(
        line,
        "allowed_ips = [\"10.77.0.2/32\", \"192.168.1.0/24\", \"192.168.1.0/33\"]",
        "client[0].allowed_ips[2]",
    );
    // Bare address = host; host bits cleared.
    let s = server_ok(&replaced(
        &min_server(),
        line,
        "allowed_ips = [\"10.77.0.2\", \"192.168.1.77/24\"]",
    ));
    assert_eq!(
        s.clients[0].allowed_ips,
        ["10.77.0.2/32", "192.168.1.0/24"]
            .map(|s| s.parse::<IpNet>().unwrap())
            .to_vec()
    );
}

#[test]
fn allowed_ips_must_not_overlap_between_clients() {
    let k1 = Key::generate().unwrap().public().to_base64();
    let k2 = Key::generate().unwrap().public().to_base64();
    // Same-client overlap is allowed; different families never overlap.
    let text = format!(
        "{}{}{}",
        min_server(),
        client_table(
            "b",
            &k1,
            "\"10.77.0.3/32\", \"10.77.0.3/32\", \"fd77::/64\""
        ),
        client_table("c", &k2, "\"fd78::/64\", \"10.77.0.4/32\""),
    );
    server_ok(&text);
    // c's 10.77.0.0/24 overlaps a's 10.77.0.2/32 (and b's), reported against a.
    let text = format!(
        "{}{}{}",
        min_server(),
        client_table("b", &k1, "\"10.77.0.3/32\""),
        client_table("c", &k2, "\"fd78::/64\", \"10.77.0.0/24\""),
    );
    let (field, line, m) = server_err(&text);
    assert_eq!(field, "client[2].allowed_ips[1]");
    assert_eq!(line, Some(text.lines().count()), "{m}");
    assert!(m.contains("`a` and `c`"), "{m}");
    assert!(m.contains("client[0].allowed_ips[0]"), "{m}");
}

// --- streams ----------------------------------------------------------------------

fn with_client_streams(body: &str) -> String {
    format!("{}[streams]\n{body}", min_client())
}

fn with_server_streams(body: &str) -> String {
    format!("{}[streams]\n{body}", min_server())
}

/// The client with `[streams]` `body` fails on `field` at the line holding `needle`.
#[track_caller]
fn client_streams_fail(body: &str, field: &str, needle: &str) -> String {
    client_fails(&with_client_streams(body), field, needle)
}

#[track_caller]
fn server_streams_fail(body: &str, field: &str, needle: &str) -> String {
    server_fails(&with_server_streams(body), field, needle)
}

fn nets(list: &[&str]) -> Vec<IpNet> {
    list.iter().map(|s| s.parse().unwrap()).collect()
}

#[test]
fn no_streams_table_is_packet_mode() {
    assert_eq!(client_ok(&min_client()).streams, None);
    assert_eq!(server_ok(&min_server()).streams, None);
    assert_eq!(client_ok(CLIENT_EXAMPLE).streams, None);
    assert_eq!(server_ok(SERVER_EXAMPLE).streams, None);
}

#[test]
fn empty_streams_table_gives_defaults() {
    let c = client_ok(&with_client_streams("")).streams.unwrap();
    assert_eq!(c, ClientStreams::default());
    assert_eq!(
        c,
        ClientStreams {
            transparent: true,
            transparent_port: 7745,
            socks5: None,
            socks5_auth: None,
            destinations: nets(&["0.0.0.0/0", "::/0"]),
            ports: vec![],
            idle_timeout: Duration::from_secs(3600),
            max_connections: 16384,
        }
    );
    assert_eq!(DEFAULT_TRANSPARENT_PORT, 7745);
    let s = server_ok(&with_server_streams("")).streams.unwrap();
    assert_eq!(s, ServerStreams::default());
    assert_eq!(
        s,
        ServerStreams {
            allow: nets(&["0.0.0.0/0", "::/0"]),
            deny: nets(&[
                "127.0.0.0/8",
                "::1/128",
                "0.0.0.0/8",
                "::/128",
                "169.254.0.0/16",
                "fe80::/10",
                "224.0.0.0/4",
                "ff00::/8",
            ]),
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(3600),
            max_streams_per_client: 16384,
            max_buffered_per_client: 64 << 20,
        }
    );
    // An inline table is the same table.
    let text = replaced(&min_client(), "[tun]", "streams = {}\n[tun]");
    assert_eq!(client_ok(&text).streams, Some(ClientStreams::default()));
}

#[test]
fn every_client_stream_option_is_read() {
    let c = client_ok(&with_client_streams(
        r#"transparent = false
transparent_port = 1
socks5 = "[::1]:1080"
socks5_username = "alice"
socks5_password = "pw"
destinations = ["10.1.2.3/8", "2001:db8::1", "192.0.2.0/24"]
ports = [443, 1, 65535]
idle_timeout_s = 604800
max_connections = 1
"#,
    ))
    .streams
    .unwrap();
    assert!(!c.transparent);
    assert_eq!(c.transparent_port, 1);
    assert_eq!(c.socks5, Some("[::1]:1080".parse().unwrap()));
    let (user, password) = c.socks5_auth.as_ref().unwrap();
    assert_eq!((user.as_str(), password.as_str()), ("alice", "pw"));
    // Host bits cleared; a bare address is a host.
    assert_eq!(
        c.destinations,
        nets(&["10.0.0.0/8", "2001:db8::1/128", "192.0.2.0/24"])
    );
    assert_eq!(c.ports, vec![443, 1, 65535]);
    assert_eq!(c.idle_timeout, Duration::from_secs(604_800));
    assert_eq!(c.max_connections, 1);
    // Lower and upper ends of the other ranges.
    let c = client_ok(&with_client_streams(
        "transparent_port = 65535\nidle_timeout_s = 1\nmax_connections = 16384\nports = []\n",
    ))
    .streams
    .unwrap();
    assert_eq!(c.transparent_port, 65535);
    assert_eq!(c.idle_timeout, Duration::from_secs(1));
    assert_eq!(c.max_connections, 16384);
    assert!(c.ports.is_empty());
}

#[test]
fn every_server_stream_option_is_read() {
    let s = server_ok(&with_server_streams(
        r#"allow = ["10.9.8.7/16", "2001:db8::/32"]
deny = []
connect_timeout_s = 300
idle_timeout_s = 1
max_streams_per_client = 1
max_buffered_mib_per_client = 1024
"#,
    ))
    .streams
    .unwrap();
    assert_eq!(s.allow, nets(&["10.9.0.0/16", "2001:db8::/32"]));
    assert!(s.deny.is_empty(), "[] denies nothing");
    assert_eq!(s.connect_timeout, Duration::from_secs(300));
    assert_eq!(s.idle_timeout, Duration::from_secs(1));
    assert_eq!(s.max_streams_per_client, 1);
    assert_eq!(s.max_buffered_per_client, 1024 << 20);
    let s = server_ok(&with_server_streams(
        "deny = [\"10.0.0.1\"]\nconnect_timeout_s = 1\nmax_streams_per_client = 16384\n\
         max_buffered_mib_per_client = 1\n",
    ))
    .streams
    .unwrap();
    // A given list replaces the default one.
    assert_eq!(s.deny, nets(&["10.0.0.1/32"]));
    assert_eq!(s.allow, ServerStreams::default().allow);
    assert_eq!(s.connect_timeout, Duration::from_secs(1));
    assert_eq!(s.max_streams_per_client, 16384);
    assert_eq!(s.max_buffered_per_client, 1 << 20);
}

#[test]
fn client_stream_numbers_are_checked() {
    for bad in ["0", "65536", "-1"] {
        let body = format!("transparent_port = {bad}\n");
        let m = client_streams_fail(&body, "streams.transparent_port", "transparent_port");
        assert!(m.contains("between 1 and 65535"), "{m}");
    }
    for bad in ["0", "604801", "-5"] {
        let body = format!("idle_timeout_s = {bad}\n");
        let m = client_streams_fail(&body, "streams.idle_timeout_s", "idle_timeout_s");
        assert!(m.contains("between 1 and 604800"), "{m}");
    }
    for bad in ["0", "16385"] {
        let body = format!("max_connections = {bad}\n");
        let m = client_streams_fail(&body, "streams.max_connections", "max_connections");
        assert!(m.contains("between 1 and 16384"), "{m}");
    }
}

#[test]
fn client_stream_lists_are_checked() {
    let m = client_streams_fail(
        "destinations = []\n",
        "streams.destinations",
        "destinations",
    );
    assert!(m.contains("at least one"), "{m}");
    let body = "destinations = [\"10.0.0.0/8\", \"example.com\"]\n";
    client_streams_fail(body, "streams.destinations[1]", "destinations");
    // Duplicates are found after host bits are cleared.
    let body =
        "# destinations\ndestinations = [\n  \"10.0.0.0/8\",\n  \"::/0\",\n  \"10.1.2.3/8\",\n]\n";
    let m = client_streams_fail(body, "streams.destinations[2]", "\"10.1.2.3/8\"");
    assert!(m.contains("listed twice (streams.destinations[0])"), "{m}");
    for (body, field) in [
        ("ports = [80, 0]", "streams.ports[1]"),
        ("ports = [80, 443, 65536]", "streams.ports[2]"),
        ("ports = [-1]", "streams.ports[0]"),
        ("ports = [80, \"443\"]", "streams.ports[1]"),
        ("ports = [80, 1.5]", "streams.ports[1]"),
        ("ports = 80", "streams.ports"),
    ] {
        client_streams_fail(&format!("{body}\n"), field, "ports");
    }
    let body = "ports = [\n  443,\n  80,\n  443,\n]\n";
    let m = client_streams_fail(body, "streams.ports[2]", "  443,\n]");
    assert!(m.contains("443 is listed twice (streams.ports[0])"), "{m}");
}

#[test]
fn socks5_address_is_checked() {
    for bad in ["127.0.0.1", "127.0.0.1:0", "[::1]:0", "localhost:1080", ""] {
        let body = format!("socks5 = \"{bad}\"\n");
        client_streams_fail(&body, "streams.socks5", "socks5");
    }
    // Not the transparent listener's port, whatever the address (it holds every address).
    for (body, needle) in [
        ("socks5 = \"127.0.0.1:7745\"\n", "socks5"),
        (
            "transparent_port = 1080\nsocks5 = \"[::1]:1080\"\n",
            "socks5 =",
        ),
        (
            "socks5 = \"0.0.0.0:1080\"\ntransparent_port = 1080\n",
            "socks5",
        ),
    ] {
        let m = client_streams_fail(body, "streams.socks5", needle);
        assert!(m.contains("`streams.transparent_port`"), "{m}");
        assert!(m.contains("`streams.socks5`"), "{m}");
    }
    // Without the transparent listener the port is free.
    let text = with_client_streams("transparent = false\nsocks5 = \"127.0.0.1:7745\"\n");
    let c = client_ok(&text).streams.unwrap();
    assert_eq!(c.socks5, Some("127.0.0.1:7745".parse().unwrap()));
    assert_eq!(c.socks5_auth, None);
}

#[test]
fn socks5_credentials_come_in_pairs_and_need_socks5() {
    let socks5 = "socks5 = \"127.0.0.1:1080\"\n";
    let body = format!("{socks5}socks5_username = \"alice\"\n");
    let m = client_streams_fail(&body, "streams.socks5_username", "socks5_username");
    assert!(m.contains("socks5_password_file"), "{m}");
    let body = format!("{socks5}socks5_password = \"pw\"\n");
    let m = client_streams_fail(&body, "streams.socks5_password", "socks5_password");
    assert!(m.contains("socks5_username"), "{m}");
    let body = format!("{socks5}socks5_password_file = \"pw.txt\"\n");
    client_streams_fail(
        &body,
        "streams.socks5_password_file",
        "socks5_password_file",
    );
    let body = format!(
        "{socks5}socks5_username = \"alice\"\nsocks5_password = \"pw\"\n\
         socks5_password_file = \"pw.txt\"\n"
    );
    let m = client_streams_fail(
        &body,
        "streams.socks5_password_file",
        "socks5_password_file",
    );
    assert!(m.contains("not both"), "{m}");
    let body = "socks5_username = \"alice\"\nsocks5_password = \"pw\"\n";
    let m = client_streams_fail(body, "streams.socks5_username", "socks5_username");
    assert!(m.contains("`streams.socks5`"), "{m}");
}

#[test]
fn socks5_credentials_are_1_to_255_bytes() {
    let socks5 = "socks5 = \"127.0.0.1:1080\"\n";
    let long = "u".repeat(256);
    for bad in ["", long.as_str()] {
        let body = format!("{socks5}socks5_username = \"{bad}\"\nsocks5_password = \"pw\"\n");
        let m = client_streams_fail(&body, "streams.socks5_username", "socks5_username");
        assert!(m.contains("1 to 255"), "{m}");
    }
    let long = "secret!".repeat(37);
    for bad in ["", long.as_str()] {
        let body = format!("{socks5}socks5_username = \"alice\"\nsocks5_password = \"{bad}\"\n");
        let m = client_streams_fail(&body, "streams.socks5_password", "socks5_password");
        assert!(m.contains("1 to 255"), "{m}");
        assert!(!m.contains("secret!"), "the password is shown: {m}");
    }
    let ok = "p".repeat(255);
    let body = format!("{socks5}socks5_username = \"{ok}\"\nsocks5_password = \"{ok}\"\n");
    let c = client_ok(&with_client_streams(&body)).streams.unwrap();
    assert_eq!(c.socks5_auth.unwrap().1.len(), 255);
}

#[test]
fn socks5_password_file_is_read_relative_to_the_config() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("secrets")).unwrap();
    let path = dir.path().join("client.toml");
    let body = "socks5 = \"127.0.0.1:1080\"\nsocks5_username = \"alice\"\n\
                socks5_password_file = \"secrets/socks5\"\n";
    let text = with_client_streams(body);
    let password = |contents: &str| {
        std::fs::write(dir.path().join("secrets/socks5"), contents).unwrap();
        parse_client(&text, &path).map(|c| c.streams.unwrap().socks5_auth.unwrap().1)
    };
    // One trailing newline (LF or CRLF) is dropped, nothing else.
    for (contents, want) in [
        ("hunter2\n", "hunter2"),
        ("hunter2", "hunter2"),
        ("hunter2\r\n", "hunter2"),
        (" two words \n\n", " two words \n"),
    ] {
        assert_eq!(password(contents).unwrap().as_str(), want, "{contents:?}");
    }
    for bad in ["\n", "", &"x".repeat(256)] {
        let e = password(bad).unwrap_err();
        assert_eq!(e.field(), Some("streams.socks5_password_file"), "{e}");
        assert_eq!(
            e.line(),
            Some(line_of(&text, "socks5_password_file")),
            "{e}"
        );
        assert!(e.to_string().contains("1 to 255"), "{e}");
    }
    std::fs::remove_file(dir.path().join("secrets/socks5")).unwrap();
    let e = parse_client(&text, &path).unwrap_err();
    assert_eq!(e.field(), Some("streams.socks5_password_file"), "{e}");
    let shown = e.to_string();
    let full = dir.path().join("secrets/socks5").display().to_string();
    assert!(shown.contains(&full), "{shown}");
    let text = with_client_streams(&body.replace("secrets/socks5", ""));
    let m = client_fails(
        &text,
        "streams.socks5_password_file",
        "socks5_password_file",
    );
    assert!(m.contains("must not be empty"), "{m}");
}

#[test]
fn the_socks5_password_is_never_debug_printed() {
    let body = "socks5 = \"127.0.0.1:1080\"\nsocks5_username = \"alice\"\n\
                socks5_password = \"hunter2-secret\"\n";
    let c = client_ok(&with_client_streams(body));
    let auth = c.streams.as_ref().unwrap().socks5_auth.as_ref().unwrap();
    assert_eq!(auth.1.as_str(), "hunter2-secret");
    for shown in [
        format!("{c:?}"),
        format!("{c:#?}"),
        format!("{:?}", c.streams),
        format!("{auth:?}"),
    ] {
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("alice"), "{shown}");
    }
}

#[test]
fn open_socks5_is_warned_about() {
    use super::check::open_socks5;
    for quiet in [
        "127.0.0.1:1080",
        "127.3.2.1:1080",
        "[::1]:1080",
        "[::ffff:127.0.0.1]:1080",
    ] {
        assert_eq!(open_socks5(quiet.parse().unwrap()), None, "{quiet}");
    }
    assert_eq!(
        open_socks5("0.0.0.0:1080".parse().unwrap()).as_deref(),
        Some(
            "SOCKS5 on 0.0.0.0:1080 without authentication: anyone who can reach it can use \
             the tunnel"
        )
    );
    for loud in ["192.168.1.2:1080", "[::]:1080", "[2001:db8::1]:1080"] {
        let w = open_socks5(loud.parse().unwrap()).unwrap();
        assert!(w.starts_with(&format!("SOCKS5 on {loud} without")), "{w}");
    }
    // A warning only: such a file is accepted.
    let text = with_client_streams("socks5 = \"0.0.0.0:1080\"\n");
    assert!(client_ok(&text).streams.unwrap().socks5.is_some());
}

#[test]
fn client_stream_fields_are_named_in_errors() {
    let m = client_streams_fail("socks = \"127.0.0.1:1080\"\n", "streams.socks", "socks =");
    assert!(m.contains("unknown field"), "{m}");
    let m = client_streams_fail(
        "transparent = \"yes\"\n",
        "streams.transparent",
        "transparent",
    );
    assert!(m.contains("invalid type"), "{m}");
    client_streams_fail(
        "idle_timeout_s = \"1h\"\n",
        "streams.idle_timeout_s",
        "idle_timeout_s",
    );
    client_streams_fail("socks5 = 1080\n", "streams.socks5", "socks5");
    client_streams_fail(
        "destinations = \"::/0\"\n",
        "streams.destinations",
        "destinations",
    );
    let text = replaced(&min_client(), "[tun]", "streams = 5\n[tun]");
    let m = client_fails(&text, "streams", "streams = 5");
    assert!(m.contains("expected a table"), "{m}");
    // A server's key in a client's table.
    client_streams_fail("allow = []\n", "streams.allow", "allow");
}

#[test]
fn server_stream_values_are_checked() {
    for (body, field) in [
        ("allow = []", "streams.allow"),
        ("allow = [\"10.0.0.0/8\", \"nope\"]", "streams.allow[1]"),
        ("allow = [\"::/0\", \"::1/0\"]", "streams.allow[1]"),
        ("deny = [\"10.0.0.0/33\"]", "streams.deny[0]"),
        (
            "deny = [\"fe80::/10\", \"127.0.0.1/8\", \"127.0.0.0/8\"]",
            "streams.deny[2]",
        ),
        ("deny = [1]", "streams.deny[0]"),
        ("connect_timeout_s = 0", "streams.connect_timeout_s"),
        ("connect_timeout_s = 301", "streams.connect_timeout_s"),
        ("connect_timeout_s = 1.5", "streams.connect_timeout_s"),
        ("idle_timeout_s = 0", "streams.idle_timeout_s"),
        ("idle_timeout_s = 604801", "streams.idle_timeout_s"),
        (
            "max_streams_per_client = 0",
            "streams.max_streams_per_client",
        ),
        (
            "max_streams_per_client = 16385",
            "streams.max_streams_per_client",
        ),
        (
            "max_buffered_mib_per_client = 0",
            "streams.max_buffered_mib_per_client",
        ),
        (
            "max_buffered_mib_per_client = 1025",
            "streams.max_buffered_mib_per_client",
        ),
        (
            "max_buffered_per_client = 64",
            "streams.max_buffered_per_client",
        ),
        ("transparent = true", "streams.transparent"),
    ] {
        let needle = format!("{} =", body.split(' ').next().unwrap());
        let m = server_streams_fail(&format!("{body}\n"), field, &needle);
        assert!(!m.is_empty());
    }
    let m = server_streams_fail(
        "deny = [\"127.0.0.0/8\", \"127.0.0.0/8\"]\n",
        "streams.deny[1]",
        "deny",
    );
    assert!(m.contains("listed twice (streams.deny[0])"), "{m}");
    let m = server_streams_fail(
        "max_buffered_mib_per_client = 2048\n",
        "streams.max_buffered_mib_per_client",
        "max_buffered",
    );
    assert!(m.contains("between 1 and 1024, got 2048"), "{m}");
}

/// The examples' commented-out `[streams]` sections, uncommented, are valid and say what
/// the defaults are.
#[test]
fn example_streams_sections_parse() {
    fn uncommented(example: &str) -> String {
        let start = example.find("# [streams]").unwrap();
        let end = start + example[start..].find("\n\n").unwrap();
        let mut text = example[..start].to_owned();
        for line in example[start..end].lines() {
            let code = line.strip_prefix("# ").unwrap_or(line);
            let key = code.split(" = ").next().unwrap();
            let option = code == "[streams]"
                || (code.contains(" = ")
                    && key
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c == '_' || c.is_ascii_digit()));
            // The password is given inline, so not in a file too.
            if option && key != "socks5_password_file" {
                text.push_str(code);
            } else {
                text.push_str(line);
            }
            text.push('\n');
        }
        text.push_str(&example[end..]);
        text
    }
    let c = client_ok(&uncommented(CLIENT_EXAMPLE)).streams.unwrap();
    let (user, password) = c.socks5_auth.clone().unwrap();
    assert_eq!(user, "alice");
    assert!(!password.is_empty());
    assert_eq!(c.socks5, Some("127.0.0.1:1080".parse().unwrap()));
    assert_eq!(c.ports, vec![80, 443]);
    assert_eq!(
        ClientStreams {
            socks5: None,
            socks5_auth: None,
            ports: vec![],
            ..c
        },
        ClientStreams::default()
    );
    let s = server_ok(&uncommented(SERVER_EXAMPLE)).streams.unwrap();
    assert_eq!(s, ServerStreams::default());
}

// --- toml's own errors ------------------------------------------------------------

#[test]
fn syntax_error_reports_a_line() {
    let text = replaced(&min_client(), "[tun]", "[tun");
    let (field, line, _) = client_err(&text);
    assert_eq!(field, "(syntax)");
    assert_eq!(line, Some(line_of(&text, "[tun")));
    let text = format!("{}name = \n", min_client());
    let (field, line, _) = client_err(&text);
    assert_eq!(
        (field.as_str(), line),
        ("(syntax)", Some(text.lines().count()))
    );
    // A duplicate key is a syntax error too.
    let text = format!("{}name = \"b\"\n", min_client());
    let (field, line, m) = client_err(&text);
    assert_eq!(
        (field.as_str(), line),
        ("(syntax)", Some(text.lines().count()))
    );
    assert!(m.contains("duplicate key `name`"), "{m}");
}

#[test]
fn unknown_fields_report_field_and_line() {
    let text = replaced(&min_client(), "[tun]\n", "[tun]\nmtus = 1400\n");
    let m = client_fails(&text, "tun.mtus", "mtus");
    assert!(m.contains("unknown field"), "{m}");
    let text = format!("servers = []\n{}", min_client());
    client_fails(&text, "servers", "servers");
    let text = format!("{}colour = \"red\"\n", min_client());
    client_fails(&text, "path[0].colour", "colour");
    let text = format!(
        "{}[[path]]\nname = \"b\"\nserver = \"198.51.100.2\"\nspeed = 3\n",
        min_client()
    );
    client_fails(&text, "path[1].speed", "speed");
    let text = format!("{}allowed_ip = []\n", min_server());
    server_fails(&text, "client[0].allowed_ip", "allowed_ip =");
    // The client file's keys are not accepted in a server file.
    let text = format!("route = []\n{}", min_server());
    server_fails(&text, "route", "route");
}

#[test]
fn type_errors_name_the_field() {
    let text = replaced(&min_client(), "[tun]\n", "[tun]\nmtu = \"big\"\n");
    let m = client_fails(&text, "tun.mtu", "mtu");
    assert!(m.contains("expected an integer"), "{m}");
    let text = format!(
        "{}[[path]]\nname = \"b\"\nserver = \"198.51.100.2\"\nmtu = \"big\"\n",
        min_client()
    );
    client_fails(&text, "path[1].mtu", "mtu = \"big\"");
    let text = format!("route = \"0.0.0.0/0\"\n{}", min_client());
    let m = client_fails(&text, "route", "route");
    assert!(m.contains("expected an array"), "{m}");
    let text = format!("route = [\"0.0.0.0/0\", 5]\n{}", min_client());
    client_fails(&text, "route[1]", "route");
    let text = format!(
        "tun = 5\n{}",
        &min_client()[..min_client().find("[tun]").unwrap()]
    );
    let m = client_fails(&text, "tun", "tun = 5");
    assert!(m.contains("expected a table"), "{m}");
    let text = format!("{}rate_mbit = \"fast\"\n", min_client());
    client_fails(&text, "path[0].rate_mbit", "rate_mbit");
    let text = format!("{}backup = \"yes\"\n", min_client());
    client_fails(&text, "path[0].backup", "backup");
    let text = format!("path_mtu = 1500.0\n{}", min_server());
    server_fails(&text, "path_mtu", "path_mtu");
    let text = replaced(&min_server(), "name = \"a\"", "name = 1");
    server_fails(&text, "client[0].name", "name = 1");
}

// --- errors and files -------------------------------------------------------------

#[test]
fn error_display_has_file_line_column_field() {
    let text = replaced(&min_client(), "[tun]\n", "[tun]\nmtu =   575\n");
    let e = parse_client(&text, Path::new("/etc/plait/client.toml")).unwrap_err();
    let line = line_of(&text, "mtu =");
    assert_eq!(
        e.to_string(),
        format!("/etc/plait/client.toml:{line}:9: tun.mtu: must be between 576 and 65535, got 575")
    );
    let e = ConfigError::Invalid {
        file: "c.toml".into(),
        line: None,
        column: None,
        field: "path".into(),
        message: "missing".into(),
    };
    assert_eq!(e.to_string(), "c.toml: path: missing");
}

#[test]
fn columns_count_characters() {
    assert_eq!(line_column("ab\ncd", 0), (1, 1));
    assert_eq!(line_column("ab\ncd", 3), (2, 1));
    assert_eq!(line_column("ab\ncd", 4), (2, 2));
    assert_eq!(line_column("é = 1", 5), (1, 5));
    assert_eq!(line_column("ab", 99), (1, 3));
}

#[test]
fn load_reports_unreadable_files() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.toml");
    let e = load_client(&missing).unwrap_err();
    assert!(matches!(e, ConfigError::Io { .. }), "{e:?}");
    assert!(e.to_string().starts_with("cannot read "), "{e}");
    assert!(e.to_string().contains("nope.toml"), "{e}");
    assert!(matches!(load_server(&missing), Err(ConfigError::Io { .. })));
    let path = dir.path().join("server.toml");
    std::fs::write(&path, min_server()).unwrap();
    assert_eq!(load_server(&path).unwrap(), server_ok(&min_server()));
}

#[test]
fn errors_name_the_origin_file() {
    let text = replaced(&min_server(), "[tun]\n", "[tun]\nname = \"\"\n");
    let e = parse_server(&text, Path::new("/srv/x/server.toml")).unwrap_err();
    assert!(e.to_string().starts_with("/srv/x/server.toml:"), "{e}");
}

#[test]
fn every_required_field_says_what_it_needs() {
    // Field, the line that goes, and where the error is placed (`None`: no position).
    let client = [
        ("server_public_key", "server_public_key = ", None),
        ("tun.addresses", "addresses = ", Some("[tun]")),
        ("path[0].name", "name = ", Some("[[path]]")),
        ("path[0].server", "server = ", Some("[[path]]")),
    ];
    for (field, gone, at) in client {
        let text = min_client()
            .lines()
            .filter(|l| !l.starts_with(gone))
            .map(|l| format!("{l}\n"))
            .collect::<String>();
        let (f, line, m) = client_err(&text);
        assert_eq!(f, field, "{m}");
        assert_eq!(line, at.map(|at| line_of(&text, at)), "{m}");
        assert!(m.starts_with("missing: "), "{m}");
        assert!(!m.contains("` is required"), "no hint for {field}: {m}");
    }
    let server = [
        ("client[0].name", "name = "),
        ("client[0].public_key", "public_key = "),
        ("client[0].allowed_ips", "allowed_ips = "),
    ];
    for (field, gone) in server {
        let text = min_server()
            .lines()
            .filter(|l| !l.starts_with(gone))
            .map(|l| format!("{l}\n"))
            .collect::<String>();
        let (f, line, m) = server_err(&text);
        assert_eq!(
            (f.as_str(), line),
            (field, Some(line_of(&text, "[[client]]")))
        );
        assert!(
            m.starts_with("missing: ") && !m.contains("` is required"),
            "{m}"
        );
    }
    // Tables: `tun`, `path` and `client` are covered by their own tests above.
}

#[test]
fn missing_field_of_an_inline_table_is_placed_at_the_table() {
    let text = replaced(
        &min_client(),
        "[tun]\naddresses = [\"10.77.0.2/24\"]\n",
        "tun = { name = \"pt0\" }\n",
    );
    let m = client_fails(&text, "tun.addresses", "tun = {");
    assert!(m.contains("prefix length"), "{m}");
    let text = format!(
        "path = [{{ name = \"a\" }}]\n{}",
        &min_client()[..min_client().find("[[path]]").unwrap()]
    );
    client_fails(&text, "path[0].server", "path = [");
}

#[test]
fn file_names_must_not_be_empty() {
    let text = replaced(
        &min_client(),
        &format!("private_key = \"{CK}\""),
        "private_key_file = \"\"",
    );
    let m = client_fails(&text, "private_key_file", "private_key_file");
    assert!(m.contains("must not be empty"), "{m}");
    let text = replaced(
        &min_server(),
        "allowed_ips",
        "preshared_key_file = \"\"\nallowed_ips",
    );
    server_fails(&text, "client[0].preshared_key_file", "preshared_key_file");
}

/// docs/tunnel-config.md's "A minimal pair" is a working pair of files.
#[test]
fn the_reference_minimal_pair_parses() {
    let doc = include_str!("../../../../docs/tunnel-config.md");
    let (examples, pair) = doc
        .split_once("## A minimal pair")
        .expect("the minimal pair section");
    // The other examples are fragments: each parses appended to a minimal client.
    for fragment in examples
        .split("```toml\n")
        .skip(1)
        .filter_map(|b| b.split("```").next())
    {
        client_ok(&format!("{}\n{fragment}", min_client()));
    }
    let blocks: Vec<&str> = pair
        .split("```toml\n")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .collect();
    let [client, server] = blocks.as_slice() else {
        panic!("expected two toml blocks, found {}", blocks.len());
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("client.key"), CK).unwrap();
    std::fs::write(dir.path().join("server.key"), SK).unwrap();
    let c = parse_client(client, &dir.path().join("client.toml")).unwrap_or_else(|e| panic!("{e}"));
    let s = parse_server(server, &dir.path().join("server.toml")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.paths.len(), 2);
    assert_eq!(c.paths[1].device.as_deref(), Some("wwan0"));
    assert_eq!(s.clients[0].name, "home-router");
}

// --- [security] --------------------------------------------------------------------

#[test]
fn security_defaults_to_everything_on() {
    let want = SecurityConfig {
        seccomp: SeccompMode::Kill,
        drop_capabilities: true,
    };
    assert_eq!(client_ok(&min_client()).security, want);
    assert_eq!(server_ok(&min_server()).security, want);
    assert_eq!(client_ok(CLIENT_EXAMPLE).security, want);
    assert_eq!(server_ok(SERVER_EXAMPLE).security, want);
}

#[test]
fn security_fields_in_both_files() {
    for mode in SeccompMode::ALL {
        let table = format!(
            "[security]\nseccomp = \"{}\"\ndrop_capabilities = false\n",
            mode.name()
        );
        let want = SecurityConfig {
            seccomp: mode,
            drop_capabilities: false,
        };
        assert_eq!(
            client_ok(&format!("{}{table}", min_client())).security,
            want
        );
        assert_eq!(
            server_ok(&format!("{}{table}", min_server())).security,
            want
        );
    }
}

#[test]
fn security_rejects_unknown_values_and_fields() {
    let text = format!("{}[security]\nseccomp = \"on\"\n", min_client());
    let m = client_fails(&text, "security.seccomp", "seccomp");
    assert!(m.contains("kill, log, off"), "{m}");
    let text = format!("{}[security]\ndrop_capabilities = \"yes\"\n", min_server());
    server_fails(&text, "security.drop_capabilities", "drop_capabilities");
    let text = format!("{}[security]\nuser = \"plait\"\n", min_client());
    client_fails(&text, "security.user", "user");
}

// --- [[policy]] (docs/protocol.md#flow-policy) --------------------------------------

#[test]
fn policy_rules_parse_in_order_on_both_ends() {
    use plait_proto::policy::{FlowAction, Prefix};
    let rules = r#"
[[policy]]
protocol = "udp"
ports = [5060, 3478]
action = "duplicate"

[[policy]]
prefixes = ["10.9.0.0/16", "fd00::1"]
dscp = [46]
action = "lowest-delay"
"#;
    let c = client_ok(&format!("{}{rules}", min_client()));
    let p = &c.engine.flow_policy;
    assert_eq!(p.len(), 2);
    assert_eq!(p[0].protocol, Some(17));
    assert_eq!(p[0].ports, vec![5060, 3478]);
    assert_eq!(p[0].action, FlowAction::Duplicate);
    assert_eq!(
        p[1].prefixes,
        vec![
            Prefix {
                addr: "10.9.0.0".parse().unwrap(),
                len: 16
            },
            Prefix {
                addr: "fd00::1".parse().unwrap(),
                len: 128
            }
        ]
    );
    assert_eq!(p[1].dscp, vec![46]);
    assert_eq!(p[1].action, FlowAction::LowestDelay);
    let s = server_ok(&format!("{}{rules}", min_server()));
    assert_eq!(s.engine.flow_policy, c.engine.flow_policy);
    assert!(client_ok(&min_client()).engine.flow_policy.is_empty());
}

#[test]
fn bad_policy_rules_are_refused_with_their_place() {
    for (body, wants) in [
        (
            "protocol = \"gre\"\naction = \"stripe\"",
            "unknown protocol `gre`",
        ),
        ("dscp = [64]\naction = \"stripe\"", "63"),
        ("ports = [0]\naction = \"stripe\"", "65535"),
        ("action = \"mirror\"", "unknown action `mirror`"),
        ("ports = [80]", "action"),
        ("colour = \"red\"\naction = \"stripe\"", "colour"),
    ] {
        let text = format!("{}\n[[policy]]\n{body}\n", min_client());
        let (f, _, message) = client_err(&text);
        assert!(f.starts_with("policy"), "{f}: {message}");
        assert!(message.contains(wants), "{body}: {message}");
    }
    let text = format!(
        "{}\n[[policy]]\nprefixes = [\"10.0.0.0/8\", \"nowhere\"]\naction = \"stripe\"\n",
        min_client()
    );
    client_fails(&text, "policy[0].prefixes[1]", "prefixes =");
    let text = format!(
        "{}\n[[policy]]\nports = []\naction = \"stripe\"\n",
        min_client()
    );
    client_fails(&text, "policy[0].ports", "[[policy]]");
    let many: String = (0..65)
        .map(|_| "[[policy]]\naction = \"stripe\"\n")
        .collect();
    let (f, _, message) = client_err(&format!("{}\n{many}", min_client()));
    assert_eq!(f, "policy[64]", "{message}");
}

/// `[test_only] rekey_after_s`: a client may shorten the rekey time (10 to 120 s; keys
/// then retire a minute after they are due, as with the defaults), never lengthen it; a
/// server has no such table.
#[test]
fn test_only_rekey_time_is_bounded_and_client_only() {
    use crate::crypto::keypair::{KeyLifetime, REJECT_AFTER_TIME, REKEY_AFTER_TIME};
    assert_eq!(client_ok(&min_client()).test_key_lifetime, None);
    for secs in [10, 60, 120] {
        let c = client_ok(&format!(
            "{}\n[test_only]\nrekey_after_s = {secs}\n",
            min_client()
        ));
        let l = c.test_key_lifetime.expect("a lifetime");
        assert_eq!(l.rekey_after(), Duration::from_secs(secs));
        assert_eq!(
            l.reject_after() - l.rekey_after(),
            REJECT_AFTER_TIME - REKEY_AFTER_TIME
        );
    }
    assert_eq!(
        KeyLifetime::shortened(REKEY_AFTER_TIME),
        Ok(KeyLifetime::default())
    );
    for bad in ["9", "121", "0", "-5", "86400", "\"10s\""] {
        let text = format!("{}\n[test_only]\nrekey_after_s = {bad}\n", min_client());
        let m = client_fails(&text, "test_only.rekey_after_s", "rekey_after_s");
        if !bad.starts_with('"') {
            assert!(m.contains("between 10 and 120"), "{m}");
        }
    }
    let text = format!("{}\n[test_only]\nreject_after_s = 20\n", min_client());
    let m = client_fails(&text, "test_only.reject_after_s", "reject_after_s");
    assert!(m.contains("unknown field"), "{m}");
    let text = format!("{}\n[test_only]\nrekey_after_s = 10\n", min_server());
    let (f, _, m) = server_err(&text);
    assert!(m.contains("unknown field"), "{f}: {m}");
}
