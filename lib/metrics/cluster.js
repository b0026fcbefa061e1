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
    f('tiergate_cluster_ban_publish_errors_total', 'counter', 'Sends of queued ban changes that Redis did not take (they are sent again).', bans('publishErrors')),
    f('tiergate_cluster_ban_changes_queued', 'gauge', 'Ban and list changes made here that wait for Redis.', bans('queued')),
    f('tiergate_cluster_ban_changes_dropped_total', 'counter', 'Ban and list changes made here and never shared: the queue for Redis was full.', bans('dropped')),
    f('tiergate_cluster_ban_changes_rejected_total', 'counter', 'Messages and hash entries ignored: not signed with the banKey, or a message sent too long ago.', bans('rejected')),
    f('tiergate_cluster_ban_apply_errors_total', 'counter', 'Received ban changes the local table refused.', bans('applyErrors')),
  ];
}

module.exports = { clusterFamilies };
