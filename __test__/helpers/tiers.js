'use strict';
// Three tiers whose budgets no test reaches, so every refusal a test sees comes from shedding.
const BIG = 1e9;
const UNLIMITED_TIERS = [
  { name: 'critical', protected: true, limit: BIG, windowMs: 1000 },
  { name: 'standard', limit: BIG, windowMs: 1000 },
  { name: 'background', limit: BIG, windowMs: 1000 },
];

module.exports = { UNLIMITED_TIERS };
