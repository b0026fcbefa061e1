'use strict';
// Every option declared once (lib/schema): the validation reads its defaults and ranges there, and
// this test holds the schema, the validation, the .d.ts files and the docs' option tables equal.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const native = require('../../lib/native');
const { Gatekeeper, concurrencyGate, Ledger, LagMonitor } = require('../..');
const { ledgerHandle, normalizeLedgerOptions } = require('../../lib/ledger');
const { normalize } = require('../../lib/gatekeeper/options');
const { parseOptions } = require('../../lib/queue/config');
const { parseCodel } = require('../../lib/queue/standing');
const { AdaptiveLimit } = require('../../lib/queue/adaptive-limit');
const { DIALECTS } = require('../../lib/http/routing');
const { retryAfterOptions } = require('../../lib/options');
const { GATEKEEPER, SHED, CONCURRENCY, SHADOW } = require('../../lib/schema/gatekeeper');
const { CONCURRENCY_GATE, QUEUE_TIER, QUEUE_TIER_FOREIGN, ADAPTIVE_LIMIT, CODEL } = require('../../lib/schema/concurrency-gate');
const { RETRY_AFTER } = require('../../lib/schema/retry-after');
const { LAG_MONITOR } = require('../../lib/schema/lag');
const { LEDGER, LEDGER_TIER, LEDGER_PER_KEY } = require('../../lib/schema/ledger');
const { NAMED_LIMIT } = require('../../lib/schema/defense');
const { compileDefense } = require('../../lib/defense/options');
const { CLUSTER, QUOTA_LIMIT } = require('../../lib/schema/cluster');
const { METRICS, OTEL, STATUS_ROUTE } = require('../../lib/schema/metrics');
const { DASHBOARD } = require('../../lib/schema/dashboard');
const { SERVICE_CLIENT } = require('../../lib/schema/client');
const { SERVE } = require('../../lib/schema/service');
const serviceConfig = require('../../lib/service/config');
const { cluster, clusterOptions } = require('../../lib/cluster');
const { Quota } = require('../../lib/quota/engine');
const { driverOptions } = require('../../lib/quota/driver');
const { statusRoute, statusRouteOptions } = require('../../lib/metrics/status');
const { otel } = require('../../lib/metrics/otel');
const { dashboard, dashboardOptions } = require('../../lib/dashboard');
const { client, clientOptions } = require('../../lib/client');
const { TABLES, PAGES, renderPage, defaultCell, rowStart } = require('../../scripts/options-docs');

const ROOT = path.join(__dirname, '..', '..');
const INVALID = 'ERR_TIERGATE_INVALID_OPTION';

function gate(options) {
  const g = concurrencyGate(options);
  g.close();
}

// What the observers (statusRoute, otel, dashboard) watch: a monitor, stopped when the file is done.
const monitor = new LagMonitor();
test.after(() => monitor.stop());
const DASHBOARD_TOKEN = 'a-dashboard-token-of-32-bytes!!!';
// Never connected to: every option check runs before a store is made (a Cluster that was made is closed).
const NO_REDIS = 'redis://127.0.0.1:1';
const ONE_LIMIT = [{ name: 'a', limit: 10, windowMs: 1000 }];
const ADMIN_TOKEN = 'k3Y-for-the-options-schema-test-0123456789';

/**
 * Per group: its schema, how to build with one option set (the option path errors name), and what
 * the validation makes of no options (for the defaults).
 */
const GROUPS = [
  { name: 'gatekeeper', schema: GATEKEEPER, at: (n) => `options.${n}`, build: (n, v) => new Gatekeeper({ [n]: v }), normalized: () => normalize({}) },
  { name: 'gatekeeper.shed', schema: SHED, at: (n) => `options.shed.${n}`, build: (n, v) => new Gatekeeper({ shed: { [n]: v } }), normalized: () => normalize({}).shed },
  { name: 'gatekeeper.concurrency', schema: CONCURRENCY, at: (n) => `options.concurrency.${n}`, build: (n, v) => new Gatekeeper({ concurrency: { [n]: v } }), normalized: () => normalize({}).concurrency },
  { name: 'gatekeeper.shadow', schema: SHADOW, at: (n) => `options.shadow.${n}`, build: (n, v) => new Gatekeeper({ shadow: { [n]: v } }), normalized: () => ({ enforcePercent: normalize({ shadow: true }).shadow }) },
  { name: 'gatekeeper.retryAfter', schema: RETRY_AFTER, at: (n) => `options.retryAfter.${n}`, build: (n, v) => new Gatekeeper({ retryAfter: { [n]: v } }), normalized: () => normalize({}).retryAfter },
  { name: 'concurrencyGate.retryAfter', schema: RETRY_AFTER, at: (n) => `retryAfter.${n}`, build: (n, v) => gate({ maxConcurrent: 1, retryAfter: { [n]: v } }), normalized: () => retryAfterOptions(undefined, 'retryAfter') },
  {
    name: 'concurrencyGate',
    schema: CONCURRENCY_GATE,
    at: (n) => n,
    build: (n, v) => gate({ maxConcurrent: 1, [n]: v }),
    normalized: () => {
      const c = parseOptions({ maxConcurrent: 1 }, DIALECTS.http, () => NaN);
      return { maxQueue: c.maxQueue, queueTimeoutMs: c.tiers[0].queueTimeoutMs, timeoutStatus: c.timeoutStatus, displace: c.displace, lifo: c.lifo, codel: c.standing.codel === null ? false : c.standing.codel };
    },
  },
  { name: 'concurrencyGate.tiers[i]', schema: QUEUE_TIER, at: (n) => `tiers[0].${n}`, build: (n, v) => gate({ maxConcurrent: 1, tiers: [{ name: 'a', [n]: v }] }), normalized: () => parseOptions({ maxConcurrent: 1, tiers: ['a'] }, DIALECTS.http, () => NaN).tiers[0] },
  { name: 'concurrencyGate.limit', schema: ADAPTIVE_LIMIT, at: (n) => `limit.${n}`, build: (n, v) => gate({ maxConcurrent: 'auto', limit: { [n]: v } }), normalized: () => new AdaptiveLimit({}) },
  {
    name: 'LagMonitor',
    schema: LAG_MONITOR,
    at: (n) => `LagMonitor: ${n}`,
    build: (n, v) => new LagMonitor({ [n]: v }),
    normalized: () => {
      const s = new LagMonitor().stats();
      return { resolutionMs: s.resolutionMs, windowMs: s.windowMs };
    },
  },
  {
    name: 'Ledger.tiers[i]',
    schema: LEDGER_TIER,
    at: (n) => `tiers[0].${n}`,
    build: (n, v) => new Ledger({ tiers: [{ name: 'a', limit: 10, windowMs: 1000, [n]: v }] }),
    normalized: () => new Ledger({ tiers: [{ name: 'a', limit: 10, windowMs: 1000 }] }).snapshot()[0],
  },
  {
    name: 'Ledger.perKey',
    schema: LEDGER_PER_KEY,
    at: (n) => `options.perKey.${n}`,
    build: (n, v) => new Ledger({ tiers: [{ name: 'a', limit: 10, windowMs: 1000 }], perKey: { limit: 1, windowMs: 1000, [n]: v } }),
    normalized: () => normalizeLedgerOptions({ tiers: [{ name: 'a', limit: 10, windowMs: 1000 }], perKey: { limit: 1, windowMs: 1000 } }).tiers[0].perKey,
  },
  {
    name: 'gatekeeper.limits[i]',
    schema: NAMED_LIMIT,
    at: (n) => `options.limits[0].${n}`,
    // burst, maxDelayMs and maxQueued belong to a GCRA limit (maxQueued to a shaper's).
    build: (n, v) => new Gatekeeper({ limits: [{ name: 'a', limit: 10, windowMs: 1000, ...(['burst', 'maxDelayMs', 'maxQueued'].includes(n) ? { algorithm: 'gcra', maxDelayMs: 100 } : {}), [n]: v }] }),
    normalized: () => {
      const l = compileDefense({ limits: [{ name: 'a', limit: 10, windowMs: 1000 }] }, new Map([['t', 0]]), { v4: 32, v6: 56 }).limits[0];
      const stats = new Gatekeeper({ limits: [{ name: 'a', limit: 10, windowMs: 1000 }] }).defense.stats().limits[0];
      return { algorithm: l.native.algorithm, maxKeys: stats.maxKeys, by: l.by.kind, cost: l.cost, maxQueued: l.maxQueued, cluster: l.cluster === true, skipSuccessfulRequests: l.skipSuccessful, skipFailedRequests: l.skipFailed };
    },
  },
  { name: 'concurrencyGate.codel', schema: CODEL, at: (n) => `codel.${n}`, build: (n, v) => gate({ maxConcurrent: 1, codel: { [n]: v } }), normalized: () => parseCodel(true) },
  {
    name: 'cluster',
    schema: CLUSTER,
    at: (n) => `cluster: options.${n}`,
    build: (n, v) => cluster({ redis: NO_REDIS, bans: false, limits: ONE_LIMIT, [n]: v }).close().catch(() => {}),
    normalized: () => {
      const n = clusterOptions({ redis: NO_REDIS, limits: ONE_LIMIT });
      const quota = new Quota({ limits: n.limits, maxKeys: n.maxKeys });
      return { ...driverOptions(n.driver), fallback: quota.limits[0].fallback, minHolders: quota.limits[0].minHolders, bans: n.bans, maxKeys: n.maxKeys };
    },
  },
  {
    name: 'cluster limits[i]',
    schema: QUOTA_LIMIT,
    at: (n) => `limits[0].${n}`,
    // burst belongs to a token bucket, provisional to unfunded: 'provisional'.
    build: (n, v) => new Quota({ limits: [{ name: 'a', limit: 10, windowMs: 1000, ...(n === 'burst' ? { algorithm: 'token-bucket' } : {}), ...(n === 'provisional' ? { unfunded: 'provisional' } : {}), [n]: v }] }),
    normalized: () => new Quota({ limits: [{ name: 'a', limit: 10, windowMs: 1000 }] }).limits[0],
  },
  { name: 'statusRoute', schema: STATUS_ROUTE, at: (n) => `statusRoute: options.${n}`, build: (n, v) => statusRoute({ lag: monitor, [n]: v }), normalized: () => statusRouteOptions({ lag: monitor }) },
  { name: 'otel', schema: OTEL, at: (n) => `otel: options.${n}`, build: (n, v) => otel({ lag: monitor, [n]: v }).unregister(), normalized: () => ({}) },
  { name: 'dashboard', schema: DASHBOARD, at: (n) => `dashboard: options.${n}`, build: (n, v) => dashboard({ token: DASHBOARD_TOKEN, lag: monitor, [n]: v }).close(), normalized: () => dashboardOptions({ token: DASHBOARD_TOKEN, lag: monitor }) },
  // `tiergate serve` / createService: explicit options, an empty environment.
  { name: 'serve', schema: SERVE, at: (n) => `option ${n}`, build: (n, v) => serviceConfig.resolve({ adminToken: ADMIN_TOKEN, [n]: v }, {}), normalized: () => serviceConfig.resolve({ adminToken: ADMIN_TOKEN }, {}) },
  { name: 'client', schema: SERVICE_CLIENT, at: (n) => `client options.${n}`, build: (n, v) => client('http://127.0.0.1:1', { [n]: v }), normalized: () => clientOptions('http://127.0.0.1:1', {}) },
];

// Options whose normalized form is not the option's value (a compiled key), or that nobody normalizes.
const NOT_NORMALIZED = new Set([
  'gatekeeper.key', 'gatekeeper.tierHeader', 'concurrencyGate.tierHeader', 'concurrencyGate.trustTierHeader',
  'Ledger.tiers[i].algorithm', 'Ledger.perKey.algorithm', // the only one: nobody keeps it
  'gatekeeper.limits[i].maxDelayMs', // the native limit's, not reported
  'cluster limits[i].provisional', // 0 (none) unless unfunded: 'provisional'
  'serve.adminToken', // required: the test gives one
  'cluster.prefix', // the stores' (lib/cluster/redis-store.js, postgres-store.js), read from the schema
]);

/** Values just outside an entry's range (and NaN, Infinity, a fraction for an integer). */
function outside(e) {
  const min = e.min === undefined ? 0 : e.min;
  const step = e.type === 'integer' ? 1 : 0.001;
  const out = [Number.NaN, Infinity, e.exclusiveMin ? min : min - step];
  if (e.max !== undefined) out.push(e.max + step);
  if (e.type === 'integer') out.push(min + 0.5);
  return out;
}

for (const g of GROUPS) {
  test(`${g.name}: a value just outside each option's range throws ${INVALID}, naming the option`, () => {
    let checked = 0;
    for (const e of Object.values(g.schema)) {
      let bad;
      if (e.values !== undefined) bad = ['not-one-of-them', 1e9];
      else if (e.type === 'number' || e.type === 'integer') bad = outside(e);
      else if (e.type === 'boolean') bad = ['yes', 1];
      else continue;
      for (const v of bad) {
        assert.throws(() => g.build(e.name, v), (err) => {
          assert.equal(err.code, INVALID, `${g.name}.${e.name} = ${v}: ${err.message}`);
          assert.ok(err.message.includes(g.at(e.name)), `${g.name}.${e.name} = ${v}: the message names the option: ${err.message}`);
          return true;
        }, `${g.name}.${e.name} = ${v} throws`);
        checked++;
      }
    }
    assert.ok(checked > 0 || Object.values(g.schema).every((e) => e.type !== 'number' && e.type !== 'integer'));
  });

  test(`${g.name}: each declared default is what the validation gives`, () => {
    const got = g.normalized();
    for (const e of Object.values(g.schema)) {
      if (e.default === undefined || NOT_NORMALIZED.has(`${g.name}.${e.name}`)) continue;
      assert.deepEqual(got[e.name], e.default, `${g.name}.${e.name}`);
    }
  });
}

test('a gatekeeper runs with the declared shed defaults (stats()), and they are the native controller\'s', () => {
  const gk = new Gatekeeper();
  const s = gk.stats();
  assert.equal(s.targetLagMs, SHED.targetLagMs.default);
  assert.equal(s.criticalLagMs, SHED.criticalLagMs.default);
  assert.deepEqual(Object.keys(SHED).sort(), Object.keys(native.gateConstants().shedDefaults).sort(), 'the schema and src/node/gate.rs name the same shed options');
  const n = normalize({});
  assert.equal(n.tierHeader, GATEKEEPER.tierHeader.default);
  assert.equal(normalize({}).key.kind, GATEKEEPER.key.default);
});

test('the shed group\'s sampler durations have the LagMonitor\'s ranges', () => {
  for (const name of Object.keys(LAG_MONITOR)) {
    assert.deepEqual([SHED[name].type, SHED[name].min, SHED[name].max], [LAG_MONITOR[name].type, LAG_MONITOR[name].min, LAG_MONITOR[name].max], name);
  }
});

test('the native gate accepts every sampler duration the schema accepts, and refuses past its own bound', () => {
  const ledger = new Ledger({ tiers: [{ name: 'a', limit: 10, windowMs: 1000 }] });
  const base = { defaultTier: 0, trustHeader: false, ipv4Prefix: 32, ipv6Prefix: 56, cost: 1, sampler: false };
  const make = (shed) => new native.GateHandle(ledgerHandle(ledger), base, shed);
  for (const name of ['stallMs', 'resolutionMs', 'windowMs', 'ewmaMs']) {
    const e = SHED[name];
    make({ [name]: e.max });
    const past = e.max + 1;
    assert.throws(() => make({ [name]: past }), { code: 'InvalidArg', message: new RegExp(`shed\\.${name} must be a whole number of milliseconds`) });
  }
});

/** The property names of `interface name { ... }` (or `type name = ... | { ... }`) in a .d.ts text. */
function interfaceProps(text, name) {
  const start = text.search(new RegExp(`(interface ${name}\\b[^{]*|type ${name} =[^{]*)\\{`));
  assert.ok(start >= 0, `${name} is declared`);
  let i = text.indexOf('{', start);
  let depth = 0;
  const body = [];
  for (; i < text.length; i++) {
    const c = text[i];
    if (c === '{') depth++;
    else if (c === '}') {
      depth--;
      if (depth === 0) break;
    }
    if (depth === 1) body.push(c);
  }
  const own = body.join('').replace(/\/\*\*[\s\S]*?\*\//g, '');
  return new Set([...own.matchAll(/^\s*([A-Za-z_$][\w$]*)\??\s*:/gm)].map((m) => m[1]));
}

const DTS = [
  { file: 'lib/gatekeeper/index.d.ts', type: 'GatekeeperOptions', schema: GATEKEEPER },
  { file: 'lib/gatekeeper/index.d.ts', type: 'ShedOptions', schema: SHED },
  { file: 'lib/gatekeeper/index.d.ts', type: 'ConcurrencyOptions', schema: CONCURRENCY },
  { file: 'lib/gatekeeper/index.d.ts', type: 'ShadowOptions', schema: SHADOW },
  { file: 'lib/queue/index.d.ts', type: 'ConcurrencyGateOptions', schema: CONCURRENCY_GATE },
  { file: 'lib/queue/index.d.ts', type: 'QueueTier', schema: QUEUE_TIER, also: QUEUE_TIER_FOREIGN },
  { file: 'lib/queue/index.d.ts', type: 'AdaptiveLimitOptions', schema: ADAPTIVE_LIMIT },
  { file: 'lib/queue/index.d.ts', type: 'CodelOptions', schema: CODEL },
  { file: 'lib/lag/index.d.ts', type: 'LagMonitorOptions', schema: LAG_MONITOR },
  { file: 'lib/defense/index.d.ts', type: 'LimitOptions', schema: NAMED_LIMIT },
  { file: 'lib/ledger/index.d.ts', type: 'LedgerOptions', schema: LEDGER },
  { file: 'lib/ledger/index.d.ts', type: 'TierOptions', schema: LEDGER_TIER, base: 'BucketOptions' },
  { file: 'lib/ledger/index.d.ts', type: 'PerKeyOptions', schema: LEDGER_PER_KEY, base: 'BucketOptions' },
  { file: 'lib/cluster/index.d.ts', type: 'ClusterLimitOptions', schema: CLUSTER, base: 'ClusterStoreOptions' },
  { file: 'lib/quota/index.d.ts', type: 'QuotaBucketLimit', schema: QUOTA_LIMIT, base: 'QuotaLimitCommon' },
  { file: 'lib/metrics/index.d.ts', type: 'MetricsOptions', schema: METRICS, base: 'ObservedComponents' },
  { file: 'lib/metrics/index.d.ts', type: 'OtelOptions', schema: OTEL, base: 'ObservedComponents' },
  { file: 'lib/metrics/index.d.ts', type: 'StatusRouteOptions', schema: STATUS_ROUTE, base: 'ObservedComponents' },
  { file: 'lib/dashboard/index.d.ts', type: 'DashboardOptions', schema: DASHBOARD, base: 'ObservedComponents', baseFile: 'lib/metrics/index.d.ts' },
  { file: 'lib/client/index.d.ts', type: 'ServiceClientOptions', schema: SERVICE_CLIENT },
  { file: 'lib/service/index.d.ts', type: 'ServiceOptions', schema: SERVE },
];

for (const d of DTS) {
  test(`${d.file} ${d.type} declares exactly the schema's options`, () => {
    const text = fs.readFileSync(path.join(ROOT, d.file), 'utf8');
    const baseText = d.baseFile === undefined ? text : fs.readFileSync(path.join(ROOT, d.baseFile), 'utf8');
    const props = [...interfaceProps(text, d.type), ...(d.base === undefined ? [] : interfaceProps(baseText, d.base))];
    assert.deepEqual(props.sort(), [...Object.keys(d.schema), ...(d.also || [])].sort());
  });
}

test('the .d.ts retryAfter of both guards has the schema\'s fields', () => {
  for (const file of ['lib/gatekeeper/index.d.ts', 'lib/queue/index.d.ts']) {
    const m = fs.readFileSync(path.join(ROOT, file), 'utf8').match(/retryAfter\?: \{([^}]*)\}/);
    assert.ok(m, `${file} declares retryAfter`);
    assert.deepEqual([...m[1].matchAll(/(\w+)\?:/g)].map((x) => x[1]).sort(), Object.keys(RETRY_AFTER).sort(), file);
  }
});

test('the docs\' option tables are the schema\'s (node scripts/options-docs.js writes them)', () => {
  for (const rel of PAGES) {
    const text = fs.readFileSync(path.join(ROOT, rel), 'utf8');
    for (const [name, t] of Object.entries(TABLES)) {
      if (t.file !== rel) continue;
      assert.ok(text.includes(`<!-- options:${name} -->`), `${rel} marks table ${name}`);
      for (const [s, prefix, only] of t.parts) {
        for (const e of Object.values(s)) {
          if (only !== undefined && !only.includes(e.name)) continue;
          assert.ok(text.includes(rowStart(t, prefix, e)), `${rel}: a row for ${prefix}${e.name} with default ${defaultCell(e)}`);
        }
      }
    }
    assert.equal(renderPage(text), text, `${rel} matches lib/schema: run node scripts/options-docs.js`);
  }
});
