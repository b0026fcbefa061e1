'use strict';
// npm run bench — the Ledger's hot path from JS, side by side in one run with:
//   the floor (a raw native no-op taking the same arguments), a plain-JS Map token bucket with the same
//   semantics (written here), `limiter` (TokenBucket) and `rate-limiter-flexible` (RateLimiterMemory),
//   and two worker threads on one Ledger.shared against one.
// Every figure is the median of REPEATS timed runs. Options: --quick (fewer ops), --repeats N, --json.
const { Worker, isMainThread, parentPort, workerData } = require('node:worker_threads');
const { performance } = require('node:perf_hooks');
const os = require('node:os');
const path = require('node:path');

const root = path.join(__dirname, '..');
const { Ledger } = require(root);
const native = require(path.join(root, 'lib', 'native.js'));
const { median } = require('./lib/stats');

const KEYS = 10_000;
const keys = Array.from({ length: KEYS }, (_, i) => `user-${i}`);
const BIG = 4e9; // buckets so large that every debit succeeds: the hot path, not the refusal path

const TIERS = [
  { name: 'critical', limit: BIG, windowMs: 1000, protected: true },
  { name: 'standard', limit: BIG, windowMs: 1000, perKey: { limit: BIG, windowMs: 1000, maxKeys: 100_000 } },
  { name: 'background', limit: BIG, windowMs: 1000 },
];

// ---------------------------------------------------------------------------------------------------
// The baseline: a plain-JS Map of token buckets, same semantics as the ledger (tier pool + per-key
// bucket debited both-or-neither, fractional refill from a monotonic clock, capacity clamp, bounded
// keys evicting the oldest).
class JsBucketLedger {
  constructor(tiers) {
    const now = performance.now();
    // The options' words: the bucket holds `burst` (default `limit`), refills `limit` per `windowMs` (a rate per ms).
    const bucket = (b) => ({ burst: b.burst ?? b.limit, rate: b.limit / b.windowMs });
    this.tiers = tiers.map((t) => ({
      ...bucket(t),
      tokens: t.burst ?? t.limit,
      last: now,
      perKey: t.perKey ? { ...bucket(t.perKey), maxKeys: t.perKey.maxKeys } : null,
      keys: new Map(),
    }));
  }

  tryConsume(tierId, key, cost = 1) {
    const t = this.tiers[tierId];
    const now = performance.now();
    if (now > t.last) {
      t.tokens = Math.min(t.burst, t.tokens + (now - t.last) * t.rate);
      t.last = now;
    }
    if (key === undefined || t.perKey === null) {
      if (cost > t.tokens) return false;
      t.tokens -= cost;
      return true;
    }
    const pk = t.perKey;
    let b = t.keys.get(key);
    if (b === undefined) {
      if (t.keys.size >= pk.maxKeys) t.keys.delete(t.keys.keys().next().value);
      b = { tokens: pk.burst, last: now };
      t.keys.set(key, b);
    } else if (now > b.last) {
      b.tokens = Math.min(pk.burst, b.tokens + (now - b.last) * pk.rate);
      b.last = now;
    }
    if (cost > b.tokens || cost > t.tokens) return false;
    b.tokens -= cost;
    t.tokens -= cost;
    return true;
  }
}

// ---------------------------------------------------------------------------------------------------

// `run(n)` performs n operations (a promise for the async case); resolves to ns/op.
async function timeOnce(run, n) {
  const t0 = process.hrtime.bigint();
  const p = run(n);
  if (p) await p;
  return Number(process.hrtime.bigint() - t0) / n;
}

let sink = 0;

// Each case has its own loop so V8 optimizes every call site monomorphically.
function cases(ledger, floor, jsMap) {
  const { TokenBucket } = require('limiter');
  const { RateLimiterMemory } = require('rate-limiter-flexible');
  const std = ledger.tierId('standard');
  const lTier = new TokenBucket({ bucketSize: BIG, tokensPerInterval: BIG, interval: 'second' });
  const lKeys = new Map();
  const rlf = new RateLimiterMemory({ points: BIG, duration: 1 });
  return [
    ['floor: raw no-op (id)', 'floor1', (n) => { for (let i = 0; i < n; i++) sink ^= floor.noop(0) ? 1 : 0; }],
    ['floor: raw no-op (id, key)', 'floor2', (n) => {
      for (let i = 0, k = 0; i < n; i++, k = k === KEYS - 1 ? 0 : k + 1) sink ^= floor.noop(std, keys[k]) ? 1 : 0;
    }],
    ['floor + key read into a stack buffer', 'floorRead', (n) => {
      for (let i = 0, k = 0; i < n; i++, k = k === KEYS - 1 ? 0 : k + 1) sink ^= floor.readKey(std, keys[k]) ? 1 : 0;
    }],
    ['tryConsume(id)', 'id', (n) => { for (let i = 0; i < n; i++) sink ^= ledger.tryConsume(0) ? 1 : 0; }],
    ['tryConsume(id, key) 10k keys', 'idKey', (n) => {
      for (let i = 0, k = 0; i < n; i++, k = k === KEYS - 1 ? 0 : k + 1) sink ^= ledger.tryConsume(std, keys[k]) ? 1 : 0;
    }],
    ['tryConsume(name)', 'name', (n) => { for (let i = 0; i < n; i++) sink ^= ledger.tryConsume('critical') ? 1 : 0; }],
    ['tryConsume(name, key) 10k keys', 'nameKey', (n) => {
      for (let i = 0, k = 0; i < n; i++, k = k === KEYS - 1 ? 0 : k + 1) sink ^= ledger.tryConsume('standard', keys[k]) ? 1 : 0;
    }],
    ['consume(id, key) + result array', 'consume', (n) => {
      const r = ledger.result;
      for (let i = 0, k = 0; i < n; i++, k = k === KEYS - 1 ? 0 : k + 1) { ledger.consume(std, keys[k]); sink ^= r[1] > 0 ? 1 : 0; }
    }],
    ['plain-JS Map bucket (id)', 'jsId', (n) => { for (let i = 0; i < n; i++) sink ^= jsMap.tryConsume(0) ? 1 : 0; }],
    ['plain-JS Map bucket (id, key) 10k keys', 'jsKey', (n) => {
      for (let i = 0, k = 0; i < n; i++, k = k === KEYS - 1 ? 0 : k + 1) sink ^= jsMap.tryConsume(1, keys[k]) ? 1 : 0;
    }],
    ['limiter TokenBucket (tier)', 'limiter', (n) => { for (let i = 0; i < n; i++) sink ^= lTier.tryRemoveTokens(1) ? 1 : 0; }],
    ['limiter TokenBucket (key, parent tier) 10k keys', 'limiterKey', (n) => {
      for (let i = 0, k = 0; i < n; i++, k = k === KEYS - 1 ? 0 : k + 1) {
        let b = lKeys.get(keys[k]);
        if (b === undefined) {
          b = new TokenBucket({ bucketSize: BIG, tokensPerInterval: BIG, interval: 'second', parentBucket: lTier });
          lKeys.set(keys[k], b);
        }
        sink ^= b.tryRemoveTokens(1) ? 1 : 0;
      }
    }],
    ['rate-limiter-flexible Memory (key) 10k keys', 'rlf', async (n) => {
      for (let i = 0, k = 0; i < n; i++, k = k === KEYS - 1 ? 0 : k + 1) {
        try { await rlf.consume(keys[k], 1); sink ^= 1; } catch { sink ^= 2; }
      }
    }],
  ];
}

// Runs in each worker: tryConsume(id, key) on the shared ledger over this worker's own keys, for
// `ms` milliseconds after a common start signal; reports the operation count.
function workerMain() {
  const { name, tiers, ms, prefix } = workerData;
  const ledger = Ledger.shared(name, { tiers });
  const std = ledger.tierId('standard');
  const mine = Array.from({ length: KEYS }, (_, i) => `${prefix}-${i}`);
  const burst = (n) => {
    for (let i = 0, k = 0; i < n; i++, k = k === KEYS - 1 ? 0 : k + 1) sink ^= ledger.tryConsume(std, mine[k]) ? 1 : 0;
  };
  burst(200_000);
  parentPort.once('message', () => {
    const end = performance.now() + ms;
    let ops = 0;
    while (performance.now() < end) {
      burst(10_000);
      ops += 10_000;
    }
    parentPort.postMessage(ops);
  });
  parentPort.postMessage('ready');
}

async function threads(count, ms) {
  const workers = Array.from({ length: count }, (_, w) =>
    new Worker(__filename, { workerData: { name: 'bench-shared', tiers: TIERS, ms, prefix: `w${w}` } }));
  await Promise.all(workers.map((w) => new Promise((res, rej) => {
    w.once('error', rej);
    w.once('message', res);
  })));
  const t0 = performance.now();
  const cpu0 = process.cpuUsage(); // the whole process: every thread
  const counts = workers.map((w) => new Promise((res) => w.once('message', res)));
  workers.forEach((w) => w.postMessage('go'));
  const ops = (await Promise.all(counts)).reduce((a, b) => a + b, 0);
  const elapsed = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  await Promise.all(workers.map((w) => w.terminate()));
  return {
    perSec: (ops / elapsed) * 1000, // wall clock: what the machine gave us
    perCpuSec: ops / ((cpu.user + cpu.system) / 1e6), // per CPU-second the threads actually ran
  };
}

// A full GC before memory readings, whether or not node ran with --expose-gc.
const gc = global.gc ?? (require('node:v8').setFlagsFromString('--expose-gc'), require('node:vm').runInNewContext('gc'));

function rss() {
  gc();
  return process.memoryUsage().rss;
}

// Bytes per key: RSS growth of the native ledger, heap growth of the JS Map, over N new keys.
function bytesPerKey(n) {
  const tiers = [{ name: 't', limit: 0, windowMs: 1000, burst: BIG, perKey: { limit: 10, windowMs: 10000, maxKeys: n } }];
  const names = Array.from({ length: n }, (_, i) => `client-${i}`);
  const l = new Ledger({ tiers });
  const r0 = rss();
  for (let i = 0; i < n; i++) l.tryConsume(0, names[i]);
  const nativeBytes = (rss() - r0) / n;
  const held = l.snapshot()[0].keys;
  const j = new JsBucketLedger(tiers);
  gc();
  const h0 = process.memoryUsage().heapUsed;
  for (let i = 0; i < n; i++) j.tryConsume(0, names[i]);
  gc();
  const jsBytes = (process.memoryUsage().heapUsed - h0) / n;
  sink ^= j.tiers[0].keys.size;
  return { nativeBytes, jsBytes, held, n, keyLen: names[n - 1].length };
}

async function main() {
  const args = process.argv.slice(2);
  const quick = args.includes('--quick');
  const repeats = Number(args[args.indexOf('--repeats') + 1]) || (quick ? 3 : 5);
  const N = quick ? 300_000 : 2_000_000;
  const ledger = new Ledger({ tiers: TIERS });
  // The floor is a bench seam, not in a release binary: `npm run bench` builds with it.
  const floor = typeof native.defineBenchFloor === 'function' ? {} : null;
  if (floor) native.defineBenchFloor(floor);
  else console.error('tiergate bench: this binary has no floor (built without the bench-seams feature): the floor rows are left out. `npm run bench` builds with it.');
  const jsMap = new JsBucketLedger(TIERS);

  // Rounds: every case once per round, so each case's median is taken over the same stretches of time
  // (the machine is shared; load from others comes and goes).
  const all = cases(ledger, floor, jsMap).filter(([, id]) => floor || !id.startsWith('floor')).map(([label, id, run]) => ({ label, id, run, n: id === 'rlf' ? Math.floor(N / 10) : N, samples: [] }));
  for (const c of all) await timeOnce(c.run, Math.min(c.n, 200_000)); // warm up: let the JIT settle
  for (let r = 0; r < repeats; r++) {
    for (const c of all) c.samples.push(await timeOnce(c.run, c.n));
  }
  const rows = all.map((c) => ({ label: c.label, id: c.id, ns: median(c.samples) }));
  const by = Object.fromEntries(rows.map((r) => [r.id, r.ns]));

  const ms = quick ? 300 : 1000;
  const t1 = [];
  const t2 = [];
  for (let r = 0; r < repeats; r++) {
    t1.push(await threads(1, ms));
    t2.push(await threads(2, ms));
  }
  const one = median(t1.map((x) => x.perSec));
  const two = median(t2.map((x) => x.perSec));
  // Scaling with the competing load factored out: throughput per CPU-second with two threads against
  // one, times two (what two free cores would give).
  const cpuScaling = (2 * median(t2.map((x) => x.perCpuSec))) / median(t1.map((x) => x.perCpuSec));
  const load = os.loadavg()[0];
  const mem = bytesPerKey(quick ? 100_000 : 500_000);

  const fmt = (x, d = 1) => x.toFixed(d);
  const lines = [];
  lines.push(`| case | ns/op | ops/s | × floor | × plain-JS Map |`);
  lines.push(`|---|---:|---:|---:|---:|`);
  for (const r of rows) {
    const floorNs = /Key|consume|rlf|floorRead|floor2/.test(r.id) ? by.floor2 : by.floor1;
    const jsNs = /Key|consume|rlf|floorRead|floor2/.test(r.id) ? by.jsKey : by.jsId;
    lines.push(`| ${r.label} | ${fmt(r.ns)} | ${(1e9 / r.ns / 1e6).toFixed(2)} M | ${floorNs ? fmt(r.ns / floorNs, 2) : '—'} | ${fmt(r.ns / jsNs, 2)} |`);
  }
  lines.push('');
  lines.push(`| threads on one Ledger.shared, tryConsume(id, key), distinct keys | ops/s | × one thread |`);
  lines.push(`|---|---:|---:|`);
  lines.push(`| 1 worker | ${(one / 1e6).toFixed(2)} M | 1.00 |`);
  lines.push(`| 2 workers | ${(two / 1e6).toFixed(2)} M | ${fmt(two / one, 2)} |`);
  lines.push(`| 2 workers, per CPU-second × 2 (competing load factored out) | | ${fmt(cpuScaling, 2)} |`);
  lines.push('');
  lines.push(`Load average (1 min) at the end of the run: ${load.toFixed(2)} on ${os.cpus().length} CPUs.`);
  lines.push('');
  lines.push(`Memory per key (${mem.n.toLocaleString('en-US')} keys of ${mem.keyLen} bytes): native ledger ${fmt(mem.nativeBytes, 0)} B of RSS ` +
    `(${mem.held.toLocaleString('en-US')} held); plain-JS Map ${fmt(mem.jsBytes, 0)} B of V8 heap.`);
  lines.push('');
  const targets = [
    ['keyed tryConsume ≤ 1.0× plain-JS Map', by.idKey / by.jsKey, (x) => x <= 1.0],
    ...(floor ? [['keyed tryConsume ≤ 1.5× floor', by.idKey / by.floor2, (x) => x <= 1.5]] : []),
    ['≥ 10× rate-limiter-flexible (speed-up)', by.rlf / by.idKey, (x) => x >= 10],
    ['2 threads ≥ 1.8× one (wall clock)', two / one, (x) => x >= 1.8],
    ['2 threads ≥ 1.8× one (per CPU-second)', cpuScaling, (x) => x >= 1.8],
  ];
  lines.push(`| target | measured | met |`);
  lines.push(`|---|---:|:---:|`);
  for (const [t, x, ok] of targets) lines.push(`| ${t} | ${fmt(x, 2)}× | ${ok(x) ? 'yes' : 'NO'} |`);

  console.log(`tiergate ledger benchmark — node ${process.version}, ${os.cpus().length} CPUs (${os.cpus()[0].model}), median of ${repeats}`);
  console.log(lines.join('\n'));
  if (args.includes('--json')) console.log(JSON.stringify({ rows, one, two, cpuScaling, load, mem }));
  if (sink === 0.5) console.log(sink); // keep results alive
}

if (isMainThread) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
} else {
  workerMain();
}
