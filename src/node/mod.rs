//! The napi layer: thin wrappers that expose `crate::core` to JavaScript.
//! Off the hot path we use ordinary `#[napi]`; hot-path calls are raw callbacks (see `raw`).
pub mod concurrency;
pub mod defense;
pub mod defense_admin;
pub mod gate;
pub mod lag;
pub mod ledger;
pub mod panic_probe;
pub mod quota;
pub mod raw;
pub mod tier_header;
pub mod uv;

use napi::Env;
use napi_derive::napi;

/// The version of the native binding, so JS can check that the loaded binary matches.
#[napi(catch_unwind)]
pub fn native_version(env: Env) -> &'static str {
    let _panic = raw::throw_on_panic(&env, "native_version");
    env!("CARGO_PKG_VERSION")
}
