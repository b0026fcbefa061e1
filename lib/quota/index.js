'use strict';
// Cluster-wide limits from leases: the engine (decides from process memory), the driver (carries its
// requests to a store in the background) and the store contract (lib/quota/store.js), with a store in
// memory. lib/cluster builds the Redis store on these; the decision service its SQL stores.
const { Quota, QUOTA_CODE, QUOTA_DEFAULTS, RETURN_REASONS } = require('./engine');
const { LeaseDriver, DRIVER_DEFAULTS } = require('./driver');
const { MemoryStore } = require('./memory-store');

module.exports = { Quota, LeaseDriver, MemoryStore, QUOTA_CODE, QUOTA_DEFAULTS, QUOTA_RETURN_REASONS: RETURN_REASONS, LEASE_DRIVER_DEFAULTS: DRIVER_DEFAULTS };
