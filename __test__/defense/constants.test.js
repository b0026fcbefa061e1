'use strict';
// What lib/defense shares with the native defend call is declared once, natively: the result layout,
// verdicts and their statuses, pass errors, the ban defaults the docs state.
const test = require('node:test');
const assert = require('node:assert/strict');
const native = require('../../lib/native');

test('defenseConstants: the result layout, verdicts, statuses and ban defaults, frozen', () => {
  const c = native.defenseConstants();
  assert.ok(Object.isFrozen(c) && Object.isFrozen(c.result) && Object.isFrozen(c.banDefaults));
  const idx = Object.entries(c.result).filter(([k]) => k !== 'LENGTH').map(([, v]) => v);
  assert.deepEqual(idx, [...idx.keys()], 'indices are 0..n-1 in order');
  assert.equal(c.result.LENGTH, c.result.LIMITS + 2 * c.maxLimits);
  assert.deepEqual(c.verdictNames, ['pass', 'exempt', 'deny-listed', 'banned', 'rate-limited', 'challenged']);
  assert.deepEqual(c.verdictStatus, [200, 200, 403, 403, 429, 403]);
  assert.deepEqual(c.passErrors, ['malformed', 'wrong-key', 'bad-signature', 'expired']);
  // The defaults docs/defense.md states.
  assert.deepEqual(c.banDefaults.rules.map((r) => ({ ...r })), [
    { name: 'rate-limit', on: 'rate-limited', threshold: 3, windowMs: 60_000, banMs: 300_000 },
    { name: 'probe', on: 'probe', threshold: 20, windowMs: 60_000, banMs: 1_800_000 },
  ]);
  assert.deepEqual({ ...c.banDefaults.escalation }, { factor: 2, maxBanMs: 86_400_000, memoryMs: 86_400_000, permanentAfter: 5, jitter: 0.1 });
  assert.deepEqual([c.banDefaults.maxBans, c.banDefaults.maxTracked], [100_000, 100_000]);
});

test('defend checks its arguments natively (TypeError / RangeError with the argument code)', () => {
  const h = new native.DefenseHandle({
    limits: [{ name: 'l', algorithm: 'fixed-window', limit: 1, windowMs: 1000, ipv4Prefix: 32, ipv6Prefix: 56 }],
    bans: { rules: [], factor: 2, maxBanMs: 1e6, memoryMs: 1e6, jitter: 0, maxBans: 10, maxTracked: 10 },
    allow: [], deny: [], ipv4Prefix: 32, ipv6Prefix: 56,
  });
  const b = {};
  h.bind(b);
  const code = (fn, Ctor, re) => assert.throws(fn, (e) => e instanceof Ctor && e.code === 'ERR_TIERGATE_INVALID_ARGUMENT' && re.test(e.message));
  code(() => b.defend(0, '1.2.3.4', undefined, 1), TypeError, /one key per limit/);
  code(() => b.defend(0.5, '1.2.3.4', undefined, 1, true), TypeError, /flags/);
  code(() => b.defend(0, 7, undefined, 1, true), TypeError, /ip must be a string/);
  code(() => b.defend(0, '1.2.3.4', undefined, -1, true), RangeError, /cost must be an integer/);
  code(() => b.defend(0, '1.2.3.4', undefined, NaN, true), RangeError, /cost/);
  code(() => b.defend(0, '1.2.3.4', undefined, new Float64Array([1.5]), true), RangeError, /every cost/);
  code(() => b.defend(0, '1.2.3.4', undefined, 1, 42), TypeError, /a key must be undefined, true or a string/);
  code(() => b.defend(0, '1.2.3.4', undefined, 1, 'x'.repeat(2000)), RangeError, /key 0 is 2000 bytes long/);
  // And decides: admitted, then refused by the limit, with the details in `result`.
  const R = native.defenseConstants().result;
  assert.equal(b.defend(0, '1.2.3.4', undefined, 1, true), 0);
  assert.equal(b.defend(0, '::ffff:1.2.3.4', undefined, 1, true), 4, 'the mapped form is the same client');
  assert.equal(b.result[R.REFUSED_BY], 0);
  assert.ok(b.result[R.RETRY_AFTER_MS] > 0 && b.result[R.RETRY_AFTER_MS] <= 1000);
  assert.equal(b.defend(1, '1.2.3.4', undefined, 1, true), 1, 'skipped: exempt');
  assert.equal(b.defend(0, '1.2.3.4', undefined, 1, undefined), 0, 'no limit applies');
  // Past the few limits read at first, the arguments are read again in full: the sixth key counts.
  const six = new native.DefenseHandle({
    limits: Array.from({ length: 6 }, (_, i) => ({ name: `l${i}`, algorithm: 'fixed-window', limit: i === 5 ? 1 : 10, windowMs: 1000, ipv4Prefix: 32, ipv6Prefix: 56 })),
    bans: { rules: [], factor: 2, maxBanMs: 1e6, memoryMs: 1e6, jitter: 0, maxBans: 10, maxTracked: 10 },
    allow: [], deny: [], ipv4Prefix: 32, ipv6Prefix: 56,
  });
  const b6 = {};
  six.bind(b6);
  code(() => b6.defend(0, '1.2.3.4', undefined, 1, true, true, true, true, true), TypeError, /one key per limit/);
  assert.equal(b6.defend(0, '1.2.3.4', undefined, 1, true, true, true, true, true, 'k'), 0);
  assert.equal(b6.defend(0, '1.2.3.4', undefined, 1, true, true, true, true, true, 'k'), 4);
  assert.equal(b6.result[R.REFUSED_BY], 5);
  assert.equal(b6.defend(0, '1.2.3.4', undefined, 1, true, true, true, true, true, 'other'), 0);
});
