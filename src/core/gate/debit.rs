//! The debit of `decide`: the tier pool and the key's bucket, the slot of the concurrency limit,
//! and the verdict.
use super::*;

impl Gate {
    #[inline(always)]
    pub(super) fn debit(&self, mut st: parking_lot::MutexGuard<'_, State>, mut d: Decision, key: Option<(&[u8], bool)>, now_ns: u64) -> Decision {
        let tier = d.tier;
        // (In shadow mode the pool is not throttled: what it refuses, it refuses as a full tier.)
        let scale = if st.shadow.is_some() { 1.0 } else { d.scale };
        let mut buf = IpKeyBuf::default();
        let mut tagged = [IP_KEY_TAG; MAX_IP_KEY_LEN + 1];
        let key = match key {
            Some((k, true)) if self.ledger.has_per_key(tier) => {
                let ip = ip_key(k, &self.cfg.ip, &mut buf);
                tagged[1..=ip.len()].copy_from_slice(ip);
                Some(&tagged[..=ip.len()])
            }
            Some((k, false)) if self.ledger.has_per_key(tier) => Some(k),
            _ => None,
        };
        let o = self.ledger.consume(tier, key, self.cfg.cost, now_ns);
        // A tier-only debit's `remaining` is the pool's tokens (a keyed one's is the key's).
        st.levels[tier] = if key.is_none() { o.remaining } else { f64::NAN };
        d.outcome = o;
        d.shadow &= o.allowed;
        if o.allowed {
            let loop_bound = Self::loop_bound(&st);
            d.slot = st.conc.try_acquire(self.protected[tier], loop_bound, now_ns);
            if d.slot == Slot::Wait && st.shadow.as_mut().is_some_and(|sh| !sh.enforce()) {
                d.slot = st.conc.take_shadow();
            }
            d.epoch = st.conc.epoch();
        }
        let c = &mut st.counters[tier];
        d.verdict = if o.allowed {
            c.admitted += 1;
            c.shadow_shed += u64::from(d.shadow);
            Verdict::Admit
        } else if o.limited_by == Limit::Key {
            c.key_limited += 1;
            Verdict::KeyLimited
        } else if scale < 1.0 {
            c.shed += 1;
            Verdict::Shed
        } else {
            c.tier_full += 1;
            Verdict::TierFull
        };
        d
    }
}
