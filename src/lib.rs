//! tiergate: the pure decision core (`core`) and its napi binding (`node`).
pub mod core;

#[cfg(feature = "node")]
// In a test build napi-derive registers no exports, so every `#[napi]` function would read as dead
// there (`cargo clippy --all-targets`); `cargo clippy --lib` still checks the real binding.
#[cfg_attr(test, allow(dead_code))]
mod node;
