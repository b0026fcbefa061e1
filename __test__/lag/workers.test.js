'use strict';
// LagMonitor lifecycle across processes and worker threads: a monitor never keeps a process alive, and
// workers that exit or are terminated (also mid-run, also while blocked) close their timer cleanly —
// an open handle at worker exit would abort the whole process.
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const path = require('node:path');

function runChild(file, timeout) {
  const started = Date.now();
  const r = spawnSync(process.execPath, [path.join(__dirname, '..', 'fixtures', file)], { encoding: 'utf8', timeout });
  return { ...r, ms: Date.now() - started };
}

test('a process with only started monitors exits by itself', () => {
  const r = runChild('lag-exit-child.js', 10_000);
  assert.equal(r.error, undefined, `child did not exit by itself within 10 s (${r.error?.code})`);
  assert.equal(r.signal, null, r.stderr);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stderr, '');
  const { ticks } = JSON.parse(r.stdout);
  assert.ok(ticks >= 10, `the sampler was running (${ticks} ticks in 100 ms at 1 ms)`);
  assert.ok(r.ms < 5_000, `exited ${r.ms} ms after start`);
});

test('200 workers created, sampled and terminated (half mid-run): no abort, no open handle', () => {
  const r = runChild('lag-workers-child.js', 120_000);
  assert.equal(r.error, undefined, `child did not finish within 120 s (${r.error?.code}): ${r.stderr}`);
  assert.equal(r.signal, null, `child died by ${r.signal}: ${r.stderr}`);
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  const { sampled, 'mid-run': midRun, 'ends-itself': endsItself, block } = out.byMode;
  assert.equal(sampled.n + midRun.n + endsItself.n + block.n, 200);
  // Sampled workers reported live figures from their own loop, then were terminated.
  assert.equal(sampled.sampled, 50);
  assert.ok(sampled.minTicks >= 1, `ticks ${sampled.minTicks}`);
  assert.equal(sampled.interval, 1, 'both monitors of a worker share its 1 ms timer');
  assert.equal(sampled.heapSeen, true);
  assert.deepEqual(sampled.exitCodes, { 1: 50 });
  // Workers with nothing but started monitors left end by themselves, with code 0.
  assert.equal(endsItself.sampled, 50);
  assert.deepEqual(endsItself.exitCodes, { 0: 50 });
  // Terminated within the first ticks of their monitors, or while blocked in JS (exit code 1: terminated).
  assert.equal(midRun.started, 50);
  assert.equal(block.started, 50);
  assert.equal(block.sampled, 0, 'terminated during the block');
  assert.deepEqual(midRun.exitCodes, { 1: 50 });
  assert.deepEqual(block.exitCodes, { 1: 50 });
  // Every worker's timer went through uv_close and its close callback freed the sampler.
  assert.equal(out.liveSamplers, 0);
  // Nothing but the child's stdio pipe is left, and the child then exited by itself.
  assert.deepEqual(out.resources.filter((r) => r !== 'PipeWrap' && r !== 'TTYWrap'), []);
});
