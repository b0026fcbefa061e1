//! Raw N-API helpers for hot-path callbacks.
//!
//! A `#[napi]` wrapper with arguments allocates per call and `String` conversion allocates again
//! (DESIGN.md measures 500–700 ns for a class method against ~40–70 ns here). Hot-path functions are
//! therefore plain `extern "C"` callbacks created with `napi_create_function`, carrying their state as
//! the callback's `data` pointer: one `napi_get_cb_info`, strings read into a stack buffer, numbers read
//! directly, a primitive returned.
use napi::sys;
use std::ffi::{c_void, CStr, CString};
use std::ptr;
use std::sync::Arc;

pub type RawCallback = unsafe extern "C" fn(sys::napi_env, sys::napi_callback_info) -> sys::napi_value;

/// Creates a JS function named `name` whose callback receives `Arc::as_ptr(&data)` as its data pointer,
/// and sets it as `target[name]`. The `Arc` is released when the function is garbage-collected.
///
/// # Safety
/// `env` and `target` must be valid for the current call; `cb` must read its data as `*const T`.
pub unsafe fn define_fn<T: Send + Sync + 'static>(
    env: sys::napi_env,
    target: sys::napi_value,
    name: &str,
    cb: RawCallback,
    data: Arc<T>,
) -> napi::Result<()> {
    unsafe extern "C" fn release<T>(_env: sys::napi_env, data: *mut c_void, _hint: *mut c_void) {
        drop(Arc::from_raw(data as *const T));
    }
    let raw = Arc::into_raw(data) as *mut c_void;
    let mut func = ptr::null_mut();
    let mut status = sys::napi_create_function(env, name.as_ptr().cast(), name.len() as isize, Some(cb), raw, &mut func);
    if status == sys::Status::napi_ok {
        status = sys::napi_add_finalizer(env, func, raw, Some(release::<T>), ptr::null_mut(), ptr::null_mut());
    }
    if status != sys::Status::napi_ok {
        // No finalizer owns the reference: release it here (a function created without one is never
        // attached to `target`, so nothing can call it with this data).
        drop(Arc::from_raw(raw as *const T));
        return check(status);
    }
    let cname = CString::new(name).map_err(|_| napi::Error::from_reason("function name contains NUL"))?;
    check(sys::napi_set_named_property(env, target, cname.as_ptr(), func))
}

/// Sets `target[name]` to a Float64Array viewing `len` f64s at `data`, memory that `owner` keeps alive:
/// the ArrayBuffer holds its own reference to `owner`, released when it is garbage-collected. Hot-path
/// callbacks write their details there instead of allocating a JS object per call.
///
/// # Safety
/// `env` and `target` must be valid for the current call; `data` must stay valid while `owner` lives.
pub unsafe fn define_f64_view<T: Send + Sync + 'static>(
    env: sys::napi_env,
    target: sys::napi_value,
    name: &CStr,
    data: *mut f64,
    len: usize,
    owner: &Arc<T>,
) -> napi::Result<()> {
    unsafe extern "C" fn release<T>(_env: sys::napi_env, _data: *mut c_void, hint: *mut c_void) {
        drop(Arc::from_raw(hint as *const T));
    }
    let hint = Arc::into_raw(owner.clone()) as *mut c_void;
    let mut ab = ptr::null_mut();
    let status = sys::napi_create_external_arraybuffer(env, data.cast(), len * 8, Some(release::<T>), hint, &mut ab);
    if status != sys::Status::napi_ok {
        drop(Arc::from_raw(hint as *const T));
        return check(status);
    }
    let mut view = ptr::null_mut();
    check(sys::napi_create_typedarray(env, sys::TypedarrayType::float64_array, len, ab, 0, &mut view))?;
    check(sys::napi_set_named_property(env, target, name.as_ptr(), view))
}

/// Turns an N-API status into a `napi::Result`.
pub fn check(status: sys::napi_status) -> napi::Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(napi::Error::new(napi::Status::from(status), "N-API call failed".to_string()))
    }
}

/// Reads up to `N` arguments and the data pointer. Missing arguments are `undefined`; `argc` is the
/// count the caller actually passed.
///
/// # Safety
/// Must be called from inside a callback with its own `env` and `info`.
#[inline(always)]
pub unsafe fn args<const N: usize>(
    env: sys::napi_env,
    info: sys::napi_callback_info,
) -> ([sys::napi_value; N], usize, *mut c_void) {
    let mut argv = [ptr::null_mut(); N];
    let mut argc = N;
    let mut data = ptr::null_mut();
    sys::napi_get_cb_info(env, info, &mut argc, argv.as_mut_ptr(), ptr::null_mut(), &mut data);
    (argv, argc, data)
}

/// The JS type of `v`.
#[inline(always)]
pub unsafe fn type_of(env: sys::napi_env, v: sys::napi_value) -> sys::napi_valuetype {
    let mut t = 0;
    sys::napi_typeof(env, v, &mut t);
    t
}

/// Reads a number; `None` if `v` is not a number.
#[inline(always)]
pub unsafe fn get_f64(env: sys::napi_env, v: sys::napi_value) -> Option<f64> {
    let mut out = 0.0;
    (sys::napi_get_value_double(env, v, &mut out) == sys::Status::napi_ok).then_some(out)
}

/// Reads a boolean; `None` if `v` is not a boolean.
#[inline(always)]
pub unsafe fn get_bool(env: sys::napi_env, v: sys::napi_value) -> Option<bool> {
    let mut out = false;
    (sys::napi_get_value_bool(env, v, &mut out) == sys::Status::napi_ok).then_some(out)
}

/// Reads a string's UTF-8 bytes into `stack`, spilling to `heap` only when it does not fit.
/// `None` if `v` is not a string.
#[inline(always)]
pub unsafe fn get_str<'a, const N: usize>(
    env: sys::napi_env,
    v: sys::napi_value,
    stack: &'a mut [u8; N],
    heap: &'a mut Vec<u8>,
) -> Option<&'a [u8]> {
    let mut len = 0usize;
    if sys::napi_get_value_string_utf8(env, v, stack.as_mut_ptr().cast(), N, &mut len) != sys::Status::napi_ok {
        return None;
    }
    // V8 stops before a character that does not fit whole, and a character takes up to 4 bytes: only
    // with at least 4 bytes to spare (besides the NUL) is the string known to be complete. (`len + 1 < N`
    // took a multi-byte string cut a few bytes short of the buffer for the whole string.)
    if len + 4 < N {
        return Some(&stack[..len]);
    }
    // The buffer was (nearly) full, so the string may have been cut: ask for its real length and read it whole.
    sys::napi_get_value_string_utf8(env, v, ptr::null_mut(), 0, &mut len);
    heap.resize(len + 1, 0);
    sys::napi_get_value_string_utf8(env, v, heap.as_mut_ptr().cast(), len + 1, &mut len);
    Some(&heap[..len])
}

/// Reads a string's UTF-8 bytes exactly as `get_str` does, faster for the usual short ASCII key:
/// V8 copies UTF-16 code units without transcoding (~10 ns less than a UTF-8 read here), and when they
/// are all ASCII they are the UTF-8 bytes. Anything else takes `get_str`. `None`: not a string.
#[inline(always)]
pub unsafe fn get_key<'a>(
    env: sys::napi_env,
    v: sys::napi_value,
    stack: &'a mut [u8; 256],
    heap: &'a mut Vec<u8>,
) -> Option<&'a [u8]> {
    const UNITS: usize = 128;
    let mut units = std::mem::MaybeUninit::<[u16; UNITS]>::uninit();
    let mut len = 0usize;
    if sys::napi_get_value_string_utf16(env, v, units.as_mut_ptr().cast(), UNITS, &mut len) != sys::Status::napi_ok {
        return None;
    }
    if len + 1 < UNITS {
        let units = std::slice::from_raw_parts(units.as_ptr().cast::<u16>(), len);
        let mut high = 0u16;
        for (b, &u) in stack.iter_mut().zip(units) {
            *b = u as u8;
            high |= u;
        }
        if high < 0x80 {
            return Some(&stack[..len]);
        }
    }
    get_str(env, v, stack, heap)
}

#[inline(always)]
pub unsafe fn boolean(env: sys::napi_env, b: bool) -> sys::napi_value {
    let mut out = ptr::null_mut();
    sys::napi_get_boolean(env, b, &mut out);
    out
}

#[inline(always)]
pub unsafe fn number(env: sys::napi_env, n: f64) -> sys::napi_value {
    let mut out = ptr::null_mut();
    sys::napi_create_double(env, n, &mut out);
    out
}

#[inline(always)]
pub unsafe fn int32(env: sys::napi_env, n: i32) -> sys::napi_value {
    let mut out = ptr::null_mut();
    sys::napi_create_int32(env, n, &mut out);
    out
}

/// Throws a `TypeError` and returns `undefined`'s stand-in (a null value, which N-API accepts while an
/// exception is pending).
#[cold]
pub unsafe fn throw_type_error(env: sys::napi_env, msg: &str) -> sys::napi_value {
    let msg = CString::new(msg).unwrap_or_default();
    sys::napi_throw_type_error(env, ptr::null(), msg.as_ptr());
    ptr::null_mut()
}

/// Throws a `RangeError`, as `throw_type_error` does.
#[cold]
pub unsafe fn throw_range_error(env: sys::napi_env, msg: &str) -> sys::napi_value {
    let msg = CString::new(msg).unwrap_or_default();
    sys::napi_throw_range_error(env, ptr::null(), msg.as_ptr());
    ptr::null_mut()
}
