//! Raw N-API helpers for hot-path callbacks.
//!
//! A `#[napi]` wrapper with arguments allocates per call and `String` conversion allocates again
//! (DESIGN.md measures 500–700 ns for a class method against ~40–70 ns here). Hot-path functions are
//! therefore plain `extern "C"` callbacks created with `napi_create_function`, carrying their state as
//! the callback's `data` pointer: one `napi_get_cb_info`, strings read into a stack buffer, numbers read
//! directly, a primitive returned.
use napi::sys;
use std::any::Any;
use std::cell::RefCell;
use std::ffi::{c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::{Arc, Once};

pub type RawCallback = unsafe extern "C" fn(sys::napi_env, sys::napi_callback_info) -> sys::napi_value;

// Panics. A Rust panic that unwinds into an `extern "C"` frame aborts the process (Rust >= 1.81), and
// N-API, libuv and every `#[napi]` wrapper enter the addon through such frames: one bug here would take
// the whole service down. So every entry point stops the unwind (`catch_unwind` costs nothing until
// something panics; the release profile must keep `panic = "unwind"`) and a panic becomes a JS `Error`
// with the stable code below. What a panic interrupted stays memory-safe: locks are released by their
// guards while unwinding (parking_lot's and `SpinLock` do not poison).
//
// - raw callbacks: `guarded!` defines the `extern "C"` function around a plain one, under `guard`;
// - `#[napi]` functions: `#[napi(catch_unwind)]`, and `let _panic = raw::throw_on_panic(&env, ...)` as
//   the body's first line. napi-rs's `catch_unwind` stops the unwind but throws a generic error (code
//   `GenericFailure`); the guard, dropped while the panic unwinds through the body, throws ours first,
//   and napi-rs then rethrows the pending exception instead of its own;
// - callbacks with no JS caller (libuv handles, cleanup hooks): `no_unwind`.

/// The `code` of the JS error that a Rust panic inside the addon becomes.
pub const PANIC_CODE: &CStr = c"ERR_TIERGATE_PANIC";
/// The `code` of the TypeError/RangeError a raw callback throws for a wrong argument (lib/errors.js).
pub const INVALID_ARGUMENT: &CStr = c"ERR_TIERGATE_INVALID_ARGUMENT";

/// Runs the body of a raw callback; a panic becomes a thrown `Error` (`PANIC_CODE`, a message naming
/// `what` and the panic's own) and the callback returns null, which N-API reads as "exception pending".
///
/// # Safety
/// `env` must be the callback's own.
#[inline(always)]
pub unsafe fn guard(env: sys::napi_env, what: &'static str, body: impl FnOnce() -> sys::napi_value) -> sys::napi_value {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(v) => v,
        Err(payload) => {
            throw_panic(env, what, panic_message(&*payload));
            forget_payload(payload);
            ptr::null_mut()
        }
    }
}

/// `unsafe extern "C" fn $name(env, info)`: the raw callback that runs `$body(env, info)` under `guard`.
macro_rules! guarded {
    ($vis:vis $name:ident = $what:literal => $body:path) => {
        $vis unsafe extern "C" fn $name(env: napi::sys::napi_env, info: napi::sys::napi_callback_info) -> napi::sys::napi_value {
            $crate::node::raw::guard(env, $what, || $body(env, info))
        }
    };
}
pub(crate) use guarded;

/// Throws the `PANIC_CODE` error if dropped while a panic unwinds: see the notes above.
pub struct PanicThrower {
    env: sys::napi_env,
    what: &'static str,
    /// False if made while another panic was already unwinding (a call made from a destructor): that
    /// panic is not this call's.
    armed: bool,
}

impl Drop for PanicThrower {
    fn drop(&mut self) {
        if self.armed && std::thread::panicking() {
            unsafe { throw_panic(self.env, self.what, "(no message)") };
        }
    }
}

/// The guard a `#[napi(catch_unwind)]` function holds for its whole body.
#[must_use]
pub fn throw_on_panic(env: &napi::Env, what: &'static str) -> PanicThrower {
    record_panic_messages();
    PanicThrower { env: env.raw(), what, armed: !std::thread::panicking() }
}

/// Runs the body of a callback that has no JS caller to throw to (libuv handles, env cleanup hooks);
/// `None` if it panicked (the panic hook has printed the message to stderr).
#[inline(always)]
pub fn no_unwind<R>(body: impl FnOnce() -> R) -> Option<R> {
    catch_unwind(AssertUnwindSafe(body)).map_err(forget_payload).ok()
}

thread_local! {
    /// The message and location of this thread's latest panic, noted by the panic hook (a guard that
    /// runs while unwinding has no payload to read).
    static LAST_PANIC: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Installs (once per process) a panic hook that notes each panic's message for `throw_panic`, then
/// runs the previous hook (Rust's default prints the panic to stderr: the operator's record of it).
pub fn record_panic_messages() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let at = info.location().map(|l| format!(" (at {}:{})", l.file(), l.line())).unwrap_or_default();
            let msg = format!("{}{at}", panic_message(info.payload()));
            let _ = LAST_PANIC.try_with(|m| m.replace(msg));
            previous(info);
        }));
    });
}

/// A panic payload's own `Drop` could panic again, outside any `catch_unwind`: leak it instead.
fn forget_payload(payload: Box<dyn Any + Send>) {
    std::mem::forget(payload);
}

fn panic_message(payload: &(dyn Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "(no message)"
    }
}

/// Throws the JS error for a caught panic: the hook's note of it if there is one, else `fallback`. An
/// exception already pending (thrown before the panic) is replaced: the panic is what the caller must
/// hear about.
#[cold]
#[inline(never)]
unsafe fn throw_panic(env: sys::napi_env, what: &str, fallback: &str) {
    let noted = LAST_PANIC.try_with(|m| m.take()).unwrap_or_default();
    let msg = if noted.is_empty() { fallback } else { &noted };
    let msg = format!("tiergate: internal error (Rust panic) in {what}: {msg}").replace('\0', "\\0");
    let mut pending = false;
    if sys::napi_is_exception_pending(env, &mut pending) == sys::Status::napi_ok && pending {
        let mut old = ptr::null_mut();
        sys::napi_get_and_clear_last_exception(env, &mut old);
    }
    let msg = CString::new(msg).unwrap_or_default();
    sys::napi_throw_error(env, PANIC_CODE.as_ptr(), msg.as_ptr());
}

/// Creates a JS function named `name` whose callback receives `Arc::as_ptr(&data)` as its data pointer,
/// and sets it as `target[name]`. The `Arc` is released when the function is garbage-collected.
///
/// # Safety
/// `env` and `target` must be valid for the current call; `cb` must read its data as `*const T`.
pub unsafe fn define_fn<T: Send + Sync + 'static>(env: sys::napi_env, target: sys::napi_value, name: &str, cb: RawCallback, data: Arc<T>) -> napi::Result<()> {
    // A finalizer, called by N-API from C: the drop must not unwind into it.
    unsafe extern "C" fn release<T>(_env: sys::napi_env, data: *mut c_void, _hint: *mut c_void) {
        let _ = no_unwind(|| drop(Arc::from_raw(data as *const T)));
    }
    record_panic_messages();
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
        let _ = no_unwind(|| drop(Arc::from_raw(hint as *const T)));
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
pub unsafe fn args<const N: usize>(env: sys::napi_env, info: sys::napi_callback_info) -> ([sys::napi_value; N], usize, *mut c_void) {
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

/// Whether `v` is a string: one check, where `napi_typeof` tests up to ten types in turn.
#[inline(always)]
pub unsafe fn is_string(env: sys::napi_env, v: sys::napi_value) -> bool {
    let mut len = 0usize;
    sys::napi_get_value_string_utf8(env, v, ptr::null_mut(), 0, &mut len) == sys::Status::napi_ok
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
pub unsafe fn get_str<'a, const N: usize>(env: sys::napi_env, v: sys::napi_value, stack: &'a mut [u8; N], heap: &'a mut Vec<u8>) -> Option<&'a [u8]> {
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
pub unsafe fn get_key<'a>(env: sys::napi_env, v: sys::napi_value, stack: &'a mut [u8; 256], heap: &'a mut Vec<u8>) -> Option<&'a [u8]> {
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
    sys::napi_throw_type_error(env, INVALID_ARGUMENT.as_ptr(), msg.as_ptr());
    ptr::null_mut()
}

/// Throws a `RangeError`, as `throw_type_error` does.
#[cold]
pub unsafe fn throw_range_error(env: sys::napi_env, msg: &str) -> sys::napi_value {
    let msg = CString::new(msg).unwrap_or_default();
    sys::napi_throw_range_error(env, INVALID_ARGUMENT.as_ptr(), msg.as_ptr());
    ptr::null_mut()
}
