'use strict';
// The JS half of the abuse defense's per-thread caches (src/node/defense_cache.rs): from a client
// address, or a limit's string key, to the index the native side recorded it under, so that a repeat
// client crosses N-API with small numbers instead of strings, and its address is not parsed, its lists
// standing not looked up again (while the lists are unchanged) and its keys not hashed.
//
// An index is claimed on a miss (`claim`) and written into the native `record` array; only once the
// call that records it returned is it remembered (`remember`), so a call that threw leaves nothing
// behind. Bounded as the ledger's key cache (lib/ledger/key-cache.js), with its constants: at most
// `size` entries, emptied when full (indices then start again at 0, the native side overwriting in
// place), and set aside for a while when it filled up with fewer hits than entries (a flood of unique
// keys would otherwise pay a cache insert per request for nothing).
const { KEY_CACHE_BYPASS_MS, KEY_CACHE_BYPASS_MAX_MS, KEY_CACHE_MAX_LENGTH } = require('../ledger/key-cache');

class SlotCache {
  #map = new Map();
  #size;
  #hits = 0;
  #off = false;
  #bypassMs = KEY_CACHE_BYPASS_MS;

  constructor(size) {
    this.#size = size;
  }

  /** The index `key` was recorded under, or undefined. */
  get(key) {
    const i = this.#map.get(key);
    if (i !== undefined) this.#hits++;
    return i;
  }

  /** The index to record `key` under (emptying a full cache first), or -1 not to record it. */
  claim(key) {
    if (this.#off || key.length > KEY_CACHE_MAX_LENGTH) return -1;
    const map = this.#map;
    if (map.size >= this.#size) {
      const paid = this.#hits >= map.size;
      map.clear();
      this.#hits = 0;
      if (!paid) {
        this.#off = true;
        setTimeout(() => { this.#off = false; }, this.#bypassMs).unref();
        this.#bypassMs = Math.min(2 * this.#bypassMs, KEY_CACHE_BYPASS_MAX_MS);
        return -1;
      }
      this.#bypassMs = KEY_CACHE_BYPASS_MS;
    }
    return map.size;
  }

  /** Remembers `key` at `index` (from claim), once the native call recorded it. */
  remember(key, index) {
    this.#map.set(key, index);
  }

  get size() {
    return this.#map.size;
  }
}

module.exports = { SlotCache };
