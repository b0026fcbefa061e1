'use strict';
// A lease driver's families (cluster mode's engine, lib/quota): how spends were decided, whether the
// store answers, and the traffic to it. Aggregate counters only: no limit's key becomes a label.
const { familyMaker, oneField } = require('./family');

// stats().decisions field -> label value.
const DECISIONS = [['lease', 'lease'], ['provisional', 'provisional'], ['fallback', 'fallback'], ['exhausted', 'exhausted'], ['storeDown', 'store-down'], ['share', 'share'], ['full', 'full']];

function leaseFamilies(snapshot) {
  const f = familyMaker(snapshot);
  return [
    f('tiergate_lease_decisions_total', 'counter', 'Spends decided by the lease driver, by how (lease, provisional, fallback, exhausted, store-down, share, full).',
      (s) => DECISIONS.map(([field, decision]) => ({ labels: { decision }, value: s.decisions[field] }))),
    f('tiergate_lease_store_up', 'gauge', 'Whether the lease store answers (1).', (s) => [{ value: s.storeUp ? 1 : 0 }], 'min'),
    f('tiergate_lease_keys', 'gauge', 'Keys with lease state held in this process.', oneField('keys')),
    f('tiergate_lease_store_inflight', 'gauge', 'Lease requests sent to the store and not yet answered.', oneField('inFlight')),
    f('tiergate_lease_store_batches_total', 'counter', 'Store calls made for leases.', oneField('batches')),
    f('tiergate_lease_store_requests_total', 'counter', 'Lease requests sent to the store.', oneField('requestsSent')),
    f('tiergate_lease_store_errors_total', 'counter', 'Store calls that failed.', oneField('storeErrors')),
    f('tiergate_lease_store_timeouts_total', 'counter', 'Store calls not answered within storeTimeoutMs.', oneField('timeouts')),
    f('tiergate_lease_tokens_granted_total', 'counter', 'Tokens the store granted to this process.', oneField('granted')),
    f('tiergate_lease_tokens_returned_total', 'counter', 'Unspent tokens given back to the store.', oneField('returned')),
    f('tiergate_lease_tokens_expired_total', 'counter', 'Leased tokens that expired unspent.', oneField('expired')),
  ];
}

module.exports = { leaseFamilies };
