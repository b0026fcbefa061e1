'use strict';
// A lift reloaded from the shared hash ends only bans that began before it (lib/cluster/bans.js): a ban
// this process made later, while Redis was away, stays. A lift heard live ends the ban whatever its age.
const test = require('node:test');
const assert = require('node:assert/strict');
const { BanCache } = require('../../lib/cluster/bans');
const { DefenseTable } = require('../../lib/cluster/defense-table');
const { gatekeeper } = require('../..');

test('a reloaded lift spares a ban made after it; a live lift ends any (exact-key table)', () => {
  const cache = new BanCache();
  cache.ban('a', { durationMs: 60_000 });
  cache.ban('b', { durationMs: 60_000 });
  cache.apply({ op: 'lift', target: 'a', cidr: false, before: Date.now() - 1000 });
  assert.notEqual(cache.get('a'), null, 'banned after the lift: kept');
  cache.apply({ op: 'lift', target: 'b', cidr: false, before: Date.now() + 1000 });
  assert.equal(cache.get('b'), null, 'banned before the lift: lifted');
  cache.apply({ op: 'lift', target: 'a', cidr: false, before: Infinity });
  assert.equal(cache.get('a'), null, 'a live lift');
});

test('a reloaded lift spares a ban made after it; a live lift ends any (the defense\'s table)', () => {
  const gate = gatekeeper({ tiers: [{ name: 'api', limit: 100, windowMs: 1000 }], bans: {} });
  const table = new DefenseTable(gate.defense);
  table.connect(() => {});
  table.ban('198.51.100.1', { durationMs: 60_000 });
  table.ban('203.0.113.0/24', { durationMs: 60_000 });
  table.apply({ op: 'lift', target: '198.51.100.1', cidr: false, before: Date.now() - 1000 });
  assert.notEqual(gate.defense.bans.get('198.51.100.1'), null, 'banned after the lift: kept');
  table.apply({ op: 'lift', target: '203.0.113.0/24', cidr: true, before: Date.now() + 1000 });
  assert.equal(gate.defense.bans.get('203.0.113.0/24'), null, 'banned before the lift: lifted');
  table.apply({ op: 'lift', target: '198.51.100.1', cidr: false, before: Infinity });
  assert.equal(gate.defense.bans.get('198.51.100.1'), null, 'a live lift');
});
