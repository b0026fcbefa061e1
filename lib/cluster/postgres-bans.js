'use strict';
// The ban channel (./bans.js) over PostgreSQL: the few Redis commands it sends, on the PostgreSQL
// store's pool, so that the channel itself (outbox, signatures, tombstones, reloads) is one code for
// both stores. Its hash is a table (field -> entry) and its pub/sub is LISTEN/NOTIFY:
//   hgetall, hset, eval(DELETE_IF_UNCHANGED) -> SELECT, upsert, DELETE … WHERE entry = the one read;
//   publish -> pg_notify; duplicate() -> a subscriber that LISTENs on one connection of its own.
// Each statement is bounded by the store's timeoutMs, like a lease batch. A NOTIFY payload holds
// at most 8000 bytes: a longer message (long allow/deny lists) is sent as RELOAD, on which every
// subscriber reloads the table, where the change already is. A subscriber whose connection fails
// listens again every RETRY_MS, then reloads ('ready', as a Redis subscriber that reconnected).
const { EventEmitter } = require('node:events');
const { DELETE_IF_UNCHANGED } = require('./bans');

const MAX_PAYLOAD = 7999;
const RELOAD = '\u0001reload';
const RETRY_MS = 1000;

class PostgresBanClient extends EventEmitter {
  #store;
  /** The last write: writes run one after another, in the order sent, as on Redis's one connection
   * (a change's NOTIFY must not reach a process that then reloads the table before the change is in it). */
  #writes = Promise.resolve();

  /** `store`: a PostgresStore (its pool, names and timeout). */
  constructor(store) {
    super();
    this.#store = store;
  }

  async hgetall() {
    await this.#store.open();
    const { rows } = await this.#store.query(`SELECT field, entry FROM ${this.#store.names.bans}`);
    return Object.fromEntries(rows.map((r) => [r.field, r.entry]));
  }

  hset(hash, field, entry) {
    return this.#inOrder(async () => {
      await this.#store.open();
      await this.#store.query(`INSERT INTO ${this.#store.names.bans} (field, entry) VALUES ($1, $2) ON CONFLICT (field) DO UPDATE SET entry = EXCLUDED.entry`, [field, entry]);
    });
  }

  async eval(script, numKeys, hash, field, entry) {
    if (script !== DELETE_IF_UNCHANGED) throw new Error('tiergate: the PostgreSQL ban table runs no other script');
    return (await this.#store.query(`DELETE FROM ${this.#store.names.bans} WHERE field = $1 AND entry = $2`, [field, entry])).rowCount;
  }

  publish(channel, text) {
    return this.#inOrder(() => this.#store.query('SELECT pg_notify($1, $2)', [this.#store.names.channel, Buffer.byteLength(text) > MAX_PAYLOAD ? RELOAD : text]));
  }

  #inOrder(write) {
    const done = this.#writes.then(write);
    this.#writes = done.catch(() => {});
    return done;
  }

  duplicate() {
    return new Subscriber(this.#store);
  }
}

class Subscriber extends EventEmitter {
  #store;
  #conn = null;
  #closed = false;
  #retry = null;
  #as = null;

  constructor(store) {
    super();
    this.#store = store;
  }

  /** LISTENs (on a connection held for it); resolves once listening. Messages come as `channel`'s (the ban channel's name; the NOTIFY channel is the store's). */
  async subscribe(channel = this.#as) {
    this.#as = channel;
    await this.#store.open();
    const c = await this.#store.pool.connect();
    try {
      await c.query(`LISTEN ${this.#store.names.channel}`);
    } catch (err) {
      c.release(err);
      throw err;
    }
    if (this.#closed) {
      c.release(true);
      return;
    }
    this.#conn = c;
    const listened = this.#store.names.channel;
    c.on('notification', (n) => {
      if (n.channel !== listened) return;
      if (n.payload === RELOAD) this.emit('ready');
      else this.emit('message', channel, n.payload);
    });
    // A connection lost is a subscription lost: listen again, then reload what was missed.
    const lost = () => this.#lost(c);
    c.on('error', lost);
    c.on('end', lost);
  }

  #lost(c) {
    if (this.#conn !== c) return;
    this.#conn = null;
    c.release(true);
    this.#again();
  }

  #again() {
    if (this.#closed || this.#retry !== null) return;
    this.#retry = setTimeout(() => {
      this.#retry = null;
      this.subscribe().then(() => this.emit('ready'), () => this.#again());
    }, RETRY_MS).unref();
  }

  /** Resolves once the listening connection answers. */
  async ping() {
    if (this.#conn === null) throw new Error('tiergate: not listening');
    await this.#conn.query('SELECT 1');
  }

  disconnect() {
    this.#closed = true;
    clearTimeout(this.#retry);
    const c = this.#conn;
    this.#conn = null;
    if (c !== null) c.release(true);
  }
}

module.exports = { PostgresBanClient };
