'use strict';
// The numbers lib/gatekeeper.js shares with the native decide come from the native side
// (src/node/gate/constants.rs `gateConstants`): one declaration, read by both. These tests check that the JS view
// of them matches what the native gate actually does.
const test = require('node:test');
const assert = require('node:assert/strict');
const native = require('../../lib/native');
const { Gatekeeper, Ledger } = require('../..');
const { ledgerHandle } = require('../../lib/ledger');

const C = native.gateConstants();
const TIERS = [
  { name: 'critical', protected: true, limit: 0, windowMs: 1000, burst: 100 },
  { name: 'standard', limit: 0, windowMs: 1000, burst: 100, perKey: { limit: 0, windowMs: 1000, burst: 1 } },
];

test('the constants are frozen, numbered in order, and complete', () => {
  for (const v of [C, C.result, C.verdict, C.verdictNames, C.verdictStatus, C.sources, C.causes, C.lagSignals, C.sel, C.shedDefaults]) {
    assert.ok(Object.isFrozen(v));
  }
  assert.deepEqual(Object.values(C.verdict), [0, 1, 2, 3]);
  assert.equal(C.verdictNames.length, 4);
  assert.deepEqual(C.verdictStatus, [200, 503, 503, 429]);
  const fields = Object.entries(C.result).filter(([k]) => k !== 'LENGTH');
  assert.deepEqual(fields.map(([, i]) => i), fields.map((_, i) => i));
  assert.equal(C.result.LENGTH, fields.length);
  assert.ok(C.sources.includes('signed') && C.causes.includes('stall') && C.lagSignals.includes('ewma'));
});

test('the result array decide fills has the length and the fields the constants name', () => {
  const ledger = new Ledger({ tiers: TIERS });
  const h = new native.GateHandle(ledgerHandle(ledger), { defaultTier: 1, trustHeader: false, ipv4Prefix: 32, ipv6Prefix: 56, cost: 1, sampler: false }, {});
  const bound = {};
  h.bind(bound);
  assert.equal(bound.result.length, C.result.LENGTH);
  // Tier 1 chosen by the caller (sel = id + 1), keyed: the key's one token admits, the next is refused.
  assert.equal(bound.decide(2, undefined, 'k'), C.verdict.ADMIT);
  assert.equal(bound.decide(2, undefined, 'k'), C.verdict.RATE_LIMITED);
  const r = bound.result;
  assert.equal(r[C.result.VERDICT], C.verdict.RATE_LIMITED);
  assert.equal(r[C.result.TIER], 1);
  assert.equal(C.sources[r[C.result.SOURCE]], 'given');
  assert.equal(r[C.result.LIMIT], 1);
  assert.equal(C.causes[r[C.result.CAUSE]], 'none');
  // The header path: an untrusted header cannot promote to 'critical'.
  assert.equal(bound.decide(0, 'critical'), C.verdict.ADMIT);
  assert.equal(C.sources[r[C.result.SOURCE]], 'untrusted');
});

test('the shed defaults are the ones a gatekeeper runs with', () => {
  const gk = new Gatekeeper({ tiers: TIERS });
  const s = gk.stats();
  assert.equal(s.targetLagMs, C.shedDefaults.targetLagMs);
  assert.equal(s.criticalLagMs, C.shedDefaults.criticalLagMs);
  assert.ok('maxBaselineMs' in C.shedDefaults && C.shedDefaults.maxBaselineMs === undefined, 'derived from targetLagMs');
});

test('the native side reads the shed options by name and names a bad one', () => {
  const ledger = new Ledger({ tiers: TIERS });
  const base = { defaultTier: 1, trustHeader: false, ipv4Prefix: 32, ipv6Prefix: 56, cost: 1, sampler: false };
  const make = (shed) => new native.GateHandle(ledgerHandle(ledger), base, shed);
  assert.throws(() => make({ stallMs: 1.5 }), { code: 'InvalidArg', message: /shed\.stallMs must be a whole number of milliseconds/ });
  assert.throws(() => make({ lagSignal: 'p50' }), { code: 'InvalidArg', message: /shed\.lagSignal must be one of latest, ewma, p99, max/ });
  assert.throws(() => make({ criticalLagMs: 10 }), { code: 'InvalidArg', message: /shed\.criticalLagMs must be greater than targetLagMs/ });
  assert.throws(() => make({ heapRatio: true }), { code: 'InvalidArg', message: /shed\.heapRatio must be a number or false/ });
  const off = make({ heapRatio: false, stallMs: false, targetLagMs: 30, criticalLagMs: 90 }).stats();
  assert.equal(off.targetLagMs, 30);
  assert.equal(off.criticalLagMs, 90);
});

test("the ledger's result layout and limitedBy names come from the native side too", () => {
  const L = native.ledgerConstants();
  const { LEDGER_RESULT } = require('../..');
  assert.deepEqual({ ...LEDGER_RESULT }, L.result);
  assert.ok(Object.isFrozen(LEDGER_RESULT));
  const fields = Object.entries(L.result).filter(([k]) => k !== 'LENGTH');
  assert.deepEqual(fields.map(([, i]) => i), fields.map((_, i) => i));
  assert.equal(L.result.LENGTH, fields.length);
  assert.deepEqual(L.limitedBy, ['none', 'tier', 'key']);
  // What consume writes where the constants say: a key over its quota of 1 is refused by the key.
  const ledger = new Ledger({ tiers: TIERS });
  const out = new Float64Array(L.result.LENGTH);
  ledger.consume('standard', 'k', 1, out);
  ledger.consume('standard', 'k', 1, out);
  assert.equal(out[L.result.ALLOWED], 0);
  assert.equal(L.limitedBy[out[L.result.LIMITED_BY]], 'key');
  assert.equal(out[L.result.LIMIT], 1);
});

test('the slots count of requests waiting for one is never read as a huge number', () => {
  // A count of waiters that went negative in JS (waiters shed between a hand-over and their start),
  // read as 2^32 - 2, was handed every free slot, and would have been four billion of them wherever
  // the limit does not cap a hand-over (the caller gives back one call at a time: a hung loop).
  const ledger = new Ledger({ tiers: TIERS });
  const h = new native.GateHandle(ledgerHandle(ledger), { defaultTier: 1, trustHeader: false, ipv4Prefix: 32, ipv6Prefix: 56, cost: 1, sampler: false, concurrency: { shadow: false, minLimit: 1, maxLimit: 2, initialLimit: 2 } }, {});
  h.injectHealth({ lagMs: 1000, ewmaLagMs: 1000, p99LagMs: 1000, elu: 1, heapUsed: 0, heapLimit: 0, stalled: false });
  h.update();
  const epoch = h.slotEpoch();
  assert.equal(h.handOverSlots(-2), 0);
  assert.equal(h.releaseSlot(epoch, -1, -2), 0);
  assert.equal(h.handOverSlots(3), 2, 'the two free slots');
  assert.throws(() => h.handOverSlots(NaN), { code: 'InvalidArg' });
});
