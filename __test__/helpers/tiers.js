'use strict';
// Three tiers whose budgets no test reaches, so every refusal a test sees comes from shedding.
const BIG = 1e9;
const UNLIMITED_TIERS = [
  { name: 'critical', protected: true, capacity: BIG, refillPerSec: BIG },
  { name: 'standard', capacity: BIG, refillPerSec: BIG },
  { name: 'background', capacity: BIG, refillPerSec: BIG },
];

module.exports = { UNLIMITED_TIERS };
