//! The reference store: the semantics the Redis Lua script and the SQL transactions implement,
//! as a plain struct (not a model of Redis: of what any store must do atomically per key; see
//! `wire`). Integer tokens; time is the store's own clock.
use crate::core::bucket::Bucket;
use crate::core::quota::{Grant, LeaseId};
use std::collections::HashMap;

#[derive(Clone, Copy, Debug)]
pub enum StoreAlg {
    Bucket {
        rate_per_sec: f64,
        burst: f64,
    },
    /// `limit` per fixed window; leases end with their window and are named by it.
    Fixed {
        limit: u64,
        window_ns: u64,
    },
    /// At most `limit` in any span of `window_ns`: a lease occupies the window from its grant until
    /// its expiry plus one window.
    Sliding {
        limit: u64,
        window_ns: u64,
    },
}

struct Record {
    id: u64,
    tokens: u64,
    occupied_until: u64,
}

#[derive(Default)]
struct KeyState {
    bucket: Option<Bucket>,
    window: u64,
    used: u64,
    records: Vec<Record>,
    /// Holder → when its latest lease expires.
    holders: HashMap<u64, u64>,
}

pub struct Store {
    pub alg: StoreAlg,
    keys: HashMap<Vec<u8>, KeyState>,
    next_lease: u64,
    /// Fixed windows: (key, window) → tokens debited (net of credited returns) when it closed.
    pub closed: HashMap<(Vec<u8>, u64), u64>,
}

impl Store {
    pub fn new(alg: StoreAlg) -> Store {
        Store { alg, keys: HashMap::new(), next_lease: 1, closed: HashMap::new() }
    }

    /// The store loses everything (a restart without persistence).
    pub fn restart(&mut self) {
        self.close_all();
        self.keys.clear();
    }

    /// Records every open fixed window as closed (at the end of a run, or a restart).
    pub fn close_all(&mut self) {
        if let StoreAlg::Fixed { .. } = self.alg {
            for (k, s) in &self.keys {
                *self.closed.entry((k.clone(), s.window)).or_default() += s.used;
            }
        }
    }

    fn state(&mut self, key: &[u8], now: u64) -> &mut KeyState {
        let alg = self.alg;
        let s = self.keys.entry(key.to_vec()).or_default();
        s.holders.retain(|_, &mut exp| exp > now);
        match alg {
            StoreAlg::Bucket { rate_per_sec, burst } => {
                s.bucket.get_or_insert(Bucket::full(burst, now)).refill(burst, rate_per_sec, now);
            }
            StoreAlg::Fixed { window_ns, .. } => {
                // A clock behind the window counted in (a step back) counts in that window.
                let w = now / window_ns;
                if w > s.window {
                    if s.used > 0 || s.window > 0 {
                        *self.closed.entry((key.to_vec(), s.window)).or_default() += s.used;
                    }
                    s.window = w;
                    s.used = 0;
                }
            }
            StoreAlg::Sliding { .. } => s.records.retain(|r| r.occupied_until > now && r.tokens > 0),
        }
        s
    }

    /// Handles one lease request of `holder` atomically.
    pub fn request(&mut self, holder: u64, key: &[u8], size: u64, ttl_ns: u64, now: u64) -> Grant {
        let alg = self.alg;
        let lease_seq = self.next_lease;
        let s = self.state(key, now);
        let (granted, remaining, ttl_ns, lease, retry_after_ns) = match alg {
            StoreAlg::Bucket { rate_per_sec, .. } => {
                let b = s.bucket.as_mut().unwrap();
                let granted = size.min(b.tokens.floor() as u64);
                b.tokens -= granted as f64;
                let remaining = b.tokens.floor() as u64;
                let retry = if remaining == 0 && rate_per_sec > 0.0 { ((1.0 - b.tokens) / rate_per_sec * 1e9).ceil() as u64 } else { 0 };
                (granted, remaining, ttl_ns, lease_seq, retry)
            }
            StoreAlg::Fixed { limit, window_ns } => {
                let granted = size.min(limit - s.used);
                s.used += granted;
                let end = (s.window + 1) * window_ns;
                let remaining = limit - s.used;
                (granted, remaining, ttl_ns.min(end - now), s.window, if remaining == 0 { end - now } else { 0 })
            }
            StoreAlg::Sliding { limit, window_ns } => {
                let used: u64 = s.records.iter().map(|r| r.tokens).sum();
                let granted = size.min(limit - used);
                if granted > 0 {
                    s.records.push(Record { id: lease_seq, tokens: granted, occupied_until: now + ttl_ns + window_ns });
                }
                let remaining = limit - used - granted;
                let retry = s.records.iter().map(|r| r.occupied_until - now).min().unwrap_or(0);
                (granted, remaining, ttl_ns, lease_seq, if remaining == 0 { retry } else { 0 })
            }
        };
        if granted > 0 {
            let exp = s.holders.entry(holder).or_default();
            *exp = (*exp).max(now + ttl_ns);
        }
        let holders = s.holders.len() as u32 + u32::from(!s.holders.contains_key(&holder));
        self.next_lease += 1;
        Grant { granted, ttl_ns, remaining, holders, lease: LeaseId(lease), retry_after_ns }
    }

    /// Applies a return; the tokens credited back (a return for a window that is over, or a lease
    /// the store no longer tracks, credits nothing). `idle_ns`: how long before `now` the lease was
    /// last spent from (`None`: never), which ends a sliding window's record one window after it.
    pub fn give_back(&mut self, key: &[u8], lease: LeaseId, tokens: u64, idle_ns: Option<u64>, now: u64) -> u64 {
        let alg = self.alg;
        let s = self.state(key, now);
        match alg {
            StoreAlg::Bucket { burst, .. } => {
                let b = s.bucket.as_mut().unwrap();
                let before = b.tokens;
                b.tokens = (b.tokens + tokens as f64).min(burst);
                (b.tokens - before).round() as u64
            }
            StoreAlg::Fixed { .. } => {
                if lease.0 != s.window {
                    return 0;
                }
                let c = tokens.min(s.used);
                s.used -= c;
                c
            }
            StoreAlg::Sliding { window_ns, .. } => match s.records.iter_mut().find(|r| r.id == lease.0) {
                Some(r) => {
                    let c = tokens.min(r.tokens);
                    r.tokens -= c;
                    if let Some(idle) = idle_ns {
                        r.occupied_until = r.occupied_until.min(now.saturating_sub(idle) + window_ns);
                    }
                    c
                }
                None => 0,
            },
        }
    }

    /// A holder's `released` return (its process shutting down, `release_all`): it holds nothing of
    /// `key` any more. The engine's `Return` does not name its holder; the driver adds it
    /// (lib/quota/driver.js) and the Lua script and the SQL stores forget the holder.
    pub fn release_holder(&mut self, key: &[u8], holder: u64, now: u64) {
        self.state(key, now).holders.remove(&holder);
    }

    /// Holders of `key` with a lease unexpired at `now`.
    pub fn holders(&mut self, key: &[u8], now: u64) -> Vec<u64> {
        let mut h: Vec<u64> = self.state(key, now).holders.keys().copied().collect();
        h.sort();
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_fixed_window_debits_at_grant_and_ends_leases_with_the_window() {
        let mut s = Store::new(StoreAlg::Fixed { limit: 10, window_ns: 1000 * MS });
        let g = s.request(1, b"k", 6, 5000 * MS, 200 * MS);
        assert_eq!((g.granted, g.remaining, g.ttl_ns, g.lease, g.holders), (6, 4, 800 * MS, LeaseId(0), 1));
        let g = s.request(2, b"k", 6, 5000 * MS, 300 * MS);
        assert_eq!((g.granted, g.remaining, g.retry_after_ns, g.holders), (4, 0, 700 * MS, 2));
        assert_eq!(s.give_back(b"k", LeaseId(0), 3, None, 400 * MS), 3);
        assert_eq!(s.request(1, b"k", 5, 5000 * MS, 500 * MS).granted, 3);
        assert_eq!(s.give_back(b"k", LeaseId(0), 3, None, 1100 * MS), 0, "that window is over");
        assert_eq!(s.closed[&(b"k".to_vec(), 0)], 10);
        assert_eq!(s.holders(b"k", 1100 * MS), Vec::<u64>::new(), "leases ended with the window");
    }

    #[test]
    fn a_sliding_window_counts_a_lease_until_its_expiry_plus_a_window() {
        let mut s = Store::new(StoreAlg::Sliding { limit: 10, window_ns: 1000 * MS });
        let g = s.request(1, b"k", 10, 100 * MS, 0);
        assert_eq!((g.granted, g.remaining, g.retry_after_ns), (10, 0, 1100 * MS));
        assert_eq!(s.request(1, b"k", 1, 100 * MS, 1099 * MS).granted, 0);
        assert_eq!(s.give_back(b"k", g.lease, 4, Some(0), 1099 * MS), 4, "unspent tokens leave the window");
        assert_eq!(s.request(1, b"k", 9, 100 * MS, 1099 * MS).granted, 4);
        assert_eq!(s.request(1, b"k", 9, 100 * MS, 1100 * MS).granted, 6);
    }

    #[test]
    fn a_sliding_windows_spent_lease_leaves_the_window_one_window_after_its_last_spend() {
        let mut s = Store::new(StoreAlg::Sliding { limit: 10, window_ns: 1000 * MS });
        let g = s.request(1, b"k", 10, 10_000 * MS, 0);
        assert_eq!((g.granted, g.retry_after_ns), (10, 11_000 * MS), "until told otherwise: TTL + window");
        // All spent by 30 ms; the return says so 20 ms later.
        assert_eq!(s.give_back(b"k", g.lease, 0, Some(20 * MS), 50 * MS), 0);
        assert_eq!(s.request(2, b"k", 1, 100 * MS, 1029 * MS).granted, 0, "the spends still count at 1029 ms");
        assert_eq!(s.request(2, b"k", 10, 100 * MS, 1030 * MS).granted, 10, "one window after the last spend");
    }

    #[test]
    fn a_bucket_debits_what_it_holds_and_credits_returns_up_to_the_burst() {
        let mut s = Store::new(StoreAlg::Bucket { rate_per_sec: 10.0, burst: 5.0 });
        let g = s.request(1, b"k", 8, 1000 * MS, 0);
        assert_eq!((g.granted, g.remaining, g.retry_after_ns), (5, 0, 100 * MS));
        assert_eq!(s.give_back(b"k", g.lease, 2, None, 0), 2);
        assert_eq!(s.give_back(b"k", g.lease, 9, None, 0), 3, "capped at the burst");
        assert_eq!(s.request(1, b"k", 8, 1000 * MS, 100 * MS).granted, 5);
    }
}
