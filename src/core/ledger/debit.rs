//! The debits: a keyed one under the key's entry lock (key bucket and tier, both or neither), a
//! tier-only one from the thread's stripe, and the coarse-then-precise clock retry.
use super::tier::Tier;
use super::{Ledger, Limit, Outcome};
use crate::core::bucket::Bucket;
use crate::core::keymap::{EntryData, KeyMap, Slot};
use std::cell::Cell;

impl Ledger {
    /// The keyed debit, under the lock of the key's entry `e` (at `now_ns`): the key's bucket and the
    /// tier (from this thread's stripe, or the pool), both or neither.
    #[inline(always)]
    pub(crate) fn debit_entry<const DETAIL: bool, const SHARED: bool>(t: &Tier, map: &KeyMap, e: &mut EntryData, cost: f64, now_ns: u64) -> Outcome {
        let cfg = &map.cfg;
        let kb = &mut e.bucket;
        kb.refill(cfg.capacity, cfg.refill_per_sec, now_ns);
        let mut out = Outcome { allowed: false, limited_by: Limit::Key, remaining: kb.tokens, limit: cfg.capacity, retry_after_ms: 0.0, reset_ms: 0.0 };
        if cost > cfg.capacity || kb.tokens < cost {
            out.retry_after_ms = kb.wait_ms(cost, cfg.capacity, cfg.refill_per_sec);
        } else {
            match t.debit_from::<SHARED>(cost, || now_ns) {
                Ok(()) => {
                    kb.tokens -= cost;
                    out.allowed = true;
                    out.limited_by = Limit::None;
                    out.remaining = kb.tokens;
                }
                Err(retry) => {
                    out.limited_by = Limit::Tier;
                    out.retry_after_ms = retry;
                }
            }
        }
        if DETAIL {
            out.reset_ms = kb.reset_ms(cfg.capacity, cfg.refill_per_sec);
        }
        out
    }

    /// A keyed debit by key: the key's entry found (or inserted) under its shard's lock, then debited
    /// under its own. Returns the slot that names the entry.
    #[inline(always)]
    pub(crate) fn debit_key<const DETAIL: bool>(t: &Tier, map: &KeyMap, hash: u64, key: &[u8], cost: f64, now: impl FnOnce() -> u64) -> (Outcome, Slot) {
        let (mut e, slot, now_ns) = map.entry(hash, key, now);
        (Self::debit_entry::<DETAIL, true>(t, map, &mut e, cost, now_ns), slot)
    }

    #[inline(always)]
    pub(crate) fn debit<const DETAIL: bool>(&self, tier: usize, key: Option<&[u8]>, cost: f64, now: impl Fn() -> u64) -> Outcome {
        let t = &self.tiers[tier];
        match (key, &t.keys) {
            (Some(key), Some(map)) => {
                let hash = map.hasher.hash_one(key);
                Self::debit_key::<DETAIL>(t, map, hash, key, cost, now).0
            }
            _ => {
                // The time, read at most once and only if needed.
                let seen = Cell::new(None);
                let clock = || {
                    *seen.get().get_or_insert_with(|| {
                        let v = now();
                        seen.set(Some(v));
                        v
                    })
                };
                let (allowed, retry_after_ms) = match t.debit(cost, clock) {
                    Ok(()) => (true, 0.0),
                    Err(retry) => (false, retry),
                };
                let mut out = Outcome {
                    allowed,
                    limited_by: if allowed { Limit::None } else { Limit::Tier },
                    remaining: 0.0,
                    limit: t.capacity,
                    retry_after_ms,
                    reset_ms: 0.0,
                };
                if DETAIL {
                    let now_ns = clock();
                    let (tokens, rate) = t.view(now_ns);
                    out.remaining = tokens;
                    out.reset_ms = Bucket { tokens, last_ns: now_ns }.reset_ms(t.capacity, rate);
                }
                out
            }
        }
    }
}
