//! The client-IP normaliser (`core::ipkey`) on arbitrary input under every prefix configuration.
//! Input: [ipv4 prefix byte, ipv6 prefix byte, the text...]. Beyond "no panic", every key is checked:
//! - it fits `MAX_KEY_LEN`, and is `INVALID_KEY` exactly when `parse_ip` finds no address;
//! - it is canonical: its address part is what std prints for that address, masked to the prefix,
//!   with `/prefix` unless the prefix keeps every bit, and never an IPv4-mapped IPv6 address;
//! - it is idempotent: normalising the key's address gives the key again;
//! - `parse_ip` agrees with std on everything std parses as an address or a socket address;
//! - the key depends on the address only, not on its spelling or decoration (spaces, brackets, port).
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use tiergate::core::ipkey::{ip_key, parse_ip, IpKeyBuf, IpKeyConfig, INVALID_KEY, MAX_INPUT_LEN, MAX_KEY_LEN};

fn key(input: &[u8], cfg: &IpKeyConfig) -> Vec<u8> {
    let mut buf = IpKeyBuf::default();
    ip_key(input, cfg, &mut buf).to_vec()
}

/// The key `ip` must get, written here from std's own types (not from the code under test).
fn expected(ip: IpAddr, cfg: &IpKeyConfig) -> String {
    match ip {
        IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some() => expected(IpAddr::V4(v6.to_ipv4_mapped().unwrap()), cfg),
        IpAddr::V4(v4) => {
            let p = u32::from(cfg.ipv4_prefix);
            let masked = Ipv4Addr::from(u32::from(v4) & u32::MAX.checked_shl(32 - p).unwrap_or(0));
            if p == 32 { masked.to_string() } else { format!("{masked}/{p}") }
        }
        IpAddr::V6(v6) => {
            let p = u32::from(cfg.ipv6_prefix);
            let masked = Ipv6Addr::from(u128::from(v6) & u128::MAX.checked_shl(128 - p).unwrap_or(0));
            if p == 128 { masked.to_string() } else { format!("{masked}/{p}") }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let [p4, p6, text @ ..] = data else { return };
    let cfg = IpKeyConfig::new(p4 % 33, p6 % 129).expect("prefixes in range");
    agrees_with_std(text);
    let out = key(text, &cfg);
    assert!(out.len() <= MAX_KEY_LEN);

    let Some(ip) = parse_ip(text) else {
        assert_eq!(out, INVALID_KEY, "no address, yet a key: {:?}", String::from_utf8_lossy(text));
        return;
    };
    let out = String::from_utf8(out).expect("keys are ASCII");
    assert_eq!(out, expected(ip, &cfg), "input {:?}", String::from_utf8_lossy(text));

    // Idempotent: the key's address part is normalised to the same key.
    let addr = out.split('/').next().unwrap();
    assert_eq!(key(addr.as_bytes(), &cfg), out.as_bytes(), "not idempotent on {out:?}");

    // Spelling and decoration do not matter: std's spelling, padded, bracketed, with a port.
    let plain = ip.to_string();
    let mut spellings = vec![plain.clone(), format!(" {plain}\t")];
    spellings.push(match ip {
        IpAddr::V4(_) => format!("{plain}:8080"),
        IpAddr::V6(_) => format!("[{plain}]:8080"),
    });
    for s in spellings.iter().filter(|s| s.len() <= MAX_INPUT_LEN) {
        assert_eq!(key(s.as_bytes(), &cfg), out.as_bytes(), "{s:?} and {:?} differ", String::from_utf8_lossy(text));
    }
});

// Agreement with std, one way: whatever std reads as an address (or address:port) must be read as that
// address. (The other way does not hold on purpose: zones, brackets without a port, padding.)
fn agrees_with_std(text: &[u8]) {
    let Ok(s) = std::str::from_utf8(text) else { return };
    if s.len() > MAX_INPUT_LEN {
        return;
    }
    if let Ok(ip) = s.parse::<IpAddr>() {
        assert_eq!(parse_ip(text), Some(ip), "{s:?}");
    }
    if let Ok(sa) = s.parse::<SocketAddr>() {
        assert_eq!(parse_ip(text), Some(sa.ip()), "{s:?}");
    }
}
