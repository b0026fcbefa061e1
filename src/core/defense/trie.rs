//! A binary prefix trie over IPv4 and IPv6 prefixes: longest-prefix match in at most 32 or 128 steps
//! (one per bit of the prefixes stored), no allocation, no hashing.
//!
//! Built once and then frozen: `TrieBuilder` collects prefixes, `build` returns an immutable
//! `PrefixTrie` that threads can share (`Arc`). Replacing a list at run time is building a new trie
//! and swapping the `Arc`: a lookup never sees a half-updated list, and needs no lock.
use super::cidr::{Addr, Cidr};
use crate::core::net::ipkey::parse_ip;
use std::net::IpAddr;

const NONE: u32 = u32::MAX;
/// The IPv4 root is node 0, the IPv6 root node 1.
const ROOTS: usize = 2;

#[derive(Clone, Copy, Debug)]
struct Node {
    child: [u32; 2],
    /// Index into `values` of the prefix ending here, or `NONE`.
    value: u32,
}

const EMPTY: Node = Node { child: [NONE; 2], value: NONE };

#[derive(Clone, Debug)]
pub struct TrieBuilder<V> {
    nodes: Vec<Node>,
    values: Vec<V>,
}

#[derive(Clone, Debug)]
pub struct PrefixTrie<V> {
    nodes: Box<[Node]>,
    values: Box<[V]>,
}

impl<V> Default for TrieBuilder<V> {
    fn default() -> Self {
        TrieBuilder { nodes: vec![EMPTY; ROOTS], values: Vec::new() }
    }
}

impl<V> TrieBuilder<V> {
    pub fn new() -> TrieBuilder<V> {
        TrieBuilder::default()
    }

    /// Adds `cidr` with `value`; a prefix already present gets the new value.
    pub fn insert(&mut self, cidr: Cidr, value: V) {
        let mut n = usize::from(cidr.addr.v6);
        for i in 0..u32::from(cidr.len) {
            let bit = ((cidr.addr.bits >> (127 - i)) & 1) as usize;
            let next = self.nodes[n].child[bit];
            n = if next == NONE {
                let id = self.nodes.len();
                self.nodes.push(EMPTY);
                self.nodes[n].child[bit] = id as u32;
                id
            } else {
                next as usize
            };
        }
        match self.nodes[n].value {
            NONE => {
                self.nodes[n].value = self.values.len() as u32;
                self.values.push(value);
            }
            v => self.values[v as usize] = value,
        }
    }

    pub fn build(self) -> PrefixTrie<V> {
        PrefixTrie { nodes: self.nodes.into_boxed_slice(), values: self.values.into_boxed_slice() }
    }
}

impl<V> Default for PrefixTrie<V> {
    fn default() -> Self {
        TrieBuilder::new().build()
    }
}

impl<V> PrefixTrie<V> {
    /// The value of the longest stored prefix containing `addr`.
    #[inline]
    pub fn lookup_addr(&self, addr: Addr) -> Option<&V> {
        let mut n = usize::from(addr.v6);
        let mut best = self.nodes[n].value;
        for i in 0..u32::from(addr.max_len()) {
            let next = self.nodes[n].child[((addr.bits >> (127 - i)) & 1) as usize];
            if next == NONE {
                break;
            }
            n = next as usize;
            if self.nodes[n].value != NONE {
                best = self.nodes[n].value;
            }
        }
        (best != NONE).then(|| &self.values[best as usize])
    }

    #[inline]
    pub fn lookup(&self, ip: IpAddr) -> Option<&V> {
        self.lookup_addr(Addr::of(ip))
    }

    /// Looks up a client address as a socket or a forwarded header gives it (brackets, port and zone
    /// are removed, see `core::net::ipkey::parse_ip`); `None` for anything that is not an address.
    pub fn lookup_str(&self, ip: &[u8]) -> Option<&V> {
        parse_ip(ip).and_then(|ip| self.lookup(ip))
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        self.lookup(ip).is_some()
    }

    /// Prefixes stored.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Bytes held (nodes and values).
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.nodes) + std::mem::size_of_val(&*self.values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trie(prefixes: &[&str]) -> PrefixTrie<usize> {
        let mut b = TrieBuilder::new();
        for (i, p) in prefixes.iter().enumerate() {
            b.insert(Cidr::parse(p).unwrap(), i);
        }
        b.build()
    }

    fn at(t: &PrefixTrie<usize>, ip: &str) -> Option<usize> {
        t.lookup_str(ip.as_bytes()).copied()
    }

    #[test]
    fn longest_prefix_wins() {
        let t = trie(&["10.0.0.0/8", "10.1.0.0/16", "10.1.2.3", "2001:db8::/32", "2001:db8:1::/48"]);
        assert_eq!(at(&t, "10.9.9.9"), Some(0));
        assert_eq!(at(&t, "10.1.9.9"), Some(1));
        assert_eq!(at(&t, "10.1.2.3"), Some(2));
        assert_eq!(at(&t, "10.1.2.4"), Some(1));
        assert_eq!(at(&t, "11.0.0.0"), None);
        assert_eq!(at(&t, "2001:db8:1::5"), Some(4));
        assert_eq!(at(&t, "2001:db8:2::5"), Some(3));
        assert_eq!(at(&t, "2001:db9::"), None);
        assert_eq!(t.len(), 5);
    }

    #[test]
    fn edge_prefixes() {
        let t = trie(&["0.0.0.0/0"]);
        assert_eq!((at(&t, "0.0.0.0"), at(&t, "255.255.255.255"), at(&t, "::1")), (Some(0), Some(0), None));
        let t = trie(&["::/0"]);
        assert_eq!((at(&t, "::"), at(&t, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"), at(&t, "1.2.3.4")), (Some(0), Some(0), None));
        let t = trie(&["203.0.113.7/32", "2001:db8::7/128"]);
        assert_eq!((at(&t, "203.0.113.7"), at(&t, "203.0.113.6"), at(&t, "203.0.113.8")), (Some(0), None, None));
        assert_eq!((at(&t, "2001:db8::7"), at(&t, "2001:db8::6"), at(&t, "2001:db8::8")), (Some(1), None, None));
        let t = trie(&["255.255.255.255/32", "128.0.0.0/1"]);
        assert_eq!((at(&t, "255.255.255.255"), at(&t, "128.0.0.1"), at(&t, "127.255.255.255")), (Some(0), Some(1), None));
    }

    #[test]
    fn mapped_addresses_and_decorated_input_match_their_ipv4_prefix() {
        let t = trie(&["10.0.0.0/8", "::ffff:192.168.0.0/112"]);
        assert_eq!(at(&t, "::ffff:10.2.3.4"), Some(0));
        assert_eq!(at(&t, "[::ffff:10.2.3.4]:443"), Some(0));
        assert_eq!(at(&t, "10.2.3.4:8080"), Some(0));
        assert_eq!(at(&t, "192.168.7.7"), Some(1));
        assert_eq!(at(&t, "not-an-ip"), None);
        assert_eq!(at(&t, "::10.2.3.4"), None, "IPv4-compatible is plain IPv6");
    }

    #[test]
    fn matches_a_linear_scan_on_random_prefixes() {
        use crate::core::defense::rng::SplitMix64;
        let mut r = SplitMix64::new(5);
        let mut cidrs = Vec::new();
        for _ in 0..300 {
            let v6 = r.below(2) == 1;
            let len = r.below(if v6 { 129 } else { 33 }) as u8;
            let bits = (u128::from(r.next_u64()) << 64 | u128::from(r.next_u64())) & super::super::cidr::mask(len);
            let bits = if v6 { bits } else { bits & (u128::from(u32::MAX) << 96) };
            cidrs.push(Cidr { addr: Addr { v6, bits }, len });
        }
        let mut b = TrieBuilder::new();
        for (i, c) in cidrs.iter().enumerate() {
            b.insert(*c, i);
        }
        let t = b.build();
        for k in 0..20_000 {
            // Addresses near stored prefixes as well as random ones.
            let base = cidrs[k % cidrs.len()];
            let noise = (u128::from(r.next_u64()) << 64 | u128::from(r.next_u64())) >> r.below(129).min(127);
            let mut bits = base.addr.bits ^ noise;
            if !base.addr.v6 {
                bits &= u128::from(u32::MAX) << 96;
            }
            let a = Addr { v6: base.addr.v6, bits };
            let expect = cidrs.iter().enumerate().filter(|(_, c)| c.contains(a)).max_by_key(|(i, c)| (c.len, *i)).map(|(i, _)| i);
            // Duplicated prefixes keep the last value: the linear scan's tie-break picks it too.
            assert_eq!(t.lookup_addr(a).copied(), expect);
        }
    }

    #[test]
    fn an_empty_trie_matches_nothing() {
        let t: PrefixTrie<()> = PrefixTrie::default();
        assert!(t.is_empty() && !t.contains("1.2.3.4".parse().unwrap()) && !t.contains("::".parse().unwrap()));
    }
}
