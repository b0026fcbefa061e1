'use strict';
// Waits until the machine is quiet: a target's background work after its run (write-behind, folding,
// a database's checkpoints) must not run on the same cores as the next target's measurement.
// Quiet: the machine's busy share of all cores over one window is under `busyShare` (Linux
// /proc/stat). Bounded by `maxMs`; where /proc/stat is not there, it resolves at once.
const fs = require('node:fs');
const { setTimeout: sleep } = require('node:timers/promises');

/** [busy, total] jiffies of all cores since boot, or null. */
function jiffies() {
  let line;
  try {
    line = fs.readFileSync('/proc/stat', 'latin1').split('\n', 1)[0];
  } catch {
    return null;
  }
  const f = line.trim().split(/\s+/).slice(1).map(Number);
  const total = f.reduce((a, b) => a + b, 0);
  const idle = f[3] + (f[4] || 0); // idle + iowait
  return [total - idle, total];
}

/** Resolves { waitedMs, busy } (busy: the last window's share, or null without /proc/stat). */
async function waitForQuiet({ busyShare = 0.15, windowMs = 250, maxMs = 20_000 } = {}) {
  const t0 = Date.now();
  let prev = jiffies();
  if (prev === null) return { waitedMs: 0, busy: null };
  for (;;) {
    await sleep(windowMs);
    const now = jiffies();
    const busy = (now[0] - prev[0]) / Math.max(1, now[1] - prev[1]);
    prev = now;
    const waitedMs = Date.now() - t0;
    if (busy < busyShare || waitedMs >= maxMs) return { waitedMs, busy };
  }
}

module.exports = { waitForQuiet };
