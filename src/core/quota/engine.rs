//! The engine: one process's side of the lease protocol, for every key of every limit it funds.
//! `try_spend` decides from local state only; store calls are the caller's, in the background
//! (`Spend::NeedLease`, `poll`), and come back through `grant` / `fail` (`reply.rs`); `poll` also
//! sweeps for expiry, debts and idleness (`poll.rs`). Not thread-safe by itself (`&mut self`): the
//! binding holds it behind one lock.
use super::account::{Account, Pending};
use super::config::{validate, Algorithm, ConfigError, Fallback, LimitConfig, QuotaConfig, Unfunded};
use super::fallback::Share;
use super::lease::{Lease, MAX_LEASES};
use super::outcome::{Refusal, Source, Spend, Stats};
use super::sizing::{lease_size, renewal_due};
use super::table::{Handle, Table};
use super::wire::{LimitId, Request, RequestId, Return, ReturnReason};

/// The most returns held for the caller between polls; past it they are dropped (and counted):
/// a lost return only strands its tokens until the lease's TTL.
pub const MAX_OUTBOX: usize = 4096;

fn ms_to_ns(ms: f64) -> u64 {
    (ms * 1e6).round() as u64
}

pub(crate) struct LimitState {
    pub cfg: LimitConfig,
    pub renewal_ns: u64,
    pub lead_ns: u64,
    pub ttl_ns: u64,
    pub retry_ns: u64,
    /// The largest holder count any grant of this limit has reported: the fallback share divides
    /// by it (the safe direction is the larger count).
    pub max_holders: u32,
}

impl LimitState {
    /// The longest a key with demand trusts the store's "nothing left before then": other holders
    /// hand tokens back (expiry, idleness, a sliding window's spent leases) that the store cannot
    /// announce, so the key asks again within one renewal period, and within one window.
    pub fn recheck_ns(&self) -> u64 {
        match self.cfg.algorithm {
            Algorithm::Window { window_ms, .. } => self.renewal_ns.min(ms_to_ns(window_ms)),
            Algorithm::TokenBucket { .. } => self.renewal_ns,
        }
    }

    /// The `H` of the fallback share for `acc`.
    pub fn share_holders(&self, acc: &Account) -> u32 {
        let key = acc.view.map_or(0, |v| v.holders);
        self.cfg.min_holders.max(self.max_holders).max(key)
    }
}

/// One process's lease engine.
pub struct Quota {
    pub(crate) limits: Vec<LimitState>,
    pub(crate) table: Table,
    /// Accounts with a request to issue at the next `poll`.
    pub(crate) due: Vec<Handle>,
    pub(crate) outbox: Vec<Return>,
    /// Whether the last request answered was granted (a failure makes unfunded keys fall back
    /// at once instead of waiting on a store that is not answering).
    pub(crate) store_up: bool,
    pub(crate) next_id: u64,
    pub(crate) idle_ttl_ns: u64,
    pub(crate) sweep: usize,
    pub(crate) stats: Stats,
}

impl Quota {
    pub fn new(cfg: QuotaConfig) -> Result<Quota, ConfigError> {
        validate(&cfg)?;
        let limits = cfg
            .limits
            .into_iter()
            .map(|c| LimitState {
                renewal_ns: ms_to_ns(c.renewal_period_ms),
                lead_ns: ms_to_ns(c.lead_time_ms),
                ttl_ns: ms_to_ns(c.lease_ttl_ms),
                retry_ns: ms_to_ns(c.retry_ms),
                max_holders: 0,
                cfg: c,
            })
            .collect();
        Ok(Quota {
            limits,
            table: Table::new(cfg.max_keys),
            due: Vec::new(),
            outbox: Vec::new(),
            store_up: true,
            next_id: 1,
            idle_ttl_ns: ms_to_ns(cfg.idle_ttl_ms),
            sweep: cfg.sweep_per_poll,
            stats: Stats::default(),
        })
    }

    /// The id of the limit named `name`.
    pub fn limit(&self, name: &str) -> Option<LimitId> {
        self.limits.iter().position(|l| l.cfg.name == name).map(|i| LimitId(i as u16))
    }

    /// The id of the `i`-th configured limit.
    pub fn limit_at(&self, i: usize) -> Option<LimitId> {
        (i < self.limits.len()).then_some(LimitId(i as u16))
    }

    pub fn limit_config(&self, limit: LimitId) -> &LimitConfig {
        &self.limits[limit.index()].cfg
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Keys tracked now.
    pub fn keys(&self) -> usize {
        self.table.len()
    }

    pub fn store_up(&self) -> bool {
        self.store_up
    }

    /// Whether `poll` has work now (a request due or returns waiting): the caller may poll at once
    /// rather than at its next tick.
    pub fn wants_poll(&self) -> bool {
        !self.due.is_empty() || !self.outbox.is_empty()
    }

    /// Unexpired lease tokens `key` holds at `now_ns` (0 if untracked).
    pub fn held(&self, limit: LimitId, key: &[u8], now_ns: u64) -> u64 {
        self.find(limit, key).map_or(0, |s| self.table.get(s).leases.live(now_ns))
    }

    /// Tokens `key` owes for provisional admissions.
    pub fn debt(&self, limit: LimitId, key: &[u8]) -> u64 {
        self.find(limit, key).map_or(0, |s| self.table.get(s).debt)
    }

    /// Whether a request for `key` is in flight.
    pub fn pending(&self, limit: LimitId, key: &[u8]) -> bool {
        self.find(limit, key).is_some_and(|s| self.table.get(s).pending.is_some())
    }

    pub(crate) fn find(&self, limit: LimitId, key: &[u8]) -> Option<u32> {
        self.table.find(self.table.hash(limit, key), limit, key)
    }

    /// Spends `cost` tokens of `key` under `limit` at `now_ns`, from local state only.
    ///
    /// In order: unexpired leases (exact); if too little and the store has said it is empty, a
    /// refusal until it may grant again; if the store is down, the fallback (`Open`: the safe share;
    /// `Closed`: refuse); otherwise the unfunded policy (`Provisional`: on credit while the debt
    /// stays within the allowance; `Wait`: a request to wait on, or the one in flight).
    ///
    /// # Panics
    /// If `limit` is not one of this engine's.
    pub fn try_spend(&mut self, limit: LimitId, key: &[u8], cost: u64, now_ns: u64) -> Spend {
        let Some(slot) = self.account(limit, key, now_ns) else {
            self.stats.refused += 1;
            let retry_after_ns = self.limits[limit.index()].retry_ns;
            return Spend::Refused { reason: Refusal::Full, retry_after_ns };
        };
        let lim = &self.limits[limit.index()];
        let acc = self.table.get_mut(slot);
        acc.last_used_ns = now_ns;
        acc.meter.add(cost, now_ns, lim.renewal_ns);
        expire(acc, now_ns, &mut self.outbox, &mut self.stats);
        let (outbox, stats, report) = (&mut self.outbox, &mut self.stats, lim.cfg.spent_returns);
        let (limit_id, key_ref) = (acc.limit, &acc.key);
        let spent = acc.leases.spend(cost, now_ns, |l| {
            if report {
                hand_back(outbox, stats, lease_return(limit_id, key_ref, l, ReturnReason::Spent, now_ns));
            }
        });
        if spent {
            self.stats.spent_lease += cost;
            self.renew_if_due(slot, now_ns);
            return Spend::Spent(Source::Lease);
        }
        if acc.empty_until_ns > now_ns {
            self.stats.refused += 1;
            return Spend::Refused { reason: Refusal::Exhausted, retry_after_ns: acc.empty_until_ns - now_ns };
        }
        if !self.store_up {
            return self.fall_back(slot, cost, now_ns);
        }
        if let Unfunded::Provisional { allowance } = lim.cfg.unfunded {
            if acc.debt.saturating_add(cost) <= allowance {
                acc.debt += cost;
                self.stats.spent_provisional += cost;
                if acc.pending.is_none() {
                    self.enqueue(slot);
                }
                return Spend::Spent(Source::Provisional);
            }
        }
        acc.awaiting = acc.awaiting.saturating_add(cost);
        if acc.pending.is_some() {
            return Spend::Awaiting;
        }
        Spend::NeedLease(self.issue(slot, now_ns))
    }

    /// Grows a request issued by `try_spend` (not yet sent) to cover the spends that joined it
    /// since: the caller sends it at its next poll, and a burst of spends on one key then needs one
    /// round trip, not one per halving of the remainder.
    pub fn top_up(&mut self, r: &mut Request) {
        let Some(slot) = self.find(r.limit, &r.key) else { return };
        let acc = self.table.get_mut(slot);
        let Some(p) = acc.pending.as_mut().filter(|p| p.id == r.id) else { return };
        let need = acc.debt.saturating_add(acc.awaiting).saturating_sub(acc.leases.total());
        if need > r.size {
            r.size = need;
            p.size = need;
        }
    }

    /// The store is down and the leases are spent: the safe share, or a refusal. A probe request is
    /// queued when the key's retry time has come.
    fn fall_back(&mut self, slot: u32, cost: u64, now_ns: u64) -> Spend {
        let acc = self.table.get(slot);
        let (probe, limit) = (acc.pending.is_none() && acc.retry_at_ns <= now_ns, acc.limit);
        if probe {
            self.enqueue(slot);
        }
        let lim = &self.limits[limit.index()];
        let acc = self.table.get_mut(slot);
        let refused = match lim.cfg.fallback {
            Fallback::Closed => Spend::Refused { reason: Refusal::StoreDown, retry_after_ns: lim.retry_ns },
            Fallback::Open => {
                let (alg, h) = (lim.cfg.algorithm, lim.share_holders(acc));
                let share = acc.share.get_or_insert_with(|| Share::new(&alg, h, now_ns));
                match share.take(&alg, h, cost, now_ns) {
                    Ok(()) => {
                        self.stats.spent_fallback += cost;
                        // A token bucket's store refills while it is away, as the share does: what
                        // the share admitted is owed to it, repaid from the first grants, so an
                        // outage adds one burst (the share's), not a second one from the store.
                        // A window's share belongs to its window and is not carried into the next.
                        if let Algorithm::TokenBucket { .. } = alg {
                            acc.debt = acc.debt.saturating_add(cost);
                        }
                        return Spend::Spent(Source::Fallback);
                    }
                    Err(wait) => Spend::Refused { reason: Refusal::Share, retry_after_ns: wait },
                }
            }
        };
        self.stats.refused += 1;
        refused
    }

    /// The account of (limit, key), made if new (evicting one if the table is full); `None` if the
    /// table is full of accounts that cannot be evicted.
    fn account(&mut self, limit: LimitId, key: &[u8], now_ns: u64) -> Option<u32> {
        let hash = self.table.hash(limit, key);
        if let Some(s) = self.table.find(hash, limit, key) {
            return Some(s);
        }
        if self.table.is_full() {
            let (limits, idle_ttl) = (&self.limits, self.idle_ttl_ns);
            let victim = self.table.victim(
                |a| {
                    let l = &limits[a.limit.index()];
                    a.evictable(&l.cfg.algorithm, l.share_holders(a), now_ns)
                },
                |a| a.idle(idle_ttl, now_ns),
            )?;
            self.evict(victim, now_ns);
        }
        Some(self.table.insert(hash, Account::new(limit, key, now_ns)))
    }

    /// Forgets an account, handing its leases back.
    pub(crate) fn evict(&mut self, slot: u32, now_ns: u64) {
        let mut acc = self.table.remove(slot);
        self.stats.evicted += 1;
        let (outbox, stats) = (&mut self.outbox, &mut self.stats);
        acc.leases.drain(|l| {
            let reason = if l.expires_ns <= now_ns { ReturnReason::Expired } else { ReturnReason::Evicted };
            if reason == ReturnReason::Expired {
                stats.expired += l.tokens;
            }
            hand_back(outbox, stats, lease_return(acc.limit, &acc.key, l, reason, now_ns));
        });
    }

    pub(crate) fn enqueue(&mut self, slot: u32) {
        let h = self.table.handle(slot);
        let acc = self.table.get_mut(slot);
        if !acc.queued {
            acc.queued = true;
            self.due.push(h);
        }
    }

    /// Whether the account may send a request now.
    pub(crate) fn may_request(&self, acc: &Account, now_ns: u64) -> bool {
        acc.pending.is_none() && acc.empty_until_ns <= now_ns && (self.store_up || acc.retry_at_ns <= now_ns)
    }

    /// After a spend from leases or a grant: queue a renewal if the balance is below what the lead
    /// time will spend, or a debt is owed.
    pub(crate) fn renew_if_due(&mut self, slot: u32, now_ns: u64) {
        let acc = self.table.get(slot);
        if acc.queued || !self.may_request(acc, now_ns) {
            return;
        }
        let lim = &self.limits[acc.limit.index()];
        let ahead =
            acc.leases.len() < MAX_LEASES && renewal_due(acc.leases.total(), acc.meter.expected(lim.lead_ns, now_ns, lim.renewal_ns), lim.cfg.max_lease);
        if ahead || acc.debt > 0 {
            self.enqueue(slot);
        }
    }

    /// Makes the account's request: enough for the spends waiting on it and its debt, else what its
    /// demand asks (`sizing`).
    pub(crate) fn issue(&mut self, slot: u32, now_ns: u64) -> Request {
        let acc = self.table.get_mut(slot);
        let lim = &self.limits[acc.limit.index()];
        let need = acc.debt.saturating_add(acc.awaiting).saturating_sub(acc.leases.total());
        let size = lease_size(acc.meter.per_period(now_ns, lim.renewal_ns), need, lim.cfg.max_lease, lim.cfg.initial_lease, acc.view);
        let id = RequestId(self.next_id);
        self.next_id += 1;
        acc.pending = Some(Pending { id, size, sent_ns: now_ns });
        self.stats.requests += 1;
        Request { id, limit: acc.limit, key: acc.key.clone(), size, ttl_ns: lim.ttl_ns }
    }
}

/// Drops the account's expired leases, handing them back (`ReturnReason::Expired`).
pub(crate) fn expire(acc: &mut Account, now_ns: u64, outbox: &mut Vec<Return>, stats: &mut Stats) {
    if acc.leases.next_expiry().is_none_or(|t| t > now_ns) {
        return;
    }
    let (limit, key) = (acc.limit, &acc.key);
    acc.leases.expire(now_ns, |l| {
        stats.expired += l.tokens;
        hand_back(outbox, stats, lease_return(limit, key, l, ReturnReason::Expired, now_ns));
    });
}

/// The return of what is left of lease `l` of (limit, key), made at `now_ns`.
pub(crate) fn lease_return(limit: LimitId, key: &[u8], l: Lease, reason: ReturnReason, now_ns: u64) -> Return {
    Return { limit, key: key.into(), lease: l.id, tokens: l.tokens, reason, idle_ns: l.idle_ns(now_ns) }
}

/// Queues a return for the caller (or drops it past `MAX_OUTBOX`).
pub(crate) fn hand_back(outbox: &mut Vec<Return>, stats: &mut Stats, r: Return) {
    if outbox.len() < MAX_OUTBOX {
        stats.returned += r.tokens;
        outbox.push(r);
    } else {
        stats.returns_dropped += 1;
    }
}
