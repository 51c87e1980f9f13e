//! An anti-replay window: which sequence numbers of one nonce family have been accepted
//! under one receiving key.
//!
//! A key has one window per path for data messages (their nonces are made of the path and
//! its sequence number, so a number replayed on another path is a different nonce and
//! fails authentication) and one for path-control counters (docs/protocol.md#data-messages).
//! Within one path datagrams leave in order, so a path's window only has to absorb the
//! network's own reordering, not the skew between paths.
//!
//! Algorithm: RFC 6479's sliding bitmap, laid out as in WireGuard
//! (drivers/net/wireguard/receive.c `counter_validate`): a ring of `WORDS * 64` bits kept
//! as 64-bit words, indexed by `counter + 1` (so that "nothing accepted yet" is the value 0
//! and counter 0 is an ordinary first packet). Moving the highest counter forward zeroes
//! the words it passes over, one word at a time; the word holding the oldest bits is
//! recycled as a whole, which is why one word of the ring is never usable.
//!
//! Acceptance rule (exact; the tests' model uses the same one): a counter `c` is accepted
//! iff `c < REJECT_AFTER_MESSAGES`, `c` has not been accepted before, and either nothing has
//! been accepted yet, `c` is above the highest accepted counter `h`, or
//! `h - c <= SIZE` (`SIZE = BITS - 64`). A path's window ([`PathWindow`]) is WireGuard's
//! 8192-bit ring (8128 usable): a datagram may trail the newest one of its path by 8128,
//! 9 ms at 1 Gbit/s of 1400-byte packets on that one path. Path control is rare
//! ([`ControlWindow`], 256 bits).
//!
//! Invariants:
//! - Every counter in `h - WINDOW_SIZE ..= h` that was accepted has its bit set; no other
//!   counter in that range does. Counters below the range are rejected without looking at
//!   the bitmap, so stale bits of recycled words never matter.
//! - The state is a fixed-size array: no allocation after [`ReplayWindow::new`], and every
//!   operation is O(1) apart from zeroing at most `WORDS` words on a jump.
//! - Only authenticated packets may change the state ([`ReplayWindow::accept`]); the cheap
//!   pre-check [`ReplayWindow::may_accept`] is read-only, so forged packets cannot move the
//!   window.

use std::fmt;

/// The window of one path's data messages under one key (8192 bits, 1 KiB).
pub type PathWindow = ReplayWindow<128>;
/// The window of path-control counters under one key (256 bits).
pub type ControlWindow = ReplayWindow<4>;

/// Counters at or above this are never accepted (the sender rekeys long before).
// WireGuard: drivers/net/wireguard/messages.h REJECT_AFTER_MESSAGES.
pub const REJECT_AFTER_MESSAGES: u64 = u64::MAX - (1 << 13);

const WORD_BITS: u64 = u64::BITS as u64;

/// RFC 6479 sliding anti-replay window over `WORDS * 64` bits (see the module docs for the
/// exact acceptance rule). `WORDS` is a power of two.
#[derive(Clone)]
pub struct ReplayWindow<const WORDS: usize> {
    /// Highest accepted counter plus one; 0 means nothing accepted yet. Never exceeds
    /// `REJECT_AFTER_MESSAGES`, so the `+ 1` cannot overflow.
    next: u64,
    /// Bit `(c + 1) % WINDOW_BITS` is set iff counter `c` was accepted (within the window).
    bitmap: [u64; WORDS],
}

impl<const WORDS: usize> ReplayWindow<WORDS> {
    /// Size of the bitmap ring in bits.
    pub const BITS: u64 = WORDS as u64 * WORD_BITS;
    /// How far behind the highest accepted counter a counter may be and still be accepted:
    /// [`Self::BITS`] minus one 64-bit word, the word being recycled as the window slides
    /// (RFC 6479 §2: the block holding the oldest bits is cleared as a whole).
    pub const SIZE: u64 = Self::BITS - WORD_BITS;
    // The ring index is taken with a mask, so the word count must be a power of two.
    const WORDS_OK: () = assert!(WORDS.is_power_of_two() && WORDS >= 2);
    const WORD_MASK: u64 = WORDS as u64 - 1;

    /// An empty window: any counter below [`REJECT_AFTER_MESSAGES`] is acceptable.
    pub fn new() -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::WORDS_OK;
        ReplayWindow {
            next: 0,
            bitmap: [0; WORDS],
        }
    }

    /// Cheap check before spending an AEAD open: false if `counter` is certainly a replay,
    /// too old for the window, or >= REJECT_AFTER_MESSAGES. Does not change state.
    pub fn may_accept(&self, counter: u64) -> bool {
        match self.position(counter) {
            Position::Reject => false,
            Position::Ahead => true,
            Position::Inside { word, mask } => self.bitmap[word] & mask == 0,
        }
    }

    /// Call only after the packet authenticated: records `counter`; returns false (and
    /// records nothing) if it is a replay, too old, or >= REJECT_AFTER_MESSAGES.
    pub fn accept(&mut self, counter: u64) -> bool {
        match self.position(counter) {
            Position::Reject => false,
            Position::Inside { word, mask } => {
                if self.bitmap[word] & mask != 0 {
                    return false;
                }
                self.bitmap[word] |= mask;
                true
            }
            Position::Ahead => {
                // `position` returned Ahead, so counter < REJECT_AFTER_MESSAGES < u64::MAX.
                let shifted = counter + 1;
                // WireGuard counter_validate: clear every word strictly after the current
                // highest's word up to and including the new one. At most the whole ring,
                // so a jump of any size costs at most WORDS stores.
                let current_word = self.next / WORD_BITS;
                let new_word = shifted / WORD_BITS;
                let clear = (new_word - current_word).min(WORDS as u64);
                for i in 1..=clear {
                    self.bitmap[Self::ring_index(current_word + i)] = 0;
                }
                self.next = shifted;
                // The bit is fresh: its word was either just cleared or is the current
                // word, whose bits above the old highest were cleared when it was entered.
                self.bitmap[Self::ring_index(new_word)] |= bit_mask(shifted);
                true
            }
        }
    }

    /// Index in the ring of absolute word number `word`.
    fn ring_index(word: u64) -> usize {
        // Masked to < WORDS before the cast, so nothing is truncated on any platform.
        (word & Self::WORD_MASK) as usize
    }

    /// Highest counter accepted so far.
    pub fn highest(&self) -> Option<u64> {
        self.next.checked_sub(1)
    }

    /// Where `counter` falls relative to the window.
    fn position(&self, counter: u64) -> Position {
        if counter >= REJECT_AFTER_MESSAGES {
            return Position::Reject;
        }
        // No overflow: counter < REJECT_AFTER_MESSAGES < u64::MAX.
        let shifted = counter + 1;
        if shifted > self.next {
            return Position::Ahead;
        }
        // Here shifted <= next, so the subtraction cannot underflow. Written as a
        // difference rather than WireGuard's `WINDOW_SIZE + c < next` because with our
        // larger window that sum could overflow near REJECT_AFTER_MESSAGES.
        if self.next - shifted > Self::SIZE {
            return Position::Reject;
        }
        Position::Inside {
            word: Self::ring_index(shifted / WORD_BITS),
            mask: bit_mask(shifted),
        }
    }
}

/// Where a counter falls relative to the window.
enum Position {
    /// Too old, or at/after the reject limit.
    Reject,
    /// Above the highest accepted counter: new, and accepting it slides the window.
    Ahead,
    /// Within the window: accepted iff its bit is clear.
    Inside { word: usize, mask: u64 },
}

/// The bit of shifted counter `shifted` within its word.
fn bit_mask(shifted: u64) -> u64 {
    1 << (shifted % WORD_BITS)
}

impl<const WORDS: usize> Default for ReplayWindow<WORDS> {
    fn default() -> Self {
        ReplayWindow::new()
    }
}

impl<const WORDS: usize> fmt::Debug for ReplayWindow<WORDS> {
    // The bitmap is noise in logs; the highest counter is what a reader needs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplayWindow")
            .field("highest", &self.highest())
            .field("window", &Self::SIZE)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type ReplayWindow = PathWindow;
    const WINDOW_BITS: u64 = PathWindow::BITS;
    const WINDOW_SIZE: u64 = PathWindow::SIZE;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    /// Runs `accept` and checks it (and the read-only pre-check) against `expected`, naming
    /// the step on failure like the kernel selftest's numbered `T(n, v)` lines.
    struct Checker {
        w: ReplayWindow,
        step: u32,
        label: &'static str,
    }

    impl Checker {
        fn new(label: &'static str) -> Checker {
            Checker {
                w: ReplayWindow::new(),
                step: 0,
                label,
            }
        }

        #[track_caller]
        fn t(&mut self, n: u64, expected: bool) {
            self.step += 1;
            assert_eq!(
                self.w.may_accept(n),
                expected,
                "{} step {}: may_accept({n})",
                self.label,
                self.step
            );
            assert_eq!(
                self.w.accept(n),
                expected,
                "{} step {}: accept({n})",
                self.label,
                self.step
            );
        }
    }

    // Ported from the Linux kernel's WireGuard counter selftest
    // (drivers/net/wireguard/selftest/counter.c, wg_packet_counter_selftest), looked up via
    // the code search, with COUNTER_WINDOW_SIZE replaced by our WINDOW_SIZE. The kernel's
    // window is 8192 - 64 = 8128, as is a path's here; the cases are relative to the
    // window, so they carry over unchanged to any size.
    const T_LIM: u64 = WINDOW_SIZE + 1;
    const R: u64 = REJECT_AFTER_MESSAGES;

    #[test]
    fn kernel_selftest_sequence() {
        let mut c = Checker::new("sequence");
        c.t(0, true); //  1: counter 0 is a valid first packet
        c.t(1, true); //  2
        c.t(1, false); //  3: replay
        c.t(9, true); //  4: gap forward
        c.t(8, true); //  5: out of order, inside the window
        c.t(7, true); //  6
        c.t(7, false); //  7
        c.t(T_LIM, true); //  8: jump forward by the window
        c.t(T_LIM - 1, true); //  9
        c.t(T_LIM - 1, false); // 10
        c.t(T_LIM - 2, true); // 11
        c.t(2, true); // 12: exactly WINDOW_SIZE behind: just inside
        c.t(2, false); // 13
        c.t(T_LIM + 16, true); // 14
        c.t(3, false); // 15: now too old
        c.t(T_LIM + 16, false); // 16
        c.t(T_LIM * 4, true); // 17: far jump, wraps the ring
        c.t(T_LIM * 4 - (T_LIM - 1), true); // 18: just inside
        c.t(10, false); // 19
        c.t(T_LIM * 4 - T_LIM, false); // 20: just outside
        c.t(T_LIM * 4 - (T_LIM + 1), false); // 21
        c.t(T_LIM * 4 - (T_LIM - 2), true); // 22
        c.t(T_LIM * 4 + 1 - T_LIM, false); // 23: same counter as 18
        c.t(0, false); // 24
        c.t(R, false); // 25: the limit itself
        c.t(R - 1, true); // 26
        c.t(R, false); // 27
        c.t(R - 1, false); // 28
        c.t(R - 2, true); // 29
        c.t(R + 1, false); // 30
        c.t(R + 2, false); // 31
        c.t(R - 2, false); // 32
        c.t(R - 3, true); // 33
        c.t(0, false); // 34
        assert_eq!(c.w.highest(), Some(R - 1));
    }

    #[test]
    fn kernel_bulk_fill_in_order_then_zero() {
        let mut c = Checker::new("bulk 1");
        for i in 1..=WINDOW_SIZE {
            c.t(i, true);
        }
        c.t(0, true);
        c.t(0, false);
    }

    #[test]
    fn kernel_bulk_fill_in_order_zero_falls_out() {
        let mut c = Checker::new("bulk 2");
        for i in 2..=WINDOW_SIZE + 1 {
            c.t(i, true);
        }
        c.t(1, true);
        c.t(0, false);
    }

    #[test]
    fn kernel_bulk_fill_in_reverse() {
        let mut c = Checker::new("bulk 3");
        for i in (0..=WINDOW_SIZE).rev() {
            c.t(i, true);
        }
    }

    #[test]
    fn kernel_bulk_fill_in_reverse_zero_falls_out() {
        let mut c = Checker::new("bulk 4");
        for i in (1..=WINDOW_SIZE + 1).rev() {
            c.t(i, true);
        }
        c.t(0, false);
    }

    #[test]
    fn kernel_bulk_reverse_then_advance() {
        let mut c = Checker::new("bulk 5");
        for i in (1..=WINDOW_SIZE).rev() {
            c.t(i, true);
        }
        c.t(WINDOW_SIZE + 1, true);
        c.t(0, false);
    }

    #[test]
    fn kernel_bulk_reverse_zero_then_advance() {
        let mut c = Checker::new("bulk 6");
        for i in (1..=WINDOW_SIZE).rev() {
            c.t(i, true);
        }
        c.t(0, true);
        c.t(WINDOW_SIZE + 1, true);
    }

    #[test]
    fn window_meets_the_multipath_requirement() {
        // docs: at least 8192 packets of reordering must be tolerated.
        assert_eq!(WINDOW_SIZE, 8128);
        assert_eq!(ControlWindow::SIZE, 192);
    }

    #[test]
    fn sliding_many_times_around_the_ring() {
        // Advances through several full turns of the ring in order, accepting each
        // counter's straggler WINDOW_SIZE behind and rejecting the one just beyond: the
        // recycled words must never leak stale bits into the window.
        let mut w = ReplayWindow::new();
        assert!(w.accept(0));
        for c in 1..WINDOW_BITS * 5 {
            assert!(w.accept(c), "in-order {c}");
            assert!(!w.may_accept(c), "replay {c}");
            if let Some(old) = c.checked_sub(WINDOW_SIZE) {
                assert!(!w.may_accept(old), "{old} accepted earlier");
            }
            if let Some(gone) = c.checked_sub(WINDOW_SIZE + 1) {
                assert!(!w.may_accept(gone), "{gone} beyond the window");
            }
        }
        assert_eq!(w.highest(), Some(WINDOW_BITS * 5 - 1));
    }

    #[test]
    fn stragglers_after_word_boundary_jumps() {
        // Jumps that land exactly on, just before and just after word and ring boundaries,
        // then fills the holes behind them.
        for jump in [
            63,
            64,
            65,
            127,
            128,
            WINDOW_BITS - 1,
            WINDOW_BITS,
            WINDOW_BITS + 1,
        ] {
            let mut w = ReplayWindow::new();
            assert!(w.accept(5));
            assert!(w.accept(5 + jump));
            for c in (5 + jump).saturating_sub(WINDOW_SIZE)..5 + jump {
                assert_eq!(w.accept(c), c != 5, "jump {jump}, straggler {c}");
            }
            assert!(!w.accept(5), "jump {jump}");
        }
    }

    #[test]
    fn may_accept_does_not_change_state() {
        let mut w = ReplayWindow::new();
        assert_eq!(w.highest(), None);
        assert!(w.may_accept(1000));
        assert_eq!(w.highest(), None);
        assert!(w.accept(1000));
        assert!(w.may_accept(1001));
        assert!(w.may_accept(999));
        assert_eq!(w.highest(), Some(1000));
        assert!(w.accept(999));
        assert!(!w.may_accept(999));
    }

    #[test]
    fn debug_is_compact() {
        let mut w = ReplayWindow::default();
        assert!(w.accept(7));
        let s = format!("{w:?}");
        assert!(s.contains("Some(7)"), "{s}");
        assert!(s.len() < 100, "{s}");
    }

    /// The documented acceptance rule, on a set of every accepted counter.
    #[derive(Default)]
    struct Model {
        seen: BTreeSet<u64>,
        highest: Option<u64>,
    }

    impl Model {
        fn may_accept(&self, c: u64) -> bool {
            c < REJECT_AFTER_MESSAGES
                && !self.seen.contains(&c)
                && match self.highest {
                    None => true,
                    Some(h) => c > h || h - c <= WINDOW_SIZE,
                }
        }

        fn accept(&mut self, c: u64) -> bool {
            if !self.may_accept(c) {
                return false;
            }
            self.seen.insert(c);
            self.highest = Some(self.highest.map_or(c, |h| h.max(c)));
            true
        }
    }

    /// How the next counter is chosen, relative to the model's highest so far.
    #[derive(Clone, Debug)]
    enum Step {
        /// A little ahead: the common in-order case, crossing word boundaries.
        Ahead(u64),
        /// Far ahead: recycles much or all of the ring.
        Jump(u64),
        /// Behind, straddling the window's edge.
        Behind(u64),
        /// Anywhere, including at and above the reject limit.
        Absolute(u64),
        /// Near the reject limit.
        NearLimit(u64),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => (0..200u64).prop_map(Step::Ahead),
            1 => (0..3 * WINDOW_BITS).prop_map(Step::Jump),
            4 => (0..WINDOW_SIZE + 200).prop_map(Step::Behind),
            1 => any::<u64>().prop_map(Step::Absolute),
            1 => (0..WINDOW_BITS).prop_map(Step::NearLimit),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn agrees_with_model(steps in proptest::collection::vec(step(), 1..400)) {
            let mut w = ReplayWindow::new();
            let mut m = Model::default();
            for s in steps {
                let h = m.highest.unwrap_or(0);
                let c = match s {
                    Step::Ahead(d) | Step::Jump(d) => h.saturating_add(d),
                    Step::Behind(d) => h.saturating_sub(d),
                    Step::Absolute(c) => c,
                    Step::NearLimit(d) => (REJECT_AFTER_MESSAGES + 64).saturating_sub(d),
                };
                let pre = w.may_accept(c);
                prop_assert_eq!(pre, m.may_accept(c), "may_accept({})", c);
                // Read-only: asking twice gives the same answer.
                prop_assert_eq!(w.may_accept(c), pre);
                prop_assert_eq!(w.accept(c), m.accept(c), "accept({})", c);
                prop_assert_eq!(w.highest(), m.highest);
                // A counter just accepted is now a replay.
                prop_assert!(!w.may_accept(c));
            }
        }
    }
}
