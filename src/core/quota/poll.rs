//! The caller's tick: `poll` issues the requests due, sweeps part of the table (expired leases,
//! abandoned requests, debts to repay, idle keys) and hands over the returns; `release_all` at
//! shutdown. No timer per key: the sweep is a clock hand over the table, `sweep_per_poll` keys a tick.
use super::engine::{expire, lease_return, Quota};
use super::outcome::Action;
use super::wire::{Return, ReturnReason};

impl Quota {
    /// The work due at `now_ns`: requests to send (renewals ahead of need, provisional
    /// reconciliations, debt repayments, probes of a store that is down) and returns to send.
    pub fn poll(&mut self, now_ns: u64) -> Vec<Action> {
        let mut out = Vec::new();
        for h in std::mem::take(&mut self.due) {
            let Some(slot) = self.table.resolve(h) else { continue };
            let acc = self.table.get_mut(slot);
            acc.queued = false;
            if self.may_request(self.table.get(slot), now_ns) {
                out.push(Action::Request(self.issue(slot, now_ns)));
            }
        }
        for _ in 0..self.sweep.min(self.table.len()) {
            let Some(slot) = self.table.next_sweep() else { break };
            self.visit(slot, now_ns, &mut out);
        }
        out.extend(self.outbox.drain(..).map(Action::Return));
        out
    }

    /// One account, as the sweep reaches it.
    fn visit(&mut self, slot: u32, now_ns: u64, out: &mut Vec<Action>) {
        let acc = self.table.get_mut(slot);
        let lim = &self.limits[acc.limit.index()];
        expire(acc, now_ns, &mut self.outbox, &mut self.stats);
        // An answer later than the lease's TTL could not be used anyway: the caller broke the
        // contract (one `grant` or `fail` per request); treat it as a failure of this key only.
        if acc.pending.is_some_and(|p| now_ns >= p.sent_ns.saturating_add(lim.ttl_ns)) {
            acc.pending = None;
            acc.awaiting = 0;
            acc.retry_at_ns = now_ns.saturating_add(lim.retry_ns);
            self.stats.abandoned += 1;
        }
        let acc = self.table.get(slot);
        let lim = &self.limits[acc.limit.index()];
        if acc.debt > 0 && !acc.queued && self.may_request(acc, now_ns) {
            out.push(Action::Request(self.issue(slot, now_ns)));
        } else if acc.idle(self.idle_ttl_ns, now_ns) && acc.evictable(&lim.cfg.algorithm, lim.share_holders(acc), now_ns) {
            self.evict(slot, now_ns);
        }
    }

    /// Every unspent, unexpired lease token, to send back at shutdown; the engine is left empty.
    /// Grants still in flight come back as late (`grant` returns them). Returns not yet polled are
    /// included.
    pub fn release_all(&mut self, now_ns: u64) -> Vec<Return> {
        let mut out = std::mem::take(&mut self.outbox);
        let stats = &mut self.stats;
        self.table.drain(|mut acc| {
            let (limit, key) = (acc.limit, acc.key.clone());
            acc.leases.drain(|l| {
                let reason = if l.expires_ns <= now_ns { ReturnReason::Expired } else { ReturnReason::Released };
                if reason == ReturnReason::Expired {
                    stats.expired += l.tokens;
                }
                stats.returned += l.tokens;
                out.push(lease_return(limit, &key, l, reason, now_ns));
            });
        });
        self.due.clear();
        out
    }
}
