//! Pure Rust: no napi, no I/O. Everything here is unit-tested with `cargo test --no-default-features`
//! and an injectable clock.
pub mod bucket;
pub mod clock;
pub mod concurrency;
pub mod defense;
pub mod gate;
pub mod health;
pub mod keymap;
pub(crate) mod keystore;
pub mod ledger;
pub mod limit;
pub mod names;
pub mod net;
mod padded;
pub mod quota;
pub mod shed;
mod sync;
#[cfg(test)]
pub(crate) mod test_json;
pub mod token;

// The modules' earlier paths, so that code written against them keeps compiling.
pub use health::histogram;
pub use net::ipkey;
pub use token::signature;
