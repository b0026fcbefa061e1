//! One key's state: its leases, its debt, its demand, its one request in flight, and what the store
//! last said about it. Everything a spend decides from.
use super::config::Algorithm;
use super::fallback::Share;
use super::lease::Leases;
use super::meter::Meter;
use super::sizing::StoreView;
use super::wire::{LimitId, RequestId};

/// The request in flight for a key (at most one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pending {
    pub id: RequestId,
    pub size: u64,
    /// When the engine issued it: a grant's TTL counts from here (never later than the store did).
    pub sent_ns: u64,
}

pub(crate) struct Account {
    pub limit: LimitId,
    pub key: Box<[u8]>,
    pub leases: Leases,
    /// Tokens admitted on credit (`Unfunded::Provisional`), owed to the next grant.
    pub debt: u64,
    pub meter: Meter,
    pub pending: Option<Pending>,
    /// The cost of the spends waiting on the request in flight (`Unfunded::Wait`), so that the request
    /// asks for all of them at once; the caller retries every waiting spend after each answer, so an
    /// answer starts the count afresh.
    pub awaiting: u64,
    /// On the engine's due list (so it is listed once).
    pub queued: bool,
    /// The last grant's figures (`None` before the first).
    pub view: Option<StoreView>,
    /// The store said it has nothing to grant before this.
    pub empty_until_ns: u64,
    /// After a failure, no request before this while the store is down.
    pub retry_at_ns: u64,
    /// The fallback share, once the key has used it.
    pub share: Option<Share>,
    pub last_used_ns: u64,
}

impl Account {
    pub fn new(limit: LimitId, key: &[u8], now_ns: u64) -> Account {
        Account {
            limit,
            key: key.into(),
            leases: Leases::default(),
            debt: 0,
            meter: Meter::new(now_ns),
            pending: None,
            awaiting: 0,
            queued: false,
            view: None,
            empty_until_ns: 0,
            retry_at_ns: 0,
            share: None,
            last_used_ns: now_ns,
        }
    }

    /// Whether forgetting the key loses nothing but its leases (which eviction returns): it owes
    /// nothing (a forgotten debt could be borrowed again), awaits nothing, and its fallback share has
    /// refilled (a forgotten share would start full again).
    pub fn evictable(&self, alg: &Algorithm, holders: u32, now_ns: u64) -> bool {
        self.pending.is_none() && self.debt == 0 && self.share.as_ref().is_none_or(|s| s.at_rest(alg, holders, now_ns))
    }

    pub fn idle(&self, idle_ttl_ns: u64, now_ns: u64) -> bool {
        now_ns.saturating_sub(self.last_used_ns) >= idle_ttl_ns
    }
}
