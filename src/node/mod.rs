//! The napi layer: thin wrappers that expose `crate::core` to JavaScript.
//! Off the hot path we use ordinary `#[napi]`; hot-path calls are raw callbacks (see `raw`).
pub mod raw;
pub mod uv;
pub mod ledger;
pub mod lag;
pub mod gate;

use napi_derive::napi;

/// The version of the native binding, so JS can check that the loaded binary matches.
#[napi]
pub fn native_version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}
