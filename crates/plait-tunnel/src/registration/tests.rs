use std::net::SocketAddr;
use std::time::Duration;

use plait_proto::Time;
use proptest::prelude::*;

use super::registrar::REGISTRATION_RETRY;
use super::wire::{ENTRY_LEN, REGISTRATION_HEADER_LEN};
use super::*;
use crate::message::{REGISTER, REGISTRATION};

fn t(ms: u64) -> Time {
    Time::ZERO + Duration::from_millis(ms)
}

fn entry(path: u8) -> Entry {
    Entry {
        path,
        available: true,
        backup: path == 2,
        attributes: PathAttributes {
            link: LinkKind::Cellular,
            cost: CostClass::Metered,
            priority: 3,
        },
        local: Some("10.0.0.2:4000".parse().unwrap()),
        quality: Quality {
            srtt_ms: Some(48),
            loss_bp: Some(125),
            rate_kbit: Some(20_000),
            signal: Some(130),
        },
    }
}

fn sample() -> Registration {
    let mut v6 = entry(5);
    v6.local = Some("[2001:db8::7]:4001".parse().unwrap());
    v6.quality = Quality::default();
    let mut unknown = entry(9);
    unknown.local = None;
    unknown.available = false;
    Registration {
        seq: 0x01_0203_0405_0607,
        entries: vec![entry(0), entry(2), v6, unknown],
    }
}

#[test]
fn a_registration_round_trips_with_every_field() {
    let r = sample();
    for kind in [REGISTER, REGISTRATION] {
        let bytes = encode(kind, &r);
        assert_eq!(bytes.len(), REGISTRATION_HEADER_LEN + 4 * ENTRY_LEN);
        assert_eq!(decode(&bytes), Ok((kind, r.clone())));
    }
    // The example of docs/protocol.md#registration: path 0, available, cellular,
    // metered, priority 3, from 10.0.0.2:4000, 48 ms, 1.25 % loss, 20 Mbit/s, signal 65 %.
    let one = Registration {
        seq: 1,
        entries: vec![entry(0)],
    };
    let hex: String = encode(REGISTER, &one)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(
        hex,
        "06 01 00000000000001 \
         00 01 03 01 03 04 0a000002000000000000000000000000 0fa0 0030 007d 00004e20 82"
            .replace(' ', "")
    );
    let empty = Registration::default();
    assert_eq!(
        decode(&encode(REGISTRATION, &empty)),
        Ok((REGISTRATION, empty))
    );
}

#[test]
fn bad_registrations_get_typed_errors() {
    let good = encode(REGISTER, &sample());
    let with = |at: usize, byte: u8| {
        let mut b = good.clone();
        b[at] = byte;
        decode(&b)
    };
    let e0 = REGISTRATION_HEADER_LEN; // first entry
    assert_eq!(
        decode(&good[..5]),
        Err(RegistrationError::WrongLength {
            len: 5,
            count: 0,
            need: REGISTRATION_HEADER_LEN
        })
    );
    assert!(matches!(
        decode(&good[..good.len() - 1]),
        Err(RegistrationError::WrongLength { count: 4, .. })
    ));
    assert_eq!(with(0, 7), Err(RegistrationError::NotARegistration(7)));
    assert_eq!(
        with(1, 200),
        Err(RegistrationError::TooManyPaths { count: 200 })
    );
    assert_eq!(with(e0, 16), Err(RegistrationError::PathOutOfRange(16)));
    // Entry 1 names path 0 again.
    assert_eq!(
        with(e0 + ENTRY_LEN, 0),
        Err(RegistrationError::PathOrder(0))
    );
    assert_eq!(
        with(e0 + 1, 4),
        Err(RegistrationError::UnknownFlags { path: 0, flags: 4 })
    );
    assert_eq!(
        with(e0 + 2, 5),
        Err(RegistrationError::UnknownLinkKind { path: 0, value: 5 })
    );
    assert_eq!(
        with(e0 + 3, 2),
        Err(RegistrationError::UnknownCostClass { path: 0, value: 2 })
    );
    assert_eq!(
        with(e0 + 4, 8),
        Err(RegistrationError::PriorityOutOfRange { path: 0, value: 8 })
    );
    for family in [1, 5, 255] {
        assert_eq!(
            with(e0 + 5, family),
            Err(RegistrationError::BadAddress { path: 0, family })
        );
    }
    // An IPv4 address with bytes where only IPv6 has them: the wrong family.
    assert_eq!(
        with(e0 + 6 + 10, 1),
        Err(RegistrationError::BadAddress { path: 0, family: 4 })
    );
    // Loss above 100 %: 10,001 is 0x2711.
    let mut b = good.clone();
    b[e0 + 26..e0 + 28].copy_from_slice(&10_001u16.to_be_bytes());
    assert_eq!(
        decode(&b),
        Err(RegistrationError::LossOutOfRange {
            path: 0,
            value: 10_001
        })
    );
    // A signal above 100 % (200 steps) that is not 255 (unknown).
    for value in [201, 254] {
        assert_eq!(
            with(e0 + 32, value),
            Err(RegistrationError::SignalOutOfRange { path: 0, value })
        );
    }
    assert!(with(e0 + 32, 255).is_ok());
}

#[test]
fn a_registration_naming_ten_thousand_addresses_is_refused_without_allocating_them() {
    // The count byte cannot say more than 255; a datagram with 10,000 entries' bytes
    // and any count is refused by its length before an entry is read.
    let mut b = vec![REGISTER, 255, 0, 0, 0, 0, 0, 0, 1];
    b.extend(std::iter::repeat_n(0u8, 10_000 * ENTRY_LEN));
    assert_eq!(
        decode(&b),
        Err(RegistrationError::TooManyPaths { count: 255 })
    );
    b[1] = 16;
    assert!(matches!(
        decode(&b),
        Err(RegistrationError::WrongLength { count: 16, .. })
    ));
}

proptest! {
    #[test]
    fn decode_never_panics_and_what_it_accepts_re_encodes_the_same(
        bytes in proptest::collection::vec(any::<u8>(), 0..700)
    ) {
        if let Ok((kind, r)) = decode(&bytes) {
            prop_assert!(r.entries.len() <= MAX_PATHS);
            prop_assert_eq!(encode(kind, &r), bytes);
        }
    }
}

#[test]
fn quality_changes_are_material_only_beyond_a_half_or_a_point() {
    let q = |srtt, loss, rate| Quality {
        srtt_ms: srtt,
        loss_bp: loss,
        rate_kbit: rate,
        signal: None,
    };
    let base = q(Some(100), Some(50), Some(10_000));
    assert!(!q(Some(140), Some(120), Some(6_000)).differs_materially(&base));
    assert!(q(Some(200), Some(50), Some(10_000)).differs_materially(&base));
    assert!(q(Some(100), Some(150), Some(10_000)).differs_materially(&base));
    assert!(q(Some(100), Some(50), Some(5_000)).differs_materially(&base));
    assert!(q(None, Some(50), Some(10_000)).differs_materially(&base));
    assert!(!Quality::default().differs_materially(&Quality::default()));
    let signal = |s| Quality { signal: s, ..base };
    assert!(!signal(Some(119)).differs_materially(&signal(Some(100))));
    assert!(signal(Some(120)).differs_materially(&signal(Some(100))));
    assert!(signal(None).differs_materially(&signal(Some(100))));
}

#[test]
fn a_signal_crossing_a_handover_bound_is_told_at_once() {
    // The engine's bounds: weak under 0.2 (40 steps), handed back at 0.3 (60).
    let signal = |s| Quality {
        signal: s,
        ..Quality::default()
    };
    assert!(signal(Some(39)).signal_crossed(&signal(Some(40))));
    assert!(signal(Some(60)).signal_crossed(&signal(Some(59))));
    assert!(!signal(Some(41)).signal_crossed(&signal(Some(59))));
    assert!(!signal(Some(200)).signal_crossed(&signal(Some(61))));
    assert!(signal(None).signal_crossed(&signal(Some(100))));
    assert_eq!(signal_steps(0.1999), Some(39), "rounded down: still weak");
    assert_eq!(signal_steps(12.0 / 60.0), Some(40), "-88 dBm, the bound");
    assert_eq!(signal_steps(f64::NAN), None);
    assert_eq!(signal_steps(7.0), Some(SIGNAL_STEPS));

    let mut r = Registrar::new();
    r.set_path(t(0), 0, Some((attrs(0), false)));
    r.note_quality(t(0), 0, signal(Some(100)));
    r.on_fresh_session(t(0));
    let first = r.due(t(0)).0.unwrap().0.seq;
    r.on_ack(t(1), first);
    let _ = r.due(t(1));
    r.on_answer(Registration::default());
    // Weaker but above the bound, 1 s later: material, so it waits for the refresh.
    r.note_quality(t(1_000), 0, signal(Some(70)));
    assert_eq!(r.poll_timeout(), None);
    // Under the bound: at once.
    r.note_quality(t(2_000), 0, signal(Some(20)));
    let weak = r.due(t(2_000)).0.expect("registered at once").0;
    assert_eq!(weak.entries[0].quality.signal, Some(20));
    r.on_ack(t(2_001), weak.seq);
    // Back above the hand-back bound: at once again.
    r.note_quality(t(3_000), 0, signal(Some(60)));
    assert!(r.due(t(3_000)).0.is_some());
}

fn attrs(priority: u8) -> PathAttributes {
    PathAttributes {
        link: LinkKind::Wifi,
        cost: CostClass::Unmetered,
        priority,
    }
}

#[test]
fn the_registrar_sends_nothing_before_a_session_then_repeats_until_acknowledged() {
    let mut r = Registrar::new();
    r.set_path(t(0), 0, Some((attrs(0), false)));
    r.set_path(t(0), 1, Some((attrs(1), true)));
    assert_eq!(r.poll_timeout(), None, "no session yet");
    assert_eq!(r.due(t(0)), (None, false));

    r.on_fresh_session(t(10));
    let (sent, query) = r.due(t(10));
    let (sent, tries) = sent.expect("registered at once");
    assert_eq!(tries, 0);
    assert!(!query, "the query waits for the acknowledgement");
    assert_eq!(sent.entries.len(), 2);
    assert!(sent.entries[1].backup);
    assert_eq!(sent.entries[1].attributes.priority, 1);
    assert_eq!(r.poll_timeout(), Some(t(10) + REGISTRATION_RETRY));
    let (again, _) = r.due(t(10) + REGISTRATION_RETRY);
    assert_eq!(
        again.map(|(a, tries)| (a.seq, tries)),
        Some((sent.seq, 1)),
        "repeated, same number, the next try"
    );

    r.on_ack(t(300), sent.seq + 1); // beyond what was sent: ignored
    assert!(r.poll_timeout().is_some());
    r.on_ack(t(300), sent.seq);
    // Acknowledged: the query is due now, and repeated until answered.
    assert_eq!(r.due(t(300)), (None, true));
    assert_eq!(r.due(t(300) + REGISTRATION_RETRY), (None, true));
    r.on_answer(sent.clone());
    assert_eq!(r.poll_timeout(), None);
    assert_eq!(r.server_view(), Some(&sent));
    assert_eq!(r.acked(), sent.seq);
}

#[test]
fn every_change_is_a_new_number_and_quality_waits_for_the_refresh_interval() {
    let mut r = Registrar::new();
    r.set_path(t(0), 0, Some((attrs(0), false)));
    r.on_fresh_session(t(0));
    let first = r.due(t(0)).0.unwrap().0.seq;
    r.on_ack(t(1), first);
    assert_eq!(r.due(t(1)), (None, true));
    r.on_answer(Registration::default());

    // Link gone: a new registration at once.
    r.set_available(t(100), 0, false);
    let (second, tries) = r.due(t(100)).0.unwrap();
    assert_eq!(tries, 0, "a new registration starts its tries anew");
    assert!(second.seq > first && !second.entries[0].available);
    r.on_ack(t(101), second.seq);
    // Same state again: nothing.
    r.set_available(t(102), 0, false);
    assert_eq!(r.poll_timeout(), None);

    // An address learnt (a wildcard is not one).
    r.set_local(t(103), 0, Some("0.0.0.0:5000".parse().unwrap()));
    assert_eq!(r.poll_timeout(), None);
    let local: SocketAddr = "192.0.2.7:5000".parse().unwrap();
    r.set_local(t(104), 0, Some(local));
    let third = r.due(t(104)).0.unwrap().0;
    assert_eq!(third.entries[0].local, Some(local));
    r.on_ack(t(105), third.seq);

    // Quality moves materially 1 s later: held until 30 s after the last registration.
    let moved = Quality {
        srtt_ms: Some(300),
        loss_bp: Some(0),
        rate_kbit: Some(1_000),
        signal: None,
    };
    r.note_quality(t(1_104), 0, moved);
    assert_eq!(r.poll_timeout(), None);
    r.note_quality(t(104) + QUALITY_REFRESH, 0, moved);
    let fourth = r.due(t(104) + QUALITY_REFRESH).0.unwrap().0;
    assert_eq!(fourth.entries[0].quality, moved);
    r.on_ack(t(20_000), fourth.seq);
    // Unchanged quality: nothing more, however long.
    r.note_quality(t(100_000), 0, moved);
    assert_eq!(r.poll_timeout(), None);

    // A path closes: it leaves the registration.
    r.set_path(t(100_001), 0, None);
    assert!(r.due(t(100_001)).0.unwrap().0.entries.is_empty());
    // Ids beyond the path limit are ignored.
    r.set_path(t(100_002), 99, Some((attrs(0), false)));
    r.set_available(t(100_002), 99, false);
    assert!(r.current().entries.is_empty());
}
