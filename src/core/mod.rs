//! Pure Rust: no napi, no I/O. Everything here is unit-tested with `cargo test --no-default-features`
//! and an injectable clock.
pub mod clock;
pub mod health;
pub mod shed;
pub mod signature;
pub mod ipkey;
pub mod bucket;
pub mod keymap;
pub mod ledger;
pub mod gate;
pub mod histogram;
mod padded;
pub mod spinlock;
