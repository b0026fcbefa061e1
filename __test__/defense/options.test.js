'use strict';
// Bad defense options throw at construction, name the option and carry a stable code; numbers are
// never coerced (NaN, negatives, Infinity, fractions where a count is meant).
const test = require('node:test');
const assert = require('node:assert/strict');
const { gatekeeper } = require('../..');

const SECRET = 'defense-pass-secret-0123456789abcdef';
const ok = { name: 'l', limit: 10, windowMs: 1000 };

function throwsWith(options, code, pattern, Ctor) {
  assert.throws(() => gatekeeper({ shed: false, ...options }), (err) => {
    assert.equal(err.code, code, `${err.message}`);
    assert.match(err.message, pattern);
    if (Ctor) assert.ok(err instanceof Ctor, `${err.constructor.name}: ${err.message}`);
    return true;
  });
}

const INVALID = 'ERR_TIERGATE_INVALID_OPTION';
const UNKNOWN = 'ERR_TIERGATE_UNKNOWN_OPTION';

test('limits: every number is checked natively and the error names the option', () => {
  for (const [v, field] of [[NaN, 'limit'], [-1, 'limit'], [Infinity, 'limit'], [1.5, 'limit'], [0, 'limit']]) {
    throwsWith({ limits: [{ ...ok, [field]: v }] }, INVALID, new RegExp(`^gatekeeper: options\\.limits\\[0\\]\\.${field} must be an integer from 1`), RangeError);
  }
  for (const v of [NaN, -5, Infinity, 0]) {
    throwsWith({ limits: [ok, { ...ok, name: 'b', windowMs: v }] }, INVALID, /^gatekeeper: options\.limits\[1\]\.windowMs must be a finite number > 0/, RangeError);
  }
  throwsWith({ limits: [{ ...ok, maxKeys: NaN }] }, INVALID, /limits\[0\]\.maxKeys/);
  throwsWith({ limits: [{ ...ok, burst: 3 }] }, INVALID, /limits\[0\]\.burst applies to the token-bucket and gcra/);
  throwsWith({ limits: [{ ...ok, algorithm: 'gcra', maxDelayMs: -1 }] }, INVALID, /limits\[0\]\.maxDelayMs must be a finite number >= 0/);
  throwsWith({ limits: [{ ...ok, algorithm: 'sliding-window', limit: 1e6 }] }, INVALID, /use sliding-counter/);
  throwsWith({ limits: [ok, ok] }, INVALID, /limits\[1\]\.name "l" is a duplicate of limits\[0\]\.name/);
});

test('limits: shapes and types are checked in JS', () => {
  throwsWith({ limits: {} }, INVALID, /options\.limits must be an array/, TypeError);
  throwsWith({ limits: [null] }, INVALID, /options\.limits\[0\] must be an object/, TypeError);
  throwsWith({ limits: [{ ...ok, per: 1 }] }, UNKNOWN, /options\.limits\[0\] has an unknown option "per"/, TypeError);
  throwsWith({ limits: [{ ...ok, name: '' }] }, INVALID, /limits\[0\]\.name must be a non-empty string/);
  throwsWith({ limits: [{ ...ok, name: 'a"b' }] }, INVALID, /limits\[0\]\.name must be 1-64 printable ASCII/);
  throwsWith({ limits: [{ ...ok, algorithm: 'leaky' }] }, INVALID, /limits\[0\]\.algorithm must be one of 'token-bucket'/, RangeError);
  throwsWith({ limits: [{ ...ok, limit: '10' }] }, INVALID, /limits\[0\]\.limit must be a number or a function \(req\) => number, got string/, TypeError);
  throwsWith({ limits: [{ ...ok, by: 'user' }] }, INVALID, /limits\[0\]\.by must be 'ip', \{ prefix/);
  throwsWith({ limits: [{ ...ok, by: { prefix: { v4: 33 } } }] }, INVALID, /limits\[0\]\.by\.prefix\.v4 must be an integer >= 0 and <= 32, got 33/, RangeError);
  throwsWith({ limits: [{ ...ok, by: { prefix: { v6: NaN } } }] }, INVALID, /by\.prefix\.v6/);
  throwsWith({ limits: [{ ...ok, by: { prefix: {} } }] }, INVALID, /by\.prefix must give v4, v6 or both/);
  throwsWith({ limits: [{ ...ok, by: { header: 'a', prefix: { v4: 8 } } }] }, INVALID, /exactly one of prefix, header/);
  throwsWith({ limits: [{ ...ok, routes: [] }] }, INVALID, /limits\[0\]\.routes must be a non-empty array/);
  throwsWith({ limits: [{ ...ok, routes: ['api'] }] }, INVALID, /limits\[0\]\.routes\[0\]\.path must start with "\/"/);
  throwsWith({ limits: [{ ...ok, routes: [{ path: '/a', tier: 'x' }] }] }, UNKNOWN, /routes\[0\] has an unknown option "tier"/);
  throwsWith({ limits: [{ ...ok, methods: ['FETCH'] }] }, INVALID, /limits\[0\]\.methods "FETCH" is not an HTTP method/);
  throwsWith({ limits: [{ ...ok, tiers: ['gold'] }] }, INVALID, /limits\[0\]\.tiers: "gold" is not one of the tiers/);
  for (const v of [-1, 1.5, NaN, Infinity]) throwsWith({ limits: [{ ...ok, cost: v }] }, INVALID, /limits\[0\]\.cost must be an integer >= 0/, RangeError);
  throwsWith({ limits: [{ ...ok, maxQueued: 5 }] }, INVALID, /maxQueued applies to a shaper only/);
  throwsWith({ limits: [{ ...ok, algorithm: 'gcra', maxDelayMs: 100, maxQueued: 0 }] }, INVALID, /maxQueued must be an integer >= 1/);
  throwsWith({ limits: Array.from({ length: 33 }, (_, i) => ({ ...ok, name: `l${i}` })) }, INVALID, /at most 32 limits/);
});

test('lists, bans and the challenge', () => {
  throwsWith({ deny: ['10.0.0.1/8'] }, INVALID, /^gatekeeper: options\.deny\[0\]: "10\.0\.0\.1\/8" has bits set past its \/8 prefix \(did you mean 10\.0\.0\.0\/8\?\)/);
  throwsWith({ allow: ['nope'] }, INVALID, /options\.allow\[0\]: "nope" is not an IP address/);
  throwsWith({ allow: '10.0.0.0/8' }, INVALID, /options\.allow must be an array/);
  throwsWith({ deny: [42] }, INVALID, /options\.deny\[0\] must be a string/);
  throwsWith({ bans: { rules: [{ name: 'r', on: 'probe', threshold: 0.5, windowMs: 1000, banMs: 1000 }] } }, INVALID, /options\.bans\.rules\[0\]\.threshold must be an integer from 1 to 1000 \(got 0\.5\)/);
  throwsWith({ bans: { rules: [{ name: 'r', on: 'probe', threshold: 3, windowMs: NaN, banMs: 1000 }] } }, INVALID, /bans\.rules\[0\]\.windowMs must be a finite number > 0/);
  throwsWith({ bans: { rules: [{ name: 'r', on: 'probe', threshold: 3, windowMs: 1000, banMs: -1 }] } }, INVALID, /bans\.rules\[0\]\.banMs/);
  throwsWith({ bans: { rules: [{ name: 'r', on: 'errors', threshold: 3, windowMs: 1000, banMs: 1 }] } }, INVALID, /bans\.rules\[0\]\.on must be one of 'rate-limited', 'probe'/);
  throwsWith({ bans: { escalation: { jitter: Infinity } } }, INVALID, /bans\.escalation\.jitter must be a finite number from 0 to 1 \(got Infinity\)/);
  throwsWith({ bans: { escalation: { factor: 0.5 } } }, INVALID, /bans\.escalation\.factor/);
  throwsWith({ bans: { escalation: { permanentAfter: -1 } } }, INVALID, /bans\.escalation\.permanentAfter/);
  throwsWith({ bans: { escalation: { permanentAfter: true } } }, INVALID, /permanentAfter must be a number or false/);
  throwsWith({ bans: { maxBans: 0 } }, INVALID, /bans\.maxBans/);
  throwsWith({ bans: { maxTracked: 1.5 } }, INVALID, /bans\.maxTracked/);
  throwsWith({ bans: { probeStatuses: [404, 700] } }, INVALID, /bans\.probeStatuses\[1\] must be an integer >= 100 and <= 599/);
  throwsWith({ bans: { after: 1 } }, UNKNOWN, /options\.bans has an unknown option "after"/);
  throwsWith({ challenge: {} }, INVALID, /options\.challenge\.secret is required/);
  throwsWith({ challenge: { secret: 'short' } }, INVALID, /options\.challenge\.secret must be at least 16 bytes/);
  throwsWith({ challenge: { secret: SECRET, afterStrikes: 0 } }, INVALID, /challenge\.afterStrikes must be an integer >= 1/);
  throwsWith({ challenge: { secret: SECRET, afterStrikes: 3 }, bans: { rules: [{ name: 'r', on: 'rate-limited', threshold: 3, windowMs: 1000, banMs: 1000 }] } }, INVALID, /afterStrikes \(3\) must be below some ban rule's threshold/);
  throwsWith({ challenge: { secret: SECRET, ttlSec: -1 } }, INVALID, /challenge\.ttlSec/);
  throwsWith({ challenge: { secret: SECRET, header: false, cookie: false } }, INVALID, /a pass needs a header or a cookie/);
  throwsWith({ challenge: { secret: SECRET, respond: 1 } }, INVALID, /challenge\.respond must be a function/);
  throwsWith({ skip: true }, INVALID, /options\.skip must be a function/);
  throwsWith({ onBan: 'x' }, INVALID, /options\.onBan must be a function/);
  throwsWith({ exemptSkipsShedding: 1 }, INVALID, /options\.exemptSkipsShedding must be a boolean, got number/, TypeError);
  throwsWith({ rateLimitHeaders: 'draft-9' }, INVALID, /rateLimitHeaders must be 'draft', 'draft-6', 'draft-7', 'draft-8', 'legacy', 'both' or false/);
});

test('a gatekeeper without defense options has no defense; the operator calls check their arguments', () => {
  assert.equal(gatekeeper({ shed: false }).defense, null);
  const g = gatekeeper({ shed: false, deny: [] });
  const d = g.defense;
  const arg = 'ERR_TIERGATE_INVALID_ARGUMENT';
  for (const [fn, re] of [
    [() => d.bans.ban('not-an-ip'), /bans\.ban: .*is not an IP address or CIDR prefix/],
    [() => d.bans.ban('10.0.0.1/8'), /has bits set past its \/8 prefix/],
    [() => d.bans.ban('10.0.0.1', { durationMs: -1 }), /durationMs must be a finite number > 0/],
    [() => d.bans.ban('10.0.0.1', { durationMs: NaN }), /durationMs/],
    [() => d.bans.ban(7), /target must be an IP address or a CIDR prefix, got number/],
    [() => d.bans.lift(''), /target must be/],
    [() => d.bans.import({}), /records must be an array/],
    [() => d.bans.import([{ target: '1.2.3.4', reason: 'x', source: 'god', since: 0, until: null }]), /source must be one of rule, operator/],
    [() => d.setLists({ deny: ['x'] }), /setLists: deny\[0\]: "x" is not an IP address/],
    [() => d.mintPass('1.2.3.4'), /no options\.challenge/],
    [() => d.report('1.2.3.4', 'spam'), /kind must be one of rate-limited, probe/],
  ]) {
    assert.throws(fn, (err) => err.code === arg && re.test(err.message), String(re));
  }
  assert.throws(() => d.bans.ban('10.0.0.1', { for: 1 }), (err) => err.code === 'ERR_TIERGATE_UNKNOWN_OPTION' && /bans\.ban: options has an unknown option "for"/.test(err.message));
  assert.throws(() => d.setLists({ block: [] }), (err) => err.code === 'ERR_TIERGATE_UNKNOWN_OPTION' && /setLists has an unknown option "block"/.test(err.message));
  // A failed setLists changed nothing.
  assert.deepEqual(d.lists(), { allow: [], deny: [] });
});

test('cluster limits (cluster: true): need options.cluster with a limit of the name; numbers stay in the cluster', async () => {
  const { cluster } = require('../..');
  throwsWith({ limits: [{ name: 'api', cluster: true }] }, INVALID, /^gatekeeper: options\.limits\[0\]\.cluster: a cluster limit needs options\.cluster/, TypeError);
  throwsWith({ limits: [{ name: 'api', cluster: 'yes' }] }, INVALID, /limits\[0\]\.cluster must be a boolean/, TypeError);
  throwsWith({ limits: [{ name: 'api', cluster: true, limit: 5 }] }, INVALID, /limits\[0\]\.limit: a cluster limit takes its algorithm and numbers from options\.cluster's limit "api"; leave limit out/, TypeError);
  throwsWith({ limits: [{ name: 'api', cluster: true, by: { prefix: { v4: 24 } } }] }, INVALID, /limits\[0\]\.by: a cluster limit counts by 'ip'/, TypeError);
  throwsWith({ limits: [{ name: 'api', cluster: true, cost: -1 }] }, INVALID, /limits\[0\]\.cost/);
  throwsWith({ limits: [ok, { name: 'l', cluster: true }] }, INVALID, /limits\[1\]\.name "l" is a duplicate of limits\[0\]\.name/);
  // A cluster (its Redis never contacted: construction does no I/O) without a limit of that name.
  const c = cluster({ redis: 'redis://127.0.0.1:1', limits: [{ name: 'other', algorithm: 'token-bucket', limit: 1, windowMs: 1000 }], bans: false });
  try {
    throwsWith({ cluster: c, limits: [{ name: 'api', cluster: true }] }, INVALID, /limits\[0\] is a cluster limit, but options\.cluster has no limit named "api"/, RangeError);
  } finally {
    await c.close();
  }
});

test('a cluster shares its bans with one gatekeeper\'s defense', async () => {
  const { cluster } = require('../..');
  const c = cluster({ redis: 'redis://127.0.0.1:1', limits: [{ name: 'other', algorithm: 'token-bucket', limit: 1, windowMs: 1000 }] });
  try {
    gatekeeper({ shed: false, cluster: c, bans: {} });
    throwsWith({ cluster: c, bans: {} }, INVALID, /options\.cluster already shares its bans with another gatekeeper's defense/, TypeError);
    // Without a defense, a second gatekeeper may use the cluster's limits (its bans are the defense's: docs/cluster.md).
    gatekeeper({ shed: false, cluster: c });
  } finally {
    await c.close();
  }
});
