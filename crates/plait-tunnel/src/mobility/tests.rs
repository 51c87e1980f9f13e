use super::*;

#[test]
fn glob_matches_whole_names() {
    let yes = [
        ("wlan*", "wlan0"),
        ("wlan*", "wlan"),
        ("wwan?", "wwan0"),
        ("*", "eth0"),
        ("*0", "eth0"),
        ("e*h*", "eth0"),
        ("*a*b*c", "xaybzc"),
        ("enp?s0*", "enp3s0f1"),
        ("eth0", "eth0"),
        ("**", ""),
        ("a*b*b", "abbbb"),
    ];
    for (p, n) in yes {
        assert!(glob_match(p, n), "{p} should match {n}");
    }
    let no = [
        ("wlan*", "wwan0"),
        ("wwan?", "wwan10"),
        ("wwan?", "wwan"),
        ("eth0", "eth01"),
        ("eth0", "eth"),
        ("*0", "eth1"),
        ("?", ""),
        ("a*b", "ac"),
        ("*a*b*c", "xaybz"),
    ];
    for (p, n) in no {
        assert!(!glob_match(p, n), "{p} should not match {n}");
    }
}

#[test]
fn glob_is_fast_on_adversarial_patterns() {
    let name = "a".repeat(15);
    let pattern = format!("{}b", "*a".repeat(15));
    let t = std::time::Instant::now();
    for _ in 0..1000 {
        assert!(!glob_match(&pattern, &name));
    }
    assert!(t.elapsed() < std::time::Duration::from_secs(1));
}

fn iface(index: u32, name: &str, up: bool) -> Interface {
    Interface {
        index,
        name: name.into(),
        up,
    }
}

fn route(dst: &str, oif: u32) -> Route {
    Route {
        dst: dst.parse().unwrap(),
        oif,
    }
}

const SERVER: &str = "198.51.100.1";

fn glob(p: &str) -> PatternSpec {
    PatternSpec {
        pattern: DevicePattern::Glob(p.into()),
        server: SERVER.parse().unwrap(),
    }
}

fn default_route() -> PatternSpec {
    PatternSpec {
        pattern: DevicePattern::DefaultRoute,
        server: SERVER.parse().unwrap(),
    }
}

#[test]
fn an_interface_opens_a_path_only_with_a_route_to_the_server() {
    let mut p = Planner::new(1, vec![glob("wwan*")], vec![]);
    let mut k = Kernel {
        interfaces: vec![iface(1, "lo", true), iface(2, "eth0", true)],
        routes: vec![route("0.0.0.0/0", 2)],
    };
    assert!(p.plan(&k).is_empty(), "nothing matches");
    // wwan0 appears, up, but without a route: nothing yet.
    k.interfaces.push(iface(5, "wwan0", true));
    assert!(p.plan(&k).is_empty());
    // A route through it that does not cover the server: still nothing.
    k.routes.push(route("10.0.0.0/8", 5));
    assert!(p.plan(&k).is_empty());
    // DHCP gives it a default route: path 1 (0 is the fixed path).
    k.routes.push(route("0.0.0.0/0", 5));
    assert_eq!(
        p.plan(&k),
        vec![Change::Open {
            id: 1,
            pattern: 0,
            ifname: "wwan0".into()
        }]
    );
    assert!(p.plan(&k).is_empty(), "no change, no action");
    assert_eq!(p.open_paths().collect::<Vec<_>>(), vec![(1, 0, "wwan0")]);
    // Carrier lost.
    k.interfaces[2].up = false;
    assert_eq!(
        p.plan(&k),
        vec![Change::Close {
            id: 1,
            pattern: 0,
            ifname: "wwan0".into(),
            why: CloseReason::Down
        }]
    );
    // Back, then its route goes.
    k.interfaces[2].up = true;
    assert_eq!(p.plan(&k).len(), 1);
    k.routes.retain(|r| r.oif != 5);
    assert!(matches!(
        p.plan(&k)[..],
        [Change::Close {
            id: 1,
            why: CloseReason::NoRoute,
            ..
        }]
    ));
    // Gone altogether, and made anew under the same name with another index.
    k.routes.push(route("198.51.100.0/24", 5));
    assert_eq!(p.plan(&k).len(), 1);
    k.interfaces[2].index = 9;
    k.routes[1].oif = 9;
    assert_eq!(
        p.plan(&k),
        vec![
            Change::Close {
                id: 1,
                pattern: 0,
                ifname: "wwan0".into(),
                why: CloseReason::Gone
            },
            Change::Open {
                id: 1,
                pattern: 0,
                ifname: "wwan0".into()
            }
        ]
    );
}

#[test]
fn ids_are_the_lowest_free_and_are_reused() {
    let mut p = Planner::new(2, vec![glob("wlan*")], vec![]);
    let mut k = Kernel::default();
    for i in 0..3 {
        k.interfaces.push(iface(10 + i, &format!("wlan{i}"), true));
        k.routes.push(route("0.0.0.0/0", 10 + i));
    }
    let ids: Vec<u8> = p
        .plan(&k)
        .iter()
        .map(|c| match c {
            Change::Open { id, .. } => *id,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(ids, vec![2, 3, 4]);
    // wlan1 (id 3) goes; a new wlan7 takes id 3.
    k.interfaces.remove(1);
    k.interfaces.push(iface(20, "wlan7", true));
    k.routes.push(route("0.0.0.0/0", 20));
    assert_eq!(
        p.plan(&k),
        vec![
            Change::Close {
                id: 3,
                pattern: 0,
                ifname: "wlan1".into(),
                why: CloseReason::Gone
            },
            Change::Open {
                id: 3,
                pattern: 0,
                ifname: "wlan7".into()
            }
        ]
    );
}

#[test]
fn the_seventeenth_path_is_refused_once_and_opens_when_an_id_frees() {
    let mut p = Planner::new(1, vec![glob("veth*")], vec![]);
    let mut k = Kernel::default();
    for i in 0..16 {
        k.interfaces.push(iface(100 + i, &format!("veth{i}"), true));
        k.routes.push(route("0.0.0.0/0", 100 + i));
    }
    let changes = p.plan(&k);
    let opened = changes
        .iter()
        .filter(|c| matches!(c, Change::Open { .. }))
        .count();
    assert_eq!(opened, 15, "ids 1 to 15");
    assert_eq!(
        changes.last(),
        Some(&Change::Refused {
            pattern: 0,
            ifname: "veth15".into()
        })
    );
    assert!(p.plan(&k).is_empty(), "refused once, not on every look");
    assert_eq!(p.open_paths().count(), 15);
    // veth3 goes: veth15 gets its id.
    k.interfaces.retain(|f| f.name != "veth3");
    assert_eq!(
        p.plan(&k),
        vec![
            Change::Close {
                id: 4,
                pattern: 0,
                ifname: "veth3".into(),
                why: CloseReason::Gone
            },
            Change::Open {
                id: 4,
                pattern: 0,
                ifname: "veth15".into()
            }
        ]
    );
}

#[test]
fn a_refused_interface_that_leaves_and_returns_is_reported_again() {
    let mut p = Planner::new(16, vec![glob("wwan*")], vec![]);
    let mut k = Kernel {
        interfaces: vec![iface(3, "wwan0", true)],
        routes: vec![route("0.0.0.0/0", 3)],
    };
    assert_eq!(p.plan(&k).len(), 1);
    assert!(p.plan(&k).is_empty());
    k.interfaces[0].up = false;
    assert!(p.plan(&k).is_empty());
    k.interfaces[0].up = true;
    assert!(matches!(p.plan(&k)[..], [Change::Refused { .. }]));
}

#[test]
fn default_route_policy_excludes_lo_the_tunnel_and_fixed_devices() {
    let mut p = Planner::new(
        1,
        vec![default_route()],
        vec!["plait0".into(), "eth0".into()],
    );
    let k = Kernel {
        interfaces: vec![
            iface(1, "lo", true),
            iface(2, "eth0", true),
            iface(3, "plait0", true),
            iface(4, "wlan0", true),
            iface(5, "wwan0", true),
            iface(6, "lan0", true),
        ],
        routes: vec![
            route("0.0.0.0/0", 1),
            route("0.0.0.0/0", 2),
            route("0.0.0.0/0", 3),
            route("0.0.0.0/0", 4),
            route("::/0", 5),
            route("198.51.100.0/24", 6),
        ],
    };
    // wwan0 has only an IPv6 default route (the server is IPv4); lan0 a route to the
    // server but no default route.
    assert_eq!(
        p.plan(&k),
        vec![Change::Open {
            id: 1,
            pattern: 0,
            ifname: "wlan0".into()
        }]
    );
}

#[test]
fn an_interface_belongs_to_the_first_pattern_that_takes_it() {
    let mut p = Planner::new(0, vec![glob("wlan*"), default_route()], vec![]);
    let k = Kernel {
        interfaces: vec![iface(4, "wlan0", true), iface(5, "wwan0", true)],
        routes: vec![route("0.0.0.0/0", 4), route("0.0.0.0/0", 5)],
    };
    assert_eq!(
        p.plan(&k),
        vec![
            Change::Open {
                id: 0,
                pattern: 0,
                ifname: "wlan0".into()
            },
            Change::Open {
                id: 1,
                pattern: 1,
                ifname: "wwan0".into()
            }
        ]
    );
}

#[test]
fn a_new_server_address_is_judged_at_the_next_look() {
    let mut p = Planner::new(0, vec![glob("wwan*")], vec![]);
    let k = Kernel {
        interfaces: vec![iface(4, "wwan0", true)],
        routes: vec![route("198.51.100.0/24", 4)],
    };
    assert_eq!(p.plan(&k).len(), 1);
    p.set_server(0, "203.0.113.9".parse().unwrap());
    assert!(matches!(
        p.plan(&k)[..],
        [Change::Close {
            why: CloseReason::NoRoute,
            ..
        }]
    ));
}
