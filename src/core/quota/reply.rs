//! The store's answers, as the caller hands them back: `grant` and `fail`.
use super::engine::{expire, lease_return, Quota};
use super::lease::Lease;
use super::sizing::StoreView;
use super::wire::{Grant, LimitId, RequestId, Return, ReturnReason};

impl Quota {
    /// Applies the store's answer to request `id` of `key`. The grant pays the key's provisional debt
    /// first; the rest becomes a lease expiring `ttl_ns` after the request was issued. Returns the
    /// tokens the engine will not use, for the caller to send back at once: all of a grant that
    /// answers no request in flight (late: after `fail`, an abandonment, an eviction or
    /// `release_all`), of one already expired on arrival, or the smallest lease past `MAX_LEASES`.
    pub fn grant(&mut self, limit: LimitId, key: &[u8], id: RequestId, g: Grant, now_ns: u64) -> Option<Return> {
        self.store_up = true;
        self.stats.grants += 1;
        self.stats.granted += g.granted;
        let lim = &mut self.limits[limit.index()];
        lim.max_holders = lim.max_holders.max(g.holders);
        let recheck_ns = lim.recheck_ns();
        let back = |tokens: u64, lease, reason| (tokens > 0).then(|| Return { limit, key: key.into(), lease, tokens, reason, idle_ns: None });

        let answered = self.find(limit, key).filter(|&s| self.table.get(s).pending.is_some_and(|p| p.id == id));
        let Some(slot) = answered else {
            let r = back(g.granted, g.lease, ReturnReason::Late);
            self.stats.returned += r.as_ref().map_or(0, |r| r.tokens);
            return r;
        };
        let acc = self.table.get_mut(slot);
        let sent = acc.pending.take().map_or(now_ns, |p| p.sent_ns);
        acc.awaiting = 0;
        acc.retry_at_ns = 0;
        acc.view = Some(StoreView { remaining: g.remaining, holders: g.holders });
        acc.empty_until_ns = if g.remaining == 0 { now_ns.saturating_add(g.retry_after_ns.min(recheck_ns)) } else { 0 };
        expire(acc, now_ns, &mut self.outbox, &mut self.stats);

        let repaid = acc.debt.min(g.granted);
        acc.debt -= repaid;
        self.stats.repaid += repaid;
        let tokens = g.granted - repaid;
        let expires_ns = sent.saturating_add(g.ttl_ns);
        let r = if tokens == 0 {
            None
        } else if expires_ns <= now_ns {
            back(tokens, g.lease, ReturnReason::Unusable)
        } else {
            acc.leases.add(Lease::new(g.lease, tokens, expires_ns)).map(|over| lease_return(limit, key, over, ReturnReason::Overflow, now_ns))
        };
        self.stats.returned += r.as_ref().map_or(0, |r| r.tokens);
        // A grant shrunk near the limit, or one that did not cover the debt, asks again; an empty
        // grant does not (the next spend decides).
        if g.granted > 0 {
            self.renew_if_due(slot, now_ns);
        }
        r
    }

    /// The store did not answer request `id` of `key` (an error, or the caller's timeout). Until a
    /// grant comes back, unfunded keys fall back instead of waiting, and this key asks again no
    /// sooner than its limit's `retry_ms`.
    pub fn fail(&mut self, limit: LimitId, key: &[u8], id: RequestId, now_ns: u64) {
        self.store_up = false;
        self.stats.failures += 1;
        let retry_ns = self.limits[limit.index()].retry_ns;
        if let Some(s) = self.find(limit, key) {
            let acc = self.table.get_mut(s);
            if acc.pending.is_some_and(|p| p.id == id) {
                acc.pending = None;
                acc.awaiting = 0;
                acc.retry_at_ns = now_ns.saturating_add(retry_ns);
            }
        }
    }
}
