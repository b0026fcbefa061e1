'use strict';
// The abuse defense's families (gate.defense.stats()): bans in force and the ban table's counters,
// requests refused per layer, and per named limit its keys and refusals. Labels are bounded: a
// limit's configured name and a fixed set of reasons, never a key, an address or a prefix.
const { familyMaker, oneField } = require('./family');

// stats().refusals field -> reason label (challenges are their own family).
const REFUSALS = [['denyListed', 'deny-listed'], ['banned', 'banned'], ['shaperFull', 'shaper-full']];

function defenseFamilies(snapshot) {
  const f = familyMaker(snapshot);
  const perLimit = (field) => (s) => s.limits.map((l) => ({ labels: { limit: l.name }, value: l[field] }));
  return [
    f('tiergate_bans', 'gauge', 'Bans in force (addresses and CIDR prefixes).', oneField('bans')),
    f('tiergate_bans_added_total', 'counter', 'Bans added or lengthened (by rules and operators, and imported or shared).', oneField('added')),
    f('tiergate_bans_lifted_total', 'counter', 'Bans lifted by an operator.', oneField('lifted')),
    f('tiergate_bans_expired_total', 'counter', 'Bans that ran out.', oneField('expired')),
    f('tiergate_bans_evicted_total', 'counter', 'Temporary bans dropped to keep the table within bans.maxBans.', oneField('evicted')),
    f('tiergate_ban_refusals_total', 'counter', 'Bans not added: the table was full of permanent bans.', oneField('refused')),
    f('tiergate_defense_refusals_total', 'counter', 'Requests the abuse defense refused, by reason (deny-listed, banned, shaper-full, fair-share; limits and challenges have their own families).',
      (s) => [...REFUSALS.map(([field, reason]) => ({ labels: { reason }, value: s.refusals[field] })), { labels: { reason: 'fair-share' }, value: s.fairShareRefused }]),
    f('tiergate_challenges_total', 'counter', 'Requests answered with the challenge.', (s) => [{ value: s.refusals.challenged }]),
    f('tiergate_limit_refusals_total', 'counter', 'Requests a named limit refused (429), by limit (cluster limits too).',
      (s) => [...s.limits, ...s.clusterLimits].map((l) => ({ labels: { limit: l.name }, value: l.refused }))),
    f('tiergate_limit_keys', 'gauge', 'Keys a named limit holds state for, by limit.', perLimit('keys')),
    f('tiergate_limit_max_keys', 'gauge', 'The most keys a named limit holds, by limit.', perLimit('maxKeys')),
    f('tiergate_tracked_clients', 'gauge', 'Clients with strikes counted by the ban rules.', oneField('tracked')),
    f('tiergate_shaper_waiting', 'gauge', 'Requests a shaper limit is delaying now.', oneField('shaperWaiting')),
  ];
}

module.exports = { defenseFamilies };
