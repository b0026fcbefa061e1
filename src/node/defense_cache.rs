//! The native half of lib/defense's per-thread client and key caches (lib/defense/slot-cache.js).
//!
//! A repeat client costs the decision most where nothing about it changed: its address read through
//! N-API and parsed, its ban key and address keys made, the lists' tries walked, and each limit's key
//! hashed (keyed SipHash) and probed. So JS remembers, per thread, an index for each client address and
//! for each string key of a limit, and `defend` takes the index (a number) instead of the string. Here,
//! at that index: for a client, its parsed address, its ban key, its standing on the lists (with the
//! lists' generation it was read under) and, per limit that counts by address, where that key's state
//! is (`StoreSlot`); for a limit's key, its bytes and its slot.
//!
//! What stays exact:
//! - the lists: `setLists` bumps `lists_gen` while it holds the write lock; a standing read under
//!   another generation is read again (under the lock) before it is used, so a request that starts
//!   after `setLists` returned never passes on the old lists;
//! - bans are never remembered: every decision looks them up (by the remembered ban key);
//! - a slot is only a hint: the store checks the entry's placement number and looks the remembered
//!   key up again when it went stale (eviction), so an index can never reach another key's state;
//! - an index names what JS recorded under it until JS records something else there, and JS only
//!   passes an index its own map gives for the very string: both sides are this thread's alone.
//!
//! Memory: at most `CACHE_SIZE` clients and `CACHE_SIZE` keys per limit (JS empties its map when full
//! and records from index 0 again, overwriting in place); grown on demand.
use crate::core::defense::Access;
use crate::core::limit::StoreSlot;
use crate::core::net::ipkey::{client_addr, ip_key_of, IpKeyBuf, IpKeyConfig};
use std::net::IpAddr;

/// Most clients, and most keys per limit, one thread's caches index (lib/defense reads it).
pub const CACHE_SIZE: usize = 1 << 15;

/// One client address, as recorded.
pub struct Client {
    pub ip: Option<IpAddr>,
    pub ban_key: IpKeyBuf,
    /// `access` was read under lists generation `lists_gen` (0: never read; generations start at 1).
    lists_gen: u64,
    access: Access,
}

/// One limit's string key, as recorded, and where its state was.
#[derive(Default)]
pub struct Key {
    pub bytes: Vec<u8>,
    pub slot: StoreSlot,
}

pub struct Cache {
    /// Limits in the set (the stride of `client_slots`).
    limits: usize,
    clients: Vec<Client>,
    /// Per client, per limit, where its address key's state was.
    client_slots: Vec<StoreSlot>,
    keys: Vec<Vec<Key>>,
}

/// Why a record was refused.
pub enum Refused {
    /// The index is neither an existing one nor the next (or past `CACHE_SIZE`).
    Index,
}

/// A valid record index for a table of `len`: an existing entry (overwritten) or the next one.
fn record_index(at: f64, len: usize) -> Result<usize, Refused> {
    if at.fract() == 0.0 && at >= 0.0 && (at as usize) <= len && (at as usize) < CACHE_SIZE {
        Ok(at as usize)
    } else {
        Err(Refused::Index)
    }
}

impl Cache {
    pub fn new(limits: usize) -> Cache {
        Cache { limits, clients: Vec::new(), client_slots: Vec::new(), keys: (0..limits).map(|_| Vec::new()).collect() }
    }

    /// Records the client whose address text is `input` at index `at`; its standing is read later.
    pub fn record_client(&mut self, at: f64, input: &[u8], ban_ip: &IpKeyConfig) -> Result<usize, Refused> {
        let i = record_index(at, self.clients.len())?;
        let ip = client_addr(input);
        let mut ban_key = IpKeyBuf::default();
        ip_key_of(ip, ban_ip, &mut ban_key);
        let c = Client { ip, ban_key, lists_gen: 0, access: Access::Neutral };
        let n = self.limits;
        if i == self.clients.len() {
            self.clients.push(c);
            self.client_slots.resize(self.clients.len() * n, StoreSlot::default());
        } else {
            self.clients[i] = c;
            self.client_slots[i * n..(i + 1) * n].fill(StoreSlot::default());
        }
        Ok(i)
    }

    /// The client recorded at `at`, if `at` is one.
    pub fn client_index(&self, at: f64) -> Option<usize> {
        (at.fract() == 0.0 && at >= 0.0 && (at as usize) < self.clients.len()).then_some(at as usize)
    }

    pub fn client(&self, i: usize) -> &Client {
        &self.clients[i]
    }

    /// Client `i`'s standing on the lists in force: remembered while `gen` (read by the caller from
    /// the lists' generation) is the generation it was read under, else `read(ip)`: the standing and
    /// the generation, both read under the lists' lock.
    pub fn access(&mut self, i: usize, gen: u64, read: impl FnOnce(Option<IpAddr>) -> (Access, u64)) -> Access {
        let c = &mut self.clients[i];
        if c.lists_gen == gen {
            return c.access;
        }
        let (a, now_gen) = read(c.ip);
        c.lists_gen = now_gen;
        c.access = a;
        a
    }

    /// Where client `i`'s key of limit `l` was.
    pub fn client_slot(&self, i: usize, l: usize) -> StoreSlot {
        self.client_slots[i * self.limits + l]
    }

    pub fn set_client_slot(&mut self, i: usize, l: usize, s: StoreSlot) {
        self.client_slots[i * self.limits + l] = s;
    }

    /// Records `bytes` as limit `l`'s key at index `at`.
    pub fn record_key(&mut self, l: usize, at: f64, bytes: &[u8]) -> Result<usize, Refused> {
        let keys = &mut self.keys[l];
        let i = record_index(at, keys.len())?;
        if i == keys.len() {
            keys.push(Key::default());
        }
        let k = &mut keys[i];
        k.bytes.clear();
        k.bytes.extend_from_slice(bytes);
        k.slot = StoreSlot::default();
        Ok(i)
    }

    /// Limit `l`'s key recorded at `at`, if `at` is one.
    pub fn key_index(&self, l: usize, at: f64) -> Option<usize> {
        (at.fract() == 0.0 && at >= 0.0 && (at as usize) < self.keys[l].len()).then_some(at as usize)
    }

    pub fn key(&self, l: usize, i: usize) -> &Key {
        &self.keys[l][i]
    }

    pub fn set_key_slot(&mut self, l: usize, i: usize, s: StoreSlot) {
        self.keys[l][i].slot = s;
    }
}
