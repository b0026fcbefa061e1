'use strict';
// What metrics(), statusRoute() and dashboard() observe, given in any form the package hands out:
// a gatekeeper middleware/handler or `fastify.tiergate` (a Gatekeeper), a concurrency gate middleware
// or its guard (`fastify.concurrencyGate`), a LagMonitor, a Ledger.
const { Gatekeeper } = require('../gatekeeper');
const { Ledger } = require('../ledger');
const { LagMonitor } = require('../lag');
const { LeaseDriver } = require('../quota/driver');
const { Cluster } = require('../cluster');
const { typeName, isObject } = require('../options');
const { OBSERVED } = require('../schema/metrics');

/** What statusRoute() and dashboard() observe; metrics() also takes a lease driver and a cluster. */
const FIELDS = OBSERVED.map((e) => e.name);
const METRICS_FIELDS = [...FIELDS, 'leases', 'cluster'];

function gatekeeperOf(v, at) {
  if (v instanceof Gatekeeper) return v;
  if (v !== null && (typeof v === 'function' || typeof v === 'object') && v.gatekeeper instanceof Gatekeeper) return v.gatekeeper;
  throw new TypeError(`${at} must be a gatekeeper (the middleware gatekeeper() returns, gatekeeper.http's handler, fastify.tiergate), got ${typeName(v)}`);
}

function queueOf(v, at) {
  const guard = v !== null && (typeof v === 'function' || typeof v === 'object') && typeof v.admit !== 'function' ? v.gate : v;
  if (guard !== null && typeof guard === 'object' && typeof guard.admit === 'function' && typeof guard.waits === 'function') return guard;
  throw new TypeError(`${at} must be a concurrency gate (the middleware concurrencyGate() returns, its .http handler, fastify.concurrencyGate), got ${typeName(v)}`);
}

/**
 * `{ gatekeeper?, queue?, lag?, ledger?, leases?, cluster? }` from the options (other keys are the caller's own); the
 * ledger defaults to the gatekeeper's. `at`: the caller's name for messages ("metrics: options").
 */
function components(options, at, fields = FIELDS) {
  if (!isObject(options)) throw new TypeError(`${at} must be an object, got ${typeName(options)}`);
  const c = {};
  if (options.gatekeeper !== undefined) c.gatekeeper = gatekeeperOf(options.gatekeeper, `${at}.gatekeeper`);
  if (options.queue !== undefined) c.queue = queueOf(options.queue, `${at}.queue`);
  if (options.lag !== undefined) {
    if (!(options.lag instanceof LagMonitor)) throw new TypeError(`${at}.lag must be a LagMonitor, got ${typeName(options.lag)}`);
    c.lag = options.lag;
  }
  if (options.ledger !== undefined) {
    if (!(options.ledger instanceof Ledger)) throw new TypeError(`${at}.ledger must be a Ledger, got ${typeName(options.ledger)}`);
    c.ledger = options.ledger;
  } else if (c.gatekeeper !== undefined) c.ledger = c.gatekeeper.ledger;
  if (fields.includes('cluster')) {
    // The cluster: given, or the gatekeeper's; its lease driver is the `leases` unless one is given.
    if (options.cluster !== undefined) {
      if (!(options.cluster instanceof Cluster)) throw new TypeError(`${at}.cluster must be made by tiergate.cluster(), got ${typeName(options.cluster)}`);
      c.cluster = options.cluster;
    } else if (c.gatekeeper !== undefined && c.gatekeeper.cluster !== null) c.cluster = c.gatekeeper.cluster;
  }
  if (fields.includes('leases') && options.leases !== undefined) {
    if (!(options.leases instanceof LeaseDriver)) throw new TypeError(`${at}.leases must be a LeaseDriver, got ${typeName(options.leases)}`);
    c.leases = options.leases;
  } else if (c.cluster !== undefined) c.leases = c.cluster.driver;
  if (Object.keys(c).length === 0) throw new TypeError(`${at} must name at least one of ${fields.join(', ')}`);
  return c;
}

module.exports = { components, FIELDS, METRICS_FIELDS };
