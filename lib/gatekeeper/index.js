'use strict';
// The gatekeeper: business-aware load shedding for Express, Fastify, Koa and node:http.
//
//   ./gatekeeper.js    the guard: classify -> decide (Rust, one raw call) -> respond, per request
//   ./options.js       its options, checked and normalized once
//   ./frameworks.js    the guard as Express/Koa middleware, a node:http handler, a Fastify plugin
//   ./hooks.js         onDecision/onShed/onReject/respond, the decision channel, warnings
//   ./decision-info.js the object those receive
//   ./cluster-step.js  cluster mode's part of a decision
//   ./slots.js, ./turn-queue.js, ./respond.js, ./key.js, ./tier-header.js, ./stats.js, ./health.js
const { Gatekeeper } = require('./gatekeeper');
const { gatekeeper, tiergatePlugin } = require('./frameworks');
const { mintTierToken } = require('./tier-header');
const { DECISION_CHANNEL } = require('./hooks');
const { BAN_CHANNEL } = require('../defense');

module.exports = { gatekeeper, Gatekeeper, tiergatePlugin, mintTierToken, DECISION_CHANNEL, BAN_CHANNEL };
