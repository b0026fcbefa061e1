'use strict';
// Bytes per key of one limiter, measured in a child process of its own (node --expose-gc):
//
//   1. a warm-up: the same number of requests from as many other addresses through a gatekeeper
//      with defaults (the harness's garbage, V8's heap growth and the addon's own start-up are paid
//      before the first reading);
//   2. GC, then RSS and V8 heap are read; the limiter is built and `keys` distinct addresses each
//      send `hits` requests through it (hits = the limit: an exact sliding window's ring is full);
//   3. GC, read again: (RSS after − RSS before) / keys. For the JS peers the V8 heap delta is the
//      figure (their state lives there); for tiergate RSS (its state is native), the keys its limit
//      reports holding (all of them must be held: maxKeys is twice the count), and the core's own
//      count of the bytes (entries, table, key copies, rings) if the binding reports one.
//
//   const r = await measureKeyMemory({ subject: 'tiergate:sliding-window', keys: 100000 });
//   -> { subject, keys, held, rssPerKey, heapPerKey, nativePerKey }
const path = require('node:path');
const { fork } = require('node:child_process');

const HITS = 10;

/** The subjects: each tiergate algorithm, and the peers' memory stores (fixed windows). */
const SUBJECTS = ['tiergate:token-bucket', 'tiergate:fixed-window', 'tiergate:sliding-window', 'tiergate:sliding-counter', 'tiergate:gcra', 'express-rate-limit:memory', 'rate-limiter-flexible:memory'];

function addr(i, base) {
  const n = base + i;
  return `${10 + ((n >> 24) & 63)}.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`;
}

function poolOf(keys, base) {
  const out = [];
  for (let i = 0; i < keys; i++) {
    const headers = { host: 'api.example.test', 'x-forwarded-for': addr(i, base) };
    out.push({ url: '/api/items', headers, raw: ['host', headers.host, 'x-forwarded-for', headers['x-forwarded-for']] });
  }
  return out;
}

/** The limiter of `subject` as a middleware list, and a function reading its native figure if any. */
function build(subject, keys) {
  const [lib, kind] = subject.split(':');
  const root = path.join(__dirname, '..', '..');
  if (lib === 'tiergate') {
    const { gatekeeper } = require(root);
    const limit = { name: 'm', by: 'ip', algorithm: kind, limit: HITS, windowMs: 60_000, maxKeys: 2 * keys };
    // The limit alone: no ban rules (their strike table would hold nothing here anyway), and no
    // shedding (a busy machine would refuse some requests, not what is measured).
    const gk = gatekeeper({ trustProxy: 1, limits: [limit], bans: { rules: false }, shed: false });
    return { chain: [gk], native: () => nativeBytes(gk) };
  }
  if (lib === 'express-rate-limit') {
    const { rateLimit, ipKeyGenerator } = require('express-rate-limit');
    const { clientIp } = require('../../lib/http/client');
    return { chain: [rateLimit({ windowMs: 60_000, limit: HITS, standardHeaders: false, legacyHeaders: false, keyGenerator: (req) => ipKeyGenerator(clientIp(req, 1)) })], native: () => null };
  }
  if (lib === 'rate-limiter-flexible') {
    const { RateLimiterMemory } = require('rate-limiter-flexible');
    const { clientIp } = require('../../lib/http/client');
    const rl = new RateLimiterMemory({ points: HITS, duration: 60 });
    return { chain: [(req, res, next) => rl.consume(clientIp(req, 1)).then(() => next(), () => next())], native: () => null };
  }
  throw new RangeError(`unknown subject ${subject}`);
}

/**
 * The keys a gatekeeper's limit holds, from `gate.defense.stats()`, and the bytes the core counts for
 * them if the binding reports that (`memoryBytes`; it does not at the time of writing).
 */
function nativeBytes(gk) {
  const d = gk.defense;
  if (!d || typeof d.stats !== 'function') return null;
  const m = (d.stats().limits || []).find((l) => l.name === 'm');
  if (!m) return null;
  return { bytes: typeof m.memoryBytes === 'number' ? m.memoryBytes : null, keys: typeof m.keys === 'number' ? m.keys : null };
}

async function child() {
  const { timeChain } = require('./chain-harness');
  const { subject, keys } = JSON.parse(process.env.TG_KEY_MEMORY);
  const { gatekeeper } = require(path.join(__dirname, '..', '..'));
  const gc = () => {
    for (let i = 0; i < 3; i++) global.gc();
  };
  const warm = poolOf(keys, 1 << 22);
  await timeChain([gatekeeper({ trustProxy: 1 })], warm, keys * HITS);
  warm.length = 0;
  const pool = poolOf(keys, 0);
  gc();
  const before = process.memoryUsage();
  const { chain, native } = build(subject, keys);
  // Each key sends HITS requests, spread out (key i's hits are `keys` requests apart).
  const r = await timeChain(chain, pool, keys * HITS);
  gc();
  const after = process.memoryUsage();
  const n = native();
  process.send({
    subject,
    keys,
    admitted: r.admitted,
    refused: r.refused,
    rssPerKey: (after.rss - before.rss) / keys,
    heapPerKey: (after.heapUsed - before.heapUsed) / keys,
    nativePerKey: n && n.bytes !== null ? n.bytes / (n.keys || keys) : null,
    held: n ? n.keys : null,
  });
}

function measureKeyMemory({ subject, keys = 100_000 }) {
  return new Promise((resolve, reject) => {
    const c = fork(__filename, [], { env: { ...process.env, TG_KEY_MEMORY: JSON.stringify({ subject, keys }) }, execArgv: ['--expose-gc'], stdio: ['ignore', 'inherit', 'pipe', 'ipc'] });
    let result = null;
    let stderr = '';
    c.stderr.on('data', (d) => (stderr += d));
    c.on('message', (m) => (result = m));
    c.on('exit', (code) => {
      if (result && result.error === undefined) resolve(result);
      else reject(new Error(`${subject}: ${result ? result.error : `exited ${code}: ${stderr.trim().split('\n').slice(-2).join(' / ')}`}`));
    });
  });
}

if (require.main === module && process.env.TG_KEY_MEMORY) {
  child().then(
    () => process.exit(0),
    (err) => {
      process.send({ error: (err && err.message) || String(err) });
      process.exit(1);
    },
  );
}

module.exports = { measureKeyMemory, SUBJECTS, HITS };
