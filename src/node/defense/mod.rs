//! `DefenseHandle`: the napi face of `core::defense::Defense` (allow/deny lists, bans, strike rules,
//! challenge passes, named limits), the abuse-defense half of the gatekeeper's decision.
//!
//! Construction, the ban API, the lists and passes are ordinary `#[napi]` (off the hot path). The
//! per-request decision is one raw callback, `defend(flags, ip, pass, cost, key0, ..)`, that `bind`
//! defines with the shared state as its data pointer: the client address and the keys are read into
//! stack buffers and a scratch buffer reused across calls, the details go to a Float64Array (`result`)
//! and the verdict comes back as a small integer. No allocation per request once warm.
//! `bind_gate` defines `defendAndDecide`, the same with the gate's `decide` (src/node/gate) run in
//! the same call when the defense lets the request on: the gatekeeper crosses into Rust once.
//!
//! Keys: each limit's argument is `undefined` (the limit does not apply), `true` (count by the
//! client address, masked to the limit's prefixes) or a string (a header's value, a function's
//! result). Address keys are tagged (`IP_KEY_TAG`) so that a given key can never collide with one.
//! The ban key (what bans, strikes and passes are bound to) is the client-IP key, untagged: it is what
//! an operator writes in `bans.add('203.0.113.7')`.
//!
//! - `options.rs`: the constructor's options, read into the core's specs;
//! - `records.rs`: bans, events and stats as JS sees them (times in Unix ms);
//! - `handle.rs`: the `#[napi]` class and its methods (off the hot path);
//! - `hot.rs`: the raw callbacks `defend` and `defendAndDecide` and the `result` layout;
//! - `constants.rs`: `defenseConstants()`, what lib/defense shares with the hot path.
mod constants;
pub(crate) mod handle;
mod hot;
pub(crate) mod options;
pub(crate) mod records;

// The class by its short path; `handle`, `options` and `records` are open to other napi files that
// add methods to it (a second `#[napi] impl`).
#[allow(unused_imports)]
pub(crate) use handle::DefenseHandle;
