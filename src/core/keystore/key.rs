//! A stored key: inline when short, else on the heap; 24 bytes either way. An address key is 7 or 19
//! bytes and many user ids fit, so comparing a probed key reads the entry's own cache line, not a
//! second allocation. (The ledger's key map packs its keys tighter, to fit an entry in one line:
//! `keymap/entry.rs`.)

/// Keys up to this long are stored inline.
pub(crate) const INLINE_KEY: usize = 22;

pub(crate) enum StoredKey {
    Inline { len: u8, buf: [u8; INLINE_KEY] },
    Heap(Box<[u8]>),
}

impl StoredKey {
    pub(crate) fn new(key: &[u8]) -> StoredKey {
        if key.len() <= INLINE_KEY {
            let mut buf = [0u8; INLINE_KEY];
            buf[..key.len()].copy_from_slice(key);
            StoredKey::Inline { len: key.len() as u8, buf }
        } else {
            StoredKey::Heap(key.into())
        }
    }

    #[inline]
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            StoredKey::Inline { len, buf } => &buf[..*len as usize],
            StoredKey::Heap(b) => b,
        }
    }

    /// Heap bytes held (for memory figures).
    pub(crate) fn heap_len(&self) -> usize {
        match self {
            StoredKey::Inline { .. } => 0,
            StoredKey::Heap(b) => b.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_around_the_inline_size_keep_their_bytes() {
        for n in 0..=3 * INLINE_KEY {
            let k: Vec<u8> = (0..n as u8).collect();
            let s = StoredKey::new(&k);
            assert_eq!(s.bytes(), &k[..]);
            assert_eq!(s.heap_len(), if n > INLINE_KEY { n } else { 0 });
        }
        assert_eq!(std::mem::size_of::<StoredKey>(), 24);
    }
}
