'use strict';
// One rule, one implementation: the gatekeeper and the concurrency gate read the tier header the same
// way (src/core/gate/tier.rs), whatever the value, trusted or not, plain or signed.
const test = require('node:test');
const assert = require('node:assert/strict');
const { EventEmitter } = require('node:events');
const { Gatekeeper, mintTierToken } = require('../..');
const { createConcurrencyGate } = require('../../lib/queue'); // internal: not exported

const SECRET = 'tier-header-secret-0123456789abcdef';
const TIERS = ['critical', 'standard', 'background'];
const VALUES = [
  'critical', 'standard', 'background', 'CRITICAL', 'Critical', ' critical ', '', '   ', 'gold', 'critical, background',
  'background,critical', 'x'.repeat(300), mintTierToken(SECRET, 'critical', { ttlSec: 600 }),
  mintTierToken(SECRET, 'critical', { expiresAt: 1 }), mintTierToken('another-secret-0123456789abcdef', 'critical', { ttlSec: 600 }),
  't1.critical.9999999999.forged', ['critical', 'critical'],
];

for (const trustTierHeader of [false, true]) {
  test(`both guards give every header value the same tier (trustTierHeader: ${trustTierHeader})`, () => {
    let seen;
    const gk = new Gatekeeper({ trustTierHeader, tierSecret: SECRET, defaultTier: 'standard', shed: false, onDecision: (info) => { seen = info.tier; } });
    const gate = createConcurrencyGate({ maxConcurrent: 1, maxQueue: 1000, trustTierHeader, tierSecret: SECRET, defaultTier: 'standard', tiers: TIERS });
    const res = () => Object.assign(new EventEmitter(), { destroyed: false, writableEnded: false, writableFinished: false });
    gate.admit({ method: 'GET', url: '/', headers: {} }, res()); // holds the slot: everything after queues
    try {
      for (const value of VALUES) {
        seen = undefined;
        gk.admit({ method: 'GET', url: '/', headers: { 'x-user-tier': value } }, {});
        const before = gate.stats().queuedByTier;
        gate.admit({ method: 'GET', url: '/', headers: { 'x-user-tier': value } }, res());
        const after = gate.stats().queuedByTier;
        const queuedIn = TIERS.find((t) => after[t] === before[t] + 1);
        assert.equal(queuedIn, seen, `${JSON.stringify(value).slice(0, 60)}: the gate queued it as ${queuedIn}, the gatekeeper decided ${seen}`);
      }
    } finally {
      gate.close();
    }
  });
}

test('the concurrency gate refuses tier names the tier header could not carry', () => {
  assert.throws(() => createConcurrencyGate({ maxConcurrent: 1, tiers: ['gold tier'] }), (err) => err.code === 'ERR_TIERGATE_INVALID_OPTION' && /tiers\[0\]\.name must be 1-64 characters of A-Z a-z 0-9 _ -/.test(err.message));
  assert.throws(() => createConcurrencyGate({ maxConcurrent: 1, tierSecret: 'short' }), (err) => err.code === 'ERR_TIERGATE_INVALID_OPTION' && /tierSecret must be at least 16 bytes/.test(err.message));
});
