//! Abuse defense: allow and deny lists, bans with strike rules and escalation, challenge passes, and
//! the chain that decides a request (`chain.rs`: allow/skip → deny → bans → named limits).
//!
//! - `cidr.rs`: IP prefixes (IPv4, IPv6, mapped IPv6 folded to IPv4) and their parse errors;
//! - `trie.rs`: the frozen prefix trie (builder, then an immutable trie to share and swap whole);
//! - `lists.rs`: the allow and deny lists;
//! - `rules.rs`: strike rules, escalation, jitter, and the ban options' validation;
//! - `strikes.rs`: counted events and offence history per key, bounded;
//! - `ban.rs`: a ban, the events reported, the counters; `table.rs`: the ban table;
//! - `persist.rs`: export and import as records with Unix-millisecond times;
//! - challenge passes (HMAC-SHA256, bound to the key, expiring) live with the tier tokens, in `token/pass.rs`;
//! - `rng.rs`: the seeded generator behind the jitter;
//! - `front.rs`: the defense as a request reaches it (raw inputs to the chain's verdict and the response's
//!   figures), the composition it is built from, and the operator's view of it;
//! - `usage.rs`: requests per client in a window, in fixed memory; `fair.rs`: the fair-share backstop
//!   that refuses the heaviest clients first when the global limit runs low.
mod ban;
mod chain;
mod cidr;
mod fair;
mod front;
#[cfg(test)]
mod front_tests;
mod lists;
mod persist;
pub mod rng;
mod rules;
mod strikes;
mod table;
#[cfg(test)]
mod tests;
mod trie;
mod usage;

pub use crate::core::token::pass::{PassError, PassSigner, MAX_PASS_LEN, MIN_SECRET_LEN};
pub use ban::{Ban, BanEvent, BanEventKind, BanHit, BanSource, BanStats, BanTarget};
pub use chain::{Defense, Outcome, Request, Verdict};
pub use cidr::{Addr, Cidr, CidrError};
pub use fair::{FairShare, FairShareConfig, FairShareSpec};
pub use front::{address_prefixes, Answer, ClientRequest, DefenseFront, FrontSpec, KeySpan, PassCheck, Scratch, MAX_IP_INPUT};
pub use lists::{Access, AccessLists};
pub use persist::{BanRecord, ImportReport};
pub use rules::{BanConfig, BanSpec, Escalation, EscalationSpec, StrikeKind, StrikeRule, StrikeRuleSpec, MAX_THRESHOLD};
pub use table::{BanTable, BanTableFull, MAX_PERMANENT_SHARE};
pub use trie::{PrefixTrie, TrieBuilder};
