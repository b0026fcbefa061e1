'use strict';
// The keyed tryConsume off the benchmark's happy path (npm run bench covers 10,000 recurring keys, all
// admitted): a flood of unique keys, refusals, and the memory the per-thread key cache holds.
//   node benchmark/ledger-edges.js [--root <checkout>]   (another checkout's build, to compare)
// Every figure is the median of 5 timed runs after a warm-up.
const path = require('node:path');
const args = process.argv.slice(2);
const root = args.includes('--root') ? path.resolve(args[args.indexOf('--root') + 1]) : path.join(__dirname, '..');
const { Ledger } = require(root);
const { median } = require('./lib/stats');

const BIG = 4e9;
let sink = 0;
function time(run, n) {
  run(Math.min(n, 300_000));
  const s = [];
  for (let r = 0; r < 5; r++) {
    const t0 = process.hrtime.bigint();
    run(n);
    s.push(Number(process.hrtime.bigint() - t0) / n);
  }
  return median(s);
}

// RSS growth over 60,000 keys debited twice each (the second time from the key cache, where there is one).
const gc = global.gc ?? (require('node:v8').setFlagsFromString('--expose-gc'), require('node:vm').runInNewContext('gc'));
const M = 60_000;
const clients = Array.from({ length: M }, (_, i) => `client-${i}`);
const mem = new Ledger({ tiers: [{ name: 't', limit: 0, windowMs: 1000, burst: BIG, perKey: { limit: 10, windowMs: 10000, maxKeys: 100_000 } }] });
gc();
const r0 = process.memoryUsage().rss;
for (let r = 0; r < 2; r++) for (let i = 0; i < M; i++) mem.tryConsume(0, clients[i]);
gc();
const rssPerKey = (process.memoryUsage().rss - r0) / M;

// 4,000,000 distinct keys in turn through maxKeys 100,000: every call a new key, most evicting one.
const U = 4_000_000;
const unique = Array.from({ length: U }, (_, i) => `flood-${i}`);
const flood = new Ledger({ tiers: [{ name: 't', limit: BIG, windowMs: 1000, perKey: { limit: BIG, windowMs: 1000, maxKeys: 100_000 } }] });
let j = 0;
const floodNs = time((n) => { for (let i = 0; i < n; i++, j = j === U - 1 ? 0 : j + 1) sink ^= flood.tryConsume(0, unique[j]) ? 1 : 0; }, 2_000_000);

// One key far over its quota (1,000 tokens, 1,000/s): nearly every call refused by the key.
const hot = new Ledger({ tiers: [{ name: 't', limit: BIG, windowMs: 1000, perKey: { limit: 1000, windowMs: 1000 } }] });
const hotNs = time((n) => { for (let i = 0; i < n; i++) sink ^= hot.tryConsume(0, 'hot-user') ? 1 : 0; }, 3_000_000);

// An empty tier pool without refill: every call refused by the tier, with 1,000 keys and without a key.
const empty = new Ledger({ tiers: [{ name: 't', limit: 0, windowMs: 1000, burst: 1000, perKey: { limit: 0, windowMs: 1000, burst: BIG } }] });
empty.tryConsume(0, undefined, 1000);
const keys = Array.from({ length: 1000 }, (_, i) => `u-${i}`);
const emptyKeyedNs = time((n) => { for (let i = 0, k = 0; i < n; i++, k = k === 999 ? 0 : k + 1) sink ^= empty.tryConsume(0, keys[k]) ? 1 : 0; }, 3_000_000);
const emptyTierNs = time((n) => { for (let i = 0; i < n; i++) sink ^= empty.tryConsume(0) ? 1 : 0; }, 3_000_000);


console.log(`${root}: node ${process.version}, load ${require('node:os').loadavg()[0].toFixed(2)}`);
console.log(`| unique-key flood (4M keys in turn, maxKeys 100k) | ${floodNs.toFixed(1)} ns |`);
console.log(`| one key over its quota (refused by the key) | ${hotNs.toFixed(1)} ns |`);
console.log(`| empty tier pool, 1,000 keys (refused by the tier) | ${emptyKeyedNs.toFixed(1)} ns |`);
console.log(`| empty tier pool, no key | ${emptyTierNs.toFixed(1)} ns |`);
console.log(`| RSS per key, 60,000 keys debited twice | ${rssPerKey.toFixed(0)} B |`);
if (sink === 0.5) console.log(sink);
