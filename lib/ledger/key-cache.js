'use strict';
// The JS half of the Ledger's keyed `tryConsume` (lib/ledger/index.js attaches it): a per-thread cache from
// key to the native slot of its bucket, so that a repeated key is debited without being read through
// N-API or hashed natively (src/node/ledger.rs: tryConsumeKeyed, tryConsumeSlot).

/** Keys cached per tier at most (and never more than the tier's maxKeys): the cache's memory bound. */
const KEY_CACHE_SIZE = 1 << 16;
/**
 * A cache that filled up with less than one hit per key is then not used for this long (ms), doubled
 * each time that repeats, up to KEY_CACHE_BYPASS_MAX_MS.
 */
const KEY_CACHE_BYPASS_MS = 1000;
const KEY_CACHE_BYPASS_MAX_MS = 64_000;
/** Longer keys are not cached (they are rare, and each would hold its string in the cache). */
const KEY_CACHE_MAX_LENGTH = 128;

// `tryConsume(tier, key?, cost = 1) -> boolean`. A keyed call reads the key through N-API and hashes it
// natively (~45 ns here, more than a JS Map's whole debit). Instead, this thread remembers per keyed
// tier, in a JS Map (V8 caches every string's hash), an index under which the native side recorded
// where the key's bucket sits (`tryConsumeKeyed`), and debits by that index (`tryConsumeSlot`: numbers
// only). The native state and its locking are untouched, so accounting stays exact across threads;
// an evicted, moved or reset bucket is detected natively (null) and the key looked up again. The cache
// is emptied when full, so a flood of unique keys cannot grow it. Anything else — a tier-only call, a
// tier without per-key buckets, an unusual cost or any invalid argument — goes to the raw native
// `tryConsume`, which checks and throws exactly as before.
//
// Keys that do not recur (a flood of unique keys, or more keys in turn than the cache holds) would
// make every call pay for a cache insert (and V8's hashing of the key) on top of the native lookup, and
// promote every key string to the old generation. So when a cache fills up having served fewer hits
// than it holds keys, it is emptied and set aside for a while (an unref'd timer puts it back): its
// tier's keyed calls go straight to the raw native function meanwhile, as they did before the cache.
function keyedTryConsume(raw, ids, maxKeys, tierSpan) {
  const { tryConsume: plain, tryConsumeKeyed, tryConsumeSlot, slotArgs, slotHits } = raw;
  const caches = maxKeys.map((n) => (n > 0 ? new Map() : undefined)); // undefined: not used (now)
  const limits = maxKeys.map((n) => Math.min(n, KEY_CACHE_SIZE));
  const bypassMs = maxKeys.map(() => KEY_CACHE_BYPASS_MS);

  // A key not in the cache (`code` undefined), or whose slot went stale. Kept out of `tryConsume` so
  // that V8 inlines the hit path into callers (it refuses functions over 460 bytes of bytecode).
  function miss(id, cache, key, cost, code) {
    if (code !== undefined) return tryConsumeKeyed(id, key, cost, (code - id) / tierSpan); // same index
    if (key.length > KEY_CACHE_MAX_LENGTH) return tryConsumeKeyed(id, key, cost, -1); // -1: records nothing
    if (cache.size >= limits[id]) {
      cache.clear();
      const paid = slotHits[id] >= limits[id];
      slotHits[id] = 0;
      if (!paid) {
        caches[id] = undefined;
        setTimeout(() => { caches[id] = cache; }, bypassMs[id]).unref();
        bypassMs[id] = Math.min(2 * bypassMs[id], KEY_CACHE_BYPASS_MAX_MS);
        return tryConsumeKeyed(id, key, cost, -1);
      }
      bypassMs[id] = KEY_CACHE_BYPASS_MS;
    }
    const i = cache.size;
    const allowed = tryConsumeKeyed(id, key, cost, i); // throws as tryConsume would: nothing cached
    cache.set(key, i * tierSpan + id);
    return allowed;
  }

  // The tier name last looked up, and its id: callers name the same tier call after call, and comparing
  // the same string object is a pointer compare, cheaper than a Map lookup of the name.
  let lastName = null;
  let lastId;
  function idOf(name) {
    if (name === lastName) return lastId;
    const id = ids.get(name);
    if (id !== undefined) {
      lastName = name;
      lastId = id;
    }
    return id;
  }

  return function tryConsume(tier, key, cost) {
    if (typeof key === 'string' && (cost === undefined || (typeof cost === 'number' && cost >= 0 && cost < Infinity))) {
      const id = typeof tier === 'number' ? tier : typeof tier === 'string' ? idOf(tier) : undefined;
      const cache = id === undefined ? undefined : caches[id];
      if (cache !== undefined) {
        const c = cost === undefined ? 1 : cost;
        const code = cache.get(key); // index * tierSpan + tier
        if (code !== undefined) {
          slotArgs[0] = code;
          slotArgs[1] = c;
          tryConsumeSlot();
          const outcome = slotArgs[2]; // 1 allowed, 0 refused, -1 stale
          if (outcome >= 0) return outcome === 1;
        }
        return miss(id, cache, key, c, code);
      }
    }
    // As many arguments as given: the native side skips reading absent ones. A known tier name goes as
    // its id (a number reads faster than a string); anything else as given, for the native checks.
    if (key === undefined && cost === undefined) return plain(typeof tier === 'string' ? idOf(tier) ?? tier : tier);
    return plain(tier, key, cost);
  };
}

module.exports = { keyedTryConsume, KEY_CACHE_SIZE, KEY_CACHE_MAX_LENGTH, KEY_CACHE_BYPASS_MS, KEY_CACHE_BYPASS_MAX_MS };
