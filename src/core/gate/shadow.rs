//! Shadow mode (Envoy's `shadow_mode`): the gate makes every overload decision as it would — a shed
//! by the controller (a tier's scale at zero, the turn budget, a throttled pool run dry) and a wait
//! for a slot of the learned concurrency limit — counts it, and enforces none of it, or
//! `enforce_percent` of it spread evenly, so that a team can turn the gatekeeper on in production
//! and see what it would refuse before it does. The tiers' budgets and per-key quotas are limits the
//! user set, not overload decisions: they are enforced as always.
//!
//! The controller's scales are not applied to the ledger (the tiers' budgets run at their configured
//! rate, as without the gatekeeper); a mirror of each throttled pool (the scaled rate and burst, from
//! the pool's tokens when the throttle began) says which requests the throttle would have refused.
use crate::core::ledger::TierConfig;

pub(super) struct Shadow {
    /// The share of would-be refusals enforced, 0..=100.
    enforce_percent: f64,
    /// Percent points owed to enforcement: one refusal is enforced each time it reaches 100.
    credit: f64,
    /// Per tier, the throttled pool's tokens and when they were last settled (ns).
    tokens: Vec<f64>,
    settled_ns: Vec<u64>,
}

impl Shadow {
    pub(super) fn new(enforce_percent: f64, tiers: usize) -> Shadow {
        Shadow { enforce_percent, credit: 0.0, tokens: vec![0.0; tiers], settled_ns: vec![0; tiers] }
    }

    /// Whether the next would-be refusal is enforced: `enforce_percent` of them, evenly spaced.
    pub(super) fn enforce(&mut self) -> bool {
        self.credit += self.enforce_percent;
        if self.credit >= 100.0 {
            self.credit -= 100.0;
            true
        } else {
            false
        }
    }

    fn settle(&mut self, tier: usize, cfg: &TierConfig, scale: f64, now_ns: u64) {
        let dt = now_ns.saturating_sub(self.settled_ns[tier]) as f64 / 1e9;
        self.tokens[tier] = (self.tokens[tier] + cfg.refill_per_sec * scale * dt).min(cfg.capacity * scale);
        self.settled_ns[tier] = self.settled_ns[tier].max(now_ns);
    }

    /// The controller moved `tier` from scale `old` to `new`; `pool_tokens`: the real pool's tokens
    /// now (the mirror starts from them when a throttle begins). A lower scale clamps the burst, as
    /// the gate clamps the real pool's.
    pub(super) fn rescale(&mut self, tier: usize, cfg: &TierConfig, old: f64, new: f64, pool_tokens: f64, now_ns: u64) {
        if old >= 1.0 {
            self.tokens[tier] = pool_tokens;
            self.settled_ns[tier] = now_ns;
        } else {
            self.settle(tier, cfg, old, now_ns);
        }
        self.tokens[tier] = self.tokens[tier].min(cfg.capacity * new);
    }

    /// Whether `tier`'s pool, throttled to `scale`, would pay `cost` now (then it is paid).
    pub(super) fn pays(&mut self, tier: usize, cfg: &TierConfig, scale: f64, cost: f64, now_ns: u64) -> bool {
        self.settle(tier, cfg, scale, now_ns);
        if self.tokens[tier] >= cost {
            self.tokens[tier] -= cost;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tier() -> TierConfig {
        TierConfig { name: "t".into(), capacity: 10.0, refill_per_sec: 100.0, protected: false, per_key: None }
    }

    #[test]
    fn a_percentage_is_enforced_evenly() {
        for (pct, want) in [(0.0, 0), (25.0, 25), (50.0, 50), (100.0, 100), (12.5, 12)] {
            let mut s = Shadow::new(pct, 1);
            let n = (0..100).filter(|_| s.enforce()).count();
            assert_eq!(n, want, "{pct}%");
        }
        let mut s = Shadow::new(25.0, 1);
        let pattern: Vec<bool> = (0..8).map(|_| s.enforce()).collect();
        assert_eq!(pattern, [false, false, false, true, false, false, false, true]);
    }

    #[test]
    fn the_mirror_pays_as_the_throttled_pool_would() {
        let c = tier();
        let mut s = Shadow::new(0.0, 1);
        // Throttled to half from a full pool of 10: the burst is clamped to 5, the rate is 50/s.
        s.rescale(0, &c, 1.0, 0.5, 10.0, 0);
        assert_eq!((0..10).filter(|_| s.pays(0, &c, 0.5, 1.0, 0)).count(), 5);
        // 100 ms later: 5 more tokens.
        assert_eq!((0..10).filter(|_| s.pays(0, &c, 0.5, 1.0, 100_000_000)).count(), 5);
        // Down to a tenth: the burst clamps to 1; rising again settles at the old rate first.
        s.rescale(0, &c, 0.5, 0.1, 0.0, 200_000_000);
        assert_eq!((0..10).filter(|_| s.pays(0, &c, 0.1, 1.0, 200_000_000)).count(), 1);
        s.rescale(0, &c, 0.1, 0.5, 0.0, 300_000_000);
        assert_eq!((0..10).filter(|_| s.pays(0, &c, 0.5, 1.0, 300_000_000)).count(), 1);
    }
}
