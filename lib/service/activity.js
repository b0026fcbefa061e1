'use strict';
// Activity is written behind: each decision's record waits in memory at most `flushMs`, then a batch
// goes to the store in one transaction (rows + per-client totals + aggregated buckets). A SIGKILL
// loses the records of the last `flushMs` (plus a flush that had not committed); decisions' state is
// never behind (it commits with the decision). Retention runs every `pruneMs`.

class ActivityWriter {
  constructor(store, { flushMs, pruneMs, maxBuffered, retention, log }) {
    this.store = store;
    this.log = log;
    this.maxBuffered = maxBuffered;
    this.retention = retention;
    this.buffer = [];
    this.dropped = 0;
    this.written = 0;
    this.writing = null;
    this.pruning = null;
    this.flushTimer = setInterval(() => this.flush().catch(() => {}), flushMs).unref();
    this.pruneTimer = setInterval(() => this.prune().catch(() => {}), pruneMs).unref();
  }

  record(r) {
    // Bounded: if the store falls behind this far, the oldest records go (counted in /metrics).
    if (this.buffer.length >= this.maxBuffered) {
      this.buffer.shift();
      this.dropped++;
    }
    this.buffer.push(r);
  }

  /** Writes everything recorded so far; resolves once it is in the store. */
  async flush() {
    while (this.writing) await this.writing;
    if (this.buffer.length === 0) return;
    const records = this.buffer;
    this.buffer = [];
    this.writing = this.store.writeActivity(records).then(() => {
      this.written += records.length;
    }, (err) => {
      // Put them back (bounded by record()'s cap) for the next flush.
      this.log.error('activity write failed', { error: String(err && err.message), records: records.length });
      this.buffer = records.concat(this.buffer).slice(-this.maxBuffered);
      throw err;
    }).finally(() => { this.writing = null; });
    return this.writing;
  }

  /** Applies retention; a prune still running (a store may prune in steps) is not started twice. */
  prune() {
    if (!this.pruning) {
      this.pruning = this.store.prune({ now: Date.now(), ...this.retention }).finally(() => { this.pruning = null; });
    }
    return this.pruning;
  }

  stop() {
    clearInterval(this.flushTimer);
    clearInterval(this.pruneTimer);
  }
}

module.exports = { ActivityWriter };
