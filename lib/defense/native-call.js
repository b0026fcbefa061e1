'use strict';
// The defense's raw native calls with their arguments in one reused array: spelled out for up to
// three limits (the common case; an array through apply costs more), through apply beyond.

/** The combined call's leading arguments: the gate's sel, header, key. */
const GATE_ARGS = 3;

/** `defend` with the arguments in `a` after the gate's three. */
function callDefend(d, a) {
  switch (a.length) {
    case 7: return d(a[3], a[4], a[5], a[6]);
    case 8: return d(a[3], a[4], a[5], a[6], a[7]);
    case 9: return d(a[3], a[4], a[5], a[6], a[7], a[8]);
    case 10: return d(a[3], a[4], a[5], a[6], a[7], a[8], a[9]);
    default: return d.apply(undefined, a.slice(GATE_ARGS));
  }
}

/** `defendAndDecide` with all of `a`. */
function callDefendAndDecide(d, a) {
  switch (a.length) {
    case 7: return d(a[0], a[1], a[2], a[3], a[4], a[5], a[6]);
    case 8: return d(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]);
    case 9: return d(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8]);
    case 10: return d(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9]);
    default: return d.apply(undefined, a);
  }
}

module.exports = { GATE_ARGS, callDefend, callDefendAndDecide };
