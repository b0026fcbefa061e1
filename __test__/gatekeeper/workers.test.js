'use strict';
// Gatekeepers in worker threads: each worker's gate samples its own loop; workers that exit or are
// terminated with a gate (and its native sampler) alive do not crash the process.
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { Worker } = require('node:worker_threads');

const FIXTURE = path.join(__dirname, '..', 'fixtures', 'gate-worker.js');

function start(exit) {
  const w = new Worker(FIXTURE, { workerData: { exit } });
  const first = new Promise((resolve, reject) => {
    w.once('message', resolve);
    w.once('error', reject);
  });
  const exited = new Promise((resolve) => w.once('exit', resolve));
  return { w, first, exited };
}

test('gatekeepers in 16 workers serve, then exit or are terminated cleanly', { timeout: 60_000 }, async () => {
  const workers = Array.from({ length: 16 }, (_, i) => start(i % 2 === 0));
  const msgs = await Promise.all(workers.map((x) => x.first));
  for (const m of msgs) {
    assert.equal(m.status, 200);
    assert.equal(m.admitted, 1);
    assert.ok(m.heapLimit > 0, 'the worker\'s own sampler reports its heap');
  }
  // Odd workers are still serving: terminate them with their gates alive.
  await Promise.all(workers.map((x, i) => (i % 2 === 1 ? x.w.terminate() : null)));
  const codes = await Promise.all(workers.map((x) => x.exited));
  codes.forEach((code, i) => assert.equal(code, i % 2 === 0 ? 0 : 1, `worker ${i} exit code`));
});
