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
    assert_eq!(c.paths[1].server, "198.51.100.1:7744".parse().unwrap());
    assert_eq!(c.paths[1].bind, Some("0.0.0.0:0".parse().unwrap()));
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
            server: "198.51.100.1:7744".parse().unwrap(),
            bind: None,
            device: None,
            mtu: 1500,
            rate_mbit: None,
        }]
    );
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
    assert_eq!(p.server, "[2001:db8::1]:7744".parse().unwrap());
    assert_eq!(p.bind, Some("[2001:db8::10]:0".parse().unwrap()));
    assert_eq!(p.device.as_deref(), Some("wlan0"));
    assert_eq!(p.mtu, 9000);
    assert_eq!(p.rate_mbit, Some(5.0));
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
    assert_eq!(c.paths[0].server, "[2001:db8::1]:7744".parse().unwrap());
    for bad in [
        "198.51.100.1:0",
        "vpn.example.com:7744",
        "198.51.100.1:99999",
        "0.0.0.0:7744",
        "",
    ] {
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
    let blocks: Vec<&str> = doc
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
