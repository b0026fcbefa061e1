'use strict';
/** What the cluster's gate step answers for a banned key: not a quota code (those are >= 0). */
const CLUSTER_BANNED = -1;

module.exports = { CLUSTER_BANNED };
