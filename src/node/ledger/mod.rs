//! `LedgerHandle`: the napi face of `core::ledger::Ledger`.
//!
//! Off the hot path (construction, snapshot, reset, refill scale) it is an ordinary `#[napi]` class. The
//! hot path — `tryConsume` and `consume` — is two raw callbacks that `bind` defines as own properties of
//! the JS `Ledger` object, each carrying the `Arc<Ledger>` as its data pointer: one `napi_get_cb_info`,
//! the tier read as a number (or a short name read into a stack buffer), the key read into a stack
//! buffer, a primitive returned. `consume` writes its details into a Float64Array instead of allocating
//! an object per call.
//!
//! - `options.rs`: the tiers as JS gives them; `handle.rs`: the `#[napi]` class (off the hot path);
//! - `hot.rs`: the raw callbacks and the `result` layout; `constants.rs`: `ledgerConstants()`;
//! - `bench.rs`: the benchmark's floor, only with the `bench-seams` feature.
#[cfg(feature = "bench-seams")]
mod bench;
mod constants;
mod handle;
mod hot;
mod options;

pub(crate) use handle::LedgerHandle;

/// Keys longer than this are refused: keyed memory is bounded by `maxKeys` times this.
pub const MAX_KEY_BYTES: usize = 1024;
