//! What a debit and a snapshot return.

/// Which bucket refused a debit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    None = 0,
    Tier = 1,
    Key = 2,
}

impl Limit {
    /// Names by code, as JS reads `limitedBy`.
    pub const NAMES: [&'static str; 3] = ["none", "tier", "key"];
}

/// The result of a debit, with what rate-limit headers need. `remaining`, `limit` and `reset_ms`
/// describe the key's bucket when the debit was keyed, else the tier pool. `retry_after_ms` is 0 when
/// allowed, else the wait of the bucket that refused (`limited_by`); infinity when it can never succeed
/// (cost above capacity, or no refill).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Outcome {
    pub allowed: bool,
    pub limited_by: Limit,
    pub remaining: f64,
    pub limit: f64,
    pub retry_after_ms: f64,
    pub reset_ms: f64,
}

impl Outcome {
    /// A refusal with no details, a starting point for callers that fill in their own.
    pub const DENIED: Outcome = Outcome { allowed: false, limited_by: Limit::Tier, remaining: 0.0, limit: 0.0, retry_after_ms: 0.0, reset_ms: 0.0 };
}

/// One tier as `snapshot` sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct TierSnapshot {
    pub name: String,
    pub protected: bool,
    pub tokens: f64,
    pub capacity: f64,
    pub refill_per_sec: f64,
    pub refill_scale: f64,
    /// Keyed buckets held now (0 for a tier without `per_key`).
    pub keys: usize,
}
