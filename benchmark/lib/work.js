'use strict';
// The CPU-bound work of one benchmark request, of one of two kinds:
//
// 'pbkdf2' (default): PBKDF2-HMAC-SHA256 with `iters` iterations: one native call, pure CPU, a single
//   32-byte result, so the loop is busy for the whole request and the request leaves no garbage.
// 'sha256-chain' (the only kind before 2026-11-29): `iters` chained sha256 rounds over 1 KiB, one
//   crypto Hash object per round. Each of those thousands of objects per request carries a native
//   handle that a young-generation GC must process: under load V8 grows the young generation and each
//   scavenge then stops the loop for 25–35 ms (seen with --trace-gc in the benchmark server, every
//   80 ms, in every configuration alike), so GC pauses, not queueing, set the latency tail.
const crypto = require('node:crypto');
const { performance } = require('node:perf_hooks');

const WORK_KINDS = ['pbkdf2', 'sha256-chain'];
const DEFAULT_WORK_KIND = WORK_KINDS[0];
const block = Buffer.alloc(1024, 7);

function work(iters, kind = DEFAULT_WORK_KIND) {
  if (kind === 'pbkdf2') return crypto.pbkdf2Sync(block, 'tiergate', iters, 32, 'sha256').toString('hex', 0, 8);
  let digest = block;
  for (let i = 0; i < iters; i++) digest = crypto.createHash('sha256').update(block).update(digest).digest();
  return digest.toString('hex', 0, 8);
}

function checkKind(kind) {
  if (!WORK_KINDS.includes(kind)) throw new RangeError(`work kind must be one of ${WORK_KINDS.join(', ')}, got ${kind}`);
  return kind;
}

/** Iterations of work() that take about `targetMs` of CPU here (median of a few timed runs). */
function calibrate(targetMs, kind = DEFAULT_WORK_KIND, runs = 7) {
  checkKind(kind);
  const probe = kind === 'pbkdf2' ? 4000 : 400;
  work(probe, kind); // warm up
  const perIter = [];
  for (let r = 0; r < runs; r++) {
    const t0 = performance.now();
    work(probe, kind);
    perIter.push((performance.now() - t0) / probe);
  }
  perIter.sort((a, b) => a - b);
  return Math.max(1, Math.round(targetMs / perIter[runs >> 1]));
}

module.exports = { WORK_KINDS, DEFAULT_WORK_KIND, work, calibrate, checkKind };
