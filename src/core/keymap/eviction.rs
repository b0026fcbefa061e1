//! Eviction and the idle sweep: how a shard stays within its cap and drains back without timers.
//!
//! A new key in a full shard evicts, from a small clock-hand scan, the first bucket that is idle
//! (untouched for `idle_ttl_ms`) or full (a full bucket is the same as a new one, so forgetting it
//! loses nothing); failing both, the least recently touched bucket of the scan. Each insert also
//! sweeps two entries for idleness, so memory drains back without any timer. Entries are looked at
//! under their own locks (shard, then entry); a removed key's hash is computed again from its bytes.
use super::entries::Entries;
use super::entry::EntryData;
use super::shard::Shard;
use super::KeyMap;

/// The largest number of keyed buckets one eviction looks at.
const EVICT_SCAN: usize = 32;
/// Entries checked for idleness on every insert of a new key.
const SWEEP: usize = 2;
/// Positions (held or free) the sweep passes at most: bounded work whatever the gaps freed keys left.
const SWEEP_REACH: usize = 8;

fn is_idle(e: &EntryData, idle_ttl_ns: f64, now_ns: u64) -> bool {
    now_ns.saturating_sub(e.bucket.last_ns) as f64 >= idle_ttl_ns
}

impl Shard {
    fn drop_entry(&mut self, map: &KeyMap, idx: usize, e: &mut EntryData) {
        let hash = map.hasher.hash_one(e.key());
        self.remove(idx, e, hash);
    }

    /// Evicts one key: the first idle or full one in a scan of up to `EVICT_SCAN` keys from the hand,
    /// else the least recently touched one of the scan. The shard holds at least one key.
    pub(crate) fn evict(&mut self, map: &KeyMap, entries: &Entries, now_ns: u64) {
        let cfg = &map.cfg;
        let n = self.high;
        let mut oldest: Option<(u64, usize)> = None;
        let mut seen = 0;
        let start = self.hand;
        for s in 0..n {
            if seen == EVICT_SCAN {
                break;
            }
            let i = (start + s) % n;
            let Some(entry) = entries.get(i) else { continue };
            let mut e = entry.0.lock();
            if e.is_free() {
                continue;
            }
            seen += 1;
            if is_idle(&e, map.idle_ttl_ns, now_ns) || e.bucket.tokens_at(cfg.capacity, cfg.refill_per_sec, now_ns) >= cfg.capacity {
                self.hand = i + 1;
                self.drop_entry(map, i, &mut e);
                return;
            }
            if oldest.is_none_or(|(t, _)| e.bucket.last_ns < t) {
                oldest = Some((e.bucket.last_ns, i));
            }
            self.hand = i + 1;
        }
        if let Some((_, i)) = oldest {
            let mut e = entries.get(i).expect("scanned").0.lock();
            self.drop_entry(map, i, &mut e);
        }
    }

    /// Drops up to `SWEEP` idle keys at the hand: how memory drains back without timers.
    pub(crate) fn sweep(&mut self, map: &KeyMap, entries: &Entries, now_ns: u64) {
        let n = self.high;
        if self.live == 0 {
            return;
        }
        let mut looked = 0;
        let start = self.hand;
        for s in 0..n.min(SWEEP_REACH) {
            if looked == SWEEP {
                break;
            }
            let i = (start + s) % n;
            self.hand = i + 1;
            let Some(entry) = entries.get(i) else { continue };
            let mut e = entry.0.lock();
            if e.is_free() {
                continue;
            }
            looked += 1;
            if is_idle(&e, map.idle_ttl_ns, now_ns) {
                self.drop_entry(map, i, &mut e);
            }
        }
    }
}
