'use strict';
// LagMonitor on the main thread: options, accuracy of a known block, an idle loop, stop/start, one
// shared timer, and the stall watchdog observed from a worker thread while this thread is blocked.
const test = require('node:test');
const assert = require('node:assert/strict');
const { setTimeout: sleep } = require('node:timers/promises');
const { Worker } = require('node:worker_threads');
const path = require('node:path');
const { LagMonitor } = require('../..');
const native = require('../../lib/native');

function block(ms) {
  const end = performance.now() + ms;
  while (performance.now() < end);
}

test('invalid options throw, naming the option', () => {
  const cases = [
    [{ resolutionMs: 0 }, RangeError, /resolutionMs/],
    [{ resolutionMs: 1.5 }, RangeError, /resolutionMs/],
    [{ resolutionMs: NaN }, RangeError, /resolutionMs/],
    [{ resolutionMs: Infinity }, RangeError, /resolutionMs/],
    [{ resolutionMs: '10' }, TypeError, /resolutionMs/],
    [{ windowMs: -1 }, RangeError, /windowMs/],
    [{ resolutionMs: 10, windowMs: 5 }, RangeError, /windowMs/],
    [{ resolutionMs: 1, windowMs: 3_600_000 }, RangeError, /windowMs \/ resolutionMs/],
    [{ ewmaMs: 0 }, RangeError, /ewmaMs/],
    [{ stallMs: 0 }, RangeError, /stallMs/],
    [{ stallMs: null }, TypeError, /stallMs/],
    [{ stalMs: 100 }, TypeError, /LagMonitor: options has an unknown option "stalMs" \(known: resolutionMs, windowMs, ewmaMs, stallMs\)/],
  ];
  for (const [opts, type, msg] of cases) {
    assert.throws(() => new LagMonitor(opts), (err) => err instanceof type && msg.test(err.message), JSON.stringify(opts));
  }
  assert.throws(() => new LagMonitor(null), TypeError);
  // A wrong type is a TypeError, a wrong value (a number no share() gives) a RangeError, both coded.
  const coded = (type) => (err) => err instanceof type && err.code === 'ERR_TIERGATE_INVALID_ARGUMENT';
  for (const id of ['1', null, undefined]) assert.throws(() => LagMonitor.observe(id), coded(TypeError), String(id));
  for (const id of [0, -1, 1.5, NaN, Infinity, 2 ** 33]) assert.throws(() => LagMonitor.observe(id), coded(RangeError), String(id));
  assert.throws(() => LagMonitor.observe(123456), /no live LagMonitor/);
});

test('defaults, and a stopped monitor reads as stopped', () => {
  const m = new LagMonitor();
  const s = m.stats();
  assert.equal(s.running, false);
  assert.equal(s.resolutionMs, 10);
  assert.equal(s.windowMs, 1000);
  assert.equal(s.stallMs, undefined);
  assert.equal(s.intervalMs, 0);
  assert.equal(s.ticks, 0);
  assert.equal(m.lagMs, 0);
  assert.equal(m.stalled, false);
});

test('a 100 ms synchronous block is reported as lag ≥ 90 ms', async () => {
  const m = new LagMonitor({ resolutionMs: 10 }).start();
  try {
    await sleep(50);
    block(100);
    // Right after the block, before the timer has run again: the tick is overdue by the block.
    assert.ok(m.lagMs >= 90, `lagMs right after the block: ${m.lagMs}`);
    await sleep(20);
    const s = m.stats();
    assert.ok(s.maxMs >= 90, `maxMs ${s.maxMs}`);
    assert.ok(s.maxBlockMs >= 99.9 && s.maxBlockMs < 1000, `maxBlockMs ${s.maxBlockMs}`);
    assert.ok(s.maxMs < 1000, `maxMs ${s.maxMs}`);
    assert.ok(s.p99Ms >= 90 || s.samples >= 100, `p99 ${s.p99Ms} of ${s.samples}`);
    assert.ok(s.ewmaMs > 10, `ewma ${s.ewmaMs}`);
    assert.ok(s.meanMs > 0 && s.meanMs <= s.maxMs);
    assert.ok(s.elu > 0.3, `the block made the loop busy: elu ${s.elu}`);
  } finally {
    m.stop();
  }
});

test('an idle loop stays under a few ms at p99', async () => {
  // Other test files (and other processes) share this machine's 2 cores and can starve this loop for
  // real; the claim is about the sampler on an idle loop, so take the best of up to 5 windows of 400 ms.
  const attempts = [];
  for (let i = 0; i < 5; i++) {
    const m = new LagMonitor({ resolutionMs: 10, windowMs: 1000 }).start();
    try {
      await sleep(400);
      const s = m.stats();
      attempts.push(s);
      assert.ok(s.samples >= 10, `samples ${s.samples}`);
      assert.ok(s.p50Ms <= s.p90Ms && s.p90Ms <= s.p99Ms && s.p99Ms <= s.maxMs);
      assert.ok(s.heapUsed > 0 && s.heapLimit > s.heapUsed, `heap ${s.heapUsed}/${s.heapLimit}`);
      assert.ok(s.heapRatio > 0 && s.heapRatio < 1);
      assert.ok(s.rss > s.heapUsed, `rss ${s.rss}`);
      if (s.p99Ms < 5 && s.p50Ms < 2 && s.elu < 0.5) break;
    } finally {
      m.stop();
    }
  }
  const best = attempts.reduce((a, b) => (b.p99Ms < a.p99Ms ? b : a));
  assert.ok(best.p99Ms < 5, `p99 ${best.p99Ms} ms (attempts: ${attempts.map((s) => s.p99Ms.toFixed(2)).join(', ')})`);
  assert.ok(best.p50Ms < 2, `p50 ${best.p50Ms}`);
  assert.ok(best.elu >= 0 && best.elu < 0.5, `elu ${best.elu}`);
});

test('stop() then start() works, with a fresh window', async () => {
  const m = new LagMonitor({ resolutionMs: 5 });
  assert.equal(m.start(), m);
  m.start(); // idempotent
  await sleep(60);
  block(40);
  await sleep(20);
  const first = m.stats();
  assert.ok(first.ticks > 2 && first.maxMs >= 20, JSON.stringify(first));
  m.stop();
  m.stop(); // idempotent
  const stopped = m.stats();
  assert.equal(stopped.running, false);
  assert.equal(stopped.intervalMs, 0);
  assert.equal(stopped.maxMs, first.maxMs, 'the last figures stay readable');
  await sleep(30);
  assert.equal(m.stats().ticks, stopped.ticks, 'no ticks while stopped');
  m.start();
  const fresh = m.stats();
  assert.equal(fresh.running, true);
  assert.equal(fresh.intervalMs, 5);
  assert.deepEqual([fresh.ticks, fresh.samples, fresh.maxMs, fresh.p99Ms, fresh.maxBlockMs], [0, 0, 0, 0, 0], 'a fresh window');
  await sleep(60);
  const again = m.stats();
  assert.ok(again.ticks >= 2, `ticks after restart ${again.ticks}`);
  m.stop();
});

test('monitors on one thread share one timer at the finest resolution', async () => {
  const coarse = new LagMonitor({ resolutionMs: 20 }).start();
  assert.equal(coarse.stats().intervalMs, 20);
  const fine = new LagMonitor({ resolutionMs: 2, windowMs: 200 }).start();
  assert.equal(coarse.stats().intervalMs, 2);
  assert.equal(fine.stats().intervalMs, 2);
  await sleep(100);
  const a = coarse.stats();
  const b = fine.stats();
  assert.ok(a.ticks >= 3 && b.ticks >= 3, `${a.ticks} ${b.ticks}`);
  assert.ok(Math.abs(a.ticks - b.ticks) <= 1, 'both fed by the same ticks');
  const extra = Array.from({ length: 50 }, (_, i) => new LagMonitor({ resolutionMs: 5 + i }).start());
  assert.equal(native.lagLiveSamplers(), 1, 'one native sampler (timer + prepare handle) for this thread');
  for (const m of extra) m.stop();
  fine.stop();
  assert.equal(coarse.stats().intervalMs, 20, 'back to the remaining monitor resolution');
  coarse.stop();
});

test('stall flag: set while the loop is blocked (seen from a worker), cleared after', async () => {
  const m = new LagMonitor({ resolutionMs: 10, stallMs: 100 }).start();
  const worker = new Worker(path.join(__dirname, '..', 'fixtures', 'lag-observer.js'), {
    workerData: { id: m.share(), pollForMs: 3000, mainTimeOrigin: performance.timeOrigin },
  });
  try {
    const ready = new Promise((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    assert.equal(await ready, 'ready');
    await sleep(50);
    assert.equal(m.stalled, false);
    const report = new Promise((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    const blockedAt = performance.now();
    block(400);
    // Still inside the same macrotask: the block is over but no tick has run yet.
    assert.equal(m.stalled, true, 'the first code after the block sees the stall');
    const r = await report;
    assert.equal(r.sawStalled, true, 'the worker saw the flag raised during the block');
    assert.ok(r.firstStalledAt - blockedAt > 90, `raised ${r.firstStalledAt - blockedAt} ms into the block`);
    assert.ok(r.firstStalledAt - blockedAt < 400, `raised ${r.firstStalledAt - blockedAt} ms into the block`);
    assert.equal(r.clearedAfter, true, 'the worker saw it clear after the block');
    assert.equal(m.stalled, false);
    assert.equal(m.stats().stalled, false);
    assert.ok(m.stats().maxMs >= 300);
  } finally {
    m.stop();
    await worker.terminate();
  }
});

test('the main thread and a worker each sample their own loop', async () => {
  const main = new LagMonitor({ resolutionMs: 20 }).start();
  const worker = new Worker(
    `const { parentPort } = require('node:worker_threads');
     const { LagMonitor } = require(${JSON.stringify(path.join(__dirname, '..', '..'))});
     const m = new LagMonitor({ resolutionMs: 1 }).start();
     setTimeout(() => {
       const end = performance.now() + 60;
       while (performance.now() < end);
       setTimeout(() => parentPort.postMessage(m.stats()), 10);
     }, 20);`,
    { eval: true },
  );
  try {
    const s = await new Promise((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    assert.equal(s.intervalMs, 1, "the worker's timer runs at its own resolution");
    assert.ok(s.maxMs >= 50 && s.maxBlockMs >= 59.9, `the worker saw its own block: ${s.maxMs} / ${s.maxBlockMs}`);
    assert.equal(main.stats().intervalMs, 20, "the main thread's timer is untouched");
  } finally {
    main.stop();
    await worker.terminate();
  }
});

test('a coarse monitor keeps its whole window when a finer one shares the timer', async () => {
  const fine = new LagMonitor({ resolutionMs: 1, windowMs: 50 }).start();
  // Sized for its own 50 ms ticks: 2 × 2000/50 + 16 = 98 samples. Fed by the 1 ms timer instead.
  const coarse = new LagMonitor({ resolutionMs: 50, windowMs: 2000 }).start();
  const deadline = performance.now() + 1500;
  while (coarse.stats().ticks < 150 && performance.now() < deadline) await sleep(20);
  const s = coarse.stats();
  fine.stop();
  coarse.stop();
  assert.ok(s.ticks >= 150, `ticks ${s.ticks}`);
  assert.equal(s.samples, s.ticks, 'every tick since start() (well within 2 s) is still in the window');
});
