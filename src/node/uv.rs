//! libuv, as the addon uses it: the functions (resolved against the node binary when the addon is
//! loaded), declared once here, with opaque handle types. No libuv struct layout is assumed: handles
//! are allocated with `uv_handle_size`, and the only thing taken from libuv's headers is the numbering
//! of the handle-type enum, which `uv_handle_type_name` confirms at run time.
use crate::core::clock::Clock;
use napi::sys;
use std::ffi::{c_char, c_int, c_void};

#[repr(C)]
pub struct UvLoop {
    _opaque: [u8; 0],
}

#[repr(C)]
pub struct UvHandle {
    _opaque: [u8; 0],
}

pub type UvCloseCb = unsafe extern "C" fn(*mut UvHandle);
pub type UvTimerCb = unsafe extern "C" fn(*mut UvHandle);

/// `uv_handle_type` value of UV_TIMER (UV_UNKNOWN_HANDLE = 0, then the UV_HANDLE_TYPE_MAP order).
pub const UV_TIMER: c_int = 13;
pub const UV_PREPARE: c_int = 9;
/// `uv_loop_option` UV_METRICS_IDLE_TIME.
pub const UV_METRICS_IDLE_TIME: c_int = 1;

extern "C" {
    pub fn napi_get_uv_event_loop(env: sys::napi_env, loop_: *mut *mut UvLoop) -> sys::napi_status;
    pub fn uv_handle_size(kind: c_int) -> usize;
    pub fn uv_handle_type_name(kind: c_int) -> *const c_char;
    pub fn uv_timer_init(loop_: *mut UvLoop, handle: *mut UvHandle) -> c_int;
    pub fn uv_timer_start(handle: *mut UvHandle, cb: UvTimerCb, timeout: u64, repeat: u64) -> c_int;
    pub fn uv_timer_stop(handle: *mut UvHandle) -> c_int;
    pub fn uv_prepare_init(loop_: *mut UvLoop, handle: *mut UvHandle) -> c_int;
    pub fn uv_prepare_start(handle: *mut UvHandle, cb: UvTimerCb) -> c_int;
    pub fn uv_prepare_stop(handle: *mut UvHandle) -> c_int;
    pub fn uv_unref(handle: *mut UvHandle);
    pub fn uv_close(handle: *mut UvHandle, cb: UvCloseCb);
    pub fn uv_is_closing(handle: *const UvHandle) -> c_int;
    pub fn uv_handle_set_data(handle: *mut UvHandle, data: *mut c_void);
    pub fn uv_handle_get_data(handle: *const UvHandle) -> *mut c_void;
    pub fn uv_hrtime() -> u64;
    /// Cumulative time the loop spent waiting for I/O, ns (0 unless idle-time metrics are on; Node
    /// turns them on for the main and every worker loop).
    pub fn uv_metrics_idle_time(loop_: *mut UvLoop) -> u64;
    pub fn uv_loop_configure(loop_: *mut UvLoop, option: c_int, ...) -> c_int;
}

/// The current thread's event loop, or null if N-API cannot give it.
///
/// # Safety
/// `env` must be the current thread's environment.
pub unsafe fn event_loop(env: sys::napi_env) -> *mut UvLoop {
    let mut loop_ = std::ptr::null_mut();
    if napi_get_uv_event_loop(env, &mut loop_) != sys::Status::napi_ok {
        return std::ptr::null_mut();
    }
    loop_
}

/// The loop's cumulative idle time, 0 without a loop.
///
/// # Safety
/// `loop_` must be null or a live loop.
#[inline]
pub unsafe fn idle_ns(loop_: *mut UvLoop) -> u64 {
    if loop_.is_null() {
        0
    } else {
        uv_metrics_idle_time(loop_)
    }
}

/// `uv_hrtime` as a core clock: the time base of the samplers' ticks and their watchdog.
#[derive(Clone, Copy, Debug, Default)]
pub struct UvClock;

impl Clock for UvClock {
    #[inline]
    fn now_ns(&self) -> u64 {
        unsafe { uv_hrtime() }
    }
}
