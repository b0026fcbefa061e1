'use strict';
// The CPU-bound work of one benchmark request: `iters` chained rounds of sha256 over 1 KiB.
const crypto = require('node:crypto');
const { performance } = require('node:perf_hooks');

const block = Buffer.alloc(1024, 7);

function work(iters) {
  let digest = block;
  for (let i = 0; i < iters; i++) digest = crypto.createHash('sha256').update(block).update(digest).digest();
  return digest.toString('hex', 0, 8);
}

/** Rounds of work() that take about `targetMs` of CPU here (median of a few timed runs). */
function calibrate(targetMs, runs = 7) {
  const probe = 400;
  work(probe); // warm up
  const perIter = [];
  for (let r = 0; r < runs; r++) {
    const t0 = performance.now();
    work(probe);
    perIter.push((performance.now() - t0) / probe);
  }
  perIter.sort((a, b) => a - b);
  return Math.max(1, Math.round(targetMs / perIter[runs >> 1]));
}

module.exports = { work, calibrate };
