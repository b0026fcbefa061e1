//! The benchmark's floor (npm run bench, benchmark/ledger.js): raw callbacks that take `tryConsume`'s
//! arguments and do nothing with them. Built only with the `bench-seams` feature: not in the release
//! binary.
use crate::node::raw;
use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;
use std::sync::Arc;

/// Defines, for the benchmark, `target.noop(tier, key, cost)`: a raw callback that takes the same
/// arguments as `tryConsume` and returns `false` (the floor), and `target.readKey(tier, key)`, which
/// also reads the key into a stack buffer (the floor plus the string read).
#[napi(catch_unwind)]
pub fn define_bench_floor(env: Env, target: Object) -> Result<()> {
    let _panic = raw::throw_on_panic(&env, "define_bench_floor");
    raw::guarded!(noop = "benchFloor.noop" => noop_unguarded);
    raw::guarded!(read_key = "benchFloor.readKey" => read_key_unguarded);
    #[inline(always)]
    unsafe fn noop_unguarded(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
        let _ = raw::args::<3>(env, info);
        raw::boolean(env, false)
    }
    #[inline(always)]
    unsafe fn read_key_unguarded(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
        let (argv, _, _) = raw::args::<3>(env, info);
        let mut stack = [0u8; 256];
        let mut heap = Vec::new();
        let len = raw::get_key(env, argv[1], &mut stack, &mut heap).map_or(0, |k| k.len());
        raw::boolean(env, len == 0)
    }
    unsafe {
        raw::define_fn(env.raw(), target.raw(), "noop", noop, Arc::new(()))?;
        raw::define_fn(env.raw(), target.raw(), "readKey", read_key, Arc::new(()))
    }
}
