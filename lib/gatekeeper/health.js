'use strict';
// The test seam's argument (gate.injectHealth): the loop health the controller reads instead of the sampler's.
const { typeName, isObject, unknownKey, boolean, finite } = require('../options');

const HEALTH_NUMBERS = ['lagMs', 'ewmaLagMs', 'p99LagMs', 'elu', 'heapUsed', 'heapLimit'];
const HEALTH_FIELDS = new Set([...HEALTH_NUMBERS, 'stalled']);

/** injectHealth's argument: the fields it names, each a finite number (stalled: a boolean). */
function checkHealth(health) {
  if (!isObject(health)) throw new TypeError(`injectHealth: health must be an object, got ${typeName(health)}`);
  const unknown = unknownKey(health, HEALTH_FIELDS);
  if (unknown !== undefined) throw new TypeError(`injectHealth: unknown field "${unknown}" (known: ${[...HEALTH_FIELDS].join(', ')})`);
  for (const k of HEALTH_NUMBERS) {
    if (health[k] !== undefined) finite(health[k], `injectHealth: ${k}`);
  }
  if (health.stalled !== undefined) boolean(health.stalled, 'injectHealth: stalled');
}

module.exports = { checkHealth };
