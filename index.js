'use strict';
// The root API, `require('tiergate')`: the middleware and its framework plugins, and the building
// blocks a user constructs. Everything else is a subpath (lib/exports/, package.json "exports");
// __test__/api/exports.test.js pins these names, so a new one is a deliberate change (docs/api.md).
const { gatekeeper, Gatekeeper, tiergatePlugin, mintTierToken, DECISION_CHANNEL, BAN_CHANNEL } = require('./lib/gatekeeper');
const { concurrencyGate, concurrencyGatePlugin } = require('./lib/queue');
const { Ledger, LEDGER_RESULT } = require('./lib/ledger');
const { LagMonitor } = require('./lib/lag');
const { metrics, statusRoute } = require('./lib/metrics');
const { otel } = require('./lib/metrics/otel');
const { dashboard } = require('./lib/dashboard');
const { cluster } = require('./lib/cluster');

module.exports = {
  gatekeeper, Gatekeeper, tiergatePlugin, mintTierToken, DECISION_CHANNEL, BAN_CHANNEL,
  concurrencyGate, concurrencyGatePlugin,
  Ledger, LEDGER_RESULT,
  LagMonitor,
  metrics, statusRoute, otel,
  dashboard,
  cluster,
};
