//! tiergate: the pure decision core (`core`) and its napi binding (`node`).
pub mod core;

#[cfg(feature = "node")]
mod node;
