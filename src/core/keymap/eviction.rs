//! The key map's eviction preference (`keystore::Eviction`) and its use of the clock hand.
//!
//! A bucket can go for free when it is idle (untouched for `idle_ttl_ms`) or full (a full bucket is the
//! same as a new one, so forgetting it loses nothing); else the least recently touched of the scan
//! goes. The sweep drops idle buckets. Entries are looked at under their own locks (shard, then
//! entry); a removed key's hash is computed again from its bytes.
use super::entries::Entries;
use super::entry::EntryData;
use super::shard::Shard;
use super::KeyMap;
use crate::core::keystore::{Eviction, Look};

/// A ledger tier's buckets at `now_ns`.
struct Buckets<'a> {
    map: &'a KeyMap,
    now_ns: u64,
}

impl Buckets<'_> {
    fn is_idle(&self, e: &EntryData) -> bool {
        self.now_ns.saturating_sub(e.bucket.last_ns) as f64 >= self.map.idle_ttl_ns
    }
}

impl Eviction<EntryData> for Buckets<'_> {
    fn look(&self, e: &EntryData) -> Look {
        let cfg = &self.map.cfg;
        if self.is_idle(e) || e.bucket.tokens_at(cfg.capacity, cfg.refill_per_sec, self.now_ns) >= cfg.capacity {
            Look::Take
        } else {
            Look::Keep(e.bucket.last_ns)
        }
    }

    fn sweepable(&self, e: &EntryData) -> bool {
        self.is_idle(e)
    }
}

impl Shard {
    fn drop_entry(&mut self, map: &KeyMap, idx: usize, e: &mut EntryData) {
        let hash = map.hasher.hash_one(e.key());
        self.remove(idx, e, hash);
    }

    /// Evicts one key (`Clock::victim` under `Buckets`). The shard holds at least one key. A bucket
    /// that can go for free is dropped under the lock the scan took; the oldest is locked again.
    pub(crate) fn evict(&mut self, map: &KeyMap, entries: &Entries, now_ns: u64) {
        let policy = Buckets { map, now_ns };
        let (mut clock, n) = (self.clock, self.index.high());
        let mut taken = false;
        let victim = clock.victim(n, |i| {
            let mut e = entries.get(i)?.0.lock();
            if e.is_free() {
                return None;
            }
            let look = policy.look(&e);
            if look == Look::Take {
                self.drop_entry(map, i, &mut e);
                taken = true;
            }
            Some(look)
        });
        self.clock = clock;
        if let (Some(i), false) = (victim, taken) {
            let mut e = entries.get(i).expect("scanned").0.lock();
            self.drop_entry(map, i, &mut e);
        }
    }

    /// Drops up to `SWEEP` idle keys at the hand: how memory drains back without timers.
    pub(crate) fn sweep(&mut self, map: &KeyMap, entries: &Entries, now_ns: u64) {
        if self.index.live() == 0 {
            return;
        }
        let policy = Buckets { map, now_ns };
        let (mut clock, n) = (self.clock, self.index.high());
        clock.sweep(n, |i| {
            let Some(entry) = entries.get(i) else { return false };
            let mut e = entry.0.lock();
            if e.is_free() {
                return false;
            }
            if policy.sweepable(&e) {
                self.drop_entry(map, i, &mut e);
            }
            true
        });
        self.clock = clock;
    }
}
