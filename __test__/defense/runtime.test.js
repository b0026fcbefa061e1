'use strict';
// The defense while it runs: lists replaced while requests are in flight, the ban API and its events
// (hooks, diagnostics channel, export/import), shaper delays and their bound, limits scoped to tiers
// and routes, and memory bounded under a flood of unique addresses.
const test = require('node:test');
const assert = require('node:assert/strict');
const diagnostics = require('node:diagnostics_channel');
const { EventEmitter } = require('node:events');
const { gatekeeper, BAN_CHANNEL } = require('../..');
const { FRAMEWORKS } = require('./apps');
const { request } = require('../helpers/http');

const MIN = 60_000;

test('lists replaced while requests are in flight: each request decides on one version, none fails', async () => {
  const app = await FRAMEWORKS['node:http']({ shed: false, trustProxy: true, deny: ['198.51.100.0/24'] });
  try {
    const addrs = ['198.51.100.1', '203.0.113.1', '2001:db8::1', '::ffff:198.51.100.2'];
    const versions = [['198.51.100.0/24'], ['203.0.113.0/24', '2001:db8::/32'], [], ['0.0.0.0/0', '::/0']];
    // A request admitted under one version is answered even after its address is denied.
    const held = request(app.port, { path: '/slow', headers: { 'x-forwarded-for': '203.0.113.1' } });
    while (app.hold.count === 0) await new Promise((r) => setImmediate(r));
    app.defense.setLists({ deny: ['203.0.113.0/24'] });
    assert.equal((await request(app.port, { path: '/hello', headers: { 'x-forwarded-for': '203.0.113.1' } })).status, 403);
    app.hold.release();
    assert.equal((await held).status, 200);
    // Bounded: 400 requests in 8 waves, the lists swapped under them every few milliseconds.
    let swaps = 0;
    let done = false;
    const swapper = (async () => {
      while (!done) {
        app.defense.setLists({ deny: versions[swaps++ % versions.length] });
        await new Promise((r) => setTimeout(r, 2));
      }
    })();
    const statuses = new Map();
    for (let wave = 0; wave < 8; wave++) {
      const rs = await Promise.all(Array.from({ length: 50 }, (_, i) => request(app.port, { path: '/hello', headers: { 'x-forwarded-for': addrs[i % addrs.length] } })));
      for (const r of rs) statuses.set(r.status, (statuses.get(r.status) || 0) + 1);
    }
    done = true;
    await swapper;
    assert.ok(swaps >= 2, `${swaps} swaps`);
    assert.deepEqual([...statuses.keys()].filter((s) => s !== 200 && s !== 403), [], 'only served or denied');
    assert.equal([...statuses.values()].reduce((a, b) => a + b, 0), 400);
    // Settled on the last version.
    app.defense.setLists({ deny: ['2001:db8::/32'] });
    const after = await Promise.all(addrs.map((a) => request(app.port, { path: '/hello', headers: { 'x-forwarded-for': a } })));
    assert.deepEqual(after.map((r) => r.status), [200, 200, 403, 200]);
  } finally {
    await app.stop();
  }
});

test('the ban API: add, get, list, remove, export and import, with events to onBan and the channel', async () => {
  const hooked = [];
  const published = [];
  const sub = (e) => published.push(e);
  diagnostics.subscribe(BAN_CHANNEL, sub);
  const app = await FRAMEWORKS['express 5']({ shed: false, trustProxy: true, onBan: (e) => hooked.push(e) });
  try {
    const bans = app.defense.bans;
    const t0 = Date.now();
    bans.ban('203.0.113.7', { durationMs: 10 * MIN, reason: 'abuse desk' });
    bans.ban('2001:db8:1:2::5'); // permanent; IPv6 keyed by the gatekeeper's /56
    bans.ban('198.51.100.0/24', { durationMs: MIN });
    const v4 = bans.get('203.0.113.7');
    assert.equal(v4.reason, 'abuse desk');
    assert.equal(v4.source, 'operator');
    assert.ok(v4.until - t0 >= 10 * MIN && v4.until - t0 <= 10 * MIN + 2000);
    const v6 = bans.get('2001:db8:1:2::99');
    assert.deepEqual([v6.target, v6.until, v6.cidr], ['2001:db8:1::/56', null, false]);
    assert.equal(bans.list().length, 3);
    const from = (xff) => request(app.port, { path: '/hello', headers: { 'x-forwarded-for': xff } });
    const temp = await from('203.0.113.7');
    assert.equal(temp.status, 403);
    assert.ok(Number(temp.headers['retry-after']) >= 599 && Number(temp.headers['retry-after']) <= 600);
    const perm = await from('2001:db8:1:2::1');
    assert.equal(perm.status, 403);
    assert.equal(perm.headers['retry-after'], undefined, 'a permanent ban has no end to announce');
    assert.match(perm.json.detail, /until an operator lifts the ban/);
    assert.equal((await from('::ffff:198.51.100.3')).status, 403, 'a CIDR ban, mapped address folded');
    assert.equal((await from('198.51.101.3')).status, 200);
    // A shorter ban does not shorten a longer one.
    bans.ban('203.0.113.7', { durationMs: 1000 });
    // (Times cross from the monotonic clock to Unix ms on each read: equal to the millisecond, give or take one.)
    const near = (a, b) => assert.ok(Math.abs(a - b) <= 2, `${a} vs ${b}`);
    near(bans.get('203.0.113.7').until, v4.until);
    // Export, then import into another gatekeeper.
    const records = bans.export();
    assert.equal(records.length, 3);
    const other = gatekeeper({ shed: false, deny: [] });
    assert.deepEqual(other.defense.bans.import(records), { applied: 3, skipped: 0, refused: 0 });
    assert.deepEqual(other.defense.bans.import(records), { applied: 0, skipped: 3, refused: 0 });
    assert.deepEqual(other.defense.bans.list().map((b) => b.target).sort(), ['198.51.100.0/24', '2001:db8:1::/56', '203.0.113.7']);
    near(other.defense.bans.get('203.0.113.7').until, v4.until);
    // Lift.
    assert.equal(bans.lift('203.0.113.7'), true);
    assert.equal(bans.lift('203.0.113.7'), false);
    assert.equal((await from('203.0.113.7')).status, 200);
    const kinds = hooked.map((e) => `${e.kind}:${e.ban.target}`);
    assert.deepEqual(kinds, ['added:203.0.113.7', 'added:2001:db8:1::/56', 'added:198.51.100.0/24', 'lifted:203.0.113.7']);
    // The channel is the process's: it also saw the other gatekeeper's imports.
    const seen = published.map((e) => `${e.kind}:${e.ban.target}`);
    assert.deepEqual(seen.slice(0, 3), kinds.slice(0, 3));
    assert.deepEqual(seen.slice(3, 6).sort(), ['added:198.51.100.0/24', 'added:2001:db8:1::/56', 'added:203.0.113.7']);
    assert.deepEqual(seen.slice(6), ['lifted:203.0.113.7']);
  } finally {
    diagnostics.unsubscribe(BAN_CHANNEL, sub);
    await app.stop();
  }
});

test('a refusal by a /24 limit strikes the /24: a crawler spread over it earns one CIDR ban', async () => {
  const hooked = [];
  const app = await FRAMEWORKS['node:http']({
    shed: false,
    trustProxy: true,
    onBan: (e) => hooked.push(e),
    limits: [
      { name: 'per-ip', algorithm: 'sliding-window', limit: 5, windowMs: MIN },
      { name: 'per-subnet', by: { prefix: { v4: 24 } }, algorithm: 'sliding-window', limit: 4, windowMs: MIN },
    ],
  });
  try {
    const from = (xff) => request(app.port, { path: '/hello', headers: { 'x-forwarded-for': xff } });
    // One request from each of 10 addresses of 198.51.100.0/24: never over the per-IP limit.
    const statuses = [];
    for (let host = 1; host <= 10; host++) statuses.push((await from(`198.51.100.${host}`)).status);
    // 4 served, 3 refused by the /24 (3 strikes on the /24, the default rule's threshold), then banned.
    assert.deepEqual(statuses, [200, 200, 200, 200, 429, 429, 429, 403, 403, 403]);
    const ban = app.defense.bans.get('198.51.100.0/24');
    assert.deepEqual([ban.target, ban.cidr, ban.source, ban.reason], ['198.51.100.0/24', true, 'rule', 'rate-limit']);
    assert.deepEqual(hooked.map((e) => `${e.kind}:${e.ban.target}`), ['added:198.51.100.0/24']);
    assert.equal(app.defense.bans.get('198.51.100.5'), null, 'no address of it is banned by itself');
    assert.equal((await from('198.51.100.200')).status, 403, 'a fresh address of the /24 is banned too');
    assert.equal((await from('198.51.101.1')).status, 200, 'the next /24 is not');
  } finally {
    await app.stop();
  }
});

test('escalation: a repeat offender is banned longer each time, and a full table of permanent bans refuses', () => {
  const g = gatekeeper({
    shed: false,
    bans: { rules: [{ name: 'hammer', on: 'probe', threshold: 2, windowMs: MIN, banMs: MIN }], escalation: { jitter: 0, factor: 3, permanentAfter: 1 }, maxBans: 2 },
  });
  const d = g.defense;
  const lens = [];
  for (let i = 0; i < 3; i++) {
    const t0 = Date.now();
    d.report('192.0.2.1');
    d.report('192.0.2.1');
    const b = d.bans.get('192.0.2.1');
    lens.push(b.until === null ? 'permanent' : Math.round((b.until - t0) / 1000));
  }
  // 1 minute, then 3 (factor 3, no jitter), then permanent (after 1 escalation).
  assert.deepEqual(lens, [60, 180, 'permanent']);
  assert.equal(d.bans.get('192.0.2.1').offense, 3);
  d.bans.ban('192.0.2.2');
  assert.throws(() => d.bans.ban('192.0.2.3'), (err) => err.code === 'ERR_TIERGATE_BAN_TABLE_FULL');
  assert.equal(d.stats().refused, 1);
});

test('a shaper delays requests over its rate to their slot, and refuses past maxQueued', async () => {
  const app = await FRAMEWORKS['fastify 5']({
    shed: false,
    bans: { rules: false },
    // A slot every 500 ms: six concurrent requests arrive well within the first slot even on a busy machine.
    limits: [{ name: 'smooth', algorithm: 'gcra', limit: 2, windowMs: 1000, burst: 1, maxDelayMs: 5000, maxQueued: 3 }],
  });
  try {
    const t0 = Date.now();
    const rs = await Promise.all(Array.from({ length: 6 }, () => request(app.port, { path: '/hello' }).then((r) => ({ ...r, at: Date.now() - t0 }))));
    const served = rs.filter((r) => r.status === 200);
    const full = rs.filter((r) => r.status === 503);
    // One at once, three delayed (to the 500, 1000, 1500 ms slots), two over the bound.
    assert.equal(served.length, 4);
    assert.equal(full.length, 2);
    for (const r of full) assert.equal(r.json.type, 'urn:tiergate:problem:shaper-full');
    const last = Math.max(...served.map((r) => r.at));
    assert.ok(last >= 1450, `the last slot is 1500 ms out; served at ${last} ms`);
    assert.equal(app.defense.stats().shaperWaiting, 0);
  } finally {
    await app.stop();
  }
});

test('limits scoped by route (in the framework dialect), method and tier', async () => {
  const options = {
    shed: false,
    bans: { rules: false },
    trustTierHeader: true,
    defaultTier: 'standard',
    limits: [
      { algorithm: 'sliding-window', name: 'api', routes: ['/api/'], limit: 1, windowMs: MIN },
      { algorithm: 'sliding-window', name: 'login', routes: [{ method: 'POST', path: '/login' }], limit: 1, windowMs: MIN },
      { algorithm: 'sliding-window', name: 'background', tiers: ['background'], limit: 1, windowMs: MIN },
    ],
  };
  for (const [fw, start] of Object.entries(FRAMEWORKS)) {
    const app = await start(options);
    try {
      const get = (path, headers) => request(app.port, { path, headers });
      // Express and node:http route case-insensitively, so the limit counts /API/a there (node:http's
      // handler here answers it 404); Fastify does not, and neither does the limit.
      assert.notEqual((await get('/API/a')).status, 429, fw);
      assert.equal((await get('/api/b')).status, fw === 'fastify 5' ? 200 : 429, fw);
      if (fw === 'fastify 5') assert.equal((await get('/api/c')).status, 429);
      const login = () => request(app.port, { method: 'POST', path: '/login', headers: { 'content-length': '0' } });
      assert.equal((await login()).status, 200);
      assert.equal((await login()).status, 429);
      // Tier-scoped: only background requests count (the tier from the trusted header).
      for (let i = 0; i < 3; i++) assert.equal((await get('/hello')).status, 200, `${fw}: the default tier is not scoped`);
      assert.equal((await get('/hello', { 'x-user-tier': 'background' })).status, 200);
      const r = await get('/hello', { 'x-user-tier': 'background' });
      assert.equal(r.status, 429);
      assert.equal(r.json.limit, 'background');
    } finally {
      await app.stop();
    }
  }
});

test('skip() and the allow list bypass limits and bans; a cost function weighs requests', async () => {
  const app = await FRAMEWORKS['express 4']({
    shed: false,
    trustProxy: true,
    allow: ['10.0.0.0/8'],
    skip: (req) => req.headers['x-internal'] === 'yes',
    limits: [{ algorithm: 'sliding-window', name: 'weighted', limit: 10, windowMs: MIN, cost: (req) => (req.url.includes('deep') ? 5 : 1) }],
  });
  try {
    const from = (xff, path = '/hello', headers = {}) => request(app.port, { path, headers: { 'x-forwarded-for': xff, ...headers } });
    app.defense.bans.ban('10.1.1.1');
    app.defense.bans.ban('192.0.2.9');
    assert.equal((await from('10.1.1.1')).status, 200, 'allow-listed beats a ban');
    assert.equal((await from('192.0.2.9', '/hello', { 'x-internal': 'yes' })).status, 200, 'skipped');
    assert.equal((await from('192.0.2.9')).status, 403);
    assert.equal((await from('192.0.2.1')).json.rateLimit.remaining, 9);
    assert.equal((await from('192.0.2.1', '/hello?deep=1')).status, 200);
    const r = await from('192.0.2.1', '/hello?deep=1');
    assert.equal(r.status, 429, 'a cost of 5 does not fit in the 4 left');
    assert.match(r.headers.ratelimit, /^"weighted";r=4;/);
    assert.equal((await from('192.0.2.1')).json.rateLimit.remaining, 3, 'a cost of 1 does');
  } finally {
    await app.stop();
  }
});

// Through the guard API directly (no sockets): 30,000 unique addresses, each going over its limit and
// earning a ban. Every store stays at its cap; no permanent ban is evicted.
test('memory stays bounded under a flood of unique addresses', () => {
  const g = gatekeeper({
    shed: false,
    concurrency: false, // its responses never finish: they would hold every slot of the limit
    trustProxy: true,
    limits: [
      { algorithm: 'sliding-window', name: 'per-ip', limit: 1, windowMs: MIN, maxKeys: 2000 },
      { name: 'exact', algorithm: 'sliding-window', limit: 2, windowMs: MIN, maxKeys: 1000 },
    ],
    bans: { rules: [{ name: 'rl', on: 'rate-limited', threshold: 2, windowMs: MIN, banMs: MIN }], maxBans: 500, maxTracked: 1000 },
  });
  const gk = g.gatekeeper;
  g.defense.bans.ban('192.0.2.0/24');
  g.defense.bans.ban('198.51.100.1');
  const res = () => Object.assign(new EventEmitter(), { headersSent: false, setHeader() {} });
  const counts = new Map();
  for (let i = 0; i < 30_000; i++) {
    const ip = `100.${64 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`;
    const req = { method: 'GET', url: '/', headers: { 'x-forwarded-for': ip }, socket: { remoteAddress: '127.0.0.1' } };
    for (let k = 0; k < 4; k++) {
      const out = gk.admit(req, res());
      const s = out === null ? 200 : out.status;
      counts.set(s, (counts.get(s) || 0) + 1);
    }
  }
  const s = g.defense.stats();
  assert.ok(s.limits[0].keys <= 2000 && s.limits[1].keys <= 1000, JSON.stringify(s.limits));
  assert.ok(s.tracked <= 1000, `tracked ${s.tracked}`);
  assert.equal(s.bans, 500);
  assert.ok(s.evicted >= 29_000, `evicted ${s.evicted}`);
  assert.ok(g.defense.bans.get('192.0.2.0/24') && g.defense.bans.get('198.51.100.1'), 'the permanent bans are kept');
  assert.deepEqual([...counts.keys()].sort(), [200, 403, 429]);
  assert.equal(counts.get(200), 30_000);
});

// The ban key (text, as an operator writes it) is made only when a refusal needs it for its strike,
// when no ban is held and there is no challenge: the strikes must still land on that key.
test('three rate-limit refusals ban the client by the key an operator writes, IPv4 and IPv6', async () => {
  const events = [];
  const app = await FRAMEWORKS['node:http']({
    shed: false,
    trustProxy: true,
    limits: [{ name: 'one', algorithm: 'sliding-window', limit: 1, windowMs: MIN }],
    onBan: (e) => events.push(e),
  });
  try {
    for (const ip of ['198.51.100.7', '2001:db8:1:2::5']) {
      const from = () => request(app.port, { path: '/hello', headers: { 'x-forwarded-for': ip } });
      assert.equal(app.defense.bans.list().length, 0, 'no ban held: the key is made at the refusal');
      assert.equal((await from()).status, 200);
      for (let i = 0; i < 3; i++) assert.equal((await from()).status, 429);
      assert.equal((await from()).status, 403, 'the third refusal banned');
      const ban = app.defense.bans.get(ip); // keyed as requests are (IPv6 by its /56)
      assert.ok(ban !== null, `banned: ${ip}`);
      assert.equal(ban.reason, 'rate-limit', 'the default rule');
      assert.equal(events.at(-1).ban.target, app.defense.clientKey(ip));
      app.defense.bans.lift(ip);
    }
  } finally {
    await app.stop();
  }
});

test('defense refusals reach onReject, onDecision, respond and the decision channel', async () => {
  const rejected = [];
  const decided = [];
  const published = [];
  const sub = (m) => published.push(m.verdict);
  diagnostics.subscribe('tiergate:decision', sub);
  const app = await FRAMEWORKS['node:http']({
    shed: false,
    trustProxy: true,
    deny: ['192.0.2.0/24'],
    bans: { rules: false },
    limits: [{ name: 'one', algorithm: 'sliding-window', limit: 1, windowMs: MIN }],
    onReject: (info) => rejected.push(info),
    onDecision: (info) => decided.push(info.verdict),
    respond: (info, req, rejection) => (info.verdict === 'banned' ? { ...rejection, status: 451 } : undefined),
  });
  try {
    const from = (xff) => request(app.port, { path: '/hello', headers: { 'x-forwarded-for': xff } });
    assert.equal((await from('192.0.2.1')).status, 403);
    assert.equal((await from('198.51.100.1')).status, 200);
    assert.equal((await from('198.51.100.1')).status, 429);
    app.defense.bans.ban('203.0.113.1', { durationMs: MIN });
    assert.equal((await from('203.0.113.1')).status, 451, 'respond() replaced the ban');
    assert.deepEqual(rejected.map((i) => i.verdict), ['deny-listed', 'rate-limited', 'banned']);
    const rl = rejected[1];
    assert.deepEqual([rl.status, rl.limitName, rl.limit, rl.remaining, rl.key, rl.tier], [429, 'one', 1, 0, '198.51.100.1', 'standard']);
    assert.ok(rl.retryAfterMs > 59_000 && rl.retryAfterMs <= MIN);
    assert.deepEqual(rejected[2].banned, { byCidr: false, permanent: false });
    assert.deepEqual(decided, ['deny-listed', 'admit', 'rate-limited', 'banned']);
    assert.deepEqual(published, decided);
  } finally {
    diagnostics.unsubscribe('tiergate:decision', sub);
    await app.stop();
  }
});

test('exemptSkipsShedding: allow-listed requests are served while the loop sheds; others are not', async () => {
  for (const exemptSkipsShedding of [false, true]) {
    const app = await FRAMEWORKS['express 5']({
      trustProxy: true,
      allow: ['10.0.0.0/8'],
      exemptSkipsShedding,
      shed: { targetLagMs: 50, criticalLagMs: 150, holdMs: 0, recoveryMs: 0, integralMs: 0, confirmMs: 0, turnBudgetMs: 0 },
    });
    try {
      app.gate.injectHealth({ lagMs: 1000 });
      const from = (xff) => request(app.port, { path: '/hello', headers: { 'x-forwarded-for': xff } });
      assert.equal((await from('192.0.2.1')).status, 503);
      assert.equal((await from('10.1.2.3')).status, exemptSkipsShedding ? 200 : 503, `exemptSkipsShedding ${exemptSkipsShedding}`);
    } finally {
      await app.stop();
    }
  }
});

test('watchServer: malformed requests count as probes and earn the probe ban', async () => {
  const net = require('node:net');
  const app = await FRAMEWORKS['node:http']({ shed: false, bans: { rules: [{ name: 'probe', on: 'probe', threshold: 5, windowMs: MIN, banMs: 30 * MIN }] } });
  try {
    const srv = app.server;
    const unwatch = app.defense.watchServer(srv);
    const raw = () => new Promise((resolve, reject) => {
      const s = net.connect(app.port, '127.0.0.1', () => s.write('GARBAGE / HTTP/9.9\r\n\r\n'));
      let text = '';
      s.setEncoding('utf8');
      s.on('data', (c) => (text += c));
      s.on('close', () => resolve(text));
      s.on('error', reject);
      s.setTimeout(5000, () => s.destroy(new Error('timed out')));
    });
    for (let i = 0; i < 5; i++) assert.match(await raw(), /^HTTP\/1\.1 400 Bad Request/);
    const ban = app.defense.bans.get('127.0.0.1');
    assert.equal(ban && ban.reason, 'probe');
    assert.equal((await request(app.port, { path: '/hello' })).status, 403);
    unwatch();
    assert.equal(srv.listenerCount('clientError'), 0);
    assert.throws(() => app.defense.watchServer(null), (err) => err.code === 'ERR_TIERGATE_INVALID_ARGUMENT');
  } finally {
    await app.stop();
  }
});

test('watchServer behind a trusted proxy: malformed requests are not charged to the proxy', async () => {
  const net = require('node:net');
  // Oversized headers are what a client sends through a proxy that passes them on: node's parser
  // refuses them (431) before any X-Forwarded-For is read, so the socket's peer is the proxy.
  const app = await FRAMEWORKS['node:http']({ shed: false, trustProxy: 1, bans: { rules: [{ name: 'probe', on: 'probe', threshold: 5, windowMs: MIN, banMs: 30 * MIN }] } });
  try {
    const unwatch = app.defense.watchServer(app.server);
    const oversized = () => new Promise((resolve, reject) => {
      const s = net.connect(app.port, '127.0.0.1', () => s.write(`GET /hello HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 192.0.2.7\r\nX-Pad: ${'a'.repeat(20_000)}\r\n\r\n`));
      let text = '';
      s.setEncoding('utf8');
      s.on('data', (c) => (text += c));
      s.on('close', () => resolve(text));
      s.on('error', (err) => (err.code === 'ECONNRESET' || err.code === 'EPIPE' ? resolve(text) : reject(err)));
      s.setTimeout(5000, () => s.destroy(new Error('timed out')));
    });
    for (let i = 0; i < 22; i++) assert.match(await oversized(), /^HTTP\/1\.1 431 /);
    assert.equal(app.defense.bans.get('127.0.0.1'), null, 'the proxy is not banned');
    assert.deepEqual(app.defense.bans.list(), [], 'nobody is');
    // The proxy's own health check (no X-Forwarded-For: the peer is the client) and a client through it.
    assert.equal((await request(app.port, { path: '/hello' })).status, 200);
    assert.equal((await request(app.port, { path: '/hello', headers: { 'x-forwarded-for': '192.0.2.7' } })).status, 200);
    unwatch();
  } finally {
    await app.stop();
  }
});

test('one native call: the gate decides only what the defense lets on, and its refusals come through', async () => {
  const app = await FRAMEWORKS['fastify 5']({
    shed: false,
    trustProxy: true,
    deny: ['192.0.2.0/24'],
    bans: { rules: false },
    perKey: { limit: 2, windowMs: 2000000 },
    limits: [{ name: 'per-ip', algorithm: 'sliding-window', limit: 3, windowMs: MIN }],
  });
  try {
    const from = (xff) => request(app.port, { path: '/hello', headers: { 'x-forwarded-for': xff } });
    for (let i = 0; i < 3; i++) assert.equal((await from('192.0.2.1')).status, 403);
    // The deny-listed requests took nothing from the tier's per-key quota of 2 (keyed by the same address form).
    assert.equal((await from('198.51.100.1')).status, 200);
    assert.equal((await from('198.51.100.1')).status, 200);
    const third = await from('198.51.100.1');
    assert.equal(third.status, 429);
    assert.equal(third.json.type, 'urn:tiergate:problem:rate-limited');
    assert.equal(third.json.tier, 'standard', "the tier quota's 429, not a named limit's");
    const s = app.gate.stats().tiers.standard;
    assert.deepEqual([s.admitted, s.rateLimited], [2, 1]);
    // The named limit counted all three; a fourth is its refusal.
    const fourth = await from('198.51.100.1');
    assert.equal(fourth.json.limit, 'per-ip');
    assert.equal(app.gate.stats().tiers.standard.rateLimited, 1, 'the gate did not decide the fourth');
  } finally {
    await app.stop();
  }
});
