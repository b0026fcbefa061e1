'use strict';
// Another process's CPU time over time, read from outside (Linux /proc/<pid>/stat: utime + stime, in
// clock ticks), so that a saturated server cannot delay its own samples the way an IPC question
// would. Where /proc is not there, `available` is false and every figure is null.
const fs = require('node:fs');
const { execFileSync } = require('node:child_process');
const { performance } = require('node:perf_hooks');

let ticksPerSec = null;
function clockTicks() {
  if (ticksPerSec === null) {
    try {
      ticksPerSec = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      ticksPerSec = 100;
    }
  }
  return ticksPerSec;
}

/** CPU seconds (user + system) the process has used, or null. */
function cpuSeconds(pid) {
  let text;
  try {
    text = fs.readFileSync(`/proc/${pid}/stat`, 'latin1');
  } catch {
    return null;
  }
  // The command name (field 2) may hold spaces and parentheses: the fields after the last ')'.
  const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / clockTicks(); // fields 14 and 15 of the whole line
}

/**
 * Samples `pid` every `everyMs` until stop(); stop() returns { available, samples: [{ t (absolute
 * ms, performance.timeOrigin-based), cpu (seconds) }] }.
 */
function sampleCpu(pid, everyMs = 100) {
  const available = cpuSeconds(pid) !== null;
  const samples = [];
  const read = () => {
    const cpu = cpuSeconds(pid);
    if (cpu !== null) samples.push({ t: performance.timeOrigin + performance.now(), cpu });
  };
  read();
  const timer = available ? setInterval(read, everyMs) : null;
  return {
    available,
    stop() {
      if (timer) clearInterval(timer);
      read();
      return { available, samples };
    },
  };
}

/** Share of one core (0..1 per core) used between absolute times a and b, or null. */
function cpuShare(samples, a, b) {
  const at = (t) => {
    // Linear between the samples around t.
    let prev = null;
    for (const s of samples) {
      if (s.t >= t) {
        if (prev === null) return s.cpu;
        return prev.cpu + ((s.cpu - prev.cpu) * (t - prev.t)) / Math.max(1e-9, s.t - prev.t);
      }
      prev = s;
    }
    return prev ? prev.cpu : null;
  };
  if (samples.length < 2) return null;
  const ca = at(a);
  const cb = at(b);
  return ca === null || cb === null ? null : (cb - ca) / ((b - a) / 1000);
}

module.exports = { sampleCpu, cpuShare, cpuSeconds };
