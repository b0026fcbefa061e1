'use strict';
// `require('tiergate/quota')`: the lease engine under cluster mode and the service, with the lease
// store contract (lib/quota/store.js): its decision codes and its return reasons.
const { Quota, LeaseDriver, MemoryStore, QUOTA_CODE, QUOTA_RETURN_REASONS } = require('../quota');

module.exports = { Quota, LeaseDriver, MemoryStore, QUOTA_CODE, QUOTA_RETURN_REASONS };
