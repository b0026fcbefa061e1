'use strict';
// The defense layers over real HTTP on Express 4, Express 5, Fastify 5 and node:http: the 429 fields
// of every draft, all or nothing across limits, a 404 probe flood banned for 30 minutes, deny and allow
// lists for IPv4, IPv6 and mapped addresses, and the challenge flow end to end.
const test = require('node:test');
const assert = require('node:assert/strict');
const { FRAMEWORKS } = require('./apps');
const { request } = require('../helpers/http');

const SECRET = 'defense-pass-secret-0123456789abcdef';
const MIN = 60_000;

const problem = (r, type, status) => {
  assert.equal(r.status, status, `${type}: status`);
  assert.match(r.headers['content-type'], /^application\/problem\+json(; charset=utf-8)?$/);
  assert.equal(r.json.type, `urn:tiergate:problem:${type}`);
};

// Two limits apply to /hello: per-ip (3 a minute) and per-subnet (10 a minute, by /24); the 4th
// request is refused by per-ip and both are listed.
const LIMITS = [
  { algorithm: 'sliding-window', name: 'per-ip', limit: 3, windowMs: MIN },
  { name: 'per-subnet', by: { prefix: { v4: 24 } }, algorithm: 'sliding-window', limit: 10, windowMs: MIN },
];
const DRAFTS = {
  'draft-8': (h) => {
    assert.equal(h['ratelimit-policy'], '"per-ip";q=3;w=60, "per-subnet";q=10;w=60');
    assert.match(h.ratelimit, /^"per-ip";r=0;t=(59|60), "per-subnet";r=7;t=(59|60)$/);
    assert.equal(h['x-ratelimit-limit'], undefined);
  },
  'draft-7': (h) => {
    assert.equal(h['ratelimit-policy'], '3;w=60, 10;w=60');
    assert.match(h.ratelimit, /^limit=3, remaining=0, reset=(59|60)$/);
    assert.equal(h['ratelimit-limit'], undefined);
  },
  'draft-6': (h) => {
    assert.equal(h['ratelimit-policy'], '3;w=60, 10;w=60');
    assert.deepEqual([h['ratelimit-limit'], h['ratelimit-remaining']], ['3', '0']);
    assert.match(h['ratelimit-reset'], /^(59|60)$/);
    assert.equal(h.ratelimit, undefined);
  },
  legacy: (h) => {
    assert.deepEqual([h['x-ratelimit-limit'], h['x-ratelimit-remaining']], ['3', '0']);
    const reset = Number(h['x-ratelimit-reset']) - Date.now() / 1000;
    assert.ok(reset > 50 && reset < 62, `x-ratelimit-reset ${reset} s from now`);
    assert.equal(h['ratelimit-policy'], undefined);
  },
};

for (const [fw, start] of Object.entries(FRAMEWORKS)) {
  test(`${fw}: 429 carries Retry-After and the RateLimit fields of every limit that applied, per draft`, async () => {
    for (const [draft, check] of Object.entries(DRAFTS)) {
      const app = await start({ shed: false, limits: LIMITS, rateLimitHeaders: draft, bans: { rules: false } });
      try {
        for (let i = 0; i < 3; i++) {
          const r = await request(app.port, { path: '/hello' });
          assert.equal(r.status, 200);
          assert.deepEqual({ name: r.json.rateLimit.name, limit: r.json.rateLimit.limit, remaining: r.json.rateLimit.remaining }, { name: 'per-ip', limit: 3, remaining: 2 - i }, 'req.rateLimit: the tightest limit');
        }
        const r = await request(app.port, { path: '/hello' });
        problem(r, 'rate-limited', 429);
        assert.equal(r.json.limit, 'per-ip');
        assert.match(r.headers['retry-after'], /^(59|60)$/);
        check(r.headers);
      } finally {
        await app.stop();
      }
    }
  });

  test(`${fw}: a refusal by one limit counts in none (all or nothing)`, async () => {
    const app = await start({
      shed: false,
      rateLimitHeaders: 'draft-8',
      bans: { rules: false },
      limits: [
        { algorithm: 'sliding-window', name: 'per-ip', limit: 5, windowMs: MIN },
        { algorithm: 'sliding-window', name: 'per-user', by: { header: 'x-user' }, limit: 2, windowMs: MIN },
      ],
    });
    try {
      const as = (user) => request(app.port, { path: '/hello', headers: { 'x-user': user } });
      assert.equal((await as('ann')).status, 200);
      assert.equal((await as('ann')).status, 200);
      for (let i = 0; i < 3; i++) {
        const r = await as('ann');
        problem(r, 'rate-limited', 429);
        assert.equal(r.json.limit, 'per-user');
        assert.match(r.headers.ratelimit, /^"per-ip";r=3;t=\d+, "per-user";r=0;t=\d+$/, 'per-ip did not count the refusals');
      }
      const bob = await as('bob');
      assert.equal(bob.status, 200);
      assert.equal(bob.json.rateLimit.remaining, 1, "bob's own limit is the tightest");
      assert.deepEqual(app.defense.stats().limits.map((l) => l.keys), [1, 2]);
    } finally {
      await app.stop();
    }
  });

  test(`${fw}: a flood of 404 probes is banned for 30 minutes`, async () => {
    const events = [];
    const app = await start({ shed: false, onBan: (e) => events.push(e) });
    try {
      const t0 = Date.now();
      // The default probe rule: 20 probe statuses within a minute.
      for (let i = 0; i < 20; i++) assert.equal((await request(app.port, { path: `/wp-admin/${i}.php` })).status, 404);
      const r = await request(app.port, { path: '/hello' });
      problem(r, 'banned', 403);
      const retry = Number(r.headers['retry-after']);
      // 30 minutes, lengthened by up to the default jitter (10%).
      assert.ok(retry >= 1795 && retry <= 1980, `retry-after ${retry}`);
      const ban = app.defense.bans.get('127.0.0.1');
      assert.equal(ban.reason, 'probe');
      assert.equal(ban.source, 'rule');
      assert.equal(ban.offense, 1);
      const left = ban.until - t0;
      assert.ok(left >= 30 * MIN && left <= 33 * MIN + 5000, `ban for ${left} ms`);
      assert.deepEqual(events.map((e) => [e.kind, e.ban.target, e.ban.reason]), [['added', '127.0.0.1', 'probe']]);
      // An operator lifts it.
      assert.equal(app.defense.bans.lift('127.0.0.1'), true);
      assert.equal((await request(app.port, { path: '/hello' })).status, 200);
      assert.deepEqual(events.map((e) => e.kind), ['added', 'lifted']);
    } finally {
      await app.stop();
    }
  });

  test(`${fw}: deny and allow lists by IPv4, IPv6 and mapped addresses`, async () => {
    const app = await start({
      shed: false,
      trustProxy: true,
      allow: ['198.51.100.0/24', '2001:db8:a11::/48'],
      deny: ['203.0.113.0/24', '2001:db8::/32', '198.51.100.0/22'],
      limits: [{ algorithm: 'sliding-window', name: 'per-ip', limit: 1, windowMs: MIN }],
      bans: { rules: false },
    });
    try {
      const from = (xff) => request(app.port, { path: '/hello', headers: { 'x-forwarded-for': xff } });
      for (const addr of ['203.0.113.9', '::ffff:203.0.113.9', '2001:db8:1::5', '198.51.101.1']) {
        const r = await from(addr);
        problem(r, 'denied', 403);
        assert.equal(r.headers['retry-after'], undefined, addr);
      }
      // Allowed (inside a denied /22 and /32, too): never limited.
      for (const addr of ['198.51.100.7', '::ffff:198.51.100.7', '2001:db8:a11::1']) {
        for (let i = 0; i < 3; i++) assert.equal((await from(addr)).status, 200, addr);
      }
      // Neither: the limit applies.
      assert.equal((await from('192.0.2.1')).status, 200);
      assert.equal((await from('192.0.2.1')).status, 429);
      // The real socket peer, when no proxy is trusted.
      app.defense.setLists({ deny: ['127.0.0.0/8'] });
      problem(await request(app.port, { path: '/hello' }), 'denied', 403);
      assert.deepEqual(app.defense.lists(), { allow: ['198.51.100.0/24', '2001:db8:a11::/48'], deny: ['127.0.0.0/8'] });
    } finally {
      await app.stop();
    }
  });

  test(`${fw}: challenge flow: refused, challenged, pass, served`, async () => {
    const app = await start({
      shed: false,
      // Exact sliding window: no aligned edge can reset it mid-sequence; 1.5 s is far longer than the
      // five requests before the challenge take, and short enough to wait out after the pass.
      limits: [{ algorithm: 'sliding-window', name: 'per-ip', limit: 2, windowMs: 1500 }],
      challenge: {
        secret: SECRET,
        afterStrikes: 2,
        respond: (info) => ({ status: 401, headers: { 'content-type': 'text/html' }, body: `<form>solve me (${info.verdict})</form>` }),
      },
    });
    try {
      const get = (headers = {}) => request(app.port, { path: '/hello', headers });
      assert.equal((await get()).status, 200);
      assert.equal((await get()).status, 200);
      problem(await get(), 'rate-limited', 429);
      problem(await get(), 'rate-limited', 429);
      // Two strikes: challenged (before any limit), and the challenge is the app's.
      const c = await get();
      assert.equal(c.status, 401);
      assert.equal(c.body, '<form>solve me (challenged)</form>');
      // A forged or foreign pass does not help.
      assert.equal((await get({ 'x-tiergate-pass': 'p1.nope' })).status, 401);
      const foreign = app.defense.mintPass('192.0.2.1');
      assert.equal((await get({ cookie: `tiergate_pass=${foreign}` })).status, 401);
      // Solved: the app mints a pass bound to this client.
      const pass = app.defense.mintPass('127.0.0.1', { ttlSec: 600 });
      assert.match(pass, /^p1\./);
      // The limit still counts (its window is 1.5 s); once it has room the request is served.
      const deadline = Date.now() + 5000;
      let r;
      do {
        r = await get({ cookie: `theme=dark; tiergate_pass=${pass}` });
        assert.notEqual(r.status, 401, 'a valid pass is not challenged');
        assert.notEqual(r.status, 403, 'nor banned: its strikes do not count');
        if (r.status !== 200) await new Promise((res) => setTimeout(res, 50));
      } while (r.status !== 200 && Date.now() < deadline);
      assert.equal(r.status, 200);
      assert.equal(app.defense.bans.list().length, 0);
      // Through the header as well.
      assert.notEqual((await get({ 'x-tiergate-pass': pass })).status, 401);
    } finally {
      await app.stop();
    }
  });
}
