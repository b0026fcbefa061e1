'use strict';
// The per-thread client and key caches of the defense (lib/defense/slot-cache.js and
// src/node/defense_cache.rs): a repeat client crosses into Rust as small numbers, but nothing it
// remembers may outlive a change: lists replaced, bans added, keyed state evicted, a check that threw.
const test = require('node:test');
const assert = require('node:assert/strict');
const { EventEmitter } = require('node:events');
const { gatekeeper } = require('../..');

const MIN = 60_000;
const res = () => Object.assign(new EventEmitter(), { headersSent: false, setHeader() {} });
const req = (ip, headers = {}) => ({ method: 'GET', url: '/', headers: { 'x-forwarded-for': ip, ...headers }, socket: { remoteAddress: '127.0.0.1' } });
const status = (gk, r) => {
  const out = gk.admit(r, res());
  return out === null ? 200 : out.status;
};
/** The refusal's problem type, after `urn:tiergate:problem:`. */
const refusal = (gk, r) => JSON.parse(gk.admit(r, res()).body).type.split(':').pop();

test('a cached client is refused by a deny entry or a ban added after it was cached, and served again when lifted', () => {
  const g = gatekeeper({ shed: false, trustProxy: true, limits: [{ name: 'per-ip', algorithm: 'sliding-window', limit: 1000, windowMs: MIN }] });
  const gk = g.gatekeeper;
  const r = req('203.0.113.7');
  // Recorded on the first request, then served from the cache.
  for (let i = 0; i < 5; i++) assert.equal(status(gk, r), 200);
  g.defense.setLists({ deny: ['203.0.113.0/24'] });
  assert.equal(status(gk, r), 403, 'denied at once');
  assert.equal(refusal(gk, r), 'denied');
  g.defense.setLists({ deny: [] });
  assert.equal(status(gk, r), 200);
  g.defense.bans.add('203.0.113.7', { durationMs: MIN });
  assert.equal(refusal(gk, r), 'banned');
  g.defense.bans.remove('203.0.113.7');
  assert.equal(status(gk, r), 200);
  g.defense.bans.add('203.0.113.0/24', { durationMs: MIN });
  assert.equal(refusal(gk, r), 'banned', 'a CIDR ban too');
  g.defense.bans.remove('203.0.113.0/24');
  // An allow entry added later exempts it: its limit is no longer counted.
  const tight = gatekeeper({ shed: false, trustProxy: true, limits: [{ name: 'per-ip', algorithm: 'fixed-window', limit: 2, windowMs: MIN }], bans: { rules: false } });
  const tk = tight.gatekeeper;
  assert.deepEqual([status(tk, r), status(tk, r), status(tk, r)], [200, 200, 429]);
  tight.defense.setLists({ allow: ['203.0.113.7'] });
  assert.deepEqual([status(tk, r), status(tk, r)], [200, 200]);
  tight.defense.setLists({ allow: [] });
  assert.equal(status(tk, r), 429);
});

test("an evicted key's cached slot is never used for the key that took its place", () => {
  // One key each: a second key evicts the first. Sliding windows with live counts are not idle, so
  // eviction goes by least recent use.
  const g = gatekeeper({
    shed: false,
    trustProxy: true,
    bans: { rules: false },
    limits: [
      { name: 'per-user', algorithm: 'sliding-window', limit: 2, windowMs: MIN, maxKeys: 1, by: { header: 'x-user' } },
      { name: 'per-ip', algorithm: 'sliding-window', limit: 2, windowMs: MIN, maxKeys: 1 },
    ],
  });
  const gk = g.gatekeeper;
  const alice = req('198.51.100.1', { 'x-user': 'alice' });
  const bob = req('198.51.100.2', { 'x-user': 'bob' });
  assert.deepEqual([status(gk, alice), status(gk, alice), status(gk, alice)], [200, 200, 429]);
  // bob evicts alice (both limits) and uses up his own two.
  assert.deepEqual([status(gk, bob), status(gk, bob), status(gk, bob)], [200, 200, 429]);
  // alice's cached slots now point where bob's state is: she must get a fresh state of her own.
  assert.equal(status(gk, alice), 200, 'alice is counted afresh, not as bob');
  assert.equal(status(gk, alice), 200);
  assert.equal(status(gk, alice), 429);
  assert.deepEqual(g.defense.stats().limits.map((l) => l.keys), [1, 1]);
});

test('a check that threw leaves nothing cached: the keys it had claimed are counted as themselves later', () => {
  const g = gatekeeper({
    shed: false,
    trustProxy: true,
    bans: { rules: false },
    limits: [
      { name: 'per-user', algorithm: 'fixed-window', limit: 2, windowMs: MIN, by: { header: 'x-user' } },
      {
        name: 'boom',
        algorithm: 'fixed-window',
        limit: 1000,
        windowMs: MIN,
        by: (r) => {
          if (r.headers['x-boom'] !== undefined) throw new Error('boom');
          return 'all';
        },
      },
    ],
  });
  const gk = g.gatekeeper;
  assert.throws(() => gk.admit(req('192.0.2.1', { 'x-user': 'carol', 'x-boom': '1' }), res()), /boom/);
  // A request with no string key of its own (no x-user: counted by address) runs next.
  assert.equal(status(gk, req('192.0.2.2')), 200);
  const carol = req('192.0.2.1', { 'x-user': 'carol' });
  assert.deepEqual([status(gk, carol), status(gk, carol), status(gk, carol)], [200, 200, 429]);
  assert.equal(status(gk, req('192.0.2.3', { 'x-user': 'dave' })), 200);
});
