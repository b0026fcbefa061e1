//! What the engine answers: a spend's decision, the work `poll` hands the caller, and counters.
use super::wire::{Request, Return};

/// Where an admitted spend's tokens came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// A lease: tokens the store debited beforehand. Exact.
    Lease,
    /// On credit (`Unfunded::Provisional`), paid back by the next grant.
    Provisional,
    /// The safe share, while the store is down (`Fallback::Open`).
    Fallback,
}

/// Why a spend was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The store said the limit has nothing left (until `retry_after_ns`).
    Exhausted,
    /// The store is down and the limit fails closed.
    StoreDown,
    /// The store is down and the key's safe share is spent.
    Share,
    /// No room to track another key: every candidate for eviction still owes or awaits the store.
    Full,
}

/// The decision on one spend, made from local state only.
#[derive(Debug, PartialEq, Eq)]
#[must_use]
pub enum Spend {
    Spent(Source),
    /// Too little lease: send this request now, wait for its answer (bounded by the caller's store
    /// timeout) and ask again. Only under `Unfunded::Wait`, or a provisional allowance used up.
    NeedLease(Request),
    /// Too little lease, and a request for this key is already in flight: wait for it (bounded) and
    /// ask again.
    Awaiting,
    /// `retry_after_ns`: when asking again may succeed (`u64::MAX`: not by waiting).
    Refused {
        reason: Refusal,
        retry_after_ns: u64,
    },
}

/// Work for the caller, from `poll`.
#[derive(Debug, PartialEq, Eq)]
pub enum Action {
    /// Send to the store in the background; answer with `Quota::grant` or `Quota::fail`.
    Request(Request),
    /// Send to the store (best effort: losing one only strands its tokens until the lease's TTL).
    Return(Return),
}

/// Running totals since the engine was made (tokens unless said otherwise).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub spent_lease: u64,
    pub spent_provisional: u64,
    /// Fallback decisions' tokens.
    pub spent_fallback: u64,
    /// Refused spends (count).
    pub refused: u64,
    /// Requests issued, grants applied, failures (counts).
    pub requests: u64,
    pub grants: u64,
    pub failures: u64,
    /// Requests the caller never answered within the lease TTL, given up as failed (count).
    pub abandoned: u64,
    pub granted: u64,
    /// Tokens of grants that paid provisional debt back.
    pub repaid: u64,
    /// Tokens dropped at their TTL (also handed back, as `ReturnReason::Expired`).
    pub expired: u64,
    /// Tokens handed to the caller to send back, for any reason (expired ones included).
    pub returned: u64,
    /// Returns dropped because the caller had not polled for `MAX_OUTBOX` of them (count; their
    /// tokens are not in `returned`).
    pub returns_dropped: u64,
    /// Keys evicted (count).
    pub evicted: u64,
}
