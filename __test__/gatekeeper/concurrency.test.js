'use strict';
// The gatekeeper against overload its event loop cannot see: a handler that waits on a small pool
// (4 at once, 20 ms each, the rest queued in the pool: a database pool's behaviour), driven at ~3x
// the pool's capacity on a real server. The learned concurrency limit keeps the pool's queue short,
// the protected tier is never shed, the rest waits in tier order or is shed; shadow mode refuses
// nothing; a user's signal sheds; handlers read the pressure; sheds can answer 429. Bounded loads.
const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const { gatekeeper } = require('../..');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** At most `k` at once, each `ms` long, the rest waiting in FIFO order. */
function pool(k, ms) {
  let busy = 0;
  const queue = [];
  const p = {
    waiting: () => queue.length,
    run: () => new Promise((resolve) => {
      const go = () => {
        busy++;
        setTimeout(() => {
          busy--;
          if (queue.length > 0) queue.shift()();
          resolve();
        }, ms);
      };
      if (busy < k) go();
      else queue.push(go);
    }),
  };
  return p;
}

async function server(options, db, onRequest = () => {}) {
  const handler = gatekeeper.http(options, async (req, res) => {
    onRequest(req);
    await db.run();
    res.end('ok');
  });
  const s = http.createServer(handler);
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const agent = new http.Agent({ keepAlive: true, maxSockets: 512 });
  return {
    gate: handler.gatekeeper,
    close: () => new Promise((r) => { agent.destroy(); s.close(r); }),
    get: (tier) => new Promise((resolve) => {
      const t0 = performance.now();
      const rq = http.get({ host: '127.0.0.1', port: s.address().port, agent, headers: { 'x-user-tier': tier } }, (r) => {
        r.resume();
        r.on('end', () => resolve({ tier, status: r.statusCode, ms: performance.now() - t0 }));
      });
      rq.on('error', () => resolve({ tier, status: 0, ms: performance.now() - t0 }));
    }),
  };
}

/** Open loop: `perSec` requests a second for `ms`, one in ten critical, three standard, six background. */
async function load(app, perSec, ms) {
  const tiers = ['critical', 'standard', 'standard', 'standard', 'background', 'background', 'background', 'background', 'background', 'background'];
  const out = [];
  const t0 = performance.now();
  for (let i = 0; performance.now() - t0 < ms;) {
    const due = Math.floor(((performance.now() - t0) / 1000) * perSec);
    for (; i < due; i++) out.push(app.get(tiers[i % 10]));
    await sleep(5);
  }
  return Promise.all(out);
}

const count = (rs, tier, status) => rs.filter((r) => r.tier === tier && r.status === status).length;
const OPTIONS = { trustTierHeader: true, shed: false };

test('a saturated pool behind gatekeeper(): the limit settles near the pool, critical is never shed, standard before background', { timeout: 60_000 }, async () => {
  const db = pool(4, 20); // 200 a second
  const app = await server(OPTIONS, db);
  try {
    await load(app, 100, 500); // unloaded: learns the pool's latency
    const rs = await load(app, 600, 2500);
    const c = app.gate.stats().concurrency;
    const crit = rs.filter((r) => r.tier === 'critical');
    assert.equal(count(rs, 'critical', 200), crit.length, 'every critical request answered 200');
    assert.ok(c.limit >= 3 && c.limit <= 12, `the limit near the pool's 4: ${JSON.stringify(c)}`);
    assert.ok(c.waited > 0 && c.waitShed + c.fullShed > 0, `the rest waited, some were shed: ${JSON.stringify(c)}`);
    const share = (tier) => count(rs, tier, 200) / rs.filter((r) => r.tier === tier).length;
    assert.ok(share('standard') > share('background'), `standard served before background: ${share('standard')} vs ${share('background')}`);
    assert.ok(count(rs, 'background', 503) > 0);
    // The pool's own queue stays short: the gate holds the rest.
    assert.ok(db.waiting() <= 12, `pool queue ${db.waiting()}`);
  } finally {
    await app.close();
  }
});

test('shadow mode refuses nothing and reports what it would have held back', { timeout: 60_000 }, async () => {
  const reported = [];
  const app = await server({ ...OPTIONS, shadow: true, onShed: (info) => reported.push(info) }, pool(4, 20));
  try {
    await load(app, 100, 300);
    const rs = await load(app, 600, 1500);
    assert.equal(rs.filter((r) => r.status !== 200).length, 0, 'nothing refused');
    const s = app.gate.stats();
    const c = s.concurrency;
    assert.ok(c.shadow && c.shadowWaits > 0 && c.shadowWaits === c.waits, JSON.stringify(c));
    assert.deepEqual(s.shadow, { enforcePercent: 0 });
    // Each would-be wait reached onShed as a shed not enforced (the loop may also have lagged: the
    // controller's would-be sheds are reported with their own cause).
    const waits = reported.filter((i) => i.cause === 'concurrency');
    assert.equal(waits.length, c.shadowWaits);
    assert.ok(reported.every((i) => i.shadow === true && i.verdict === 'shed' && i.tier !== 'critical'), JSON.stringify(reported[0]));
  } finally {
    await app.close();
  }
});

test("a user's signal of a saturated pool sheds, handlers read the pressure, and sheds can answer 429", { timeout: 60_000 }, async () => {
  const db = pool(50, 20); // latency never inflates: only the signal tells
  let saturated = 0;
  const pressures = [];
  const app = await server({ ...OPTIONS, shedStatus: 429, concurrency: { signals: () => saturated, maxWaitMs: 50 } }, db, (req) => pressures.push(req.tiergate.pressure));
  try {
    // Below the pool's capacity nothing is shed (a burst past the recent peak may wait for a slot).
    const calm = await load(app, 300, 500);
    assert.deepEqual(calm.filter((r) => r.status !== 200), []);
    assert.equal(app.gate.stats().concurrency.waitShed, 0);
    saturated = 2;
    const rs = await load(app, 300, 1500);
    const c = app.gate.stats().concurrency;
    assert.ok(c.signal === 2 && c.limit < 50, JSON.stringify(c));
    assert.ok(count(rs, 'background', 429) > 0, 'sheds answer 429');
    assert.equal(rs.filter((r) => r.status === 503).length, 0);
    assert.equal(count(rs, 'critical', 200), rs.filter((r) => r.tier === 'critical').length);
    assert.ok(pressures.every((p) => p >= 0 && p <= 1) && pressures.some((p) => p > 0), 'req.tiergate.pressure');
    assert.ok(app.gate.pressure() >= 0 && app.gate.pressure() <= 1);
  } finally {
    await app.close();
  }
});

test('concurrency options are checked and named', () => {
  const bad = [
    [{ concurrency: 'auto' }, /options.concurrency must be an object or false/],
    [{ concurrency: { minLimit: 0 } }, /concurrency.minLimit/],
    [{ concurrency: { maxLimit: 2, minLimit: 3 } }, /concurrency.maxLimit must be >= minLimit/],
    [{ concurrency: { maxWaitMs: NaN } }, /concurrency.maxWaitMs/],
    [{ concurrency: { signals: [1] } }, /concurrency.signals\[0\] must be a function/],
    [{ concurrency: { bogus: 1 } }, /bogus/],
    [{ shedStatus: 500 }, /shedStatus must be 503 or 429/],
  ];
  for (const [o, re] of bad) assert.throws(() => gatekeeper(o), (e) => re.test(e.message) && typeof e.code === 'string', JSON.stringify(o));
  assert.equal(gatekeeper({ concurrency: false }).gatekeeper.stats().concurrency, null);
});
