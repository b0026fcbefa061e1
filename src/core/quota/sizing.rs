//! How big a lease to ask for, and when to ask.
//!
//! * **Size.** The key's local demand over one renewal period (so a lease lasts about that long),
//!   clamped to `[1, max_lease]`, and never less than the spend waiting on it needs. A key that has
//!   had no grant yet asks for at least `initial_lease`.
//! * **Near the limit** the lease shrinks toward one token: at most `max(1, remaining / (2 ×
//!   holders))` of what the store said it had left at the last grant (but still what the waiting spend
//!   needs). Each holder can then take at most half a fair share of the remainder, so the remainder
//!   is spread instead of grabbed, and the last tokens of a limit go out one at a time: near the limit
//!   the cluster is exact (CockroachDB's distributed token bucket and Doorman use the same idea).
//! * **When.** A renewal is asked ahead of need, when the balance falls below what the next
//!   `lead_time` will spend (at most `max_lease`), with at most one request in flight per key.
//!
//! **Bound** (what one process can hold of one key, unspent: the shortfall bound). A request is
//! asked only while the balance is below `max_lease` (a renewal) or below the spend's cost (a spend
//! that waits), one at a time, and its size is at most `max(max_lease, need)` with `need = debt +
//! cost − balance`. Hence held + in flight < `2 × max(M, C + A)` where `M = max_lease`, `C` the
//! largest cost asked and `A` the provisional allowance (0 for `Wait`): `2 × max_lease` when costs do
//! not exceed it.

/// What the store said at the key's last grant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreView {
    pub remaining: u64,
    pub holders: u32,
}

/// The tokens to ask for. `per_period`: the key's demand over one renewal period (`Meter`); `need`:
/// tokens a waiting spend needs beyond the balance, plus any debt (0 for a renewal ahead of need);
/// `view`: the last grant's figures, `None` before the first.
pub fn lease_size(per_period: f64, need: u64, max_lease: u64, initial_lease: u64, view: Option<StoreView>) -> u64 {
    let target = match view {
        Some(_) => per_period,
        None => per_period.max(initial_lease as f64),
    };
    // `as` saturates, and NaN cannot come from a meter's counts.
    let want = (target.ceil() as u64).clamp(1, max_lease).max(need);
    match view {
        Some(v) => {
            let fair_half = (v.remaining / (2 * u64::from(v.holders.max(1)))).max(1);
            want.min(fair_half.max(need))
        }
        None => want,
    }
}

/// Whether a key holding `balance` should renew now: below what the next lead time will spend
/// (`lead_expected`, from the meter), capped at `max_lease` so that a renewal never waits for more
/// than one lease's worth of balance. A key nobody spends (`lead_expected == 0`) never renews.
pub fn renewal_due(balance: u64, lead_expected: f64, max_lease: u64) -> bool {
    balance < (lead_expected.ceil() as u64).min(max_lease)
}

#[cfg(test)]
mod tests {
    use super::*;

    const V: fn(u64, u32) -> Option<StoreView> = |remaining, holders| Some(StoreView { remaining, holders });

    #[test]
    fn a_lease_lasts_a_renewal_period_within_bounds() {
        assert_eq!(lease_size(37.2, 0, 1000, 1, V(10_000, 1)), 38);
        assert_eq!(lease_size(0.0, 0, 1000, 1, V(10_000, 1)), 1, "never below one token");
        assert_eq!(lease_size(5000.0, 0, 1000, 1, V(1_000_000, 2)), 1000, "clamped to maxLease");
        assert_eq!(lease_size(5000.0, 1500, 1000, 1, V(1_000_000, 2)), 1500, "a waiting spend's need is asked whole");
    }

    #[test]
    fn a_first_lease_is_at_least_the_initial_size() {
        assert_eq!(lease_size(1.0, 1, 1000, 20, None), 20);
        assert_eq!(lease_size(50.0, 1, 1000, 20, None), 50);
    }

    #[test]
    fn near_the_limit_the_lease_shrinks_to_one_token() {
        // 100 left among 5 holders: at most 100 / 10 = 10 each.
        assert_eq!(lease_size(400.0, 0, 1000, 1, V(100, 5)), 10);
        assert_eq!(lease_size(400.0, 0, 1000, 1, V(9, 5)), 1);
        assert_eq!(lease_size(400.0, 0, 1000, 1, V(0, 5)), 1);
        // ... but a waiting spend of 3 still asks for 3 (the store grants what it has).
        assert_eq!(lease_size(400.0, 3, 1000, 1, V(9, 5)), 3);
        // No holder count (0) reads as one.
        assert_eq!(lease_size(400.0, 0, 1000, 1, V(100, 0)), 50);
    }

    #[test]
    fn renews_below_the_lead_times_spend_capped_at_max_lease() {
        assert!(renewal_due(4, 4.5, 1000));
        assert!(!renewal_due(5, 4.5, 1000));
        assert!(!renewal_due(0, 0.0, 1000), "an idle key does not renew");
        assert!(renewal_due(0, 0.1, 1000));
        assert!(!renewal_due(10, 1e9, 10), "capped at maxLease");
        assert!(renewal_due(9, 1e9, 10));
    }
}
