//! `QuotaHandle`: the napi face of `core::quota::Quota`, the lease engine of cluster mode and the
//! decision service.
//!
//! Off the hot path (construction, `poll`, `grant`, `fail`, `releaseAll`, stats) it is an ordinary
//! `#[napi]` class: those run once per store round trip, not per request. The hot path, `trySpend`,
//! is a raw callback that `bind` defines on the JS object with the engine as its data pointer: the
//! limit read as a number, the key into a stack buffer, a small integer returned (`Code`), the wait
//! of a refusal written into a Float64Array (`result`). A spend that needs a lease leaves its request
//! with the engine's outbox for the next `poll` (lib/quota/driver.js polls at once when told so), so
//! no object crosses on the hot path either way.
//!
//! - `options.rs`: the limits as JS gives them; `records.rs`: requests, returns, grants and stats;
//! - `handle.rs`: the `#[napi]` class (off the hot path); `hot.rs`: `trySpend` and its codes;
//! - `constants.rs`: `quotaConstants()`.
mod constants;
mod handle;
mod hot;
mod options;
mod records;

use napi::{Error, Status};

/// Tokens and ids cross as JS numbers: exact up to 2^53.
pub(crate) const MAX_SAFE: f64 = 9_007_199_254_740_991.0;
pub(crate) const NS_PER_MS: f64 = 1e6;

/// Config errors surface as `InvalidArg`; lib/quota/engine.js rethrows them as `RangeError`.
pub(crate) fn invalid(msg: String) -> Error {
    Error::new(Status::InvalidArg, msg)
}
