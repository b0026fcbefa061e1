//! The CIDR parser and prefix trie behind the allow/deny lists and CIDR bans (`core::defense`).
//! Input: lines of text; the last 17 bytes (if any) are an address to look up. Beyond "no panic":
//! - a parsed prefix has no bits past its length, a length within its family, and contains its own
//!   network address;
//! - it prints as text that parses back to the same prefix;
//! - an IPv4-mapped IPv6 prefix inside ::ffff:0:0/96 is the same prefix as its IPv4 form;
//! - the trie of every parsed line answers a lookup with the longest stored prefix containing the
//!   address (checked against a linear scan), whatever the insertion order.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::net::{IpAddr, Ipv6Addr};
use tiergate::core::defense::{Addr, Cidr, TrieBuilder};

fuzz_target!(|data: &[u8]| {
    let (text, probe) = if data.len() > 17 { data.split_at(data.len() - 17) } else { (data, &[][..]) };
    let text = String::from_utf8_lossy(text);
    let mut parsed: Vec<Cidr> = Vec::new();
    for line in text.lines().take(64) {
        let Ok(c) = Cidr::parse(line) else { continue };
        let max = if c.addr.v6 { 128 } else { 32 };
        assert!(c.len <= max, "{line:?}: /{} past the family's {max}", c.len);
        let mask = if c.len == 0 { 0 } else { u128::MAX << (128 - u32::from(c.len)) };
        assert_eq!(c.addr.bits & !mask, 0, "{line:?}: bits set past the prefix");
        assert!(c.contains(c.addr), "{line:?}: does not contain its own network address");
        let shown = c.to_string();
        assert_eq!(Cidr::parse(&shown), Ok(c), "{line:?} printed as {shown:?}, which parses differently");
        if !c.addr.v6 {
            let v4 = std::net::Ipv4Addr::from((c.addr.bits >> 96) as u32);
            let mapped = format!("{}/{}", v4.to_ipv6_mapped(), u32::from(c.len) + 96);
            assert_eq!(Cidr::parse(&mapped), Ok(c), "{mapped:?} is not the same prefix as {shown:?}");
        }
        parsed.push(c);
    }
    if probe.len() < 17 {
        return;
    }
    let bits = u128::from_be_bytes(probe[1..17].try_into().unwrap());
    let addr = if probe[0] & 1 == 0 { Addr::of(IpAddr::V6(Ipv6Addr::from(bits))) } else { Addr { v6: false, bits: bits & (u128::MAX << 96) } };
    for reversed in [false, true] {
        let mut b = TrieBuilder::new();
        let order: Vec<usize> = if reversed { (0..parsed.len()).rev().collect() } else { (0..parsed.len()).collect() };
        for &i in &order {
            b.insert(parsed[i], i);
        }
        let trie = b.build();
        // The linear scan: the longest prefix containing addr; among equal prefixes, the last inserted.
        let mut best: Option<(u8, usize)> = None;
        for &i in &order {
            let c = parsed[i];
            if c.contains(addr) && best.is_none_or(|(len, _)| c.len >= len) {
                best = Some((c.len, i));
            }
        }
        let got = trie.lookup_addr(addr).map(|&i| (parsed[i].len, parsed[i]));
        let want = best.map(|(len, i)| (len, parsed[i]));
        assert_eq!(got, want, "lookup of {addr:?} among {parsed:?}");
    }
});
