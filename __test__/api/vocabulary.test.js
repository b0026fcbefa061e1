'use strict';
// One vocabulary (issue 37): every limit the library defines is { algorithm?, limit, windowMs, burst? }
// and reads the same wherever it is written — tiers' budgets, per-key quotas, named limits, cluster
// limits — with one check and one message per bad value; the per-key quota behaves as a named limit.
const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const native = require('../../lib/native');
const { gatekeeper, Ledger } = require('../..');
const { Quota } = require('tiergate/quota');
const { ALGORITHMS } = require('../../lib/schema/limit');
const { listen, close, request } = require('../helpers/http');

const INVALID = 'ERR_TIERGATE_INVALID_OPTION';

/** The message a construction throws, checked to be an option error with the stable code. */
function messageOf(build) {
  try {
    build();
  } catch (err) {
    assert.equal(err.code, INVALID, err.message);
    return err.message;
  }
  assert.fail('did not throw');
}

test('one bad value, one message: tiers, per-key quotas, named limits and cluster limits alike', () => {
  const where = {
    tier: (l) => () => new Ledger({ tiers: [{ name: 'a', ...l }] }),
    perKey: (l) => () => gatekeeper({ shed: false, perKey: l }),
    named: (l) => () => gatekeeper({ shed: false, limits: [{ name: 'n', algorithm: 'token-bucket', ...l }] }),
    cluster: (l) => () => new Quota({ limits: [{ name: 'c', algorithm: 'token-bucket', ...l }] }),
  };
  const bad = [
    [{ limit: 10, windowMs: -1 }, /\.windowMs must be a finite number > 0 \(at least 1e-6, one nanosecond\) and at most 1000000000000 \(got -1\)$/],
    [{ limit: 10, windowMs: Infinity }, /\.windowMs must be a finite number > 0 .*\(got Infinity\)$/],
    [{ limit: 10, windowMs: 1000, burst: 2.5 }, /\.burst must be an integer from 1 to 4294967295 \(got 2\.5\)$/],
    [{ limit: 10, windowMs: 1000, burst: NaN }, /\.burst must be an integer from 1 to 4294967295 \(got NaN\)$/],
  ];
  for (const [l, re] of bad) {
    const tails = Object.entries(where).map(([name, make]) => {
      const m = messageOf(make(l));
      assert.match(m, re, `${name}: ${m}`);
      return m.slice(m.lastIndexOf('.'));
    });
    assert.equal(new Set(tails).size, 1, `the same words everywhere: ${tails.join(' | ')}`);
  }
  // The old words are unknown options everywhere.
  for (const [make, old] of [[where.tier, { capacity: 1, refillPerSec: 1 }], [where.perKey, { capacity: 1, refillPerSec: 1 }], [where.cluster, { rate: 1, burst: 1 }]]) {
    assert.throws(make(old), (e) => e.code === 'ERR_TIERGATE_UNKNOWN_OPTION' && /unknown option "(capacity|rate)"/.test(e.message));
  }
});

test('the library spells algorithms as the native named limits do, and a cluster limit defaults as a named limit', () => {
  assert.deepEqual([...ALGORITHMS], native.defenseConstants().algorithms);
  const q = new Quota({ limits: [{ name: 'w', limit: 5, windowMs: 1000 }, { name: 'b', algorithm: 'token-bucket', limit: 5, windowMs: 1000 }] });
  assert.deepEqual(q.limits.map((l) => [l.algorithm, l.limit, l.windowMs, l.burst]), [['fixed-window', 5, 1000, undefined], ['token-bucket', 5, 1000, 5]]);
});

test('a tier budget { limit, windowMs, burst } refills limit per windowMs and holds burst', () => {
  const l = new Ledger({ tiers: [{ name: 't', limit: 1, windowMs: 1e12, burst: 3 }] });
  for (let i = 0; i < 3; i++) assert.equal(l.tryConsume('t'), true);
  assert.equal(l.tryConsume('t'), false, 'burst 3, then ~nothing for 1e12 ms');
  assert.deepEqual(l.snapshot().map((t) => [t.limit, t.windowMs, t.burst]), [[1, 1e12, 3]]);
});

test('a per-key quota behaves as a named limit: req.rateLimit, and the named limits\' fields in every format', async (t) => {
  for (const [mode, expect] of [
    ['draft', { 'ratelimit-policy': '"standard";q=3;w=6', ratelimit: '"standard";r=2;t=2' }],
    ['draft-7', { 'ratelimit-policy': '3;w=6', ratelimit: 'limit=3, remaining=2, reset=2' }],
    ['draft-6', { 'ratelimit-policy': '3;w=6', 'ratelimit-limit': '3', 'ratelimit-remaining': '2', 'ratelimit-reset': '2' }],
  ]) {
    let seen = null;
    const handler = gatekeeper.http({ shed: false, perKey: { limit: 3, windowMs: 6000 }, rateLimitHeaders: mode, rateLimitHeadersOnSuccess: true }, (req, res) => {
      seen = req.rateLimit;
      res.end('ok');
    });
    const server = http.createServer(handler);
    const port = await listen(server);
    t.after(() => close(server));
    const r = await request(port, { path: '/' });
    assert.equal(r.status, 200);
    for (const [h, v] of Object.entries(expect)) assert.equal(r.headers[h], v, `${mode}: ${h}`);
    assert.ok(seen !== null && seen !== undefined, `${mode}: req.rateLimit is set`);
    assert.deepEqual([seen.name, seen.limit, seen.remaining, seen.used], ['standard', 3, 2, 1]);
    assert.ok(seen.resetTime instanceof Date);
  }
});
