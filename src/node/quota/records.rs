//! What crosses between the engine and lib/quota's driver off the hot path: lease requests, returns,
//! the store's grants and the engine's figures, times in ms.
use super::NS_PER_MS;
use crate::core::names::named_enum;
use crate::core::quota::{Request, Return, ReturnReason};
use napi_derive::napi;

named_enum! {
    /// `ReturnReason` as JS reads it.
    #[derive(Clone, Copy)]
    pub(crate) enum Reason: u8 {
        Released = "released",
        Evicted = "evicted",
        Expired = "expired",
        Late = "late",
        Unusable = "unusable",
        Overflow = "overflow",
        Spent = "spent",
    }
}

pub(crate) fn reason(r: ReturnReason) -> Reason {
    match r {
        ReturnReason::Released => Reason::Released,
        ReturnReason::Evicted => Reason::Evicted,
        ReturnReason::Expired => Reason::Expired,
        ReturnReason::Late => Reason::Late,
        ReturnReason::Unusable => Reason::Unusable,
        ReturnReason::Overflow => Reason::Overflow,
        ReturnReason::Spent => Reason::Spent,
    }
}

/// "Lease `size` tokens of `key` under limit `limit` for `ttlMs`": answer with `grant` or `fail`.
#[napi(object)]
pub struct QuotaRequest {
    pub id: f64,
    pub limit: u32,
    pub key: String,
    pub size: f64,
    pub ttl_ms: f64,
}

/// Tokens of `lease` the engine will not spend: send them back (best effort).
#[napi(object)]
pub struct QuotaReturn {
    pub limit: u32,
    pub key: String,
    pub lease: f64,
    pub tokens: f64,
    pub reason: String,
    /// Ms since the lease was last spent from, when it was (a sliding window's record ends one
    /// window after that).
    pub idle_ms: Option<f64>,
}

#[napi(object)]
pub struct QuotaWork {
    pub requests: Vec<QuotaRequest>,
    pub returns: Vec<QuotaReturn>,
}

/// The store's answer to a request (`wire::Grant`, times in ms).
#[napi(object)]
pub struct QuotaGrant {
    pub granted: f64,
    pub ttl_ms: f64,
    pub remaining: f64,
    pub holders: f64,
    pub lease: f64,
    pub retry_after_ms: f64,
}

#[napi(object)]
pub struct QuotaStats {
    pub spent_lease: f64,
    pub spent_provisional: f64,
    pub spent_fallback: f64,
    pub refused: f64,
    pub requests: f64,
    pub grants: f64,
    pub failures: f64,
    pub abandoned: f64,
    pub granted: f64,
    pub repaid: f64,
    pub expired: f64,
    pub returned: f64,
    pub returns_dropped: f64,
    pub evicted: f64,
    pub keys: u32,
    pub store_up: bool,
}

pub(crate) fn request(r: Request) -> QuotaRequest {
    QuotaRequest {
        id: r.id.0 as f64,
        limit: u32::from(r.limit.index() as u16),
        key: String::from_utf8_lossy(&r.key).into_owned(),
        size: r.size as f64,
        ttl_ms: r.ttl_ns as f64 / NS_PER_MS,
    }
}

pub(crate) fn give_back(r: Return) -> QuotaReturn {
    QuotaReturn {
        limit: r.limit.index() as u32,
        key: String::from_utf8_lossy(&r.key).into_owned(),
        lease: r.lease.0 as f64,
        tokens: r.tokens as f64,
        reason: reason(r.reason).as_str().to_owned(),
        // Rounded down: the store's record then ends no earlier than one window after the last spend.
        idle_ms: r.idle_ns.map(|ns| (ns / 1_000_000) as f64),
    }
}
