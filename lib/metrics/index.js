'use strict';
// Prometheus metrics through prom-client (an optional peer dependency): the families of each
// component given, registered on the application's registry or prom-client's default one. Every
// value is read from the components' stats() when the registry is scraped; nothing runs per request.
//
// One file per component (./gatekeeper.js, ./queue.js, ./lag.js, ./ledger.js, ./leases.js, the
// gatekeeper's abuse defense ./defense.js, cluster mode's ban channel ./cluster.js). A new component
// adds its file and one entry in SOURCES below: its families from its stats, read once per scrape
// through oncePerScrape.
const { requireOptional } = require('../optional');
const { buildingOptions } = require('../errors');
const { onlyKnown, typeName, isObject } = require('../options');
const { oncePerScrape } = require('./family');
const { components, METRICS_FIELDS } = require('./components');
const { gatekeeperFamilies } = require('./gatekeeper');
const { queueFamilies, WAIT_BUCKETS } = require('./queue');
const { lagFamilies } = require('./lag');
const { ledgerFamilies } = require('./ledger');
const { leaseFamilies } = require('./leases');
const { defenseFamilies } = require('./defense');
const { clusterFamilies } = require('./cluster');
const { statusRoute } = require('./status');
const { METRICS } = require('../schema/metrics');
const { optionNames } = require('../schema');

const OPTIONS = optionNames(METRICS);

/** Each source: the families of one component, given the components (c) and the options (o). */
const SOURCES = [
  (c) => (c.gatekeeper
    ? gatekeeperFamilies(oncePerScrape(() => c.gatekeeper.stats()), { withLoop: c.lag === undefined, withConcurrency: c.gatekeeper.stats().concurrency !== null })
    : []),
  (c, o) => (c.queue ? queueFamilies(c.queue, oncePerScrape(() => c.queue.stats()), o.waitBuckets) : []),
  (c) => (c.lag ? lagFamilies(oncePerScrape(() => c.lag.stats())) : []),
  (c) => (c.ledger ? ledgerFamilies(oncePerScrape(() => c.ledger.snapshot())) : []),
  (c) => (c.leases ? leaseFamilies(oncePerScrape(() => c.leases.stats())) : []),
  (c) => (c.gatekeeper && c.gatekeeper.defense ? defenseFamilies(oncePerScrape(() => c.gatekeeper.defense.stats())) : []),
  (c) => (c.cluster ? clusterFamilies(oncePerScrape(() => c.cluster.stats())) : []),
];

/** Every family of the components `c` (what components() returns), with options `o` ({ waitBuckets }). */
function familiesOf(c, o) {
  return SOURCES.flatMap((source) => source(c, o));
}

function waitBuckets(v) {
  if (v === undefined) return WAIT_BUCKETS;
  if (!Array.isArray(v) || v.length === 0) throw new TypeError(`metrics: options.waitBuckets must be a non-empty array of seconds, got ${typeName(v)}`);
  v.forEach((b, i) => {
    if (typeof b !== 'number' || !Number.isFinite(b) || b <= 0 || (i > 0 && b <= v[i - 1])) {
      throw new RangeError(`metrics: options.waitBuckets[${i}] must be a finite number > 0, above the one before, got ${b}`);
    }
  });
  return Object.freeze([...v]);
}

function registryOption(r) {
  if (r === undefined) return requireOptional('prom-client', 'metrics()').register;
  if (!isObject(r) || typeof r.registerMetric !== 'function' || typeof r.removeSingleMetric !== 'function' || typeof r.metrics !== 'function') {
    throw new TypeError(`metrics: options.registry must be a prom-client Registry, got ${typeName(r)}`);
  }
  return r;
}

/**
 * Registers tiergate's families: `metrics({ gatekeeper?, queue?, lag?, ledger?, leases?, cluster?, registry?, waitBuckets? })`.
 * The gatekeeper's defense and cluster (and that cluster's lease driver) come with it.
 * Returns `{ registry, names, handler(req, res), unregister() }`.
 */
function metrics(options) {
  const { c, o, registry } = buildingOptions(() => {
    if (isObject(options)) onlyKnown(options, OPTIONS, 'metrics: options');
    const comps = components(options, 'metrics: options', METRICS_FIELDS);
    return { c: comps, o: { waitBuckets: waitBuckets(options.waitBuckets) }, registry: registryOption(options.registry) };
  });
  const families = familiesOf(c, o);
  // All or none: a name already taken (metrics() called twice on one registry) leaves nothing half-registered.
  const taken = families.find((f) => registry.getSingleMetric && registry.getSingleMetric(f.name) !== undefined);
  if (taken !== undefined) throw new Error(`metrics: ${taken.name} is already registered on this registry (call unregister() on the earlier metrics() first)`);
  for (const f of families) registry.registerMetric(f);
  const names = Object.freeze(families.map((f) => f.name));
  return {
    registry,
    names,
    /** node:http / Express handler for GET /metrics. */
    handler(req, res) {
      registry.metrics().then((text) => {
        res.writeHead(200, { 'content-type': registry.contentType, 'cache-control': 'no-store' });
        res.end(text);
      }, (err) => {
        res.writeHead(500, { 'content-type': 'text/plain' });
        res.end('metrics collection failed\n');
        process.emitWarning(err);
      });
    },
    /** Removes these families from the registry. */
    unregister() {
      for (const name of names) if (registry.getSingleMetric(name) !== undefined) registry.removeSingleMetric(name);
    },
  };
}

module.exports = { metrics, statusRoute, WAIT_BUCKETS, familiesOf, waitBuckets };
