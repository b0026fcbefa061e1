//! The store contract: what the engine asks of the store (`Request`), what the store answers
//! (`Grant`), and what the engine hands back (`Return`). The caller carries them to the store
//! (a Redis Lua script, an SQL transaction) in the background; the engine does no I/O.
//!
//! What the store must do, atomically per (limit, key), whatever its algorithm:
//! * **Debit before use.** `granted = min(size, what the limit has left now)`, debited at once, so a
//!   token is leased to one holder only and the sum of outstanding leases never exceeds what the
//!   limit allows (Doorman's rule).
//! * **Answer with a duration, not an instant.** `ttl_ns` is counted from when the store handled the
//!   request; the engine counts it from when it *issued* the request, which is earlier, so its local
//!   expiry is never later than the store's, whatever the two clocks read.
//! * **End a window's leases with the window.** A fixed window store answers
//!   `ttl = min(asked, window end − now)` and names the lease by its window (`LeaseId = window
//!   index`); a return naming an older window is ignored (those tokens' window is over).
//! * **A sliding window store** counts a lease's tokens as occupying the window from the grant until
//!   one window after the last spend from it could have been (`[granted_at, last_spend + window)`),
//!   and grants only what keeps the tokens occupying "now" within the limit. Until it hears otherwise
//!   the last spend could be at the lease's expiry, so a record starts as `[granted_at, expires_at +
//!   window)`. Any span of one window then holds at most `limit` spends: a spend at `t` in `[x, x + w]`
//!   comes from a lease granted by `x + w` whose record lasts past `x`, and at the latest such grant
//!   all of them occupied that instant. A return shrinks its lease's record by its tokens and, when
//!   the lease was spent from, ends the record one window after its last spend (`idle_ns` before the
//!   store handles the return: the store's instant for it is never earlier than the real one, so the
//!   record never ends early). The engine sends a `Spent` return (no tokens) when a sliding window's
//!   lease runs dry, so a window spent in a burst is free again one window after the burst, not one
//!   window after the lease's TTL.
//! * **A token bucket store** credits returns back (capped at the burst); the lease id is only echoed.
//! * Count holders: `holders` is how many distinct processes hold an unexpired lease of this key
//!   (the requester included). It sizes leases near the limit and the fallback share.
//! * `retry_after_ns`: when `remaining` is 0, how long until the store may grant again (the window's
//!   end; the time for one token to refill). The engine asks no sooner.
//!
//! A return is always safe to apply or to lose: the engine has stopped spending its tokens before it
//! emits it. Losing one strands its tokens until the lease's TTL (the shortfall bound counts them).

/// Names one request of the engine's, so that a late answer cannot be mistaken for a newer one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(pub u64);

/// The store's name for a lease (a window index, a record id): echoed back in returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaseId(pub u64);

/// The index of a limit in the engine's configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LimitId(pub(crate) u16);

impl LimitId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// "Lease `size` tokens of `key` under `limit` for `ttl_ns`." The caller sends it, then hands the
/// answer to `Quota::grant`, or `Quota::fail` on an error or a timeout: exactly one of the two.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub id: RequestId,
    pub limit: LimitId,
    pub key: Box<[u8]>,
    pub size: u64,
    pub ttl_ns: u64,
}

/// The store's answer to a `Request`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    /// Tokens debited for the requester: 0..=size.
    pub granted: u64,
    /// The lease's life from when the store handled the request (at most the TTL asked).
    pub ttl_ns: u64,
    /// What the limit has left after this grant.
    pub remaining: u64,
    /// Processes holding an unexpired lease of this key, the requester included.
    pub holders: u32,
    pub lease: LeaseId,
    /// With `remaining == 0`: how long until the store may grant again.
    pub retry_after_ns: u64,
}

/// Why tokens go back to the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReturnReason {
    /// `release_all`: shutdown.
    Released,
    /// The key was evicted (idle, or to make room).
    Evicted,
    /// The lease passed its TTL unspent. A window store ignores these (the window is over); a token
    /// bucket credits them.
    Expired,
    /// A grant came after the request had failed or been abandoned, or for a key no longer tracked.
    Late,
    /// A grant whose lease had already expired when it arrived.
    Unusable,
    /// A grant beyond `MAX_LEASES` held leases of the key: the smallest lease goes back.
    Overflow,
    /// A sliding window's lease whose tokens are all spent (`tokens` is 0): its record can end one
    /// window after `idle_ns`.
    Spent,
}

/// Tokens of `lease` the engine will never spend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Return {
    pub limit: LimitId,
    pub key: Box<[u8]>,
    pub lease: LeaseId,
    pub tokens: u64,
    pub reason: ReturnReason,
    /// How long before the return was made the lease was last spent from (`None`: never).
    pub idle_ns: Option<u64>,
}
