'use strict';
// The gatekeeper's turn queue (lib/gatekeeper/turn-queue.js): during a shed episode, unprotected
// requests wait for a later loop turn and run highest tier first, protected ones run as soon as they
// are read, a waiter is shed by its wait or by a higher tier taking its place, and on a healthy loop
// nothing waits. Episodes are injected (injectHealth); the order of handlers is observed on a real
// server, with the requests made to arrive in one loop turn by blocking the loop while they are sent.
const test = require('node:test');
const assert = require('node:assert/strict');
const { performance } = require('node:perf_hooks');
const { AsyncLocalStorage } = require('node:async_hooks');
const { gatekeeper, Gatekeeper } = require('../..');
const { HOLD_MS } = require('../../lib/gatekeeper/turn-queue');
const { serveTiers } = require('../helpers/http');
const { UNLIMITED_TIERS } = require('../helpers/tiers');

const TIERS = UNLIMITED_TIERS;
// Lag 60 on 50..150 gives pressure 0.1 (background at 0.8 of its refill): an episode that refuses
// nothing by its scales, so every refusal below is the queue's. Turn budget 5 ms.
const SHED = { targetLagMs: 50, criticalLagMs: 150, holdMs: 0, recoveryMs: 0, hysteresisMs: 10, integralMs: 0, confirmMs: 0, turnBudgetMs: 5 };

function busy(ms) {
  const end = performance.now() + ms;
  while (performance.now() < end);
}

/**
 * A node:http server whose handler logs `tier path`, with `?then=PATH` sends a protected request to
 * PATH while it runs (its status in `sent`), blocks `?ms=N` milliseconds, or with `?waitMs=N` waits N
 * ms on a timer (an I/O-bound handler) and counts how many such waits overlap.
 */
async function serve(t, options, connections = 8) {
  const order = [];
  const sent = [];
  const io = { inFlight: 0, peak: 0 };
  let get;
  const handler = gatekeeper.http(options, async (req, res) => {
    const url = new URL(req.url, 'http://x');
    order.push(`${req.headers['x-user-tier']} ${url.pathname}`);
    // In the kernel before this turn ends, read by the loop's next poll.
    if (url.searchParams.has('then')) sent.push(get(url.searchParams.get('then'), 'critical'));
    busy(Number(url.searchParams.get('ms') || 0));
    const waitMs = Number(url.searchParams.get('waitMs') || 0);
    if (waitMs > 0) {
      io.peak = Math.max(io.peak, ++io.inFlight);
      await new Promise((resolve) => setTimeout(resolve, waitMs));
      io.inFlight--;
    }
    res.writeHead(200);
    res.end('ok');
  });
  ({ get } = await serveTiers(t, handler, connections));
  // Warm keep-alive connections, so the requests below need no accept.
  await Promise.all(Array.from({ length: connections }, () => get('/warm', 'critical')));
  order.length = 0;
  /** Sends every [path, tier] at once; the server reads them all in one loop turn. */
  const inOneTurn = (list) => {
    const all = Promise.all(list.map(([path, tier]) => get(path, tier)));
    busy(30); // the requests were written synchronously above; all are in the kernel when this ends
    return all;
  };
  /** An injected episode, and one protected request so that a decision has seen it (see startEpisode). */
  const episode = async () => {
    startEpisode(handler);
    await get('/warm', 'critical');
    order.length = 0;
  };
  return { gate: handler, get, order, sent, io, inOneTurn, episode };
}

/**
 * Starts an injected episode and lets a protected request's decision see it: until one has, the gate
 * applies the turn budget itself, and a busy moment of this test process could then shed the first
 * unprotected request instead of queueing it.
 */
function startEpisode(gate, admitCritical) {
  gate.injectHealth({ lagMs: 60 });
  assert.ok(gate.stats().pressure > 0);
  if (admitCritical) assert.equal(admitCritical(), null);
}

test('during an episode, a protected request read after unprotected ones runs first; the rest run highest tier first, one budget per turn', async (t) => {
  const { gate, order, inOneTurn, episode } = await serve(t, { tiers: TIERS, trustTierHeader: true, shed: SHED });
  await episode();
  const statuses = await inOneTurn([
    ['/a?ms=10', 'background'],
    ['/b?ms=10', 'background'],
    ['/c?ms=10', 'standard'],
    ['/d', 'critical'],
  ]);
  assert.deepEqual(statuses, [200, 200, 200, 200]); // late in a busy turn, none is shed: they wait
  assert.deepEqual(order, ['critical /d', 'standard /c', 'background /a', 'background /b']);
  const s = gate.stats();
  assert.equal(s.tiers.standard.turnShed + s.tiers.background.turnShed, 0);
  assert.equal(s.tiers.background.deferred, 2);
  assert.equal(s.tiers.standard.deferred, 1);
  assert.equal(s.tiers.critical.deferred, 0);
  assert.equal(s.queue.active, true);
  assert.ok(s.queue.peak >= 3);
});

test('during an episode, a protected request that arrives while another runs goes before the queued unprotected ones', async (t) => {
  const { gate, order, sent, inOneTurn, episode } = await serve(t, { tiers: TIERS, trustTierHeader: true, shed: SHED });
  await episode();
  assert.deepEqual(await inOneTurn([['/first?ms=10&then=/second', 'critical'], ['/queued', 'background']]), [200, 200]);
  assert.deepEqual(await Promise.all(sent), [200]);
  assert.deepEqual(order, ['critical /first', 'critical /second', 'background /queued']);
  assert.equal(gate.stats().tiers.background.deferred, 1);
});

test('a queued request that waited longer than shed.queueMaxWaitMs is shed with 503, never run', async (t) => {
  const maxWaitMs = 150;
  const { gate, order, inOneTurn, episode } = await serve(t, { tiers: TIERS, trustTierHeader: true, shed: { ...SHED, queueMaxWaitMs: maxWaitMs } });
  await episode();
  assert.equal(gate.stats().queue.maxWaitMs, maxWaitMs);
  // The first waiter's handler blocks past the wait limit: the second has waited longer when its turn comes.
  const statuses = await inOneTurn([
    [`/slow?ms=${maxWaitMs + 100}`, 'standard'],
    ['/late', 'background'],
  ]);
  assert.deepEqual(statuses, [200, 503]);
  assert.deepEqual(order, ['standard /slow']);
  const s = gate.stats();
  assert.equal(s.tiers.background.queueShed, 1);
  assert.equal(s.queue.shed, 1);
  // Counted once: as shed (by the queue), not as admitted.
  assert.equal(s.tiers.background.shed, 1);
  assert.equal(s.tiers.background.admitted, 0);
  assert.equal(s.tiers.standard.admitted, 1);
});

test('during an episode, I/O-bound handlers are not serialised: queued requests whose handlers wait are all in flight at once', async (t) => {
  const n = 40;
  const { gate, io, inOneTurn, episode } = await serve(t, { tiers: TIERS, trustTierHeader: true, shed: SHED }, n);
  await episode();
  const statuses = await inOneTurn(Array.from({ length: n }, (_, i) => ['/io?waitMs=400', i % 2 ? 'standard' : 'background']));
  assert.deepEqual(statuses, Array(n).fill(200));
  assert.equal(io.peak, n); // every one was waiting at once: the budget is time, not a count
  assert.ok(gate.stats().queue.deferred >= n / 2, `deferred ${gate.stats().queue.deferred}`);
});

/** A fake request/response pair for Gatekeeper#admit (isGone reads the response's state). */
function fake(tier) {
  return [{ method: 'GET', url: '/', headers: { 'x-user-tier': tier }, socket: { remoteAddress: '127.0.0.1' } }, { headersSent: false, destroyed: false, writableEnded: false, setHeader() {} }];
}

test('a full queue (shed.queueMaxLength): a higher tier takes the newest lower-tier waiter\'s place; the lowest tier is shed at once', () => {
  const MAX_QUEUE = 5;
  const gk = new Gatekeeper({ tiers: TIERS, trustTierHeader: true, shed: { ...SHED, queueMaxLength: MAX_QUEUE } });
  startEpisode(gk, () => gk.admit(...fake('critical')));
  const got = [];
  const waiters = [];
  for (let i = 0; i < MAX_QUEUE; i++) {
    const w = gk.admit(...fake('background'));
    assert.equal(typeof w.then, 'function');
    const k = i;
    w.then((v) => {
      got[k] = v;
    });
    waiters.push(w);
  }
  assert.equal(gk.stats().queue.queued, MAX_QUEUE);
  const refused = gk.admit(...fake('background'));
  assert.equal(refused.status, 503); // nothing below background to displace
  const std = gk.admit(...fake('standard'));
  assert.equal(typeof std.then, 'function');
  assert.equal(got[MAX_QUEUE - 1].status, 503); // the newest background waiter gave its place
  assert.equal(got[0], undefined);
  assert.equal(gk.admit(...fake('critical')), null); // protected: never queued
  const s = gk.stats();
  assert.equal(s.queue.queued, MAX_QUEUE);
  assert.equal(s.tiers.background.queueShed, 2);
  assert.equal(s.tiers.background.shed, 2);
  assert.equal(s.tiers.background.admitted, 0); // none has run yet: waiting ones count once they run
  assert.equal(s.tiers.standard.admitted, 0);
  assert.equal(s.tiers.critical.admitted, 2);
});

test('on a healthy loop nothing waits; after an episode the queue ends once empty and calm', async () => {
  const gk = new Gatekeeper({ tiers: TIERS, trustTierHeader: true, shed: SHED });
  assert.equal(gk.admit(...fake('background')), null);
  assert.equal(gk.stats().queue.active, false);
  startEpisode(gk, () => gk.admit(...fake('critical')));
  const w = gk.admit(...fake('background'));
  const ran = new Promise((resolve) => w.then(resolve));
  assert.equal(await ran, null); // run at a later turn
  gk.injectHealth({ lagMs: 0 });
  assert.equal(gk.stats().pressure, 0);
  const deadline = performance.now() + HOLD_MS + 2000;
  let out;
  do {
    await new Promise((resolve) => setTimeout(resolve, 100));
    out = gk.admit(...fake('background'));
    if (out !== null) await new Promise((resolve) => out.then(resolve));
  } while (out !== null && performance.now() < deadline);
  assert.equal(out, null);
  assert.equal(gk.stats().queue.active, false);
});

test('a lag over the target that the spike filter has not confirmed starts the queue, and sheds nothing', async () => {
  const gk = new Gatekeeper({ tiers: TIERS, trustTierHeader: true, shed: { ...SHED, confirmMs: 30 } });
  gk.injectHealth({ lagMs: 60 });
  assert.equal(gk.stats().pressure, 0); // one reading: not an episode
  assert.equal(gk.admit(...fake('critical')), null);
  const w = gk.admit(...fake('background'));
  assert.equal(typeof w.then, 'function');
  assert.equal(await new Promise((resolve) => w.then(resolve)), null);
  const s = gk.stats();
  assert.equal(s.episodes, 0);
  assert.equal(s.tiers.background.shed + s.tiers.background.queueShed, 0);
  assert.equal(s.queue.active, true);
});

test('no lag yet, no episode: a third unprotected request admitted in a turn whose two before it each ran the budget starts the queue', async (t) => {
  // A target far above what this test's loop lags, so that only the turn starts the queue: the first
  // two requests of the turn run inline (one slow one is not a burst), the next ones wait, and the
  // protected one read last goes before them. The waiters are quick: the next turn runs them all,
  // and a queue that a burst alone started then ends at the next decision.
  const { gate, get, order, inOneTurn } = await serve(t, { tiers: TIERS, trustTierHeader: true, shed: { targetLagMs: 400, criticalLagMs: 800, stallMs: false } });
  const statuses = await inOneTurn([
    ['/a?ms=10', 'background'],
    ['/b?ms=10', 'background'],
    ['/c', 'background'],
    ['/d', 'standard'],
    ['/e', 'critical'],
  ]);
  assert.deepEqual(statuses, [200, 200, 200, 200, 200]);
  assert.deepEqual(order, ['background /a', 'background /b', 'critical /e', 'standard /d', 'background /c']);
  const s = gate.stats();
  assert.equal(s.episodes, 0);
  assert.equal(s.queue.episodes, 1);
  assert.equal(s.tiers.background.deferred, 1);
  assert.equal(s.tiers.standard.deferred, 1);
  assert.equal(await get('/f', 'background'), 200);
  assert.equal(gate.stats().tiers.background.deferred, 1); // run inline
  assert.equal(gate.stats().queue.active, false);
});

test('a run of slow requests read together: the in-band lag starts the queue inside the run, which serves what fits in its wait limit and sheds the rest', async (t) => {
  // 60 background requests of 15 ms each arrive together: 900 ms of work, no timer tick in between
  // when admitted inline. The gate's in-band estimate sees the lag within the first few; from then on
  // they wait and run one per turn, and those still waiting after queueMaxWaitMs (500 ms) are shed.
  const { order, inOneTurn } = await serve(t, { tiers: TIERS, trustTierHeader: true, shed: { targetLagMs: 20, criticalLagMs: 60, stallMs: false } }, 60);
  const statuses = await inOneTurn(Array.from({ length: 60 }, () => ['/slow?ms=15', 'background']));
  const served = statuses.filter((s) => s === 200).length;
  t.diagnostic(`served ${served} of 60`);
  assert.equal(statuses.filter((s) => s !== 200 && s !== 503).length, 0);
  assert.ok(served >= 1, 'the first requests of the run are served');
  assert.ok(served <= 50, `the queue shed by wait within the run: ${served} of 60 served`);
  assert.equal(order.length, served); // a shed request's handler never ran
});

test('a queued request\'s handler runs in its own async context (AsyncLocalStorage)', async (t) => {
  const als = new AsyncLocalStorage();
  const seen = [];
  const guarded = gatekeeper.http({ tiers: TIERS, trustTierHeader: true, shed: SHED }, (req, res) => {
    seen.push([req.url, als.getStore()]);
    busy(10);
    res.end('ok');
  });
  const { get } = await serveTiers(t, (req, res) => als.run(req.url, () => guarded(req, res)), 4);
  await Promise.all(['/w1', '/w2', '/w3', '/w4'].map((p) => get(p, 'critical')));
  startEpisode(guarded);
  await get('/seen', 'critical');
  seen.length = 0;
  const all = Promise.all(['/a', '/b', '/c'].map((p) => get(p, 'background')));
  busy(30);
  assert.deepEqual(await all, [200, 200, 200]);
  assert.ok(guarded.stats().tiers.background.deferred >= 3);
  for (const [url, store] of seen) assert.equal(store, url);
});

test('the queue\'s limits: 500 ms and 100 waiters by default; other values are validated', () => {
  const q = new Gatekeeper({ tiers: TIERS, shed: SHED }).stats().queue;
  assert.equal(q.maxWaitMs, 500);
  assert.equal(q.maxQueue, 100);
  for (const [name, bad] of [['queueMaxWaitMs', [0, -1, NaN, Infinity, '500', 60_001]], ['queueMaxLength', [0, -1, 2.5, NaN, Infinity, '100', 1_000_001]]]) {
    for (const v of bad) {
      assert.throws(() => gatekeeper({ shed: { [name]: v } }), (err) => err.code === 'ERR_TIERGATE_INVALID_OPTION' && err.message.includes(`options.shed.${name} must be`), `${name}: ${String(v)}`);
    }
  }
});

test('with turnBudgetMs 0 or shed off there is no queue', () => {
  for (const shed of [{ ...SHED, turnBudgetMs: 0 }, false]) {
    const gk = new Gatekeeper({ tiers: TIERS, trustTierHeader: true, shed });
    if (shed !== false) gk.injectHealth({ lagMs: 60 });
    assert.equal(gk.admit(...fake('background')), null);
    assert.equal(gk.stats().queue, null);
  }
});

test('Koa: a queued request starts inside the queue\'s turn, so the turn budget holds between waiters', async (t) => {
  const Koa = require('koa');
  let turn = 0;
  let ticking = true;
  const tick = () => {
    turn++;
    if (ticking) setImmediate(tick);
  };
  setImmediate(tick); // one increment per loop iteration
  t.after(() => {
    ticking = false;
  });
  const started = [];
  const gate = gatekeeper.koa({ tiers: TIERS, trustTierHeader: true, shed: SHED });
  const app = new Koa();
  app.use(gate);
  app.use((ctx) => {
    started.push([ctx.path, turn]);
    busy(Number(ctx.query.ms || 0));
    ctx.body = 'ok';
  });
  const { get } = await serveTiers(t, app.callback(), 4);
  await Promise.all(['/w1', '/w2', '/w3', '/w4'].map((p) => get(p, 'critical')));
  startEpisode(gate);
  await get('/seen', 'critical');
  started.length = 0;
  const all = Promise.all([get('/a?ms=10', 'background'), get('/b?ms=10', 'background')]);
  busy(30);
  assert.deepEqual(await all, [200, 200]);
  assert.equal(gate.stats().tiers.background.deferred, 2);
  // /a's 10 ms spent the 5 ms turn budget: /b waits for the next turn, not a microtask after /a's.
  assert.deepEqual(started.map(([path]) => path), ['/a', '/b']);
  assert.ok(started[1][1] > started[0][1], `both started in turn ${started[0][1]}`);
});
