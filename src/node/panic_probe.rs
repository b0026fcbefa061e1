//! Test seams, not public API (lib/ does not re-export them): entry points that panic on purpose, so
//! that __test__/native/panic.test.js can prove, against the shipped release binary, that a panic at
//! the N-API boundary becomes a JS error and that the process carries on. They are harmless for the
//! very reason they exist: the boundary catches what they throw.
use crate::node::raw;
use napi::bindgen_prelude::*;
use napi::{sys, JsValue};
use napi_derive::napi;
use std::sync::Arc;

/// What a probe does, by `mode`: 0 returns normally, 1 panics, 2 panics after an exception was
/// already pending (the panic's error must replace it), 3 fails the ordinary way (an `Err`).
fn run(mode: u32, throw_first: impl FnOnce()) -> Result<u32> {
    match mode {
        0 => Ok(1),
        1 => panic!("deliberate panic (test seam)"),
        2 => {
            throw_first();
            panic!("deliberate panic after a pending exception (test seam)")
        }
        _ => Err(Error::from_reason("an ordinary error (test seam)")),
    }
}

/// `panicProbe(mode)`: a `#[napi]` function.
#[napi(js_name = "panicProbe", catch_unwind)]
pub fn panic_probe(env: Env, mode: u32) -> Result<u32> {
    let _panic = raw::throw_on_panic(&env, "panicProbe");
    run(mode, || unsafe {
        sys::napi_throw_type_error(env.raw(), std::ptr::null(), c"thrown before the panic".as_ptr());
    })
}

/// Defines `target.panic(mode)`: a raw callback, as the hot path's are.
#[napi(js_name = "definePanicProbe", catch_unwind)]
pub fn define_panic_probe(env: Env, target: Object) -> Result<()> {
    let _panic = raw::throw_on_panic(&env, "definePanicProbe");
    raw::guarded!(probe = "panicProbe (raw)" => probe_unguarded);
    unsafe fn probe_unguarded(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
        let (argv, _, _) = raw::args::<1>(env, info);
        let mode = raw::get_f64(env, argv[0]).unwrap_or(0.0) as u32;
        match run(mode, || {
            raw::throw_type_error(env, "thrown before the panic");
        }) {
            Ok(v) => raw::number(env, f64::from(v)),
            Err(e) => raw::throw_range_error(env, &e.reason),
        }
    }
    unsafe { raw::define_fn(env.raw(), target.raw(), "panic", probe, Arc::new(())) }
}
