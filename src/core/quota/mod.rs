//! Lease accounting for cluster-wide limits (cluster mode over Redis; the decision service over
//! SQLite/PostgreSQL): one process's side of the protocol, pure and clock-injected (`now_ns`
//! arguments), with the store calls left to the caller.
//!
//! **The protocol.** Every admission is paid from a lease: tokens the store has debited atomically
//! *before* handing them to this process, so a token is spendable by one process only, once, and the
//! cluster cannot over-admit from leases. The engine tracks per key its leases (tokens + expiry), a
//! provisional debt, its demand (`meter`), at most one request in flight, and what the store last said
//! (remaining, holders). `try_spend` decides from that alone; the caller carries `Request`s to the
//! store in the background and hands the answers back (`grant` / `fail`); `poll` is its tick (requests
//! due, expiries, debts, idle eviction, returns); `release_all` hands everything back at shutdown.
//! The store's side of the contract (what the Lua script / SQL must do) is in `wire`.
//!
//! **Bounds** (per key; `P` processes, `M = max_lease`, `C` the largest cost, `A` the provisional
//! allowance, `L` the limit per window or the bucket's `burst + rate·t`):
//! * *Exact mode* (`Unfunded::Wait`, store up): admitted ≤ debited ≤ `L` (per window: a window
//!   store ends leases with their window; a sliding window store counts a lease until its expiry plus
//!   one window; see `wire`).
//! * *Shortfall*: what the store debited but nobody spent is at most what was outstanding (held or in
//!   flight) when the window closed or the holder died: per process `< 2·max(M, C + A)` (`sizing`),
//!   so `L − admitted < P · 2·max(M, C + A)` for a window whose demand exceeded `L` throughout, plus
//!   the tokens of grants that came back after their request had failed (timed out) or after their
//!   lease's expiry (a reply slower than the window's remainder); those are handed back and a store
//!   that can still use them credits them.
//! * *Provisional* (`Unfunded::Provisional { allowance: A }`): a key's debt never exceeds `A`, so
//!   admitted ≤ `L + P·A` per window (a debt repaid from a later window's grant only moves it), and
//!   ≤ `burst + rate·t + P·A` in all for a bucket.
//! * *Expiry and death*: a lease is not spent past its TTL, and the store forgets it at the same TTL
//!   (never earlier: `wire`). A process that dies strands at most what it had outstanding
//!   (`< 2·max(M, C + A)`), until the TTL for a window store; a bucket refills past it.
//! * *Store down, `Fallback::Open`*: leases first, then the safe share (`fallback`): at most `Σ_p
//!   burst/H_p + rate/H_p · t` for a bucket, `Σ_p 2·L/H_p` per store window for a window limit.
//!   `Fallback::Closed`: nothing beyond leases. "Down" is the engine's view: a failed or timed-out
//!   request puts every key that runs out of lease into fallback (rather than making it wait on a
//!   store that is not answering), until the next grant; each key probes every `retry_ms`.
//! * *Store restarts empty*: the new store grants `L` again, knowing nothing of before. Per window,
//!   admitted ≤ `L`, plus what was admitted in that window before the restart (the store's memory,
//!   lost), plus what was outstanding at the restart (`< P · 2·max(M, C + A)`), plus the fallback
//!   share's admissions and `P·A`. The engine adds only the outstanding leases, the share and the
//!   allowance; the rest is the store's persistence to keep.
//!
//! Files: `config` (options, validation), `wire` (the store contract), `lease` (a key's leases),
//! `meter` (demand rate), `sizing` (lease size, renewal timing), `fallback` (the safe share),
//! `account` (a key's state), `table` (bounded key table, eviction), `engine` (spending), `reply`
//! (grants and failures), `poll` (the tick and shutdown), `outcome` (decisions, actions, counters);
//! `tests/`: the flows by hand, and the bounds above checked over a simulated cluster against a
//! reference store (`tests/store.rs`: the semantics the Lua script and the SQL implement).
mod account;
mod config;
mod engine;
mod fallback;
mod lease;
mod meter;
mod outcome;
mod poll;
mod reply;
mod sizing;
mod table;
#[cfg(test)]
mod tests;
mod wire;

pub use config::{Algorithm, Fallback, LimitConfig, QuotaConfig, Unfunded};
pub use config::{IDLE_TTL_MS, INITIAL_LEASE, LEAD_TIME_MS, LEASE_TTL_MS, MAX_KEYS, MAX_LEASE, MIN_HOLDERS, RENEWAL_PERIOD_MS, RETRY_MS, SWEEP_PER_POLL};
pub use engine::{Quota, MAX_OUTBOX};
pub use lease::MAX_LEASES;
pub use outcome::{Action, Refusal, Source, Spend, Stats};
pub use wire::{Grant, LeaseId, LimitId, Request, RequestId, Return, ReturnReason};
