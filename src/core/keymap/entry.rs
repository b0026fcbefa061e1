//! One key's entry: its bucket and its key, behind the entry's own lock, on a cache line of its own.
//!
//! A debit by slot takes only this lock (no shard lock), so a hit writes no line that a debit of
//! another key uses. Keys up to `INLINE_KEY` bytes are stored inline (IPv4/IPv6 prefixes, short ids):
//! comparing one is comparing a fixed-size array on the line already read; longer keys live on the heap.
use crate::core::bucket::Bucket;
use crate::core::sync::Mutex;

pub(crate) const INLINE_KEY: usize = 24;
/// `EntryData::len` of an entry whose key is on the heap.
const HEAP: u8 = 254;
/// `EntryData::len` of an entry that holds no key (never used, or removed).
const FREE: u8 = 255;

#[repr(align(64))]
pub(crate) struct Entry(pub(crate) Mutex<EntryData>);

pub(crate) struct EntryData {
    pub(crate) bucket: Bucket,
    /// A thin pointer (8 bytes, not a 16-byte slice pointer), so the entry fits one cache line.
    heap: Option<Box<Box<[u8]>>>,
    /// Stamped on every placement of a key here (`Slot`).
    pub(crate) gen: u32,
    /// Bits 48.. of the key's hash: with `gen`, what a slot must match.
    pub(crate) tag: u16,
    /// The inline key's length, or `HEAP`, or `FREE`.
    len: u8,
    inline: [u8; INLINE_KEY],
}

/// A key being looked up, zero-padded once per call so it compares with stored keys as one array.
pub(crate) struct Probe<'a> {
    key: &'a [u8],
    padded: [u8; INLINE_KEY],
}

impl<'a> Probe<'a> {
    #[inline]
    pub(crate) fn new(key: &'a [u8]) -> Probe<'a> {
        let mut padded = [0u8; INLINE_KEY];
        if key.len() <= INLINE_KEY {
            padded[..key.len()].copy_from_slice(key);
        }
        Probe { key, padded }
    }
}

/// The part of a hash an entry keeps (`EntryData::tag`).
#[inline]
pub(crate) fn tag_of(hash: u64) -> u16 {
    (hash >> 48) as u16
}

impl Entry {
    pub(crate) fn free() -> Entry {
        Entry(Mutex::new(EntryData { bucket: Bucket::full(0.0, 0), heap: None, gen: 0, tag: 0, len: FREE, inline: [0; INLINE_KEY] }))
    }
}

impl EntryData {
    pub(crate) fn is_free(&self) -> bool {
        self.len == FREE
    }

    /// Places `key` here with a full bucket and generation `gen`.
    pub(crate) fn place(&mut self, key: &[u8], hash: u64, gen: u32, bucket: Bucket) {
        let probe = Probe::new(key);
        self.inline = probe.padded;
        self.len = if key.len() <= INLINE_KEY { key.len() as u8 } else { HEAP };
        self.heap = (key.len() > INLINE_KEY).then(|| Box::new(key.into()));
        self.gen = gen;
        self.tag = tag_of(hash);
        self.bucket = bucket;
    }

    /// Empties the entry (`gen`: a fresh generation, so that slots naming it go stale).
    pub(crate) fn clear(&mut self, gen: u32) {
        self.len = FREE;
        self.heap = None;
        self.gen = gen;
    }

    /// The key held (empty for a free entry).
    pub(crate) fn key(&self) -> &[u8] {
        match self.len {
            FREE => &[],
            HEAP => self.heap.as_deref().map_or(&[], |b| &**b),
            n => &self.inline[..n as usize],
        }
    }

    #[inline]
    pub(crate) fn matches(&self, p: &Probe) -> bool {
        if p.key.len() <= INLINE_KEY {
            self.len as usize == p.key.len() && self.inline == p.padded
        } else {
            self.len == HEAP && self.heap.as_deref().map(|b| &**b) == Some(p.key)
        }
    }
}
