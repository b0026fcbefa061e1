//! The fair-share backstop: when a global limit (a tier's pool) runs low, it refuses the heaviest
//! clients first instead of whoever arrives.
//!
//! Every request that reaches the pool while it is short is counted by its client address and its
//! subnet (`usage.rs`: requests in the last `windowMs`, in fixed memory, keyed with the process's
//! seeded hash: the subnet's, and the address's derived from it, `within`). A client's share is
//! its usage divided by the fair share (the window's demand per active client);
//! a subnet's the same among subnets, so a crawler spread over a /24 is one heavy client once its
//! addresses together are over the subnets' fair share. The request's share is the larger of the two.
//!
//! While the pool holds at least `reserve` of its budget (capacity × the shed controller's scale),
//! everyone is admitted as before. Below it, a request is admitted only if its share is at most
//! `maxShare × tokens / (reserve × budget)`: the threshold falls from `maxShare` fair shares at the
//! top of the reserve to 0 at an empty pool, so as the pool drains the heaviest clients are refused
//! first, and the pool's last tokens go to clients that have sent nothing in the window. A new
//! address has no usage yet, so a crawler rotating over hundreds of them is light for its first
//! requests on each; the threshold's fall is what keeps those from draining the pool.
//!
//! "Short" (`TRACK_WINDOWS`): below the level halfway from the reserve to full, and for two windows
//! after. The backstop costs a comparison per request until a pool runs low, and its counts then
//! describe the traffic that is draining it.
//!
//! A pool can also be full while the server is not: when the work the pool admits is more than the
//! loop can run (a global limit set near the capacity, CPU-heavy routes), requests queue in the loop
//! and the pool never sees it. So the loop's lag counts too: at `load` = lag / `lagMs` above 1, the
//! pool is taken to hold at most `reserve / load` of its budget, so the threshold starts at
//! `maxShare / load` fair shares and falls as the lag grows.
use super::usage::UsageSketch;
use crate::core::keymap::KeyHasher;
use crate::core::ledger::{js_number, ConfigError};
use crate::core::net::ipkey::{ip_bits, IpKeyConfig};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The options as a JS user writes them (`fairShare: { .. }`); `Default` holds the defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct FairShareSpec {
    /// The share of the pool's budget below which clients are ranked (0 < reserve <= 1).
    pub reserve: f64,
    /// The window usage is counted over.
    pub window_ms: f64,
    /// The share admitted at the top of the reserve (fair shares).
    pub max_share: f64,
    /// The subnet's (IPv4, IPv6) prefix lengths; `None`: addresses only.
    pub subnet: Option<(u32, u32)>,
    /// Cells per row of each sketch (a power of two).
    pub slots: f64,
    /// The loop lag above which the pool counts as short (0: the pool's level only).
    pub lag_ms: f64,
}

impl Default for FairShareSpec {
    fn default() -> Self {
        FairShareSpec { reserve: 0.5, window_ms: 1000.0, max_share: 4.0, subnet: Some((24, 48)), slots: 4096.0, lag_ms: 50.0 }
    }
}

/// Requests are counted while the pool is below the level halfway from its reserve to full, and for
/// this many windows after it last was: a pool that is not short pays nothing per request for the
/// backstop, and one that becomes short has a window of usage to rank by before its reserve is reached
/// (a crawl that drains a pool takes it past that level first).
const TRACK_WINDOWS: u64 = 2;

/// The tracking level (a share of the budget) for `reserve`.
fn tracking_level(reserve: f64) -> f64 {
    reserve + (1.0 - reserve) / 2.0
}

pub const MAX_SLOTS: f64 = (1u64 << 20) as f64;
const MIN_SLOTS: f64 = 16.0;
const MAX_WINDOW_MS: f64 = 3_600_000.0;
const MAX_LAG_MS: f64 = 60_000.0;

#[derive(Clone, Debug, PartialEq)]
pub struct FairShareConfig {
    pub reserve: f64,
    pub window_ns: u64,
    pub max_share: f64,
    pub subnet: Option<IpKeyConfig>,
    pub slots: usize,
    pub lag_ms: f64,
}

impl FairShareSpec {
    /// Checks every field, naming it under `path` (`fairShare.reserve`).
    pub fn validate(&self, path: &str) -> Result<FairShareConfig, ConfigError> {
        let bad = |field: &str, what: &str, v: f64| Err(ConfigError(format!("{path}.{field} must be {what} (got {})", js_number(v))));
        if !(self.reserve.is_finite() && self.reserve > 0.0 && self.reserve <= 1.0) {
            return bad("reserve", "a finite number > 0 and at most 1", self.reserve);
        }
        if !(self.window_ms.is_finite() && self.window_ms >= 1.0 && self.window_ms <= MAX_WINDOW_MS) {
            return bad("windowMs", "a finite number from 1 to 3600000", self.window_ms);
        }
        if !(self.max_share.is_finite() && self.max_share >= 1.0 && self.max_share <= 1000.0) {
            return bad("maxShare", "a finite number from 1 to 1000", self.max_share);
        }
        if !(self.slots >= MIN_SLOTS && self.slots <= MAX_SLOTS && self.slots.fract() == 0.0 && (self.slots as u64).is_power_of_two()) {
            return bad("slots", "a power of two from 16 to 1048576", self.slots);
        }
        if !(self.lag_ms.is_finite() && (0.0..=MAX_LAG_MS).contains(&self.lag_ms)) {
            return bad("lagMs", "a finite number from 0 to 60000", self.lag_ms);
        }
        let subnet = match self.subnet {
            None => None,
            Some((v4, v6)) => {
                let (Ok(a), Ok(b)) = (u8::try_from(v4), u8::try_from(v6)) else {
                    return Err(ConfigError(format!("{path}.subnet: prefixes must be 0..32 and 0..128")));
                };
                Some(IpKeyConfig::new(a, b).map_err(|e| ConfigError(format!("{path}.subnet: {e}")))?)
            }
        };
        Ok(FairShareConfig {
            reserve: self.reserve,
            window_ns: (self.window_ms * 1e6).round() as u64,
            max_share: self.max_share,
            subnet,
            slots: self.slots as usize,
            lag_ms: self.lag_ms,
        })
    }
}

pub struct FairShare {
    cfg: FairShareConfig,
    /// What an address is counted by (the gatekeeper's prefixes, as the ban key).
    addr: IpKeyConfig,
    hasher: KeyHasher,
    clients: UsageSketch,
    subnets: Option<UsageSketch>,
    refused: AtomicU64,
    /// The share of the budget below which requests are counted (`TRACK_WINDOWS` more windows after).
    track: f64,
    tracking_until: AtomicU64,
    /// Tests: hash an IPv4 key by its address bits, so that counts are exact (no shared cells).
    #[cfg(test)]
    exact: bool,
}

impl FairShare {
    pub fn new(cfg: FairShareConfig, addr: IpKeyConfig) -> FairShare {
        let subnets = cfg.subnet.map(|_| UsageSketch::new(cfg.slots));
        let track = tracking_level(cfg.reserve);
        FairShare {
            clients: UsageSketch::new(cfg.slots),
            subnets,
            cfg,
            addr,
            hasher: KeyHasher::process(),
            refused: AtomicU64::new(0),
            track,
            tracking_until: AtomicU64::new(0),
            #[cfg(test)]
            exact: false,
        }
    }

    pub fn config(&self) -> &FairShareConfig {
        &self.cfg
    }

    /// Notes a request of the client at `ip` (`None`: an unusable address, all such counted as one
    /// client) at `now_ns`; returns its share (fair shares it had used before this request).
    #[inline]
    pub fn note(&self, ip: Option<IpAddr>, now_ns: u64) -> f64 {
        let w = self.cfg.window_ns;
        let (epoch, weight) = (now_ns / w, 1.0 - (now_ns % w) as f64 / w as f64);
        let addr = ip_bits(ip, &self.addr);
        let (Some(sketch), Some(cfg)) = (&self.subnets, &self.cfg.subnet) else {
            return self.clients.note(self.hash(addr), epoch, weight).share();
        };
        let h = self.hash(ip_bits(ip, cfg));
        let share = sketch.note(h, epoch, weight).share();
        share.max(self.clients.note(self.within(h, addr), epoch, weight).share())
    }

    #[inline(always)]
    fn hash(&self, bits: u128) -> u64 {
        #[cfg(test)]
        if self.exact {
            let a = bits as u32 as u64;
            return a << 32 | a;
        }
        self.hasher.hash_u128(bits)
    }

    /// An address's hash from its subnet's keyed hash and its own bits (one keyed hash per request
    /// instead of two): the subnet's hash is the secret part, so a client cannot place its cells on
    /// those of another subnet's clients; the address bits are mixed into it by a bijective
    /// finaliser, so the addresses of one subnet spread over the cells.
    #[inline(always)]
    fn within(&self, subnet_hash: u64, addr: u128) -> u64 {
        #[cfg(test)]
        if self.exact {
            return self.hash(addr);
        }
        mix(mix(subnet_hash ^ addr as u64) ^ (addr >> 64) as u64)
    }

    /// Whether a request of `share` may take a token from a pool holding `tokens` of its `budget`
    /// (module notes).
    #[inline]
    pub fn admits_share(&self, share: f64, tokens: f64, budget: f64) -> bool {
        let reserve = self.cfg.reserve * budget;
        tokens >= reserve || share * reserve <= self.cfg.max_share * tokens
    }

    /// The loop's load for `admits`: its lag (`lag_ms`) over `lagMs`, 0 when that part is off.
    #[inline]
    pub fn load(&self, lag_ms: f64) -> f64 {
        if self.cfg.lag_ms > 0.0 {
            lag_ms / self.cfg.lag_ms
        } else {
            0.0
        }
    }

    /// Whether the request of the client at `ip` at `now_ns` may take a token from a pool holding
    /// `tokens` of its `budget` while the loop is at `load` (`load()`): counted (`note`) while
    /// tracking, then `admits_share`. `share` keeps the request's share between calls for one
    /// request (the gate may ask twice: with the pool's level as last seen, then as it is now), so
    /// that it is counted once.
    #[inline]
    pub fn admits(&self, ip: Option<IpAddr>, now_ns: u64, tokens: f64, budget: f64, load: f64, share: &mut Option<f64>) -> bool {
        // A loop over its lag counts as a pool at reserve / load (module notes).
        let tokens = if load > 1.0 { tokens.min(self.cfg.reserve * budget / load) } else { tokens };
        let s = match *share {
            Some(s) => s,
            None => {
                if tokens < self.track * budget {
                    self.tracking_until.store(now_ns.saturating_add(TRACK_WINDOWS * self.cfg.window_ns), Relaxed);
                } else if now_ns >= self.tracking_until.load(Relaxed) {
                    // Not tracking: the pool is above the tracking level, so above its reserve.
                    return true;
                }
                *share.insert(self.note(ip, now_ns))
            }
        };
        self.admits_share(s, tokens, budget)
    }

    /// Counts a request refused for its share.
    pub fn count_refusal(&self) {
        self.refused.store(self.refused.load(Relaxed) + 1, Relaxed);
    }

    /// Requests refused for their share so far.
    pub fn refused(&self) -> u64 {
        self.refused.load(Relaxed)
    }

    /// Bytes held (fixed at construction).
    pub fn bytes(&self) -> usize {
        self.clients.bytes() + self.subnets.as_ref().map_or(0, UsageSketch::bytes)
    }
}

/// SplitMix64's finaliser: a bijection of u64 whose output bits each depend on every input bit.
#[inline(always)]
fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// Exact counts: IPv4 addresses that differ in their low 20 bits never share a cell.
    fn fair(spec: FairShareSpec) -> FairShare {
        let spec = FairShareSpec { slots: MAX_SLOTS, ..spec };
        FairShare { exact: true, ..FairShare::new(spec.validate("fairShare").unwrap(), IpKeyConfig::new(32, 56).unwrap()) }
    }

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn options_are_checked_by_name() {
        let err = |f: fn(&mut FairShareSpec)| {
            let mut s = FairShareSpec::default();
            f(&mut s);
            s.validate("fairShare").unwrap_err().0
        };
        assert_eq!(err(|s| s.reserve = 0.0), "fairShare.reserve must be a finite number > 0 and at most 1 (got 0)");
        assert_eq!(err(|s| s.reserve = f64::NAN), "fairShare.reserve must be a finite number > 0 and at most 1 (got NaN)");
        assert_eq!(err(|s| s.window_ms = f64::INFINITY), "fairShare.windowMs must be a finite number from 1 to 3600000 (got Infinity)");
        assert_eq!(err(|s| s.max_share = 0.5), "fairShare.maxShare must be a finite number from 1 to 1000 (got 0.5)");
        assert_eq!(err(|s| s.slots = 1000.0), "fairShare.slots must be a power of two from 16 to 1048576 (got 1000)");
        assert_eq!(err(|s| s.slots = -16.0), "fairShare.slots must be a power of two from 16 to 1048576 (got -16)");
        assert_eq!(err(|s| s.lag_ms = -1.0), "fairShare.lagMs must be a finite number from 0 to 60000 (got -1)");
        assert_eq!(err(|s| s.lag_ms = f64::NAN), "fairShare.lagMs must be a finite number from 0 to 60000 (got NaN)");
        assert_eq!(err(|s| s.subnet = Some((33, 48))), "fairShare.subnet: ipv4Prefix must be an integer in 0..32");
        let c = FairShareSpec::default().validate("fairShare").unwrap();
        assert_eq!((c.window_ns, c.slots, c.subnet.map(|s| (s.ipv4_prefix, s.ipv6_prefix))), (1000 * MS, 4096, Some((24, 48))));
        // Memory is fixed: two sketches of 2 × 4096 cells of 8 bytes.
        let f = FairShare::new(c, IpKeyConfig::new(32, 56).unwrap());
        assert!(f.bytes() >= 2 * 2 * 4096 * 8 && f.bytes() < 2 * 2 * 4096 * 8 + 512);
    }

    #[test]
    fn the_threshold_falls_from_max_share_at_the_reserve_to_zero_at_an_empty_pool() {
        let f = fair(FairShareSpec::default());
        // Budget 100, reserve 50: above it everyone; at 25 tokens up to 2 fair shares; at 0 only 0.
        assert!(f.admits_share(1e9, 50.0, 100.0));
        assert!(f.admits_share(2.0, 25.0, 100.0));
        assert!(!f.admits_share(2.01, 25.0, 100.0));
        assert!(f.admits_share(0.0, 0.0, 100.0));
        assert!(!f.admits_share(0.01, 0.0, 100.0));
        f.count_refusal();
        assert_eq!(f.refused(), 1);
        // A throttled pool (budget = capacity × scale) keeps its reserve of what it may hold.
        assert!(f.admits_share(1e9, 5.0, 10.0));
    }

    /// A crawler rotating over 100 addresses, a new light client after every second of its requests,
    /// all within one window (exact counts): an address's share grows with each round, a light
    /// client's stays 0.
    #[test]
    fn rotating_addresses_become_heavy_and_light_clients_stay_light() {
        let f = fair(FairShareSpec { subnet: None, ..FairShareSpec::default() });
        let mut t = 0;
        for round in 0..6u32 {
            for i in 0..100u32 {
                t += MS;
                let s = f.note(ip(&format!("45.0.{i}.9")), t);
                // Demand so far: 100 per round and 50 light ones, this round's share; active: 100 (or
                // i + 1 in the first round) and every light client so far.
                let demand = f64::from(150 * round + i + 1 + i.div_ceil(2));
                let active = f64::from(if round == 0 { i + 1 } else { 100 } + 50 * round + i.div_ceil(2));
                assert_eq!(s, f64::from(round) / (demand / active), "round {round}, address {i}");
                if i % 2 == 0 {
                    assert_eq!(f.note(ip(&format!("81.{round}.{i}.17")), t), 0.0);
                }
            }
        }
        // After 6 rounds: 6 requests of 900 from 400 clients, 2.67 fair shares.
        assert_eq!(f.note(ip("45.0.0.9"), t), 6.0 / (901.0 / 400.0));
    }

    /// 254 addresses of one /24, each as new as a user, together one heavy subnet.
    #[test]
    fn a_subnet_whose_addresses_together_exceed_the_subnets_share_is_heavy() {
        let f = fair(FairShareSpec::default());
        let mut t = 0;
        for i in 0..254u32 {
            t += MS;
            // One legitimate user between two crawler requests, each in a /24 of its own (200 of them).
            f.note(ip(&format!("81.1.{}.17", i % 200)), t);
            let s = f.note(ip(&format!("203.0.113.{}", 1 + i)), t);
            // The /24 has sent i before; subnets: demand 2(i + 1), active ones the users' and this one.
            let active = f64::from((i + 1).min(200) + 1);
            assert_eq!(s, f64::from(i) / (f64::from(2 * (i + 1)) / active), "address {i}");
        }
        // Each address alone is new: only the subnet makes it heavy.
        let alone = fair(FairShareSpec { subnet: None, ..FairShareSpec::default() });
        assert!((0..254u32).all(|i| alone.note(ip(&format!("203.0.113.{}", 1 + i)), u64::from(i) * MS) == 0.0));
        // A user seen twice: 2 of 509 requests from 454 addresses, the larger of its two shares.
        assert_eq!(f.note(ip("81.1.7.17"), t), 2.0 / (509.0 / 454.0));
    }

    #[test]
    fn usage_is_forgotten_after_the_window() {
        let f = fair(FairShareSpec { subnet: None, ..FairShareSpec::default() });
        for i in 0..50 {
            f.note(ip("45.0.0.9"), i * MS);
        }
        f.note(ip("81.0.0.1"), 60 * MS);
        assert!(f.note(ip("45.0.0.9"), 100 * MS) > 1.5);
        // Two windows later it starts from nothing.
        assert_eq!(f.note(ip("45.0.0.9"), 2100 * MS), 0.0);
        // Addresses that do not parse count as one client.
        f.note(None, 2100 * MS);
        assert!(f.note(None, 2101 * MS) > 0.0);
    }

    /// With the keyed hash (not the tests' exact one): the addresses of one /24, whose subnet key
    /// is one, get hashes of their own that spread over a row's cells like random ones.
    #[test]
    fn with_the_keyed_hash_a_subnets_addresses_spread_over_the_cells() {
        let f = FairShare::new(FairShareSpec::default().validate("fairShare").unwrap(), IpKeyConfig::new(32, 56).unwrap());
        let sub = IpKeyConfig::new(24, 48).unwrap();
        let mut cells = std::collections::HashSet::new();
        let mut hashes = std::collections::HashSet::new();
        for i in 0..254u32 {
            let a = ip(&format!("203.0.113.{}", 1 + i));
            let x = f.within(f.hash(ip_bits(a, &sub)), ip_bits(a, &f.addr));
            hashes.insert(x);
            cells.insert((x & 4095, (x >> 32) & 4095));
        }
        assert_eq!(hashes.len(), 254);
        // 254 random keys in 4096 × 4096 cell pairs: a shared pair has a chance of ~0.2%.
        assert!(cells.len() >= 253, "{} distinct cell pairs", cells.len());
    }

    /// Requests are counted only while the pool is below 75% of its budget (reserve 0.5) and for two
    /// windows after; one request is counted once however often the gate asks.
    #[test]
    fn requests_are_counted_while_the_pool_is_short_and_two_windows_after() {
        let f = fair(FairShareSpec { subnet: None, ..FairShareSpec::default() });
        let a = ip("45.0.0.9");
        let ask = |t: u64, tokens: f64| {
            let mut share = None;
            let ok = f.admits(a, t, tokens, 100.0, 0.0, &mut share);
            (ok, share)
        };
        // A full pool: admitted, nothing counted.
        assert_eq!(ask(0, 80.0), (true, None));
        assert_eq!(ask(MS, 76.0), (true, None));
        // Below 75: counted from here on, for two windows (2 s) after the last time it was.
        assert_eq!(ask(2 * MS, 74.0), (true, Some(0.0)));
        // Its second request: 1 before it, of 2 from 1 client.
        assert_eq!(ask(3 * MS, 90.0), (true, Some(0.5)));
        assert!(ask(2002 * MS - 1, 90.0).1.is_some());
        assert_eq!(ask(2002 * MS, 90.0), (true, None));
        // Asked twice for one request: counted once.
        let mut share = None;
        assert!(f.admits(a, 2003 * MS, 10.0, 100.0, 0.0, &mut share));
        let first = share;
        f.admits(a, 2003 * MS, 10.0, 100.0, 0.0, &mut share);
        assert_eq!(share, first);
        // Epoch 2 holds its requests at 2002 ms and 2003 ms (once): 2 before this one, of 3.
        assert_eq!(f.note(a, 2003 * MS), 2.0 / 3.0);
    }

    /// A full pool on a lagging loop: at lag = 2 × lagMs the pool counts as at a quarter of its
    /// budget (reserve 0.5 / 2), so requests are counted and a client over 2 fair shares is refused;
    /// at or under lagMs, or with lagMs 0, the full pool admits everyone and counts nothing.
    #[test]
    fn a_lagging_loop_ranks_clients_whatever_the_pool_holds() {
        let f = fair(FairShareSpec { subnet: None, ..FairShareSpec::default() });
        assert_eq!((f.load(100.0), f.load(50.0)), (2.0, 1.0));
        let (heavy, light) = (ip("45.0.0.9"), ip("81.0.0.1"));
        let ask = |a, t: u64, load: f64| {
            let mut share = None;
            let ok = f.admits(a, t, 100.0, 100.0, load, &mut share);
            (ok, share)
        };
        // Not lagging: nothing counted.
        assert_eq!(ask(heavy, 0, 1.0), (true, None));
        // Lagging: counted; 5 from the heavy client, then 1 from the light one (of 6 from 2 clients).
        for i in 0..5 {
            assert!(ask(heavy, (1 + i) * MS, 2.0).0);
        }
        assert_eq!(ask(light, 6 * MS, 2.0), (true, Some(0.0)));
        // The heavy one has sent 5 of 7 (this one counted) from 2 clients: 1.43 fair shares, under
        // 2: admitted; then 6 of 8, 1.5, over the threshold of 4/3 at a lag of 3 × lagMs: refused.
        assert_eq!(ask(heavy, 7 * MS, 2.0), (true, Some(5.0 / (7.0 / 2.0))));
        assert_eq!(ask(heavy, 8 * MS, 3.0), (false, Some(6.0 / (8.0 / 2.0))));
        // The light client: 1 of 9, 0.22 fair shares.
        assert!(ask(light, 9 * MS, 3.0).0);
        // lagMs 0: the lag is not looked at.
        let off = fair(FairShareSpec { subnet: None, lag_ms: 0.0, ..FairShareSpec::default() });
        assert_eq!(off.load(1e6), 0.0);
    }
}
