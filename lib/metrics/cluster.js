'use strict';
// Cluster mode's ban channel (cluster.stats().bans): changes published to and received from the other
// processes, and the failures. Its lease driver's families (fallback decisions, store health) are
// ./leases.js's, read from the same cluster.
const { familyMaker } = require('./family');

function clusterFamilies(snapshot) {
  const f = familyMaker(snapshot);
  const bans = (field) => (s) => (s.bans === null ? [] : [{ value: s.bans[field] }]);
  return [
    f('tiergate_cluster_ban_changes_published_total', 'counter', 'Ban and list changes made here and published to the other processes.', bans('published')),
    f('tiergate_cluster_ban_changes_received_total', 'counter', 'Ban and list changes received from other processes.', bans('received')),
    f('tiergate_cluster_ban_publish_errors_total', 'counter', 'Ban changes Redis did not take (publish or persist failed).', bans('publishErrors')),
    f('tiergate_cluster_ban_apply_errors_total', 'counter', 'Received ban changes the local table refused.', bans('applyErrors')),
  ];
}

module.exports = { clusterFamilies };
