//! Abuse defense: allow and deny lists, bans, challenge passes, and the chain that decides a request.
pub mod rng;
