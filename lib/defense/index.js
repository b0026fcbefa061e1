'use strict';
// The abuse defense of the gatekeeper (docs/defense.md): lists, bans, the challenge step-up and named
// limits. The per-request check and gate.defense are ./defense.js; which limits a request falls under,
// ./limit-scope.js; options, ./options.js; bans and their events, ./bans.js; `gate.limits`, ./admin.js.
const { Defense, CLUSTER_STEP } = require('./defense');
const { compileDefense, DEFENSE_OPTIONS } = require('./options');
const { BAN_CHANNEL } = require('./bans');

module.exports = { Defense, compileDefense, DEFENSE_OPTIONS, BAN_CHANNEL, CLUSTER_STEP };
