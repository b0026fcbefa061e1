'use strict';
// Small pieces the fault tests and the chaos run share: a stalled loop, and the fullest window of a
// list of admission times.

/** Busy-waits `ms` on this thread: a stalled event loop. */
function stall(ms) {
  const end = performance.now() + ms;
  while (performance.now() < end);
}

/** The most admissions (by their sorted times, ms) in any span shorter than `spanMs`. */
function fullestSpan(times, spanMs) {
  let max = 0;
  for (let i = 0, j = 0; i < times.length; i++) {
    while (times[i] - times[j] >= spanMs) j++;
    max = Math.max(max, i - j + 1);
  }
  return max;
}

module.exports = { stall, fullestSpan };
