'use strict';
// A hand-sized bulkhead: what a user writes (or gets from cockatiel's bulkhead / p-limit) around a
// downstream call once they know its size: at most `limit` calls at once, up to `maxQueue` more wait
// in arrival order (FIFO, no tiers), and a call beyond that is refused at once. The benchmark's
// "hand-tuned" configuration sets limit to the pool size (bench:downstream).
//
//   const bh = bulkhead({ limit: 4, maxQueue: 4 });
//   const rows = await bh.run(() => pool.query(sql));   // rejects with err.code 'BULKHEAD_FULL'
class BulkheadFull extends Error {
  constructor() {
    super('bulkhead full');
    this.code = 'BULKHEAD_FULL';
  }
}

function bulkhead({ limit, maxQueue = 0 }) {
  if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`bulkhead: limit must be a whole number >= 1, got ${limit}`);
  if (!Number.isInteger(maxQueue) || maxQueue < 0) throw new RangeError(`bulkhead: maxQueue must be a whole number >= 0, got ${maxQueue}`);
  let active = 0;
  const waiting = []; // resolve functions, oldest first
  let maxActive = 0;
  const release = () => {
    const next = waiting.shift();
    if (next) next(); // the slot passes straight to the oldest waiter
    else active--;
  };
  return {
    /** Runs `fn` (returns a promise) when a slot is free; rejects BulkheadFull when the queue is full too. */
    async run(fn) {
      if (active < limit) active++;
      else if (waiting.length < maxQueue) await new Promise((resolve) => waiting.push(resolve));
      else throw new BulkheadFull();
      maxActive = Math.max(maxActive, active);
      try {
        return await fn();
      } finally {
        release();
      }
    },
    stats: () => ({ limit, active, queued: waiting.length, maxActive }),
  };
}

module.exports = { bulkhead, BulkheadFull };
