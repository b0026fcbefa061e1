//! The heap figures: `v8.getHeapStatistics`, registered from JS per thread and called from the tick.
use super::sampler::{ThreadSampler, HEAP_EVERY_NS, HEAP_FN};
use crate::node::raw;
use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;
use std::ffi::CStr;
use std::ptr;

/// Calls the registered `v8.getHeapStatistics` (at most every 100 ms unless forced): `(used, limit)`
/// when the figures were refreshed. Runs on the loop thread, outside any JS frame: it opens its own
/// handle scope and swallows any exception (a terminating worker cannot run JS any more).
pub(crate) unsafe fn read_heap(ts: &mut ThreadSampler, now: u64, force: bool) -> Option<(u64, u64)> {
    if !force && now.saturating_sub(ts.last_heap_ns) < HEAP_EVERY_NS {
        return None;
    }
    let fn_ref = HEAP_FN.with(|c| c.get());
    if fn_ref.is_null() {
        return None;
    }
    ts.last_heap_ns = now;
    let env = ts.env;
    let mut scope = ptr::null_mut();
    if sys::napi_open_handle_scope(env, &mut scope) != sys::Status::napi_ok {
        return None;
    }
    let mut read = None;
    let mut func = ptr::null_mut();
    let mut recv = ptr::null_mut();
    let mut out = ptr::null_mut();
    if sys::napi_get_reference_value(env, fn_ref, &mut func) == sys::Status::napi_ok
        && !func.is_null()
        && sys::napi_get_undefined(env, &mut recv) == sys::Status::napi_ok
        && sys::napi_call_function(env, recv, func, 0, ptr::null(), &mut out) == sys::Status::napi_ok
    {
        let used = get_number(env, out, c"used_heap_size");
        let limit = get_number(env, out, c"heap_size_limit");
        ts.heap_reads += 1;
        if let (Some(used), Some(limit)) = (used, limit) {
            read = Some((used as u64, limit as u64));
        }
    }
    let mut pending = false;
    if sys::napi_is_exception_pending(env, &mut pending) == sys::Status::napi_ok && pending {
        let mut exc = ptr::null_mut();
        sys::napi_get_and_clear_last_exception(env, &mut exc);
    }
    sys::napi_close_handle_scope(env, scope);
    read
}

pub(crate) unsafe fn get_number(env: sys::napi_env, obj: sys::napi_value, key: &CStr) -> Option<f64> {
    let mut v = ptr::null_mut();
    if sys::napi_get_named_property(env, obj, key.as_ptr(), &mut v) != sys::Status::napi_ok {
        return None;
    }
    raw::get_f64(env, v)
}

/// Registers `v8.getHeapStatistics` for this thread's environment (lib/lag.js does it on load).
#[napi(js_name = "lagSetHeapSource", catch_unwind)]
pub fn lag_set_heap_source(env: Env, func: Function<(), Object>) -> Result<()> {
    let _panic = raw::throw_on_panic(&env, "lag_set_heap_source");
    let raw_env = env.raw();
    let mut reference = ptr::null_mut();
    unsafe {
        raw::check(sys::napi_create_reference(raw_env, func.raw(), 1, &mut reference))?;
    }
    let old = HEAP_FN.with(|c| c.replace(reference));
    if !old.is_null() {
        unsafe { sys::napi_delete_reference(raw_env, old) };
    }
    Ok(())
}
