//! What every limit algorithm answers, and the two-step protocol they share: `check` (would cost `c`
//! be admitted at `t`?, changing nothing) then `commit` (count it). Splitting the two is what lets a
//! request be checked against several limits and then counted by all of them or by none
//! (`LimitSet`): a refusal by any one leaves every other limit's state as it was.

/// A wait that never ends: the cost is larger than the limit could ever admit at once.
pub const NEVER: u64 = u64::MAX;

/// One limit's answer for one request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Check {
    /// This limit, alone, admits the request.
    pub allowed: bool,
    /// Units left once the request is counted (when allowed), or as things stand (when refused).
    pub remaining: u64,
    /// Nanoseconds until one more unit comes back (0 when the quota is full): the end of a fixed
    /// window, the moment the oldest counted request leaves a sliding one, the next whole token of a
    /// bucket. The IETF `RateLimit` header's `t`.
    pub reset_ns: u64,
    /// Refused: nanoseconds until a request of this cost could be admitted (`NEVER` when the cost is
    /// over what the limit can ever admit at once). 0 when allowed.
    pub retry_after_ns: u64,
    /// A shaper's answer: how long the request must wait before it is served (0 for everything else).
    pub delay_ns: u64,
}

/// What a limit promises, for the IETF `RateLimit-Policy` header: `quota` units per `window_ns`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    pub quota: u64,
    pub window_ns: u64,
}

/// A limit algorithm: its configuration lives in `self`, one key's state in `State`.
///
/// Contract: `commit(s, c, t)` is only called right after `check(s, c, t)` allowed, with the same
/// state, cost and time, and nothing in between (the store's lock is held across both).
pub trait Algorithm: Send + Sync + 'static {
    type State: Send + 'static;

    /// The state of a key never seen before.
    fn fresh(&self, now_ns: u64) -> Self::State;

    fn check(&self, s: &Self::State, cost: u32, now_ns: u64) -> Check;

    fn commit(&self, s: &mut Self::State, cost: u32, now_ns: u64);

    /// Whether `s` has come back to what a fresh state would answer: forgetting it loses nothing, so
    /// the store evicts such entries first and sweeps them without any timer.
    fn is_idle(&self, s: &Self::State, now_ns: u64) -> bool;

    fn policy(&self) -> Policy;

    /// Gives back `units` counted by an admission at `at_ns` (an outcome that is not counted, an
    /// operator's refund): the state as if they had not been counted, as far as they still count at
    /// `now_ns` (a unit whose window has passed is not given back twice). Never below a fresh state.
    fn refund(&self, s: &mut Self::State, units: u32, at_ns: u64, now_ns: u64);

    /// The same algorithm with another `limit` (a key's override, a per-request limit); a burst that
    /// was the limit (the default) follows it, a burst set apart is kept. `limit` >= 1.
    fn with_limit(&self, limit: u32) -> Self
    where
        Self: Sized;

    /// Counts `units` after the fact (a weight the response reported): what is left of them, up to
    /// the units remaining now, so a key is emptied but not put in debt. Returns the units counted.
    fn charge(&self, s: &mut Self::State, units: u32, now_ns: u64) -> u32 {
        let left = self.check(s, 0, now_ns).remaining.min(u64::from(units)) as u32;
        if left > 0 && self.check(s, left, now_ns).allowed {
            self.commit(s, left, now_ns);
            return left;
        }
        0
    }

    /// Heap bytes a key's state holds now (the exact window's ring), for memory reports.
    fn heap_bytes(&self, _s: &Self::State) -> usize {
        0
    }

    /// Heap bytes a key's state can hold at most.
    fn max_heap_bytes(&self) -> usize {
        0
    }
}

/// The check of the counting algorithms, from two of their functions:
/// - `avail`: units admissible now (at most `capacity`);
/// - `wait(pending, need)`: nanoseconds until `need` units are admissible, supposing `pending` more
///   were counted now (`need` at most `capacity`).
#[inline]
pub(crate) fn counted_check(capacity: u64, cost: u32, avail: u64, wait: impl Fn(u32, u64) -> u64) -> Check {
    let c = u64::from(cost);
    if c <= avail {
        let remaining = avail - c;
        let reset_ns = if remaining >= capacity { 0 } else { wait(cost, remaining + 1) };
        Check { allowed: true, remaining, reset_ns, retry_after_ns: 0, delay_ns: 0 }
    } else {
        let reset_ns = if avail >= capacity { 0 } else { wait(0, avail + 1) };
        let retry_after_ns = if c > capacity { NEVER } else { wait(0, c) };
        Check { allowed: false, remaining: avail, reset_ns, retry_after_ns, delay_ns: 0 }
    }
}

/// A u128 duration as u64 nanoseconds (saturating: a wait past 2^64 ns is `NEVER` in effect).
#[inline]
pub(crate) fn to_ns(v: u128) -> u64 {
    u64::try_from(v).unwrap_or(NEVER)
}
