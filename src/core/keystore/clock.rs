//! The clock hand: eviction and the idle sweep, without a timer or an order kept per key.
//!
//! A new key in a full store evicts, from a scan of up to `EVICT_SCAN` held entries at the hand, the
//! first that forgetting loses nothing (`Look::Take`: idle, expired, back to its fresh state), else
//! the least recently used of the scan; entries that must not be forgotten (`Look::Pass`) are never
//! chosen, and when the whole scan passes there is no victim. Each insert also sweeps `SWEEP` held
//! entries at the hand (passing at most `SWEEP_REACH` positions, held or free: bounded work whatever
//! gaps removed keys left), so memory drains back after a flood. A sampled victim, not the store's
//! least recently used one: exact order would cost a list update on every hit.
//!
//! The owner says what its values are worth keeping (`Eviction`), and how to reach position `i`: the
//! scans take a closure that returns `None` for a free position.

/// The most held entries one eviction looks at.
pub(crate) const EVICT_SCAN: usize = 32;
/// Held entries the sweep looks at on each insert of a new key.
pub(crate) const SWEEP: usize = 2;
/// Positions (held or free) one sweep passes at most.
pub(crate) const SWEEP_REACH: usize = 8;

/// What eviction makes of one held entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Look {
    /// Forgetting it loses nothing: taken at once.
    Take,
    /// A candidate, by the time it was last used (the oldest of the scan goes).
    Keep(u64),
    /// Never evicted (it owes or awaits something).
    Pass,
}

/// A store owner's eviction preference over its values.
pub(crate) trait Eviction<V: ?Sized> {
    /// What a full store's eviction makes of `v`.
    fn look(&self, v: &V) -> Look;
    /// Whether the idle sweep drops `v`.
    fn sweepable(&self, v: &V) -> bool;
}

/// Where eviction and the sweep look next.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Clock {
    hand: usize,
}

impl Clock {
    /// The hand's position among `0..n` (`n` > 0; a store that shrank may leave it past the end).
    #[inline]
    fn start(&self, n: usize) -> usize {
        if self.hand < n {
            self.hand
        } else {
            self.hand % n
        }
    }

    /// The victim among positions `0..n` (`None` if every scanned entry passes or none is held).
    /// `look(i)` is `None` for a free position.
    #[inline]
    pub(crate) fn victim(&mut self, n: usize, mut look: impl FnMut(usize) -> Option<Look>) -> Option<usize> {
        if n == 0 {
            return None;
        }
        let mut oldest: Option<(u64, usize)> = None;
        let mut seen = 0;
        let mut i = self.start(n);
        for _ in 0..n {
            if seen == EVICT_SCAN {
                break;
            }
            let at = i;
            i = if i + 1 == n { 0 } else { i + 1 };
            self.hand = i;
            let Some(l) = look(at) else { continue };
            seen += 1;
            match l {
                Look::Take => return Some(at),
                Look::Keep(t) if oldest.is_none_or(|(o, _)| t < o) => oldest = Some((t, at)),
                Look::Keep(_) | Look::Pass => {}
            }
        }
        oldest.map(|(_, i)| i)
    }

    /// One sweep over positions `0..n`: `visit(i)` drops the entry at `i` if it should go and says
    /// whether `i` was held (`false`: a free position, not counted).
    #[inline]
    pub(crate) fn sweep(&mut self, n: usize, mut visit: impl FnMut(usize) -> bool) {
        if n == 0 {
            return;
        }
        let mut looked = 0;
        let mut i = self.start(n);
        for _ in 0..n.min(SWEEP_REACH) {
            if looked == SWEEP {
                break;
            }
            let at = i;
            i = if i + 1 == n { 0 } else { i + 1 };
            self.hand = i;
            if visit(at) {
                looked += 1;
            }
        }
    }

    /// The next held position of `0..n`, going round (`None` if none is held).
    pub(crate) fn next_held(&mut self, n: usize, held: impl Fn(usize) -> bool) -> Option<usize> {
        for _ in 0..n {
            let i = self.hand % n;
            self.hand = i + 1;
            if held(i) {
                return Some(i);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_victim_is_the_first_taken_else_the_oldest_kept_never_a_passed_one() {
        let looks = [Some(Look::Keep(5)), None, Some(Look::Pass), Some(Look::Keep(3)), Some(Look::Keep(3)), Some(Look::Take)];
        let mut c = Clock::default();
        assert_eq!(c.victim(looks.len(), |i| looks[i]), Some(5), "the first taken");
        assert_eq!(c.victim(5, |i| looks[i]), Some(3), "else the oldest (the first of equals)");
        assert_eq!(c.victim(3, |_| Some(Look::Pass)), None);
        assert_eq!(c.victim(3, |_| None), None);
        // The scan stops after EVICT_SCAN held entries.
        let mut c = Clock::default();
        assert_eq!(c.victim(100, |i| Some(if i == EVICT_SCAN { Look::Take } else { Look::Keep(9) })), Some(0));
    }

    #[test]
    fn the_sweep_looks_at_a_few_held_entries_within_a_reach() {
        let mut c = Clock::default();
        let mut seen = vec![];
        c.sweep(100, |i| {
            seen.push(i);
            i % 4 == 3
        });
        assert_eq!(seen, (0..SWEEP_REACH).collect::<Vec<_>>(), "two held (3 and 7) within the reach");
        let mut next = vec![];
        c.sweep(100, |i| {
            next.push(i);
            true
        });
        assert_eq!(next, vec![8, 9], "from where the hand stopped");
        assert_eq!(Clock::default().next_held(4, |i| i == 2), Some(2));
        assert_eq!(Clock::default().next_held(4, |_| false), None);
    }
}
