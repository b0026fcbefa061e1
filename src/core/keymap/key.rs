//! A key as an entry stores it: inline up to `INLINE_KEY` bytes, else on the heap.
/// Keys up to this many bytes are stored inline in their entry (IPv4/IPv6 prefixes, short ids), so a
/// lookup reads one cache line and compares a fixed-size array; longer keys live on the heap.
pub(crate) const INLINE_KEY: usize = 24;

pub(crate) struct StoredKey {
    pub(crate) len: u32,
    /// The entry's generation (`Slot`). It lives here, in what would be the key's padding, so the
    /// entry stays one cache line.
    pub(crate) gen: u32,
    pub(crate) inline: [u8; INLINE_KEY],
    /// A thin pointer (8 bytes, not a 16-byte slice pointer), so the entry fits one cache line.
    pub(crate) heap: Option<Box<Box<[u8]>>>,
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

impl StoredKey {
    pub(crate) fn new(key: &[u8]) -> StoredKey {
        let probe = Probe::new(key);
        StoredKey {
            len: key.len() as u32,
            gen: 0,
            inline: probe.padded,
            heap: (key.len() > INLINE_KEY).then(|| Box::new(key.into())),
        }
    }

    #[inline]
    pub(crate) fn matches(&self, p: &Probe) -> bool {
        self.len as usize == p.key.len()
            && if p.key.len() <= INLINE_KEY { self.inline == p.padded } else { self.heap.as_deref().map(|b| &**b) == Some(p.key) }
    }
}
