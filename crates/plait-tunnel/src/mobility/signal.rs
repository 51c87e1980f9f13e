//! The link layer's signal, as Linux's wireless extensions publish it in
//! `/proc/net/wireless` (one row per wireless interface the kernel has statistics for;
//! cfg80211 drivers fill it for a station that is associated), turned into the 0-to-1
//! scale the engine's handover judges (docs/protocol.md#handover, "signal").
//!
//! A row, as `net/wireless/wext-proc.c` prints it:
//!
//! ```text
//! Inter-| sta-|   Quality        |   Discarded packets               | Missed | WE
//!  face | tus | link level noise |  nwid  crypt   frag  retry   misc | beacon | 22
//!  wlan0: 0000   54.  -56.  -256        0      0      0      0      0        0
//! ```
//!
//! A value followed by `.` was updated by the driver since the file was last read (the
//! kernel clears the flag as it prints; cfg80211 drivers set it again at every read, older
//! wireless-extensions drivers only when they measure anew); one without is stale or
//! invalid ([`SignalRow::updated`]). The level is in dBm when negative (the kernel
//! subtracts 256 when the driver flags dBm; -256, a driver's 0 dBm placeholder, counts as
//! not updated); otherwise it is the driver's own 8-bit scale.
//!
//! Scale (NetworkManager's `nm_wifi_utils_level_to_quality`, what a desktop's Wi-Fi
//! indicator shows): -40 dBm or more is 1, -100 dBm or less is 0, linear between (so the
//! engine's default bound 0.2 is -88 dBm); an unsigned level above 110 is an 8-bit dBm
//! value (`level - 256`); any other unsigned level is a percentage.
//!
//! Invariants: parsing never panics and allocates only the rows it returns (at most
//! [`MAX_ROWS`], interface names of at most 15 bytes); a malformed row is counted and
//! skipped, never guessed at. Nothing here reads a file or a clock.

/// Most rows read from one file (the kernel prints one per wireless interface; a host with
/// more than this many is not plausible and the rest are ignored).
pub const MAX_ROWS: usize = 64;
/// Longest interface name Linux allows (`IFNAMSIZ` less the terminating NUL).
const MAX_IFNAME: usize = 15;

/// One interface's row.
#[derive(Clone, Debug, PartialEq)]
pub struct SignalRow {
    /// The interface, e.g. `wlan0`.
    pub interface: String,
    /// Its signal, 0 to 1, from the level as printed.
    pub signal: f64,
    /// Whether the driver updated the level since the last read (see the module docs).
    pub updated: bool,
}

/// What one reading of the file gave.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SignalTable {
    /// The interfaces' rows, in file order.
    pub rows: Vec<SignalRow>,
    /// Rows that could not be read (wrong shape, a value that is not a number, a name
    /// longer than Linux allows).
    pub malformed: usize,
    /// Rows past [`MAX_ROWS`], ignored.
    pub beyond_bound: usize,
}

impl SignalTable {
    /// The row of `interface`, if it has one.
    pub fn row(&self, interface: &str) -> Option<&SignalRow> {
        self.rows.iter().find(|r| r.interface == interface)
    }
}

/// Reads the text of `/proc/net/wireless` (see the module docs). The two header lines, and
/// any line without an interface name before a `:`, are skipped without counting.
pub fn parse_wireless(text: &str) -> SignalTable {
    let mut table = SignalTable::default();
    for line in text.lines() {
        let Some((name, values)) = line.split_once(':') else {
            continue;
        };
        let name = name.trim();
        // Header lines ("Inter-| sta-|...", " face | tus |...") hold no ':'; a line whose
        // name part holds '|' is a header too.
        if name.is_empty() || name.contains('|') {
            continue;
        }
        if table.rows.len() >= MAX_ROWS {
            table.beyond_bound += 1;
            continue;
        }
        match parse_row(name, values) {
            Some(row) => table.rows.push(row),
            None => table.malformed += 1,
        }
    }
    table
}

/// `values` after the name: status (hex), link quality, level, noise, then counters.
fn parse_row(name: &str, values: &str) -> Option<SignalRow> {
    if name.len() > MAX_IFNAME || name.chars().any(char::is_whitespace) {
        return None;
    }
    let mut fields = values.split_whitespace();
    let _status = u16::from_str_radix(fields.next()?, 16).ok()?;
    let _quality = value(fields.next()?)?;
    let (level, updated) = value(fields.next()?)?;
    let _noise = value(fields.next()?)?;
    Some(SignalRow {
        interface: name.to_owned(),
        signal: level_to_signal(level),
        updated: updated && level != -256,
    })
}

/// A value and whether the driver updated it (a trailing `.`).
fn value(field: &str) -> Option<(i32, bool)> {
    let (digits, updated) = match field.strip_suffix('.') {
        Some(d) => (d, true),
        None => (field, false),
    };
    // Within what the kernel prints (an 8-bit value, less 256 for dBm).
    let v: i32 = digits.parse().ok()?;
    (-256..=255).contains(&v).then_some((v, updated))
}

/// The 0-to-1 scale of a level (see the module docs).
pub fn level_to_signal(level: i32) -> f64 {
    let dbm = if level < 0 {
        level
    } else if level > 110 {
        level - 256
    } else {
        return f64::from(level.min(100)) / 100.0;
    };
    let dbm = dbm.clamp(-100, -40);
    f64::from(dbm + 100) / 60.0
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
Inter-| sta-|   Quality        |   Discarded packets               | Missed | WE
 face | tus | link level noise |  nwid  crypt   frag  retry   misc | beacon | 22
 wlan0: 0000   54.  -56.  -256        0      0      0      0     12        0
wlp3s0: 0000   10.  -95.  -256        0      0      0      0      0        0
 wlan1: 0000   40   -70   -256        0      0      0      0      0        0
 wlan2: 0000    0.  -256.  -256       0      0      0      0      0        0
";

    #[test]
    fn reads_the_kernels_rows() {
        let t = parse_wireless(SAMPLE);
        assert_eq!(t.malformed, 0);
        assert_eq!(t.rows.len(), 4);
        let r = t.row("wlan0").unwrap();
        assert!((r.signal - 44.0 / 60.0).abs() < 1e-9 && r.updated, "{r:?}");
        let r = t.row("wlp3s0").unwrap();
        assert!((r.signal - 5.0 / 60.0).abs() < 1e-9 && r.updated, "{r:?}");
        // Not updated since the last read, and the 0 dBm placeholder.
        assert!(!t.row("wlan1").unwrap().updated);
        assert!(!t.row("wlan2").unwrap().updated);
        assert_eq!(t.row("eth0"), None);
    }

    #[test]
    fn the_scale_is_network_managers() {
        assert_eq!(level_to_signal(-30), 1.0);
        assert_eq!(level_to_signal(-40), 1.0);
        assert_eq!(level_to_signal(-70), 0.5);
        assert!((level_to_signal(-88) - 0.2).abs() < 1e-9);
        assert_eq!(level_to_signal(-100), 0.0);
        assert_eq!(level_to_signal(-120), 0.0);
        // 8-bit dBm (200 - 256 = -56) and a percentage.
        assert_eq!(level_to_signal(200), level_to_signal(-56));
        assert_eq!(level_to_signal(75), 0.75);
        assert_eq!(level_to_signal(0), 0.0);
        assert_eq!(level_to_signal(110), 1.0);
    }

    #[test]
    fn malformed_rows_are_counted_and_skipped() {
        let text = "\
 wlan0: zzzz   54.  -56.  -256  0 0 0 0 0 0
 wlan1: 0000   54.  loud  -256  0 0 0 0 0 0
 wlan2: 0000   54.
 wlan3: 0000   54.  -999. -256  0 0 0 0 0 0
 averyveryverylongname0: 0000   54.  -56.  -256  0 0 0 0 0 0
 wlan4: 0000   54.  -56.  -256  0 0 0 0 0 0
no colon here
";
        let t = parse_wireless(text);
        assert_eq!(t.malformed, 5);
        assert_eq!(t.rows.len(), 1);
        assert_eq!(t.rows[0].interface, "wlan4");
    }

    #[test]
    fn rows_past_the_bound_are_dropped() {
        let text: String = (0..MAX_ROWS + 10)
            .map(|i| format!("w{i}: 0000 50. -60. -256 0 0 0 0 0 0\n"))
            .collect();
        let t = parse_wireless(&text);
        assert_eq!(t.rows.len(), MAX_ROWS);
        assert_eq!((t.malformed, t.beyond_bound), (0, 10));
    }

    proptest::proptest! {
        #[test]
        fn any_text_parses_without_panic(text in ".{0,400}") {
            let t = parse_wireless(&text);
            proptest::prop_assert!(t.rows.len() <= MAX_ROWS);
            for r in &t.rows {
                proptest::prop_assert!((0.0..=1.0).contains(&r.signal));
            }
        }
    }
}
