'use strict';
// The operator's side of the ban table and the lists, and the ban events.
//
// Every ban change is an event `{ kind, ban }`: kind 'added' (new, or lengthened), 'lifted' (an
// operator removed it), 'expired', 'evicted' (dropped at maxBans: the temporary ban closest to its
// end, never a permanent one), 'refused' (not added: the table is full of permanent bans). `ban` is
// `{ target, cidr, reason, source: 'rule'|'operator', offense, since, until }`, times in Unix ms,
// `until` null for a permanent ban. Events go to `onBan(event)` and the `tiergate:ban`
// diagnostics channel. Expired bans are swept (and reported) by one unref'd timer that runs only
// while bans are held.
const diagnostics = require('node:diagnostics_channel');
const { typeName, isObject, onlyKnown, finite } = require('../options');
const { CODES, codedError, withCode } = require('../errors');

/** diagnostics_channel name: every ban event is published when it has subscribers. */
const BAN_CHANNEL = 'tiergate:ban';
const banChannel = diagnostics.channel(BAN_CHANNEL);
/** How often expired bans are swept and reported while any ban is held. */
const SWEEP_MS = 5000;
const BAN_FIELDS = new Set(['durationMs', 'reason']);
const LIST_FIELDS = new Set(['allow', 'deny']);
const RECORD_FIELDS = new Set(['target', 'cidr', 'reason', 'source', 'offense', 'since', 'until']);

/** A ban as the API gives it: `until` null for a permanent ban (natively: absent). */
function banOut(b) {
  if (b.until === undefined) b.until = null;
  return b;
}

/** Events as the API gives them. */
function eventsOut(events) {
  for (const e of events) banOut(e.ban);
  return events;
}

/** Native argument errors (InvalidArg) as RangeErrors with the argument code. */
function call(fn, at) {
  try {
    return fn();
  } catch (err) {
    if (err && err.code === 'InvalidArg') throw codedError(RangeError, CODES.INVALID_ARGUMENT, `${at}: ${err.message}`);
    throw withCode(err, CODES.INVALID_ARGUMENT);
  }
}

function targetArg(t, at) {
  if (typeof t !== 'string' || t === '') {
    throw codedError(TypeError, CODES.INVALID_ARGUMENT, `${at}: target must be an IP address or a CIDR prefix, got ${typeName(t)}`);
  }
  return t;
}

class BanEvents {
  constructor(handle, onBan, warn) {
    this.handle = handle;
    this.onBan = onBan;
    this.warn = warn;
    this.timer = null;
    /** The cluster's ban channel when the gatekeeper has one (lib/cluster/defense-table.js). */
    this.share = null;
  }

  publish(events) {
    if (events.length === 0) return;
    for (const e of eventsOut(events)) {
      if (this.share !== null) this.share(e);
      if (this.onBan !== null) {
        try {
          this.onBan(e);
        } catch (err) {
          this.warn('onBan', err);
        }
      }
      if (banChannel.hasSubscribers) banChannel.publish(e);
    }
    this.#schedule();
  }

  /** Sweeps while bans are held; stops when none are. */
  #schedule() {
    if (this.timer !== null) return;
    if (this.handle.stats().bans === 0) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.publish(this.handle.sweep());
    }, SWEEP_MS);
    this.timer.unref();
  }
}

/** `gate.defense.bans`: list, get, ban, lift, export, import (cluster mode's `bans` has the same ban/lift). */
class Bans {
  #handle;
  #events;
  constructor(handle, events) {
    this.#handle = handle;
    this.#events = events;
  }

  /** The live bans. */
  list() {
    return this.#handle.list().map(banOut);
  }

  /** The live ban on an address (keyed as requests are: IPv6 by its prefix) or a CIDR prefix, or null. */
  get(target) {
    const b = call(() => this.#handle.get(targetArg(target, 'bans.get')), 'bans.get');
    return b === undefined || b === null ? null : banOut(b);
  }

  /**
   * Bans an address or a CIDR prefix for `durationMs` (omitted or null: permanent, until lifted).
   * Returns the ban as held (a longer ban already there is kept).
   */
  ban(target, { durationMs, reason = 'operator' } = {}) {
    const at = 'bans.ban';
    const opts = arguments[1];
    if (opts !== undefined) {
      if (!isObject(opts)) {
        throw codedError(TypeError, CODES.INVALID_ARGUMENT, `${at}: options must be an object { durationMs?, reason? }, got ${typeName(opts)}`);
      }
      try {
        onlyKnown(opts, BAN_FIELDS, `${at}: options`);
      } catch (err) {
        throw withCode(err, CODES.INVALID_ARGUMENT);
      }
    }
    targetArg(target, at);
    if (durationMs === null) durationMs = undefined; // as cluster mode's bans.ban takes it
    if (durationMs !== undefined) call(() => finite(durationMs, `${at}: durationMs`, { min: 0, exclusiveMin: true, max: 1e12 }), at);
    if (typeof reason !== 'string' || reason.length > 256) {
      throw codedError(TypeError, CODES.INVALID_ARGUMENT, `${at}: reason must be a string of at most 256 characters`);
    }
    let events;
    try {
      events = call(() => this.#handle.ban(target, durationMs, reason), at);
    } catch (err) {
      if (/full of permanent bans/.test(err.message)) throw codedError(RangeError, CODES.BAN_TABLE_FULL, `${at}: ${err.message}`);
      throw err;
    }
    this.#events.publish(events);
    return this.get(target);
  }

  /** Lifts the ban on `target` (and, for an address, forgets its strikes). True if there was one. */
  lift(target) {
    const events = call(() => this.#handle.lift(targetArg(target, 'bans.lift')), 'bans.lift');
    this.#events.publish(events);
    return events.some((e) => e.kind === 'lifted');
  }

  /** The live bans as records (Unix ms) to persist or share. */
  export() {
    return this.#handle.export().map(banOut);
  }

  /** Adds exported records (the longer ban wins); `{ applied, skipped, refused }`. */
  import(records) {
    const at = 'bans.import';
    if (!Array.isArray(records)) throw codedError(TypeError, CODES.INVALID_ARGUMENT, `${at}: records must be an array, got ${typeName(records)}`);
    const recs = records.map((r, i) => {
      if (!isObject(r)) throw codedError(TypeError, CODES.INVALID_ARGUMENT, `${at}: records[${i}] must be an object, got ${typeName(r)}`);
      try {
        onlyKnown(r, RECORD_FIELDS, `${at}: records[${i}]`);
      } catch (err) {
        throw withCode(err, CODES.INVALID_ARGUMENT);
      }
      const untilOk = r.until === null || r.until === undefined || typeof r.until === 'number';
      if (typeof r.target !== 'string' || typeof r.reason !== 'string' || typeof r.source !== 'string' || typeof r.since !== 'number' || !untilOk) {
        throw codedError(TypeError, CODES.INVALID_ARGUMENT, `${at}: records[${i}] must be a record as export() gives`);
      }
      const offense = r.offense === undefined ? 0 : r.offense;
      if (!Number.isInteger(offense) || offense < 0 || offense > 0xffffffff) {
        throw codedError(RangeError, CODES.INVALID_ARGUMENT, `${at}: records[${i}].offense must be an integer >= 0`);
      }
      const until = r.until === null ? undefined : r.until;
      return { target: r.target, cidr: r.cidr === true, reason: r.reason, source: r.source, offense, since: r.since, until };
    });
    const report = call(() => this.#handle.import(recs), at);
    this.#events.publish(this.#handle.takeEvents());
    return report;
  }
}

/** Checks `{ allow?, deny? }` for `setLists`. */
function listsArg(v) {
  const at = 'setLists';
  if (!isObject(v)) throw codedError(TypeError, CODES.INVALID_ARGUMENT, `${at}: lists must be an object { allow?, deny? }, got ${typeName(v)}`);
  try {
    onlyKnown(v, LIST_FIELDS, at);
  } catch (err) {
    throw withCode(err, CODES.INVALID_ARGUMENT);
  }
  for (const k of ['allow', 'deny']) {
    if (v[k] === undefined) continue;
    if (!Array.isArray(v[k]) || v[k].some((s) => typeof s !== 'string')) {
      throw codedError(TypeError, CODES.INVALID_ARGUMENT, `${at}: ${k} must be an array of IP addresses or CIDR prefixes`);
    }
  }
  return v;
}

module.exports = { Bans, BanEvents, BAN_CHANNEL, listsArg, call };
