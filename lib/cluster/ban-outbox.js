'use strict';
// Ban changes made in this process on their way to Redis (./bans.js), in the order they were made.
// Every change goes through here: it is sent at once if nothing is in flight, else with the next
// send. A change that Redis does not take (down, restarting, a failover) stays queued and is sent
// again every RETRY_MS and as soon as the connection is ready again, so a ban made while Redis is
// away reaches the hash and every process when it returns. At most MAX_QUEUED changes wait; past
// that a change is not queued (it holds in this process only) and is counted as dropped.
//
// One send is in flight at a time, so changes reach Redis in order; a send that hangs (a paused
// server) holds the others until it ends or its connection fails.

const MAX_QUEUED = 10_000;
const RETRY_MS = 1000;
/** Changes per send. */
const BATCH = 500;

class BanOutbox {
  #items = []; // { change, resolve }
  #deliver;
  #busy = false;
  #retry = null;
  #closed = false;
  dropped = 0;
  /** Sends that did not deliver all they carried. */
  failures = 0;

  /** `deliver(changes)`: a Promise of how many of `changes`, from the first, Redis took. */
  constructor(deliver) {
    this.#deliver = deliver;
  }

  get size() {
    return this.#items.length;
  }

  /** Queues `change`: a Promise that resolves once Redis has it, or null if the queue is full. */
  push(change) {
    if (this.#closed || this.#items.length >= MAX_QUEUED) {
      this.dropped++;
      return null;
    }
    let resolve;
    const delivered = new Promise((r) => {
      resolve = r;
    });
    this.#items.push({ change, resolve });
    this.flush();
    return delivered;
  }

  /** Sends what waits, unless a send is in flight (which sends the rest when it ends). */
  flush() {
    if (this.#busy || this.#closed || this.#items.length === 0) return;
    clearTimeout(this.#retry);
    this.#retry = null;
    this.#busy = true;
    const batch = this.#items.slice(0, BATCH);
    Promise.resolve()
      .then(() => this.#deliver(batch.map((i) => i.change)))
      .catch(() => 0)
      .then((n) => {
        this.#busy = false;
        for (const item of this.#items.splice(0, n)) item.resolve();
        if (n === batch.length) this.flush();
        else {
          this.failures++;
          if (!this.#closed) this.#retry = setTimeout(() => this.flush(), RETRY_MS).unref();
        }
      });
  }

  /** Tries to send what waits for up to `ms`, then stops: what is still queued is not sent. */
  async close(ms) {
    const deadline = Date.now() + ms;
    while (this.#items.length > 0 && Date.now() < deadline) {
      this.flush();
      await new Promise((r) => setTimeout(r, 20));
    }
    this.#closed = true;
    clearTimeout(this.#retry);
  }
}

module.exports = { BanOutbox, MAX_QUEUED, RETRY_MS };
