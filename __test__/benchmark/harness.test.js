'use strict';
// The benchmark harness (benchmark/lib): the open-loop generator keeps its schedule whatever the
// server does, accounts per tier, and the scenario runs a server in a child process with a pluggable
// guard. Loads are small and bounded (well under a second each).
const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const path = require('node:path');
const { openLoop, closedLoop } = require('../../benchmark/lib/openloop');
const { startServer, runLoad } = require('../../benchmark/lib/scenario');

function listen(handler) {
  const server = http.createServer(handler);
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

const MIX = [
  { tier: 'critical', weight: 0.2 },
  { tier: 'background', weight: 0.8 },
];

test('openLoop sends on schedule although the server answers slowly, and accounts per tier', async (t) => {
  let concurrent = 0;
  let maxConcurrent = 0;
  const server = await listen((req, res) => {
    concurrent++;
    maxConcurrent = Math.max(maxConcurrent, concurrent);
    const tier = req.headers['x-user-tier'];
    // Every answer takes 300 ms: a closed-loop client with few connections would slow down.
    setTimeout(() => {
      concurrent--;
      if (tier === 'background') {
        res.writeHead(503);
        res.end();
      } else {
        res.writeHead(200);
        res.end('ok');
      }
    }, 300);
  });
  t.after(() => server.close());
  const r = await openLoop({ port: server.address().port, path: '/', rate: 200, durationMs: 500, mix: MIX, timeoutMs: 2000 });
  assert.equal(r.sent, 100);
  assert.equal(r.tiers.critical.sent + r.tiers.background.sent, 100);
  assert.ok(r.tiers.critical.sent > 5 && r.tiers.background.sent > 50, JSON.stringify(r.tiers));
  // All requests of the first 300 ms were out before any answer came back: open loop.
  assert.ok(maxConcurrent >= 50, `max concurrent ${maxConcurrent}`);
  assert.equal(r.tiers.critical.ok, r.tiers.critical.sent);
  assert.equal(r.tiers.critical.successPct, 100);
  assert.ok(r.tiers.critical.p50 >= 290, `p50 ${r.tiers.critical.p50}`);
  assert.equal(r.tiers.background.ok, 0);
  assert.deepEqual(r.tiers.background.rejections, { 503: r.tiers.background.sent });
  const sentInTimeline = r.timeline.reduce((n, row) => n + row.sent.critical + row.sent.background, 0);
  assert.equal(sentInTimeline, 100);
  const okInTimeline = r.timeline.reduce((n, row) => n + (row.goodput.critical * r.bucketMs) / 1000, 0);
  assert.equal(Math.round(okInTimeline), r.tiers.critical.ok);
});

test('openLoop counts requests that outlive their timeout, and overflow beyond maxOutstanding', async (t) => {
  const open = new Set();
  const server = await listen((req, res) => open.add(res)); // never answers
  t.after(() => {
    for (const res of open) res.destroy();
    server.close();
  });
  const r = await openLoop({ port: server.address().port, rate: 100, durationMs: 300, timeoutMs: 200, maxOutstanding: 10, drainMs: 1000 });
  assert.equal(r.sent, 30);
  const rej = r.tiers.all.rejections;
  assert.equal(r.tiers.all.ok, 0);
  assert.equal((rej.timeout || 0) + (rej.overflow || 0), 30, JSON.stringify(rej));
  assert.ok(rej.overflow > 0 && rej.timeout >= 10, JSON.stringify(rej));
});

test('closedLoop measures a sustained rate', async (t) => {
  const server = await listen((req, res) => setTimeout(() => res.end('ok'), 5));
  t.after(() => server.close());
  const r = await closedLoop({ port: server.address().port, concurrency: 4, durationMs: 400, warmupMs: 100 });
  assert.ok(r.reqPerSec > 100 && r.reqPerSec < 4 * 200 + 50, `rate ${r.reqPerSec}`);
  assert.equal(r.other, 0);
});

test('scenario: a server in a child process with a guard from a module path, and its lag window', async (t) => {
  for (const framework of ['express', 'fastify', 'http']) {
    const srv = await startServer({
      framework,
      protection: { module: path.join(__dirname, '..', 'fixtures', 'bench-guard.js'), export: 'makeGuard' },
      options: { reject: 'background' },
      workIters: 10,
      record: true,
    });
    t.after(() => srv.stop());
    const run = await runLoad(srv, { path: '/work', rate: 100, durationMs: 300, mix: MIX });
    assert.equal(run.load.tiers.critical.ok, run.load.tiers.critical.sent, framework);
    assert.equal(run.load.tiers.background.ok, 0, framework);
    assert.equal(run.server.rejected, run.load.tiers.background.sent, framework);
    assert.equal(run.server.handled, 30, framework);
    assert.ok(run.server.firstRejectAt > 0);
    for (const k of ['p50', 'p99', 'max', 'mean']) assert.ok(Number.isFinite(run.server.lag[k]) && run.server.lag[k] >= 0, `${framework} lag.${k}`);
    assert.ok(run.server.samples.t.length > 5, `${framework}: lag samples`);
    assert.deepEqual(await srv.guardStats(), { seen: 30 });
    await srv.stop();
  }
});

test('idealTierLatency: no wait below capacity; under overload the favoured tier still waits for the request in progress', () => {
  const { idealTierLatency } = require('../../benchmark/lib/ideal');
  const mix = [
    { tier: 'critical', weight: 0.1 },
    { tier: 'standard', weight: 0.3 },
    { tier: 'background', weight: 0.6 },
  ];
  const light = idealTierLatency({ rate: 50, durationMs: 5000, serviceMs: 4, mix }); // 0.2x of 250/s
  assert.equal(light.p99, 4);
  const over = idealTierLatency({ rate: 750, durationMs: 5000, serviceMs: 4, mix }); // 3x
  assert.ok(over.p50 > 4 && over.p99 > 8 && over.max <= 4 * 6, JSON.stringify(over));
  // Non-preemptive: a critical request never waits for more than the request in progress plus the
  // critical requests ahead of it.
  assert.deepEqual(idealTierLatency({ rate: 750, durationMs: 5000, serviceMs: 4, mix }), over, 'deterministic');
  // K servers: a jittered service time ends the lockstep of servers that started together; a server
  // reserved for the favoured tier shortens its wait and serves fewer of the others.
  const pool = { rate: 576, durationMs: 3000, serviceMs: 20.8, mix, servers: 4 };
  const busy = idealTierLatency({ ...pool, jitterMs: 1 });
  assert.deepEqual(idealTierLatency({ ...pool, jitterMs: 1 }), busy, 'deterministic with jitter');
  assert.equal(idealTierLatency({ ...pool, jitterMs: 0 }).p99, idealTierLatency(pool).p99);
  const reserved = idealTierLatency({ ...pool, jitterMs: 1, reserve: 1 });
  assert.ok(reserved.waitP99 < busy.waitP99 && reserved.served < 0.9 * busy.served, JSON.stringify({ busy: busy.waitP99, reserved: reserved.waitP99 }));
  assert.ok(busy.served >= 0.99 * 192 * 3, `every server kept busy (192/s for 3 s): ${busy.served}`);
  assert.throws(() => idealTierLatency({ ...pool, reserve: 4 }), /reserve must be from 0 to servers - 1/);
  // Work kinds of the benchmark route are named and checked.
  const { calibrate, checkKind } = require('../../benchmark/lib/work');
  assert.throws(() => checkKind('md5'), /work kind must be one of pbkdf2, sha256-chain/);
  assert.ok(calibrate(1, 'pbkdf2', 3) >= 1);
});
