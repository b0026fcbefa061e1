//! `GateHandle`: the napi face of `core::gate::Gate`, the gatekeeper's per-request decision.
//!
//! Construction, stats and the health test seam are ordinary `#[napi]`. The hot path is one raw
//! callback, `decide(sel, header, key)`, that `bind` defines on the JS gate object with the gate as its
//! data pointer: it reads the header and key into stack buffers, reads the thread's loop health, moves
//! the shed controller when due, debits the ledger, writes the details into a Float64Array (`result`)
//! and returns the verdict as a small integer. One crossing into Rust per request.
//!
//! - `options.rs`: the constructor's options, read into the core's config;
//! - `stats.rs`: the figures `stats()` returns;
//! - `handle.rs`: the `#[napi]` class and its methods (off the hot path);
//! - `hot.rs`: the raw callback `decide`, the `result` layout and the `sel` bits;
//! - `constants.rs`: `gateConstants()` and `mintTierToken()`.
mod constants;
mod handle;
mod hot;
mod options;
mod stats;

use napi::{Error, Status};

pub(crate) use handle::GateHandle;
pub(crate) use hot::{decide_args, gate_now_ns, read_bounded, unix_now_sec, Bound};

/// A value the caller got wrong: code `InvalidArg`, which lib/ rethrows as a RangeError.
pub(crate) fn invalid(msg: impl Into<String>) -> Error {
    Error::new(Status::InvalidArg, msg.into())
}
