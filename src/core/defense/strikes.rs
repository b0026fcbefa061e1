//! Strikes: counted events per key, and each key's offence history, in a bounded store.
//!
//! Each rule counts its events per key exactly, in a ring of the last `threshold − 1` event times (the
//! `threshold`-th within the window fires the rule and empties the ring). A key also remembers how many
//! bans it has had and until when that counts (`remember_until_ns`: its last ban's end plus the
//! escalation's memory), and may be cleared (`cleared_until_ns`: a challenge pass) so that its events
//! count for nothing until then.
//!
//! The store is `core::limit::Store`: keyed hash, `max_tracked` keys, idle entries (no live strike,
//! nothing remembered, not cleared) evicted first and swept on insert. A flood of unique keys evicts
//! the least recently touched, which may forget a repeat offender's history; its bans themselves live
//! in the ban table.
use super::rules::{StrikeKind, StrikeRule};
use crate::core::limit::Store;
use std::collections::VecDeque;

#[derive(Debug, Default)]
pub(crate) struct StrikeState {
    /// One ring per rule; empty until the key's first event.
    rings: Vec<VecDeque<u64>>,
    offenses: u32,
    remember_until_ns: u64,
    cleared_until_ns: u64,
}

/// A rule fired: ban the key for its `offense`-th time within the memory period.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fired {
    pub(crate) rule: usize,
    pub(crate) offense: u32,
}

pub(crate) struct Strikes {
    rules: Vec<StrikeRule>,
    store: Store<StrikeState>,
}

impl Strikes {
    pub(crate) fn new(rules: Vec<StrikeRule>, max_tracked: usize) -> Strikes {
        Strikes { rules, store: Store::new(max_tracked) }
    }

    pub(crate) fn rules(&self) -> &[StrikeRule] {
        &self.rules
    }

    fn is_idle(rules: &[StrikeRule], s: &StrikeState, now_ns: u64) -> bool {
        s.remember_until_ns <= now_ns
            && s.cleared_until_ns <= now_ns
            && s.rings.iter().zip(rules).all(|(r, rule)| r.back().is_none_or(|&t| t.saturating_add(rule.window_ns) <= now_ns))
    }

    /// Runs `f` on `key`'s state, made fresh if the store has none (idle entries make room first).
    fn with<R>(&self, key: &[u8], now_ns: u64, f: impl FnOnce(&mut StrikeState) -> R) -> R {
        let rules = &self.rules;
        self.store.with(key, now_ns, |s| Self::is_idle(rules, s, now_ns), StrikeState::default, f)
    }

    /// Counts an event of `kind` for `key`; returns the rule that fired, if one did (the first of
    /// those the event completes, in rule order; the event counts in every rule of its kind).
    pub(crate) fn record(&self, key: &[u8], kind: StrikeKind, now_ns: u64) -> Option<Fired> {
        let rules = &self.rules;
        if !rules.iter().any(|r| r.on == kind) {
            return None;
        }
        self.with(key, now_ns, |s| {
            if now_ns < s.cleared_until_ns {
                return None;
            }
            if s.rings.is_empty() {
                s.rings = (0..rules.len()).map(|_| VecDeque::new()).collect();
            }
            let mut fired = None;
            for (i, rule) in rules.iter().enumerate().filter(|(_, r)| r.on == kind) {
                let ring = &mut s.rings[i];
                while ring.front().is_some_and(|&t| t.saturating_add(rule.window_ns) <= now_ns) {
                    ring.pop_front();
                }
                if ring.len() + 1 >= rule.threshold as usize {
                    ring.clear();
                    fired = fired.or(Some(i));
                } else {
                    ring.push_back(ring.back().map_or(now_ns, |&b| b.max(now_ns)));
                }
            }
            let rule = fired?;
            s.offenses = if now_ns < s.remember_until_ns { s.offenses.saturating_add(1) } else { 1 };
            Some(Fired { rule, offense: s.offenses })
        })
    }

    /// Notes that `key` had its `offense`-th ban, until `until_ns` (`None`: permanently): its offences
    /// count until then plus `memory_ns`.
    pub(crate) fn remember(&self, key: &[u8], offense: u32, until_ns: Option<u64>, memory_ns: u64, now_ns: u64) {
        let until = until_ns.map_or(u64::MAX, |u| u.saturating_add(memory_ns));
        self.with(key, now_ns, |s| {
            s.remember_until_ns = s.remember_until_ns.max(until);
            s.offenses = s.offenses.max(offense);
        });
    }

    /// Clears `key`'s strikes, and ignores its events until `until_ns` (a challenge pass's lifetime).
    pub(crate) fn clear_until(&self, key: &[u8], until_ns: u64, now_ns: u64) {
        self.with(key, now_ns, |s| {
            s.rings.iter_mut().for_each(VecDeque::clear);
            s.cleared_until_ns = s.cleared_until_ns.max(until_ns);
        });
    }

    /// Forgets `key` entirely (strikes and history): an operator lifted its ban.
    pub(crate) fn forget(&self, key: &[u8]) {
        self.store.remove(key);
    }

    /// Live strikes of `key` for rule `rule` at `now_ns`.
    pub(crate) fn count(&self, key: &[u8], rule: usize, now_ns: u64) -> usize {
        let w = self.rules[rule].window_ns;
        self.store.get(key, |s| s.and_then(|s| s.rings.get(rule)).map_or(0, |r| r.iter().filter(|&&t| t.saturating_add(w) > now_ns).count()))
    }

    /// Live strikes of `key` under every rule together (the challenge's soft threshold): one lookup.
    pub(crate) fn total(&self, key: &[u8], now_ns: u64) -> usize {
        let rules = &self.rules;
        self.store.get(key, |s| {
            s.map_or(0, |s| s.rings.iter().zip(rules).map(|(r, rule)| r.iter().filter(|&&t| t.saturating_add(rule.window_ns) > now_ns).count()).sum())
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.store.len()
    }

    #[cfg(test)]
    pub(crate) fn store(&self) -> &Store<StrikeState> {
        &self.store
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn strikes() -> Strikes {
        Strikes::new(
            vec![
                StrikeRule { name: "rl".into(), on: StrikeKind::RateLimited, threshold: 3, window_ns: 60 * S, ban_ns: 300 * S },
                StrikeRule { name: "probe".into(), on: StrikeKind::Probe, threshold: 2, window_ns: 10 * S, ban_ns: 600 * S },
            ],
            100,
        )
    }

    #[test]
    fn the_threshold_th_event_within_the_window_fires() {
        let s = strikes();
        assert_eq!(s.record(b"k", StrikeKind::RateLimited, 0), None);
        assert_eq!(s.record(b"k", StrikeKind::RateLimited, 30 * S), None);
        assert_eq!(s.count(b"k", 0, 30 * S), 2);
        s.record(b"k", StrikeKind::Probe, 30 * S);
        assert_eq!((s.total(b"k", 30 * S), s.total(b"k", 41 * S), s.total(b"other", 0)), (3, 2, 0));
        // The first strike has left the window at 60 s: two live, no ban.
        assert_eq!(s.record(b"k", StrikeKind::RateLimited, 60 * S), None);
        assert_eq!(s.record(b"k", StrikeKind::RateLimited, 61 * S), Some(Fired { rule: 0, offense: 1 }));
        assert_eq!(s.count(b"k", 0, 61 * S), 0, "firing empties the ring");
        // Kinds count apart.
        assert_eq!(s.record(b"k", StrikeKind::Probe, 62 * S), None);
        assert_eq!(s.record(b"k", StrikeKind::Probe, 63 * S), Some(Fired { rule: 1, offense: 1 }));
    }

    #[test]
    fn offences_count_while_remembered() {
        let s = strikes();
        let fire = |t: u64| {
            s.record(b"k", StrikeKind::Probe, t);
            s.record(b"k", StrikeKind::Probe, t).unwrap().offense
        };
        assert_eq!(fire(0), 1);
        s.remember(b"k", 0, Some(600 * S), 3600 * S, 0);
        assert_eq!(fire(700 * S), 2);
        s.remember(b"k", 0, Some(1900 * S), 3600 * S, 700 * S);
        assert_eq!(fire(5499 * S), 3);
        s.remember(b"k", 0, Some(5500 * S), 3600 * S, 5499 * S);
        assert_eq!(fire(9100 * S), 1, "forgotten after the memory period");
        s.remember(b"k", 0, None, 3600 * S, 9100 * S);
        assert_eq!(fire(u64::MAX / 2), 2, "a permanent ban is remembered for ever");
    }

    #[test]
    fn a_cleared_key_counts_nothing_until_then() {
        let s = strikes();
        s.record(b"k", StrikeKind::RateLimited, 0);
        s.record(b"k", StrikeKind::RateLimited, 1);
        s.clear_until(b"k", 100 * S, 2);
        assert_eq!(s.count(b"k", 0, 2), 0);
        for t in 3..50 {
            assert_eq!(s.record(b"k", StrikeKind::RateLimited, t), None);
        }
        assert_eq!(s.count(b"k", 0, 50), 0);
        s.record(b"k", StrikeKind::RateLimited, 100 * S);
        s.record(b"k", StrikeKind::RateLimited, 100 * S);
        assert!(s.record(b"k", StrikeKind::RateLimited, 100 * S).is_some());
    }

    #[test]
    fn a_flood_of_unique_keys_stays_at_max_tracked() {
        let s = strikes();
        for i in 0..30_000u32 {
            s.record(&i.to_le_bytes(), StrikeKind::RateLimited, u64::from(i));
        }
        assert_eq!(s.len(), 100);
        assert!(s.store().allocated().0 <= 100);
    }
}
