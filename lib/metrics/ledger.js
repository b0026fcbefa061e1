'use strict';
// A ledger's families: each tier pool's tokens and configuration, and the keyed buckets it holds.
const { Family } = require('./family');

function ledgerFamilies(snapshot) {
  const f = (name, type, help, field) => new Family({ name, type, help, snapshot, read: (tiers) => tiers.map((t) => ({ labels: { tier: t.name }, value: field(t) })) });
  return [
    f('tiergate_ledger_tokens', 'gauge', 'Tokens in the tier pool now.', (t) => t.tokens),
    f('tiergate_ledger_burst_tokens', 'gauge', 'Tokens the tier pool holds when full (its burst).', (t) => t.burst),
    // A rate in Prometheus' base unit (per second) from the tier's limit per windowMs.
    f('tiergate_ledger_refill_tokens_per_second', 'gauge', 'Configured refill rate of the tier pool, limit per windowMs (before the refill scale).', (t) => (t.limit * 1000) / t.windowMs),
    f('tiergate_ledger_keys', 'gauge', 'Per-key buckets the tier holds now (bounded by maxKeys).', (t) => t.keys),
  ];
}

module.exports = { ledgerFamilies };
