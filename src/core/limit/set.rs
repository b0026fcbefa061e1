//! Several named limits, evaluated all or nothing: a request is counted by every limit that applies or
//! by none. The caller computes each limit's key (the JS side knows the request: client IP, an IP
//! prefix, a header, a function) and passes `None` for a limit that does not apply to this request.
//!
//! Evaluation runs in the limits' order. Each limit locks its key's state, checks, and passes on to the
//! next while holding the lock; the first refusal stops the walk and unwinds without counting anything,
//! and an admission commits every limit on the way back. Locks are always taken in limit order and a
//! limit owns its store, so decisions on other threads cannot deadlock against each other.
//!
//! The result names the refusing limit (its index: `LimitSet::name`), and for every limit that was
//! evaluated its check (remaining, reset), which with `policy` gives what the IETF `RateLimit` and
//! `RateLimit-Policy` headers carry, one policy per limit.
use super::algorithm::{Check, Policy};
use super::keyed::Keyed;
use super::overrides::{Full, Overrides};
use super::spec::LimitSpec;
use crate::core::ledger::ConfigError;

/// Most named limits in one set (one bit each in `Decision::evaluated`).
pub const MAX_LIMITS: usize = 32;

/// One request's answer from a `LimitSet`. Reused across calls (no allocation per decision).
#[derive(Clone, Debug)]
pub struct Decision {
    pub admitted: bool,
    /// The limit that refused (the first to, in order).
    pub refused_by: Option<usize>,
    /// Refused: when to retry (the refusing limit's `retry_after_ns`).
    pub retry_after_ns: u64,
    /// Admitted: how long a shaper asks the request to wait (the longest of them).
    pub delay_ns: u64,
    /// Bit i: `checks[i]` holds limit i's check for this request.
    pub evaluated: u32,
    pub checks: [Check; MAX_LIMITS],
}

impl Default for Decision {
    fn default() -> Self {
        Decision { admitted: false, refused_by: None, retry_after_ns: 0, delay_ns: 0, evaluated: 0, checks: [Check::default(); MAX_LIMITS] }
    }
}

/// The limit a response speaks of (`req.rateLimit`, the single-limit `RateLimit` fields) and its figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tightest {
    pub index: usize,
    pub remaining: u64,
    pub reset_ns: u64,
}

impl Decision {
    /// The evaluated limits' indices and checks, in order.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &Check)> {
        self.checks.iter().enumerate().filter(|(i, _)| self.evaluated & (1 << i) != 0)
    }

    /// The tightest limit of this decision: the one that refused, else the evaluated one with the
    /// fewest units left, a tie going to the later reset (then to the first in order). `None` when no
    /// limit applied.
    pub fn tightest(&self) -> Option<Tightest> {
        let tighter = |a: &Check, b: &Check| a.remaining < b.remaining || (a.remaining == b.remaining && a.reset_ns > b.reset_ns);
        let index = self.refused_by.or_else(|| self.iter().reduce(|best, c| if tighter(c.1, best.1) { c } else { best }).map(|(i, _)| i))?;
        let c = &self.checks[index];
        Some(Tightest { index, remaining: c.remaining, reset_ns: c.reset_ns })
    }
}

struct Named {
    name: String,
    limit: Box<dyn Keyed>,
}

pub struct LimitSet {
    limits: Vec<Named>,
    overrides: Overrides,
}

/// One key of one limit as it stands (`LimitSet::peek`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyState {
    /// The key's limit: its override, else the configured one.
    pub limit: u64,
    pub remaining: u64,
    pub reset_ns: u64,
    pub overridden: bool,
}

impl LimitSet {
    /// Validates every spec (errors name `limits[i].<option>`) and builds the set.
    pub fn new(specs: &[LimitSpec]) -> Result<LimitSet, ConfigError> {
        if specs.len() > MAX_LIMITS {
            return Err(ConfigError(format!("limits must list at most {MAX_LIMITS} limits (got {})", specs.len())));
        }
        let mut limits = Vec::with_capacity(specs.len());
        for (i, s) in specs.iter().enumerate() {
            if let Some(j) = specs[..i].iter().position(|o| o.name == s.name) {
                return Err(ConfigError(format!("limits[{i}].name {:?} is a duplicate of limits[{j}].name", s.name)));
            }
            limits.push(Named { name: s.name.clone(), limit: s.build(&format!("limits[{i}]"))? });
        }
        let overrides = Overrides::new(limits.len());
        Ok(LimitSet { limits, overrides })
    }

    pub fn len(&self) -> usize {
        self.limits.len()
    }

    pub fn is_empty(&self) -> bool {
        self.limits.is_empty()
    }

    pub fn name(&self, i: usize) -> &str {
        &self.limits[i].name
    }

    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.limits.iter().position(|l| l.name == name)
    }

    pub fn policy(&self, i: usize) -> Policy {
        self.limits[i].limit.policy()
    }

    pub fn limit(&self, i: usize) -> &dyn Keyed {
        &*self.limits[i].limit
    }

    /// Decides a request of `cost` at `now_ns`: `keys[i]` is limit i's key, `None` where it does not
    /// apply (`keys.len()` must be `len()`). Returns `out.admitted`.
    pub fn decide(&self, keys: &[Option<&[u8]>], cost: u32, now_ns: u64, out: &mut Decision) -> bool {
        self.decide_costs(keys, std::slice::from_ref(&cost), now_ns, out)
    }

    /// As `decide`, with a cost per limit (`costs[i]` for limit i; one cost alone applies to every
    /// limit): a limit may weigh a request differently from the others.
    pub fn decide_costs(&self, keys: &[Option<&[u8]>], costs: &[u32], now_ns: u64, out: &mut Decision) -> bool {
        assert_eq!(keys.len(), self.limits.len(), "one key (or None) per limit");
        assert!(costs.len() == 1 || costs.len() == keys.len(), "one cost, or one per limit");
        out.admitted = false;
        out.refused_by = None;
        out.retry_after_ns = 0;
        out.delay_ns = 0;
        out.evaluated = 0;
        out.admitted = self.from(0, keys, costs, now_ns, out);
        if !out.admitted {
            // The walk stopped at the refusal; the limits after it that apply are read (not counted)
            // so that a 429 can list every limit that applied, as the RateLimit fields do.
            for (j, key) in keys.iter().enumerate() {
                if let (Some(key), true) = (key, out.evaluated & (1 << j) == 0) {
                    // Cost 0: the units left as things stand.
                    out.checks[j] = Check { delay_ns: 0, ..self.limits[j].limit.peek(key, self.overrides.get(j, key), now_ns) };
                    out.evaluated |= 1 << j;
                }
            }
        }
        out.admitted
    }

    /// Limits `i..`, under the locks the caller holds for `..i`.
    fn from(&self, i: usize, keys: &[Option<&[u8]>], costs: &[u32], now_ns: u64, out: &mut Decision) -> bool {
        let Some(i) = (i..keys.len()).find(|&j| keys[j].is_some()) else {
            return true;
        };
        let key = keys[i].unwrap_or_default();
        let cost = if costs.len() == 1 { costs[0] } else { costs[i] };
        let own = self.overrides.get(i, key);
        let (ok, check) = self.limits[i].limit.nest_as(key, own, cost, now_ns, &mut |c| {
            if !c.allowed {
                out.refused_by = Some(i);
                out.retry_after_ns = c.retry_after_ns;
                return false;
            }
            self.from(i + 1, keys, costs, now_ns, out)
        });
        out.checks[i] = check;
        out.evaluated |= 1 << i;
        if ok {
            out.delay_ns = out.delay_ns.max(check.delay_ns);
        }
        ok
    }
}

/// The operator's and the outcome's access to one key of one limit (`i` < `len()`), off the hot path.
impl LimitSet {
    pub fn overrides(&self) -> &Overrides {
        &self.overrides
    }

    /// Key `key` of limit `i` as it stands, without counting anything or inserting the key.
    pub fn peek(&self, i: usize, key: &[u8], now_ns: u64) -> KeyState {
        let own = self.overrides.get(i, key);
        let c = self.limits[i].limit.peek(key, own, now_ns);
        let limit = match own {
            Some(l) => self.limits[i].limit.policy_as(l).quota,
            None => self.policy(i).quota,
        };
        KeyState { limit, remaining: c.remaining, reset_ns: c.reset_ns, overridden: self.overrides.operator(i, key).is_some() }
    }

    /// Gives back `units` that an admission at `at_ns` counted (see `Algorithm::refund`).
    pub fn refund(&self, i: usize, key: &[u8], units: u32, at_ns: u64, now_ns: u64) -> bool {
        self.limits[i].limit.refund(key, self.overrides.get(i, key), units, at_ns, now_ns)
    }

    /// Counts `units` after the fact, up to what is left; the units counted.
    pub fn charge(&self, i: usize, key: &[u8], units: u32, now_ns: u64) -> u32 {
        self.limits[i].limit.charge(key, self.overrides.get(i, key), units, now_ns)
    }

    /// Forgets what key `key` of limit `i` has counted (its override stays); whether it held any.
    pub fn reset(&self, i: usize, key: &[u8]) -> bool {
        self.limits[i].limit.remove(key)
    }

    pub fn set_override(&self, i: usize, key: &[u8], limit: u32) -> Result<(), Full> {
        self.overrides.set(i, key, limit)
    }

    pub fn clear_override(&self, i: usize, key: &[u8]) -> bool {
        self.overrides.clear(i, key)
    }

    /// Key `key` of limit `i` is limited to `limit` from this request on (`None`: the configured limit).
    pub fn set_per_request(&self, i: usize, key: &[u8], limit: Option<u32>) {
        self.overrides.set_per_request(i, key, limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::limit::spec::AlgorithmKind;

    const MS: u64 = 1_000_000;

    fn set() -> LimitSet {
        LimitSet::new(&[
            LimitSpec::new("per-ip", AlgorithmKind::FixedWindow, 5.0, 1000.0),
            LimitSpec::new("per-user", AlgorithmKind::SlidingWindow, 2.0, 1000.0),
            LimitSpec::new("global", AlgorithmKind::TokenBucket, 100.0, 1000.0),
        ])
        .unwrap()
    }

    #[test]
    fn one_refusal_debits_no_limit() {
        let s = set();
        let mut d = Decision::default();
        let keys = [Some(&b"1.2.3.4"[..]), Some(&b"alice"[..]), Some(&b"all"[..])];
        assert!(s.decide(&keys, 1, 0, &mut d));
        assert!(s.decide(&keys, 1, 0, &mut d));
        let rem: Vec<u64> = d.iter().map(|(_, c)| c.remaining).collect();
        assert_eq!(rem, vec![3, 0, 98]);
        // per-user is full: refused, and neither per-ip nor global counts it.
        assert!(!s.decide(&keys, 1, 10 * MS, &mut d));
        assert_eq!(d.refused_by, Some(1));
        assert_eq!(s.name(1), "per-user");
        assert_eq!(d.retry_after_ns, 990 * MS);
        assert_eq!(d.evaluated, 0b111, "the limits after the refusal are read for the headers");
        assert_eq!(d.checks[2].remaining, 99, "98 and 10 ms of refill, as things stand");
        assert_eq!(d.checks[0].remaining, 3, "per-ip reports its state as it stands");
        assert!(d.checks[0].allowed && !d.checks[1].allowed);
        assert_eq!(s.limit(0).check(b"1.2.3.4", 0, 10 * MS).remaining, 3);
        assert_eq!(s.limit(2).check(b"all", 0, 10 * MS).remaining, 99, "98 and 10 ms of refill: nothing taken");
        // Another user on the same IP is admitted and counted by per-ip and global.
        let bob = [Some(&b"1.2.3.4"[..]), Some(&b"bob"[..]), Some(&b"all"[..])];
        assert!(s.decide(&bob, 1, 10 * MS, &mut d));
        assert_eq!(d.checks[0].remaining, 2);
    }

    #[test]
    fn a_refusal_by_the_last_limit_debits_the_earlier_ones_nothing() {
        let s = LimitSet::new(&[
            LimitSpec::new("a", AlgorithmKind::Gcra, 10.0, 1000.0),
            LimitSpec::new("b", AlgorithmKind::SlidingCounter, 10.0, 1000.0),
            LimitSpec::new("c", AlgorithmKind::FixedWindow, 1.0, 1000.0),
        ])
        .unwrap();
        let mut d = Decision::default();
        let k = [Some(&b"k"[..]); 3];
        assert!(s.decide(&k, 1, 0, &mut d));
        for _ in 0..100 {
            assert!(!s.decide(&k, 1, 0, &mut d));
            assert_eq!(d.refused_by, Some(2));
        }
        assert_eq!(s.limit(0).check(b"k", 0, 0).remaining, 9);
        assert_eq!(s.limit(1).check(b"k", 0, 0).remaining, 9);
    }

    #[test]
    fn limits_that_do_not_apply_are_skipped_and_shaper_delays_are_reported() {
        let mut g = LimitSpec::new("shape", AlgorithmKind::Gcra, 10.0, 1000.0);
        g.burst = Some(1.0);
        g.max_delay_ms = Some(500.0);
        let s = LimitSet::new(&[LimitSpec::new("hdr", AlgorithmKind::FixedWindow, 1.0, 1000.0), g]).unwrap();
        let mut d = Decision::default();
        for expect in [0, 100 * MS, 200 * MS] {
            assert!(s.decide(&[None, Some(b"x")], 1, 0, &mut d));
            assert_eq!((d.delay_ns, d.evaluated), (expect, 0b10));
        }
        assert!(s.decide(&[Some(b"h"), Some(b"x")], 1, 0, &mut d));
        assert_eq!(d.delay_ns, 300 * MS);
        // hdr refuses: the shaper's slot is not taken.
        assert!(!s.decide(&[Some(b"h"), Some(b"x")], 1, 0, &mut d));
        assert!(s.decide(&[None, Some(b"x")], 1, 0, &mut d));
        assert_eq!(d.delay_ns, 400 * MS);
        assert!(s.decide(&[None, None], 1, 0, &mut d));
        assert_eq!(d.evaluated, 0);
    }

    #[test]
    fn each_limit_can_weigh_the_request_differently() {
        let s = set();
        let mut d = Decision::default();
        let keys = [Some(&b"1.2.3.4"[..]), Some(&b"alice"[..]), Some(&b"all"[..])];
        assert!(s.decide_costs(&keys, &[1, 2, 10], 0, &mut d));
        let rem: Vec<u64> = d.iter().map(|(_, c)| c.remaining).collect();
        assert_eq!(rem, vec![4, 0, 90]);
        // per-user has nothing left for a cost of 1, but a cost of 0 there still passes.
        assert!(!s.decide_costs(&keys, &[1, 1, 1], 0, &mut d));
        assert!(s.decide_costs(&keys, &[4, 0, 1], 0, &mut d));
        assert_eq!(d.checks[0].remaining, 0);
    }

    #[test]
    fn policies_and_names_for_the_headers() {
        let s = set();
        assert_eq!(s.policy(0), Policy { quota: 5, window_ns: 1000 * MS });
        assert_eq!(s.index_of("global"), Some(2));
        let dup = LimitSet::new(&[LimitSpec::new("a", AlgorithmKind::Gcra, 1.0, 1.0), LimitSpec::new("a", AlgorithmKind::Gcra, 1.0, 1.0)]);
        assert_eq!(dup.err().unwrap().0, "limits[1].name \"a\" is a duplicate of limits[0].name");
        let bad = LimitSet::new(&[LimitSpec::new("a", AlgorithmKind::Gcra, 1.0, f64::NAN)]);
        assert!(bad.err().unwrap().0.starts_with("limits[0].windowMs"));
    }

    /// Concurrent decisions: two threads hammer two limits that share one key; all or nothing must hold
    /// under the interleaving (the per-key counts agree at the end).
    #[test]
    fn all_or_nothing_holds_across_threads() {
        let s = std::sync::Arc::new(
            LimitSet::new(&[LimitSpec::new("a", AlgorithmKind::FixedWindow, 1000.0, 1e9), LimitSpec::new("b", AlgorithmKind::SlidingWindow, 700.0, 1e9)])
                .unwrap(),
        );
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let s = s.clone();
                std::thread::spawn(move || {
                    let mut d = Decision::default();
                    (0..500).filter(|_| s.decide(&[Some(b"k"), Some(b"k")], 1, 5, &mut d)).count()
                })
            })
            .collect();
        let admitted: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(admitted, 700);
        assert_eq!(s.limit(0).check(b"k", 0, 5).remaining, 300);
        assert_eq!(s.limit(1).check(b"k", 0, 5).remaining, 0);
    }
}
