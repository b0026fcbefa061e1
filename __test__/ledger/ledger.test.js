'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { setTimeout: sleep } = require('node:timers/promises');
const { Ledger, LEDGER_RESULT: R } = require('../..');
const { LEDGER_HANDLE, ledgerHandle } = require('../../lib/ledger'); // internal: not exported

const TIERS = [
  { name: 'critical', limit: 0, windowMs: 1000, burst: 5, protected: true },
  { name: 'standard', limit: 0, windowMs: 1000, burst: 10, perKey: { limit: 0, windowMs: 1000, burst: 3 } },
  { name: 'background', limit: 0, windowMs: 1000, burst: 2 },
];

const ledger = (tiers = TIERS, extra = {}) => new Ledger({ tiers, ...extra });

test('tiers, ids and names', () => {
  const l = ledger();
  assert.deepEqual(l.tiers, ['critical', 'standard', 'background']);
  assert.equal(l.tierId('critical'), 0);
  assert.equal(l.tierId('background'), 2);
  assert.ok(Object.isFrozen(l.tiers));
});

test('tryConsume by id and by name draws from the same pool; cost defaults to 1', () => {
  const l = ledger();
  assert.equal(l.tryConsume(0), true);
  assert.equal(l.tryConsume('critical', undefined, 3), true);
  assert.equal(l.tryConsume(0, undefined, 2), false, 'only 1 left');
  assert.equal(l.tryConsume('critical'), true);
  assert.equal(l.tryConsume(0), false);
  assert.equal(l.tryConsume(2, undefined, 0), true, 'cost 0 is a probe');
});

test('fractional costs and a cost above capacity never succeeding', () => {
  const l = ledger();
  assert.equal(l.tryConsume('background', undefined, 2.5), false);
  assert.equal(l.tryConsume('background', undefined, 0.75), true);
  assert.equal(l.tryConsume('background', undefined, 1.25), true);
  assert.equal(l.tryConsume('background', undefined, 0.01), false);
  assert.equal(l.snapshot()[2].tokens, 0);
});

test('a keyed debit takes from the key and the tier pool, both or neither', () => {
  const l = ledger();
  for (let i = 0; i < 3; i++) assert.equal(l.tryConsume('standard', 'alice'), true);
  assert.equal(l.consume('standard', 'alice'), false);
  assert.equal(l.result[R.LIMITED_BY], 2, 'refused by the key');
  assert.equal(l.snapshot()[1].tokens, 7, 'the pool keeps what the key refused');
  for (let i = 0; i < 3; i++) assert.equal(l.tryConsume('standard', 'bob'), true);
  for (let i = 0; i < 3; i++) assert.equal(l.tryConsume('standard', 'carol'), true);
  assert.equal(l.consume('standard', 'dave'), true);
  assert.equal(l.consume('standard', 'erin'), false);
  assert.deepEqual(Ledger.readResult(l.result), {
    allowed: false, remaining: 3, limit: 3, retryAfterMs: Infinity, resetMs: 0, limitedBy: 'tier',
  });
  assert.equal(l.snapshot()[1].keys, 5);
});

test('a key is ignored by a tier without per-key buckets', () => {
  const l = ledger();
  assert.equal(l.tryConsume('background', 'x'), true);
  assert.equal(l.tryConsume('background', 'y'), true);
  assert.equal(l.tryConsume('background', 'z'), false);
  assert.equal(l.snapshot()[2].keys, 0);
});

test('options.perKey applies to every tier; perKey: null opts out', () => {
  const l = new Ledger({
    tiers: [{ name: 'a', limit: 0, windowMs: 1000, burst: 100 }, { name: 'b', limit: 0, windowMs: 1000, burst: 100, perKey: null }],
    perKey: { limit: 0, windowMs: 1000, burst: 1 },
  });
  assert.equal(l.tryConsume('a', 'k'), true);
  assert.equal(l.tryConsume('a', 'k'), false);
  assert.equal(l.tryConsume('b', 'k'), true);
  assert.equal(l.tryConsume('b', 'k'), true);
});

test('consume writes allowed, remaining, limit, retryAfterMs, resetMs into result or a given array', () => {
  const l = new Ledger({ tiers: [{ name: 't', limit: 10, windowMs: 5000 }] });
  const result = l.result;
  assert.ok(result instanceof Float64Array && result.length === R.LENGTH);
  assert.equal(l.consume('t', undefined, 4), true);
  assert.equal(l.result, result, 'the same array every call');
  assert.equal(result[R.ALLOWED], 1);
  assert.ok(result[R.REMAINING] >= 6 && result[R.REMAINING] < 6.1);
  assert.equal(result[R.LIMIT], 10);
  assert.equal(result[R.RETRY_AFTER_MS], 0);
  assert.ok(result[R.RESET_MS] > 1900 && result[R.RESET_MS] <= 2000);
  const out = new Float64Array(8).fill(-1);
  assert.equal(l.consume(0, undefined, 8, out), false);
  assert.equal(out[R.ALLOWED], 0);
  assert.ok(out[R.RETRY_AFTER_MS] > 900 && out[R.RETRY_AFTER_MS] <= 1000, String(out[R.RETRY_AFTER_MS]));
  assert.equal(out[R.LIMITED_BY], 1);
  assert.equal(out[6], -1, 'nothing written past the layout');
  assert.equal(result[R.ALLOWED], 1, 'the own array untouched when out is given');
});

test('tokens refill over real time', async () => {
  const l = new Ledger({ tiers: [{ name: 't', limit: 1, windowMs: 5 }] });
  assert.equal(l.tryConsume(0), true);
  assert.equal(l.tryConsume(0), false);
  await sleep(30);
  assert.equal(l.tryConsume(0), true);
  assert.equal(l.snapshot()[0].tokens <= 1, true, 'clamped at capacity');
});

test('setRefillScale: 0 stops the refill, 1 restores it; refillScale reads it', async () => {
  const l = new Ledger({ tiers: [{ name: 'a', limit: 1, windowMs: 1 }, { name: 'b', limit: 1, windowMs: 1000 }] });
  assert.equal(l.refillScale('a'), 1);
  l.setRefillScale('a', 0);
  assert.equal(l.refillScale(0), 0);
  assert.equal(l.tryConsume('a'), true);
  await sleep(20);
  assert.equal(l.tryConsume('a'), false, 'no refill at scale 0');
  l.setRefillScale(0, 1);
  await sleep(20);
  assert.equal(l.tryConsume('a'), true);
  l.setRefillScale('b', 0.25);
  assert.equal(l.snapshot()[1].refillScale, 0.25);
});

test('snapshot reports every tier', () => {
  const l = ledger();
  l.tryConsume('standard', 'k1', 2);
  l.setRefillScale('background', 0.5);
  assert.deepEqual(l.snapshot(), [
    { name: 'critical', protected: true, tokens: 5, limit: 0, windowMs: 1000, burst: 5, refillScale: 1, keys: 0 },
    { name: 'standard', protected: false, tokens: 8, limit: 0, windowMs: 1000, burst: 10, refillScale: 1, keys: 1 },
    { name: 'background', protected: false, tokens: 2, limit: 0, windowMs: 1000, burst: 2, refillScale: 0.5, keys: 0 },
  ]);
});

test('reset: a key, a tier, everything', () => {
  const l = ledger();
  l.tryConsume('critical', undefined, 5);
  l.tryConsume('standard', 'a', 3);
  l.tryConsume('standard', 'b', 3);
  assert.equal(l.tryConsume('standard', 'a'), false);
  assert.equal(l.reset('standard', 'a'), 1);
  assert.equal(l.tryConsume('standard', 'a'), true, 'a forgotten key starts full');
  assert.equal(l.reset('standard', 'nobody'), 0);
  assert.equal(l.snapshot()[1].tokens, 3, 'forgetting a key leaves the pool alone');
  assert.equal(l.reset(1), 3, 'the pool and its two keys');
  assert.deepEqual([l.snapshot()[1].tokens, l.snapshot()[1].keys], [10, 0]);
  assert.equal(l.snapshot()[0].tokens, 0);
  l.setRefillScale(0, 0.5);
  l.reset();
  assert.equal(l.snapshot()[0].tokens, 5);
  assert.equal(l.refillScale(0), 0.5, 'reset leaves refill scales alone');
});

test('Ledger.shared returns the same native ledger for a name', () => {
  const config = { tiers: [{ name: 'only', limit: 0, windowMs: 1000, burst: 2 }] };
  const a = Ledger.shared('ledger.test shared', config);
  const b = Ledger.shared('ledger.test shared', config);
  const c = Ledger.shared('ledger.test shared');
  assert.ok(a instanceof Ledger);
  assert.ok(a.isSameLedger(b) && a.isSameLedger(c));
  assert.equal(a.tryConsume(0), true);
  assert.equal(b.tryConsume(0), true);
  assert.equal(c.tryConsume(0), false);
  assert.equal(a.isSameLedger(new Ledger(config)), false);
  assert.throws(() => Ledger.shared('ledger.test shared', { tiers: [{ name: 'only', limit: 0, windowMs: 1000, burst: 3 }] }),
    { name: 'Error', message: /exists with a different config/ });
  assert.throws(() => Ledger.shared('ledger.test never created'), { message: /no ledger of that name exists yet/ });
  assert.throws(() => Ledger.shared('', config), { name: 'TypeError', message: /name must be a non-empty string/ });
  assert.throws(() => Ledger.shared(7, config), TypeError);
});

test('ledgerHandle gives the native handle other components share', () => {
  const l = ledger();
  const h = ledgerHandle(l);
  assert.equal(h, l[LEDGER_HANDLE].native);
  assert.equal(typeof h.snapshot, 'function');
  assert.ok(!Object.keys(l).includes(String(LEDGER_HANDLE)));
  assert.throws(() => ledgerHandle({}), { name: 'TypeError', message: /expected a Ledger/ });
});

test('hot-path argument errors name the problem', () => {
  const l = ledger();
  const cases = [
    [[], TypeError, /tier must be a tier name \(string\) or id \(number\), got undefined/],
    [[null], TypeError, /got null/],
    [[{}], TypeError, /got object/],
    [['gold'], RangeError, /unknown tier "gold"/],
    [[3], RangeError, /tier 3 is not a tier id of this ledger \(ids are 0 to 2\)/],
    [[-1], RangeError, /tier -1 is not a tier id/],
    [[1.5], RangeError, /tier 1.5 is not a tier id/],
    [[NaN], RangeError, /tier NaN/],
    [[1, 42], TypeError, /key must be a string or undefined, got number/],
    [[1, null], TypeError, /key must be a string or undefined, got null/],
    [[1, { id: 1 }], TypeError, /got object/],
    [[1, 'k'.repeat(1025)], RangeError, /key is 1025 bytes long; the limit is 1024/],
    [[0, undefined, NaN], RangeError, /cost must be a finite number >= 0 \(got NaN\)/],
    [[0, undefined, -1], RangeError, /cost must be a finite number >= 0 \(got -1\)/],
    [[0, undefined, Infinity], RangeError, /got Infinity/],
    [[Infinity], RangeError, /tier Infinity is not/],
    [[0, undefined, '2'], TypeError, /cost must be a number, got string/],
    [[0, undefined, 2n], TypeError, /got bigint/],
  ];
  for (const [args, type, message] of cases) {
    assert.throws(() => l.tryConsume(...args), { name: type.name, message }, `tryConsume(${args.map(String)})`);
    assert.throws(() => l.consume(...args), { name: type.name, message }, `consume(${args.map(String)})`);
  }
  assert.throws(() => l.consume(0, undefined, 1, []), { name: 'TypeError', message: /out must be a Float64Array/ });
  assert.throws(() => l.consume(0, undefined, 1, new Float32Array(6)), { name: 'TypeError' });
  assert.throws(() => l.consume(0, undefined, 1, new Float64Array(5)), { name: 'RangeError', message: /at least 6 elements \(got 5\)/ });
  assert.equal(l.snapshot()[0].tokens, 5, 'nothing was debited by a refused call');
});

test('other argument errors', () => {
  const l = ledger();
  assert.throws(() => l.tierId(0), { name: 'TypeError', message: /name must be a string, got number/ });
  assert.throws(() => l.tierId('gold'), { name: 'RangeError', message: /unknown tier "gold" \(tiers: critical, standard, background\)/ });
  assert.throws(() => l.setRefillScale(0, 1.5), { name: 'RangeError', message: /scale must be between 0 and 1 \(got 1.5\)/ });
  assert.throws(() => l.setRefillScale(0, -0.1), RangeError);
  assert.throws(() => l.setRefillScale(0, NaN), RangeError);
  assert.throws(() => l.setRefillScale(0, '1'), { name: 'TypeError', message: /scale must be a number, got string/ });
  assert.throws(() => l.setRefillScale(9, 1), { name: 'RangeError', message: /tier 9 is not a tier id/ });
  assert.throws(() => l.refillScale(true), { name: 'TypeError', message: /got boolean/ });
  assert.throws(() => l.reset('nope'), RangeError);
  assert.throws(() => l.reset(0, 5), { name: 'TypeError', message: /key must be a string or undefined, got number/ });
  assert.throws(() => Ledger.readResult([0, 0, 0, 0, 0, 0]), TypeError);
});

test('invalid configuration throws at construction, naming the option', () => {
  const t = (over) => ({ tiers: [{ name: 'a', limit: 1, windowMs: 1000, ...over }] });
  const cases = [
    [undefined, TypeError, /Ledger options must be an object \{ tiers, perKey\? \}, got undefined/],
    [[], TypeError, /got array/],
    [{}, TypeError, /options.tiers must be an array of tiers, highest priority first, got undefined/],
    [{ tiers: [] }, RangeError, /tiers must list at least one tier/],
    [{ tiers: [null] }, TypeError, /tiers\[0\] must be an object/],
    [{ tiers: [], extra: 1 }, TypeError, /options has an unknown option "extra"/],
    [t({ name: undefined }), TypeError, /tiers\[0\].name must be a string, got undefined/],
    [t({ name: '' }), RangeError, /tiers\[0\].name must be a non-empty string/],
    [t({ limit: undefined }), TypeError, /tiers\[0\].limit must be a number, got undefined/],
    [t({ limit: '5' }), TypeError, /tiers\[0\].limit must be a number, got string/],
    [t({ limit: -1 }), RangeError, /tiers\[0\].limit must be an integer from 0 to 4294967295 \(got -1\)/],
    [t({ limit: -3 }), RangeError, /tiers\[0\].limit/],
    [t({ limit: 2.5 }), RangeError, /tiers\[0\].limit must be an integer from 0 to 4294967295 \(got 2.5\)/],
    [t({ limit: NaN }), RangeError, /tiers\[0\].limit must be an integer from 0 to 4294967295 \(got NaN\)/],
    [t({ limit: Infinity }), RangeError, /tiers\[0\].limit must be an integer from 0 to 4294967295 \(got Infinity\)/],
    [t({ windowMs: undefined }), TypeError, /tiers\[0\].windowMs must be a number, got undefined/],
    [t({ windowMs: -1 }), RangeError, /tiers\[0\].windowMs must be a finite number > 0 \(at least 1e-6, one nanosecond\) and at most 1000000000000 \(got -1\)/],
    [t({ windowMs: 0 }), RangeError, /tiers\[0\].windowMs/],
    [t({ windowMs: Infinity }), RangeError, /tiers\[0\].windowMs .*\(got Infinity\)/],
    [t({ windowMs: NaN }), RangeError, /tiers\[0\].windowMs .*\(got NaN\)/],
    [t({ burst: 0 }), RangeError, /tiers\[0\].burst must be an integer from 1 to 4294967295 \(got 0\)/],
    [t({ burst: '2' }), TypeError, /tiers\[0\].burst must be a number, got string/],
    [t({ algorithm: 'fixed-window' }), RangeError, /tiers\[0\].algorithm must be 'token-bucket'/],
    [t({ limit: 4e9, windowMs: 1e-6 }), RangeError, /tiers\[0\].windowMs: limit \/ windowMs must be at most 1000000000000000 per second/],
    [t({ capacity: 1 }), TypeError, /tiers\[0\] has an unknown option "capacity"/],
    [t({ protected: 'yes' }), TypeError, /tiers\[0\].protected must be a boolean, got string/],
    [t({ refilPerSec: 1 }), TypeError, /tiers\[0\] has an unknown option "refilPerSec"/],
    [t({ perKey: 5 }), TypeError, /tiers\[0\].perKey must be an object/],
    [t({ perKey: { limit: 1 } }), TypeError, /tiers\[0\].perKey.windowMs must be a number, got undefined/],
    [t({ perKey: { limit: 0, windowMs: 1000 } }), RangeError, /tiers\[0\].perKey.burst is required with limit 0/],
    [t({ perKey: { limit: 0.5, windowMs: 1000 } }), RangeError, /tiers\[0\].perKey.limit must be an integer from 0/],
    [t({ perKey: { limit: 1, windowMs: -1 } }), RangeError, /tiers\[0\].perKey.windowMs/],
    [t({ perKey: { limit: 1, windowMs: 1000, burst: -1 } }), RangeError, /tiers\[0\].perKey.burst/],
    [t({ perKey: { limit: 1, windowMs: 1000, maxKeys: 0 } }), RangeError, /tiers\[0\].perKey.maxKeys must be an integer from 1/],
    [t({ perKey: { limit: 1, windowMs: 1000, maxKeys: 2.5 } }), RangeError, /maxKeys .*got 2.5/],
    [t({ perKey: { limit: 1, windowMs: 1000, idleTtlMs: -5 } }), RangeError, /tiers\[0\].perKey.idleTtlMs/],
    [t({ perKey: { limit: 1, windowMs: 1000, maxKeys: null } }), TypeError, /tiers\[0\].perKey.maxKeys must be a number, got null/],
    [t({ perKey: { limit: 1, windowMs: 1000, idleTtlMs: null } }), TypeError, /tiers\[0\].perKey.idleTtlMs must be a number, got null/],
    [t({ perKey: { limit: 1, windowMs: 1000, ttl: 5 } }), TypeError, /perKey has an unknown option "ttl"/],
    [{ tiers: [{ name: 'a', limit: 1, windowMs: 1000 }], perKey: { windowMs: 1000 } }, TypeError, /options.perKey.limit must be a number/],
    [{ tiers: [{ name: 'a', limit: 1, windowMs: 1000 }, { name: 'a', limit: 2, windowMs: 1000 }] }, RangeError,
      /tiers\[1\].name "a" is a duplicate of tiers\[0\].name/],
  ];
  for (const [options, type, message] of cases) {
    assert.throws(() => new Ledger(options), { name: type.name, message }, JSON.stringify(options));
  }
  // limit 0: a fixed allowance of `burst` tokens, never refilled (as refillPerSec 0 was).
  const fixed = new Ledger(t({ limit: 0, burst: 5 }));
  assert.deepEqual(fixed.snapshot().map((x) => [x.limit, x.windowMs, x.burst, x.tokens]), [[0, 1000, 5, 5]]);
  assert.throws(() => new Ledger(t({ limit: 0 })), { name: 'RangeError', message: /tiers\[0\].burst is required with limit 0/ });
});

test('examples/ledger.js runs and shows quotas, details and the refill lever', async () => {
  const { run } = require('../../examples/ledger.js');
  const lines = [];
  const { perUser, background, critical } = await run({ log: (...a) => lines.push(a.join(' ')) });
  assert.deepEqual(Object.values(perUser), [10, 10, 10, 10, 10]);
  assert.equal(background, 50, 'no refill at scale 0');
  assert.ok(critical > 200, `critical kept refilling (${critical})`);
  assert.ok(lines.some((l) => /refused by the key: RateLimit-Limit 10, Remaining 0/.test(l)), lines.join('\n'));
});

test('keys are compared by their full UTF-8 text, ASCII or not, short or long', () => {
  const l = new Ledger({ tiers: [{ name: 't', limit: 0, windowMs: 1000, burst: 1e6, perKey: { limit: 0, windowMs: 1000, burst: 2 } }] });
  const keys = ['e', 'é', 'e\u0301', 'ключ', 'ключ2', '🙂', '\u{1F642}x', 'a'.repeat(126), 'a'.repeat(127), 'a'.repeat(128),
    'a'.repeat(300), `${'a'.repeat(299)}b`, `${'é'.repeat(200)}x`, `${'é'.repeat(200)}y`, 'a\u0000b', 'клю' + 'ч'];
  assert.equal(new Set(keys).size, keys.length - 1, "'ключ' appears twice on purpose (built differently)");
  for (const k of keys.slice(0, -1)) assert.equal(l.tryConsume(0, k, 2), true, `first debit of ${JSON.stringify(k)}`);
  for (const k of keys) assert.equal(l.tryConsume(0, k), false, `${JSON.stringify(k.slice(0, 20))} is one bucket`);
  assert.equal(l.snapshot()[0].keys, keys.length - 1);
  assert.equal(l.tryConsume(0, 'é'.repeat(512)), true, '1024 UTF-8 bytes is allowed');
  assert.throws(() => l.tryConsume(0, 'é'.repeat(513)), { name: 'RangeError', message: /key is 1026 bytes long/ });
});

test('an out-of-range tier id never reaches the core (a panic there would abort the process)', () => {
  const l = ledger();
  // A shadowed `tiers` must not widen the id check.
  Object.defineProperty(l, 'tiers', { value: ['a', 'b', 'c', 'd', 'e'] });
  assert.throws(() => l.setRefillScale(4, 0.5), RangeError);
  assert.throws(() => l.reset(4), RangeError);
  // The native handle checks ids itself, for callers that reach it directly.
  const native = l[LEDGER_HANDLE].native;
  assert.throws(() => native.setRefillScale(9, 1), /out of range/);
  assert.throws(() => native.refillScale(9), /out of range/);
  assert.throws(() => native.reset(9), /out of range/);
  assert.throws(() => native.setRefillScale(0, 2), /between 0 and 1/);
  assert.equal(native.refillScale(0), 1);
});
