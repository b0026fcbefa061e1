'use strict';
// The shared algorithm vectors (__test__/fixtures/algorithm-vectors.json, "decisions") against the
// decision service's algorithms (lib/service/algorithms.js): directly, on the path both stores take
// (rows.decideEntry), and through the SQLite and PostgreSQL stores (a real database each: the states
// round-trip through their rows, the time is the store's clock). The Rust core answers the same
// vectors (src/core/limit/vectors_tests.rs), so the two are held equal.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { ALGORITHMS, initialState } = require('../../lib/service/algorithms');
const rows = require('../../lib/service/stores/rows');
const { SqliteStore } = require('../../lib/service/stores/sqlite');
const { PostgresStore } = require('../../lib/service/stores/postgres');
const { tmpdir, pgMissing } = require('../service/helpers');
const { VECTORS, BASE, close, pgWithClock } = require('../helpers/vectors');

// The service's names and fields for a vector's config: its wire contract keeps the reference
// design's (snake_case names; requestsPerSecond and burstSize, or maxRequests and windowSeconds).
const SERVICE = Object.freeze({
  'token-bucket': { algorithm: 'token_bucket', rate: true },
  'fixed-window': { algorithm: 'fixed_window', rate: false },
  'sliding-window': { algorithm: 'sliding_window', rate: false },
  'sliding-counter': { algorithm: 'sliding_counter', rate: false },
  gcra: { algorithm: 'gcra', rate: true },
});

// Where the service's resetAt is the instant the next unit comes back, as the vectors' resetMs. For
// the others it is when the quota is whole again (the bucket full, both counts slid out, the GCRA
// backlog gone): another contract, the reference design's, so it is not compared with resetMs.
const RESET_IS_NEXT_UNIT = new Set(['fixed-window', 'sliding-window']);

function policyOf(alg, c, clientKey) {
  const { algorithm, rate } = SERVICE[alg];
  return rate
    ? { clientKey, algorithm, requestsPerSecond: (c.limit * 1000) / c.windowMs, burstSize: c.burst }
    : { clientKey, algorithm, maxRequests: c.limit, windowSeconds: c.windowMs / 1000 };
}

/** Every case of the vectors: [algorithm, case, a client key of its own]. */
const CASES = Object.entries(VECTORS.decisions).flatMap(([alg, cases]) => cases.map((c, i) => [alg, c, `vec-${alg}-${i}`]));

function expectStep(alg, c, i, r) {
  const step = c.steps[i];
  const at = `${alg}: ${c.name}, step ${i} (t ${step.t} ms, cost ${step.cost})`;
  assert.equal(r.allowed, step.allowed, `${at}: allowed`);
  assert.equal(r.remaining, step.remaining, `${at}: remaining`);
  // null: a cost above what the limit admits at once. The service answers such a check 400
  // VALIDATION_ERROR before deciding it (docs/service.md), so its wire has no "never"; decided
  // anyway, it is refused (above) with a finite retryAfterMs that no answer carries.
  if (step.retryAfterMs !== null) close(r.retryAfterMs, step.retryAfterMs, `${at}: retryAfterMs`);
  if (RESET_IS_NEXT_UNIT.has(alg) && step.resetMs > 0) close(r.resetAtMs - (BASE + step.t), step.resetMs, `${at}: resetAtMs`);
}

test('the vectors cover every algorithm of the service, and the service every algorithm of the vectors', () => {
  assert.deepEqual(Object.keys(SERVICE).sort(), Object.keys(VECTORS.decisions).sort());
  assert.deepEqual(Object.values(SERVICE).map((s) => s.algorithm).sort(), Object.keys(ALGORITHMS).sort());
});

test('lib/service/algorithms.js answers the vectors (rows.decideEntry: the decision both stores make)', () => {
  for (const [alg, c, key] of CASES) {
    const policy = policyOf(alg, c, key);
    const entry = { policy, state: initialState(policy, BASE), ban: null };
    c.steps.forEach((step, i) => expectStep(alg, c, i, rows.decideEntry(entry, [step.cost], BASE + step.t).results[0]));
  }
});

test('the SQLite store answers the vectors', async (t) => {
  const dir = tmpdir('tiergate-vectors-');
  const store = new SqliteStore({ dataDir: dir });
  t.after(async () => {
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  await store.open();
  for (const [alg, c, key] of CASES) {
    assert.ok(await store.createClient(policyOf(alg, c, key)));
    // The store's own batch transaction at the vectors' instants (SqliteStore.decideBatch passes it
    // Date.now(): the one thing set here).
    c.steps.forEach((step, i) => {
      const out = store.decisions.decideBatch(new Map([[key, [step.cost]]]), BASE + step.t).get(key);
      expectStep(alg, c, i, out.results[0]);
    });
  }
  assert.ok(fs.existsSync(path.join(dir, 'tiergate.sqlite')));
});

test('the PostgreSQL store answers the vectors', { skip: pgMissing() }, async (t) => {
  const { clock, store } = await pgWithClock(t, (url) => new PostgresStore({ connectionString: url }));
  await store.open();
  for (const [alg, c, key] of CASES) {
    assert.ok(await store.createClient(policyOf(alg, c, key)));
    for (const [i, step] of c.steps.entries()) {
      await clock.set(BASE + step.t);
      const out = (await store.decideBatch(new Map([[key, [step.cost]]]))).get(key);
      if (out instanceof Error) throw out;
      expectStep(alg, c, i, out.results[0]);
    }
  }
});
