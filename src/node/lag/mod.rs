//! LagMonitor's native side: one libuv timer per JS thread, shared by every monitor (and by every other
//! native component, through `acquire_thread_sampler`) on that thread.
//!
//! The arithmetic, the fan-out to the users' windows and the stall watchdog are the core's
//! (`core::health::sampler`, `core::health::watchdog`); this file owns the libuv side:
//! * The timer lives on the loop of the thread that first asks for it (`napi_get_uv_event_loop`); its
//!   handle is allocated with `uv_handle_size(UV_TIMER)` — no libuv struct layout is assumed here — and
//!   `uv_unref`'d so it never keeps a process alive. Each tick hands `uv_hrtime` to the loop's
//!   `LoopSampler`, which measures the drift and feeds every subscriber.
//! * A prepare handle (same allocation rule, also unref'd) runs once per loop iteration, just before
//!   the loop polls for I/O: (time since the previous prepare) − (idle time in between) is how long the
//!   loop ran without polling — a synchronous block measured to the microsecond whatever the timer's
//!   resolution. The longest one per window is `max_block_ms`.
//! * Event-loop utilisation comes from `uv_metrics_idle_time`, which counts only once the loop was
//!   configured with UV_METRICS_IDLE_TIME. Node (20) does that when it creates the main and every worker
//!   loop (checked: the first `performance.eventLoopUtilization()` call already reports the idle time
//!   since start). A loop that reports no idle time at all when the sampler starts is configured here
//!   (`uv_loop_configure`, on the loop's own thread), so embedders that skip it still get ELU.
//! * Heap used / limit: `v8.getHeapStatistics()` (registered by lib/lag.js), read at most every 100 ms.
//! * An async env cleanup hook stops and `uv_close`s the handle when the environment (a worker) is torn
//!   down; memory is freed only in the close callback, which then releases the hook so Node may close
//!   the loop.
//! * One process-wide watchdog thread (on `uv_hrtime`, the ticks' clock) raises `LoopHealth::stalled`
//!   when a loop has been overdue for longer than a subscriber's `stall_ms`.
//!
//! - `sampler.rs`: the thread's sampler and `SamplerGuard`, what other native components acquire;
//! - `callbacks.rs`: the libuv and teardown callbacks; `heap.rs`: the heap figures;
//! - `hot.rs`: a monitor's `lagMs()` / `stalled()`; `handle.rs`: the `#[napi]` classes;
//! - `diagnostics.rs`: the sampler's own figures and its test seam.
mod callbacks;
mod diagnostics;
mod handle;
mod heap;
mod hot;
mod sampler;

#[allow(unused_imports)] // `acquire_thread_sampler`: API for other native components
pub(crate) use sampler::{acquire_thread_sampler, acquire_thread_sampler_with, current_turn, current_turn_age_ms, SamplerGuard, SamplerOptions};
