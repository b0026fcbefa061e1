'use strict';
// The fair-share backstop (fairShare): while a global limit (the tier's pool) is saturated by many
// rotating addresses, the heaviest clients are refused first and a light client keeps being served;
// a /24 whose addresses are each new is one heavy client. Real servers, bounded waves of requests.
const test = require('node:test');
const assert = require('node:assert/strict');
const { FRAMEWORKS } = require('./apps');
const prom = require('prom-client');
const http = require('node:http');
const { metrics, gatekeeper } = require('../..');
const { request, listen, close } = require('../helpers/http');
const { parsePrometheusText, sampleValue } = require('../helpers/prom-text');

// A pool of 40 refilled at 50/s: above the light client's rate (a request at most every 50 ms),
// far below the waves' (40 or more requests each, sent at once), which drain it.
const TIERS = [{ name: 'standard', limit: 40, windowMs: 800 }];
const LIGHT_GAP_MS = 50;
const LIGHT_REQUESTS = 10;
const MAX_WAVES = 400;

const get = (port, ip) => request(port, { path: '/hello', headers: { 'x-forwarded-for': ip } });

/**
 * Waves of requests sent at once until the light client (81.1.1.17) has sent LIGHT_REQUESTS, each
 * amid a wave, on every third wave from the fourth on (the first waves' addresses are all new, as
 * light as it) and at least LIGHT_GAP_MS after its previous one, its first at least twice that
 * after the crawl began: a third of a heavy address's rate however fast the waves go, and below the
 * pool's refill. (A first request sent right after the first waves drained the pool can find less
 * than the tokens its share needs there when the waves are fast.) `wave(w)` gives a wave's
 * [class, address] pairs.
 */
async function crawl(port, wave) {
  const out = { light: [] };
  let lastLight = Date.now() + LIGHT_GAP_MS;
  for (let w = 0; w < MAX_WAVES && out.light.length < LIGHT_REQUESTS; w++) {
    const sends = wave(w);
    if (w >= 3 && w % 3 === 0 && Date.now() - lastLight >= LIGHT_GAP_MS) {
      lastLight = Date.now();
      sends.splice(sends.length >> 1, 0, ['light', '81.1.1.17']);
    }
    await Promise.all(sends.map(([cls, ip]) => get(port, ip).then((r) => (out[cls] ??= []).push(r.status))));
  }
  return out;
}

/** 40 heavy addresses (each in a /24 of its own) one request per wave, 10 moderate ones every other wave. */
const rotating = (w) => [
  ...Array.from({ length: 40 }, (_, i) => ['heavy', `45.0.${i}.9`]),
  ...(w % 2 === 0 ? Array.from({ length: 10 }, (_, i) => ['moderate', `46.0.${i}.9`]) : []),
];

const refusedShare = (statuses) => statuses.filter((s) => s !== 200).length / statuses.length;

for (const name of ['node:http', 'express 5']) {
  test(`${name}: the heaviest clients are refused first and a light client is served while rotating addresses saturate the global limit`, async () => {
    const app = await FRAMEWORKS[name]({ tiers: TIERS, shed: false, trustProxy: true, fairShare: true });
    try {
      const r = await crawl(app.port, rotating);
      assert.equal(r.light.length, LIGHT_REQUESTS);
      assert.deepEqual(r.light, r.light.map(() => 200), 'the light client is served every time');
      // The heavy and moderate addresses took the refusals, as 503s (what the global limit answers),
      // the heavy ones more often.
      assert.ok(refusedShare(r.heavy) > 0.5, `heavy refused ${refusedShare(r.heavy)}`);
      assert.ok(r.heavy.every((s) => s === 200 || s === 503));
      assert.ok(refusedShare(r.heavy) > refusedShare(r.moderate), `heavy ${refusedShare(r.heavy)} vs moderate ${refusedShare(r.moderate)}`);
      const refused = app.defense.stats().fairShareRefused;
      assert.ok(refused > 0);
      // Scraped, as an operator's dashboard sees it.
      const m = metrics({ gatekeeper: app.gate, registry: new prom.Registry() });
      try {
        const fams = parsePrometheusText(await m.registry.metrics());
        assert.equal(sampleValue(fams, 'tiergate_defense_refusals_total', { reason: 'fair-share' }), refused);
      } finally {
        m.unregister();
      }
    } finally {
      await app.stop();
    }
  });
}

test('without fairShare the same crawl refuses the light client too (whoever arrives at an empty pool)', async () => {
  const app = await FRAMEWORKS['node:http']({ tiers: TIERS, shed: false, trustProxy: true, limits: [] });
  try {
    const r = await crawl(app.port, rotating);
    assert.ok(r.light.some((s) => s === 503), `light: ${r.light}`);
    assert.equal(app.defense.stats().fairShareRefused, 0);
  } finally {
    await app.stop();
  }
});

test('a /24 of new addresses is one heavy client: its requests are refused and a light client is served', async () => {
  const app = await FRAMEWORKS['node:http']({ tiers: TIERS, shed: false, trustProxy: true, fairShare: { subnet: { v4: 24, v6: 48 } } });
  try {
    // 48 requests per wave through the /24's 254 addresses in turn: each address is new for 5 waves.
    let n = 0;
    const r = await crawl(app.port, () => Array.from({ length: 48 }, () => ['subnet', `203.0.113.${1 + (n++ % 254)}`]));
    assert.deepEqual(r.light, r.light.map(() => 200));
    assert.equal(r.light.length, LIGHT_REQUESTS);
    assert.ok(refusedShare(r.subnet) > 0.5, `the /24 refused ${refusedShare(r.subnet)}`);
    assert.ok(app.defense.stats().fairShareRefused > 0);
  } finally {
    await app.stop();
  }
});

/**
 * A node:http app whose every request busies the loop for 3 ms of wall-clock time, behind a pool that
 * never runs short; waves of requests sent at once: 10 heavy addresses 4 each per wave, and every
 * third wave 20 light ones 1 each (a wave is 40–60 requests: the loop lags 120–180 ms however fast
 * the machine is). Returns the statuses per class and the defense's stats.
 */
async function lagCrawl(fairShare, waves = 24) {
  const busy = (ms) => {
    const end = performance.now() + ms;
    while (performance.now() < end);
  };
  const gate = gatekeeper.http({ tiers: [{ name: 'standard', limit: 1e6, windowMs: 1000 }], shed: false, trustProxy: true, fairShare }, (req, res) => {
    busy(3);
    res.end('ok');
  });
  const server = http.createServer(gate);
  const port = await listen(server);
  const out = { heavy: [], light: [] };
  try {
    for (let w = 0; w < waves; w++) {
      const sends = [];
      for (let i = 0; i < 10; i++) for (let k = 0; k < 4; k++) sends.push(['heavy', `45.1.${i}.9`]);
      if (w % 3 === 0) for (let i = 0; i < 20; i++) sends.splice(2 * i, 0, ['light', `81.2.${i}.17`]);
      await Promise.all(sends.map(([cls, ip]) => get(port, ip).then((r) => out[cls].push(r.status))));
    }
    return { ...out, stats: gate.defense.stats() };
  } finally {
    await close(server);
  }
}

test('a loop lagging over lagMs ranks clients though the pool is full: the heavy addresses are refused, the light ones served', async (t2) => {
  const r = await lagCrawl({ lagMs: 20 });
  t2.diagnostic(`heavy refused ${refusedShare(r.heavy).toFixed(2)} of ${r.heavy.length}; light ${r.light.length}`);
  assert.deepEqual(r.light, r.light.map(() => 200), 'every light request served');
  assert.ok(r.heavy.every((s) => s === 200 || s === 503));
  assert.ok(refusedShare(r.heavy) > 0.3, `heavy refused ${refusedShare(r.heavy)}`);
  assert.ok(r.stats.fairShareRefused > 0);
  // The control: with the lag part off the full pool refuses nobody, however the loop lags.
  const off = await lagCrawl({ lagMs: 0 }, 6);
  assert.deepEqual([...off.heavy, ...off.light].filter((s) => s !== 200), []);
  assert.equal(off.stats.fairShareRefused, 0);
});

test('fairShare options: types checked in JS, numbers natively, each naming the option with a stable code', async () => {
  const cases = [
    [{ fairShare: 1 }, TypeError, 'ERR_TIERGATE_INVALID_OPTION', /options\.fairShare must be true, false or an object/],
    [{ fairShare: { reserve: 0 } }, RangeError, 'ERR_TIERGATE_INVALID_OPTION', /options\.fairShare\.reserve must be a finite number > 0 and at most 1 \(got 0\)/],
    [{ fairShare: { reserve: NaN } }, RangeError, 'ERR_TIERGATE_INVALID_OPTION', /fairShare\.reserve .*got NaN/],
    [{ fairShare: { windowMs: Infinity } }, RangeError, 'ERR_TIERGATE_INVALID_OPTION', /fairShare\.windowMs must be a finite number from 1 to 3600000 \(got Infinity\)/],
    [{ fairShare: { maxShare: -1 } }, RangeError, 'ERR_TIERGATE_INVALID_OPTION', /fairShare\.maxShare/],
    [{ fairShare: { slots: 1000 } }, RangeError, 'ERR_TIERGATE_INVALID_OPTION', /fairShare\.slots must be a power of two/],
    [{ fairShare: { windowMs: '1s' } }, TypeError, 'ERR_TIERGATE_INVALID_OPTION', /fairShare\.windowMs must be a number, got string/],
    [{ fairShare: { subnet: { v4: 24, v6: 129 } } }, RangeError, 'ERR_TIERGATE_INVALID_OPTION', /fairShare\.subnet\.v6 must be an integer/],
    [{ fairShare: { subnet: 24 } }, TypeError, 'ERR_TIERGATE_INVALID_OPTION', /fairShare\.subnet must be \{ v4, v6 \}/],
    [{ fairShare: { reserv: 0.5 } }, TypeError, 'ERR_TIERGATE_UNKNOWN_OPTION', /fairShare has an unknown option "reserv"/],
    [{ fairShare: { lagMs: -1 } }, RangeError, 'ERR_TIERGATE_INVALID_OPTION', /options\.fairShare\.lagMs must be a finite number from 0 to 60000 \(got -1\)/],
    [{ fairShare: { lagMs: NaN } }, RangeError, 'ERR_TIERGATE_INVALID_OPTION', /fairShare\.lagMs .*got NaN/],
    [{ fairShare: { lagMs: '50' } }, TypeError, 'ERR_TIERGATE_INVALID_OPTION', /fairShare\.lagMs must be a number, got string/],
  ];
  for (const [o, Ctor, code, message] of cases) {
    assert.throws(() => gatekeeper({ tiers: TIERS, ...o }), (e) => e instanceof Ctor && e.code === code && message.test(e.message), JSON.stringify(o));
  }
  gatekeeper({ tiers: TIERS, fairShare: { reserve: 1, windowMs: 250, maxShare: 2, subnet: false, slots: 16, lagMs: 0 } });
  // false alone asks for no defense at all.
  assert.equal(gatekeeper({ tiers: TIERS, fairShare: false }).defense, null);
  assert.notEqual(gatekeeper({ tiers: TIERS, fairShare: true }).defense, null);
});
