'use strict';
// The activity file's writer on a worker thread, and its handle on the main thread. The main thread
// posts a flush's records and awaits the answer (written, committed); the worker runs one request at
// a time, in the order posted (a deleted client's history goes after every write posted before).
// Its SQLite work no longer pauses the checks, and it checkpoints the store file's WAL too (the main
// connection's automatic checkpoint is off): a checkpoint copies pages and syncs the file, and ran
// inside whichever decision batch or fold crossed the WAL's threshold.
const { Worker, isMainThread, parentPort, workerData } = require('node:worker_threads');

/** The main thread's handle: request(op, arg) resolves with the worker's answer. */
class ActivityWorker {
  constructor({ file, coreFile, checkpointMs }) {
    this.options = { file, coreFile, checkpointMs };
    this.pending = new Map(); // id → { resolve, reject }
    this.next = 1;
    this.worker = null;
    this.closed = false;
    this.#start(); // now, not at the first request: it checkpoints the store file from the start
  }

  #start() {
    const w = new Worker(__filename, { workerData: this.options });
    w.on('message', ({ id, error, value }) => {
      const p = this.pending.get(id);
      if (!p) return;
      this.pending.delete(id);
      if (error) p.reject(Object.assign(new Error(error.message), { code: error.code }));
      else p.resolve(value);
    });
    // A worker that died fails what it had (the activity writer keeps the records for its next
    // flush); the next request starts another.
    const down = (err) => {
      if (this.worker !== w) return;
      this.worker = null;
      for (const p of this.pending.values()) p.reject(err);
      this.pending.clear();
    };
    w.on('error', down);
    w.on('exit', (code) => down(new Error(`the activity worker exited (${code})`)));
    this.worker = w;
  }

  request(op, arg) {
    if (this.closed) return Promise.reject(new Error('the activity worker is closed'));
    if (!this.worker) this.#start();
    return new Promise((resolve, reject) => {
      const id = this.next++;
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ id, op, arg });
    });
  }

  async close() {
    if (this.closed || !this.worker) { this.closed = true; return; }
    await this.request('close');
    this.closed = true; // a late request must not start a worker again
    const w = this.worker;
    this.worker = null;
    await w.terminate();
  }
}

function serve() {
  const { openDatabase } = require('./sqlite-open');
  const { ActivityFile } = require('./sqlite-activity');
  const db = openDatabase(workerData.file);
  // Writable, for the checkpoints (a read-only connection cannot make one); otherwise it only reads.
  const core = openDatabase(workerData.coreFile);
  const file = new ActivityFile(db, core);
  // PASSIVE: copies what no reader still needs, never waits for (nor blocks) the decisions' writer.
  const checkpoint = core.prepare('PRAGMA wal_checkpoint(PASSIVE)');
  const timer = setInterval(() => { try { checkpoint.run(); } catch { /* busy: the next one */ } }, workerData.checkpointMs);
  const ops = {
    write: (records) => { file.write(records); return records.length; },
    prune: (options) => file.prune(options),
    forget: (key) => file.forget(key),
    close: () => { clearInterval(timer); core.close(); db.close(); },
  };
  parentPort.on('message', ({ id, op, arg }) => {
    try {
      parentPort.postMessage({ id, value: ops[op](arg) });
    } catch (err) {
      parentPort.postMessage({ id, error: { message: String(err && err.message), code: err && err.code } });
    }
  });
}

if (!isMainThread && workerData && workerData.coreFile) serve();

module.exports = { ActivityWorker };
