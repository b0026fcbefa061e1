//! The ban table: bans by key and by CIDR prefix, strike rules that ban automatically with
//! escalation and jitter, and bounded memory.
//!
//! - Lookups (every request that reached the ban step) read an atomic count first: with no bans at all
//!   they take no lock. Otherwise one lock, one keyed-hash probe, and for CIDR bans one trie walk.
//! - Bounded: at most `max_bans`, on the keystore (`core::keystore::Slab`: keyed hash, capped slots
//!   reused). Making room takes expired bans first, then the temporary ban closest
//!   to its end (it loses the least ban time; with equal durations that is the oldest). A permanent ban
//!   is never dropped to make room: when only permanent bans remain, a new ban is refused, counted
//!   (`BanStats::refused`) and reported (`BanEventKind::Refused`). This order is exact (an index of
//!   temporary bans by end time), not the keystore's sampled clock hand: a scan of a few bans would
//!   drop one with more ban time left than another it did not look at.
//! - Rules make at most `MAX_PERMANENT_SHARE` of `max_bans` permanent: past that, a rule's permanent
//!   ban is given as the longest temporary one (`maxBanMs`) instead. Otherwise a botnet that keeps
//!   earning bans could fill the table with permanent ones, after which no new ban could be added at
//!   all. Operators' permanent bans are theirs to make and are not capped.
//! - Expiry needs no timer: a lookup ignores an expired ban, and every change (and `sweep`, which
//!   the binding may call from a timer to publish `Expired` events) removes the expired ones.
//! - Every change is returned as events (`events: &mut Vec<BanEvent>`), for the binding to publish.
//!   Re-adding a ban that is already there reports only if it got longer, so a cluster node that
//!   imports what another published does not publish it back.
//! - Lifting a ban (an operator's act) forgets its key's or prefix's strikes and offence history too,
//!   so that a lifted permanent ban is not re-imposed by the next strike.
use super::ban::{Ban, BanEvent, BanEventKind, BanHit, BanSource, BanStats, BanTarget};
use super::cidr::{Addr, Cidr};
use super::rng::SplitMix64;
use super::rules::{BanConfig, StrikeKind};
use super::strikes::Strikes;
use super::trie::{PrefixTrie, TrieBuilder};
use crate::core::keystore::{KeyHasher, Slab};
use parking_lot::Mutex;
use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The share of `max_bans` that rule bans may fill with permanent ones (module notes).
pub const MAX_PERMANENT_SHARE: f64 = 0.5;

/// A ban was not added: the table is at `max_bans` and every ban in it is permanent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BanTableFull;

pub(super) struct BanState {
    hasher: KeyHasher,
    /// Every ban, indexed by the keyed hash of its key (a prefix's: of `Cidr::strike_key`).
    bans: Slab<Ban>,
    /// The prefix bans' ids (for the trie).
    cidr_ids: Vec<u32>,
    trie: PrefixTrie<u32>,
    trie_dirty: bool,
    /// Temporary bans by end time: the next to expire, and the one to evict, come first.
    expiry: BTreeSet<(u64, u32)>,
    pub(super) rng: SplitMix64,
    pub(super) stats: BanStats,
}

pub struct BanTable {
    pub(super) cfg: BanConfig,
    pub(super) state: Mutex<BanState>,
    /// Bans held (expired ones included until swept): lets a lookup skip the lock when there are none.
    held: AtomicUsize,
    strikes: Strikes,
}

impl BanState {
    fn ban(&self, id: u32) -> &Ban {
        self.bans.get(id)
    }

    fn hash(&self, target: &BanTarget) -> u64 {
        match target {
            BanTarget::Key(k) => self.hasher.hash_one(k),
            BanTarget::Cidr(c) => self.hasher.hash_one(&c.strike_key()),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.bans.len()
    }

    fn find(&self, target: &BanTarget) -> Option<u32> {
        self.bans.find(self.hash(target), |b| b.target == *target)
    }

    fn insert(&mut self, ban: Ban) -> u32 {
        let hash = self.hash(&ban.target);
        let (until, is_cidr) = (ban.until_ns, matches!(ban.target, BanTarget::Cidr(_)));
        let id = self.bans.insert(hash, ban);
        if is_cidr {
            self.cidr_ids.push(id);
            self.trie_dirty = true;
        }
        if let Some(u) = until {
            self.expiry.insert((u, id));
        }
        id
    }

    fn remove(&mut self, id: u32) -> Ban {
        let ban = self.bans.remove(id);
        if let BanTarget::Cidr(_) = ban.target {
            self.cidr_ids.retain(|&i| i != id);
            self.trie_dirty = true;
        }
        if let Some(u) = ban.until_ns {
            self.expiry.remove(&(u, id));
        }
        ban
    }

    pub(super) fn sweep(&mut self, now_ns: u64, events: &mut Vec<BanEvent>) {
        while let Some(&(until, id)) = self.expiry.first() {
            if until > now_ns {
                break;
            }
            let ban = self.remove(id);
            self.stats.expired += 1;
            events.push(BanEvent { kind: BanEventKind::Expired, ban });
        }
    }

    /// Adds `ban`, or lengthens the ban already on its target (the longer end wins, by more than
    /// `slack_ns`; permanent is longest). See the module notes for what happens at the cap.
    pub(super) fn upsert(&mut self, ban: Ban, now_ns: u64, slack_ns: u64, events: &mut Vec<BanEvent>) -> Result<(), BanTableFull> {
        self.sweep(now_ns, events);
        if let Some(id) = self.find(&ban.target) {
            let old = self.ban(id).until_ns;
            let longer = match (old, ban.until_ns) {
                (None, _) => false,
                (Some(_), None) => true,
                (Some(a), Some(b)) => b > a.saturating_add(slack_ns),
            };
            if !longer {
                return Ok(());
            }
            if let Some(u) = old {
                self.expiry.remove(&(u, id));
            }
            if let Some(u) = ban.until_ns {
                self.expiry.insert((u, id));
            }
            let held = self.bans.get_mut(id);
            *held = Ban { since_ns: held.since_ns.min(ban.since_ns), offense: held.offense.max(ban.offense), ..ban };
            let added = held.clone();
            self.stats.added += 1;
            events.push(BanEvent { kind: BanEventKind::Added, ban: added });
            return Ok(());
        }
        if self.bans.is_full() {
            match self.expiry.first() {
                Some(&(_, id)) => {
                    let gone = self.remove(id);
                    self.stats.evicted += 1;
                    events.push(BanEvent { kind: BanEventKind::Evicted, ban: gone });
                }
                None => {
                    self.stats.refused += 1;
                    events.push(BanEvent { kind: BanEventKind::Refused, ban });
                    return Err(BanTableFull);
                }
            }
        }
        self.stats.added += 1;
        events.push(BanEvent { kind: BanEventKind::Added, ban: ban.clone() });
        self.insert(ban);
        Ok(())
    }

    fn lookup(&mut self, key: &[u8], addr: Option<Addr>, now_ns: u64) -> Option<BanHit> {
        if !key.is_empty() {
            let hit = self.bans.find(self.hasher.hash_one(key), |b| matches!(&b.target, BanTarget::Key(k) if **k == *key));
            if let Some(id) = hit {
                let b = self.ban(id);
                if b.is_live(now_ns) {
                    return Some(BanHit { reason: b.reason.clone(), until_ns: b.until_ns, by_cidr: false });
                }
            }
        }
        let addr = addr?;
        if self.cidr_ids.is_empty() {
            return None;
        }
        if self.trie_dirty {
            let mut t = TrieBuilder::new();
            for &id in &self.cidr_ids {
                if let BanTarget::Cidr(c) = self.ban(id).target {
                    t.insert(c, id);
                }
            }
            self.trie = t.build();
            self.trie_dirty = false;
        }
        let id = *self.trie.lookup_addr(addr)?;
        let b = if self.ban(id).is_live(now_ns) {
            self.ban(id)
        } else {
            // The most specific prefix has expired (not yet swept): a wider live one may still cover.
            let mut wider = self.cidr_ids.iter().map(|&i| self.ban(i)).filter(|b| b.is_live(now_ns));
            wider.find(|b| matches!(b.target, BanTarget::Cidr(c) if c.contains(addr)))?
        };
        Some(BanHit { reason: b.reason.clone(), until_ns: b.until_ns, by_cidr: true })
    }

    /// Slots ever handed out (freed ones are reused): the most bans held at once.
    #[cfg(test)]
    pub(super) fn slots_used(&self) -> usize {
        self.bans.positions()
    }

    pub(super) fn live(&self, now_ns: u64) -> impl Iterator<Item = &Ban> {
        self.bans.iter().map(|(_, b)| b).filter(move |b| b.is_live(now_ns))
    }
}

impl BanTable {
    /// A table over a validated configuration (`BanSpec::validate`); `seed` drives the jitter
    /// (`rng::random_seed()` in production, a constant in tests).
    pub fn new(cfg: BanConfig, seed: u64) -> BanTable {
        let strikes = Strikes::new(cfg.rules.clone(), cfg.max_tracked);
        let state = BanState {
            hasher: KeyHasher::process(),
            bans: Slab::new(cfg.max_bans),
            cidr_ids: Vec::new(),
            trie: PrefixTrie::default(),
            trie_dirty: false,
            expiry: BTreeSet::new(),
            rng: SplitMix64::new(seed),
            stats: BanStats::default(),
        };
        BanTable { cfg, state: Mutex::new(state), held: AtomicUsize::new(0), strikes }
    }

    pub fn config(&self) -> &BanConfig {
        &self.cfg
    }

    pub(super) fn note_len(&self, st: &BanState) {
        self.held.store(st.len(), Ordering::Release);
    }

    /// Whether the request is banned: by its key (`key`, empty for none) or by a prefix containing its
    /// address (`ip`).
    #[inline]
    pub fn lookup(&self, key: &[u8], ip: Option<IpAddr>, now_ns: u64) -> Option<BanHit> {
        if self.held.load(Ordering::Acquire) == 0 {
            return None;
        }
        self.state.lock().lookup(key, ip.map(Addr::of), now_ns)
    }

    /// Counts a strike of `kind` against `key`; when a rule fires, bans the key (escalated, jittered)
    /// and returns the ban. The events of the change go to `events`.
    pub fn record(&self, key: &[u8], kind: StrikeKind, now_ns: u64, events: &mut Vec<BanEvent>) -> Option<Ban> {
        self.record_on(key, || BanTarget::Key(key.into()), kind, now_ns, events)
    }

    /// Counts a strike of `kind` against a whole prefix (under `Cidr::strike_key`); when a rule fires,
    /// bans the prefix (a CIDR ban), escalated and jittered like a key's.
    pub fn record_cidr(&self, cidr: Cidr, kind: StrikeKind, now_ns: u64, events: &mut Vec<BanEvent>) -> Option<Ban> {
        self.record_on(&cidr.strike_key(), || BanTarget::Cidr(cidr), kind, now_ns, events)
    }

    fn record_on(&self, key: &[u8], target: impl FnOnce() -> BanTarget, kind: StrikeKind, now_ns: u64, events: &mut Vec<BanEvent>) -> Option<Ban> {
        let fired = self.strikes.record(key, kind, now_ns)?;
        let rule = &self.strikes.rules()[fired.rule];
        let mut st = self.state.lock();
        let mut until_ns = self.cfg.escalation.duration_ns(rule.ban_ns, fired.offense, &mut st.rng).map(|d| now_ns.saturating_add(d));
        let permanent_held = st.len() - st.expiry.len();
        if until_ns.is_none() && permanent_held as f64 >= self.cfg.max_bans as f64 * MAX_PERMANENT_SHARE {
            until_ns = Some(now_ns.saturating_add(self.cfg.escalation.max_ns));
        }
        let ban = Ban { target: target(), reason: rule.name.clone(), since_ns: now_ns, until_ns, offense: fired.offense, source: BanSource::Rule };
        let added = st.upsert(ban.clone(), now_ns, 0, events);
        self.note_len(&st);
        drop(st);
        added.ok()?;
        self.strikes.remember(key, fired.offense, until_ns, self.cfg.escalation.memory_ns, now_ns);
        Some(ban)
    }

    pub(super) fn remember(&self, key: &[u8], offense: u32, until_ns: Option<u64>, now_ns: u64) {
        self.strikes.remember(key, offense, until_ns, self.cfg.escalation.memory_ns, now_ns);
    }

    /// Clears `key`'s strikes and ignores its strikes until `until_ns` (a valid challenge pass).
    pub fn clear_strikes(&self, key: &[u8], until_ns: u64, now_ns: u64) {
        self.strikes.clear_until(key, until_ns, now_ns);
    }

    /// Live strikes of `key` under rule `rule` (an index into the configuration's rules).
    pub fn strikes(&self, key: &[u8], rule: usize, now_ns: u64) -> usize {
        self.strikes.count(key, rule, now_ns)
    }

    /// Live strikes of `key` under all rules together.
    pub fn live_strikes(&self, key: &[u8], now_ns: u64) -> usize {
        self.strikes.total(key, now_ns)
    }

    /// Keys whose strikes are tracked now (at most `max_tracked`).
    pub fn tracked(&self) -> usize {
        self.strikes.len()
    }

    /// An operator's ban: for `duration_ns` (`None`: permanent), exactly (no jitter).
    pub fn ban(&self, target: BanTarget, reason: &str, duration_ns: Option<u64>, now_ns: u64, events: &mut Vec<BanEvent>) -> Result<(), BanTableFull> {
        let ban = Ban {
            target,
            reason: Arc::from(reason),
            since_ns: now_ns,
            until_ns: duration_ns.map(|d| now_ns.saturating_add(d)),
            offense: 0,
            source: BanSource::Operator,
        };
        let mut st = self.state.lock();
        let r = st.upsert(ban, now_ns, 0, events);
        self.note_len(&st);
        r
    }

    /// An operator lifts the ban on `target` (and forgets its strikes and history).
    pub fn lift(&self, target: &BanTarget, now_ns: u64, events: &mut Vec<BanEvent>) -> bool {
        let mut st = self.state.lock();
        st.sweep(now_ns, events);
        let found = st.find(target).map(|id| st.remove(id));
        let lifted = found.is_some();
        if let Some(ban) = found {
            st.stats.lifted += 1;
            events.push(BanEvent { kind: BanEventKind::Lifted, ban });
        }
        self.note_len(&st);
        drop(st);
        match target {
            BanTarget::Key(k) => self.strikes.forget(k),
            BanTarget::Cidr(c) => self.strikes.forget(&c.strike_key()),
        }
        lifted
    }

    /// Removes expired bans (reporting them).
    pub fn sweep(&self, now_ns: u64, events: &mut Vec<BanEvent>) {
        let mut st = self.state.lock();
        st.sweep(now_ns, events);
        self.note_len(&st);
    }

    /// The live bans (unordered).
    pub fn list(&self, now_ns: u64) -> Vec<Ban> {
        self.state.lock().live(now_ns).cloned().collect()
    }

    pub fn get(&self, target: &BanTarget, now_ns: u64) -> Option<Ban> {
        let st = self.state.lock();
        st.find(target).map(|id| st.ban(id)).filter(|b| b.is_live(now_ns)).cloned()
    }

    /// Bans held (expired ones until swept).
    pub fn len(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn stats(&self) -> BanStats {
        self.state.lock().stats
    }
}
