//! Client-IP keys for per-key limits.
//!
//! One client should map to one key, and one attacker should not be able to mint fresh keys cheaply:
//! - IPv4 addresses key by themselves (`/32`, configurable);
//! - IPv6 addresses key by their prefix (`/56` by default): a single subscriber is usually given a /56
//!   or /64 and can pick any address inside it, so keying by the full address would hand them 2^72
//!   buckets;
//! - IPv4-mapped IPv6 (`::ffff:a.b.c.d`, what a dual-stack socket reports for an IPv4 peer) folds to
//!   the IPv4 address, so the same client has the same key whichever socket it came in on;
//! - decoration is removed: surrounding spaces, `[...]` brackets, a `:port`, an IPv6 zone (`%eth0`);
//! - anything else (junk in a forwarded header, over-long input) maps to the one shared key
//!   `INVALID_KEY`, so malformed input cannot create new buckets.
//!
//! Keys are canonical text (`203.0.113.7`, `2001:db8:0:ab00::/56`), readable in snapshots and logs.
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The key shared by every input that is not an IP address.
pub const INVALID_KEY: &[u8] = b"invalid-ip";
/// Longest input considered; longer input is malformed.
pub const MAX_INPUT_LEN: usize = 96;
/// Room for the longest key: a full IPv6 address, `/`, three digits.
pub const MAX_KEY_LEN: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpKeyConfig {
    pub ipv4_prefix: u8,
    pub ipv6_prefix: u8,
}

impl Default for IpKeyConfig {
    fn default() -> Self {
        IpKeyConfig { ipv4_prefix: 32, ipv6_prefix: 56 }
    }
}

impl IpKeyConfig {
    pub fn new(ipv4_prefix: u8, ipv6_prefix: u8) -> Result<IpKeyConfig, &'static str> {
        if ipv4_prefix > 32 {
            return Err("ipv4Prefix must be an integer in 0..32");
        }
        if ipv6_prefix > 128 {
            return Err("ipv6Prefix must be an integer in 0..128");
        }
        Ok(IpKeyConfig { ipv4_prefix, ipv6_prefix })
    }
}

/// A key written into a caller's stack buffer.
pub struct IpKeyBuf {
    buf: [u8; MAX_KEY_LEN],
    len: usize,
}

impl Default for IpKeyBuf {
    fn default() -> Self {
        IpKeyBuf { buf: [0; MAX_KEY_LEN], len: 0 }
    }
}

impl IpKeyBuf {
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// A plain dotted quad (`a.b.c.d`, each 0..=255 in 1-3 digits, no leading zero), the socket peer's
/// usual form, parsed on the bytes; `None` for anything else, which the general path then reads.
/// Accepts only what `Ipv4Addr::from_str` accepts, with the same value.
#[inline]
fn dotted_quad(input: &[u8]) -> Option<Ipv4Addr> {
    if !(7..=15).contains(&input.len()) {
        return None;
    }
    let mut octets = [0u8; 4];
    let mut part = 0usize;
    let (mut value, mut digits) = (0u32, 0u32);
    for &b in input {
        match b {
            b'0'..=b'9' => {
                // A leading zero ("01") is refused by the std parser: leave it to it.
                if digits == 1 && value == 0 {
                    return None;
                }
                value = value * 10 + u32::from(b - b'0');
                digits += 1;
                if digits > 3 || value > 255 {
                    return None;
                }
            }
            b'.' if digits > 0 && part < 3 => {
                octets[part] = value as u8;
                part += 1;
                (value, digits) = (0, 0);
            }
            _ => return None,
        }
    }
    if part != 3 || digits == 0 {
        return None;
    }
    octets[3] = value as u8;
    Some(Ipv4Addr::from(octets))
}

/// Parses `input` as an IP address with its decoration removed; `None` when it is not one.
pub fn parse_ip(input: &[u8]) -> Option<IpAddr> {
    if let Some(v4) = dotted_quad(input) {
        return Some(IpAddr::V4(v4));
    }
    if input.len() > MAX_INPUT_LEN {
        return None;
    }
    let s = std::str::from_utf8(input).ok()?.trim();
    let s = if let Some(rest) = s.strip_prefix('[') {
        // [v6] or [v6]:port
        let end = rest.find(']')?;
        let after = &rest[end + 1..];
        if !(after.is_empty() || (after.starts_with(':') && after.len() > 1 && after[1..].bytes().all(|b| b.is_ascii_digit()))) {
            return None;
        }
        let inner = &rest[..end];
        let inner = inner.find('%').map_or(inner, |i| &inner[..i]);
        return inner.parse::<Ipv6Addr>().ok().map(IpAddr::V6);
    } else {
        s
    };
    // Zone index (fe80::1%eth0) names a local interface: it does not identify the client.
    let s = match s.find('%') {
        Some(i) => &s[..i],
        None => s,
    };
    // No colon: only a.b.c.d can match (the usual socket peer), so skip the IPv6 parser's attempt.
    if !s.contains(':') {
        return s.parse::<Ipv4Addr>().ok().map(IpAddr::V4);
    }
    if let Ok(v6) = s.parse::<Ipv6Addr>() {
        return Some(IpAddr::V6(v6));
    }
    // a.b.c.d or a.b.c.d:port
    let host = match s.rfind(':') {
        Some(i) if s[i + 1..].bytes().all(|b| b.is_ascii_digit()) && i + 1 < s.len() => &s[..i],
        Some(_) => return None,
        None => s,
    };
    host.parse::<Ipv4Addr>().ok().map(IpAddr::V4)
}

/// The IPv4 address an IPv4-mapped IPv6 address carries (`::ffff:a.b.c.d`).
fn mapped_v4(v6: &Ipv6Addr) -> Option<Ipv4Addr> {
    let o = v6.octets();
    if o[..10].iter().all(|&b| b == 0) && o[10] == 0xff && o[11] == 0xff {
        Some(Ipv4Addr::new(o[12], o[13], o[14], o[15]))
    } else {
        None
    }
}

fn mask_v4(a: Ipv4Addr, prefix: u8) -> Ipv4Addr {
    let bits = u32::from(a);
    let mask = if prefix == 0 { 0 } else { u32::MAX << (32 - u32::from(prefix)) };
    Ipv4Addr::from(bits & mask)
}

fn mask_v6(a: Ipv6Addr, prefix: u8) -> Ipv6Addr {
    let bits = u128::from(a);
    let mask = if prefix == 0 { 0 } else { u128::MAX << (128 - u32::from(prefix)) };
    Ipv6Addr::from(bits & mask)
}

/// `ip` masked to `cfg`'s prefix as 128 bits, IPv4 in its IPv4-mapped IPv6 form (so the two
/// families never meet); 0 (`::`, never a client) for `None`. A compact key to hash for counting.
pub fn ip_bits(ip: Option<IpAddr>, cfg: &IpKeyConfig) -> u128 {
    match ip {
        None => 0,
        Some(IpAddr::V4(a)) => 0xffff << 32 | u128::from(u32::from(mask_v4(a, cfg.ipv4_prefix))),
        Some(IpAddr::V6(a)) => u128::from(mask_v6(a, cfg.ipv6_prefix)),
    }
}

/// The client's address in `input` (decoration removed, IPv4-mapped IPv6 folded to IPv4), or `None`.
pub fn client_addr(input: &[u8]) -> Option<IpAddr> {
    match parse_ip(input)? {
        IpAddr::V6(v6) => Some(mapped_v4(&v6).map_or(IpAddr::V6(v6), IpAddr::V4)),
        v4 => Some(v4),
    }
}

/// Writes the canonical key for `input` into `out` and returns it. Malformed input gives `INVALID_KEY`.
pub fn ip_key<'a>(input: &[u8], cfg: &IpKeyConfig, out: &'a mut IpKeyBuf) -> &'a [u8] {
    ip_key_of(client_addr(input), cfg, out)
}

/// `ip_key` for an address already parsed by `client_addr` (`None`: malformed), so that one parse
/// serves several keys.
pub fn ip_key_of<'a>(ip: Option<IpAddr>, cfg: &IpKeyConfig, out: &'a mut IpKeyBuf) -> &'a [u8] {
    let Some(ip) = ip else {
        out.buf[..INVALID_KEY.len()].copy_from_slice(INVALID_KEY);
        out.len = INVALID_KEY.len();
        return out.as_bytes();
    };
    if let IpAddr::V4(v4) = ip {
        // By hand: this runs per request, and `fmt` costs several times more for four numbers.
        let masked = if cfg.ipv4_prefix == 32 { v4 } else { mask_v4(v4, cfg.ipv4_prefix) };
        let mut n = 0;
        for (i, o) in masked.octets().into_iter().enumerate() {
            if i > 0 {
                out.buf[n] = b'.';
                n += 1;
            }
            n += write_decimal(&mut out.buf[n..], o);
        }
        if cfg.ipv4_prefix != 32 {
            out.buf[n] = b'/';
            n += 1;
            n += write_decimal(&mut out.buf[n..], cfg.ipv4_prefix);
        }
        out.len = n;
        return out.as_bytes();
    }
    let mut cur = std::io::Cursor::new(&mut out.buf[..]);
    // The buffer fits the longest form, so these writes cannot fail.
    let _ = match ip {
        IpAddr::V6(v6) if cfg.ipv6_prefix == 128 => write!(cur, "{v6}"),
        IpAddr::V6(v6) => write!(cur, "{}/{}", mask_v6(v6, cfg.ipv6_prefix), cfg.ipv6_prefix),
        IpAddr::V4(_) => unreachable!("handled above"),
    };
    out.len = cur.position() as usize;
    out.as_bytes()
}

/// Writes `v` in decimal at the start of `out`; returns the digits written (1 to 3).
fn write_decimal(out: &mut [u8], v: u8) -> usize {
    if v >= 100 {
        out[..3].copy_from_slice(&[b'0' + v / 100, b'0' + v / 10 % 10, b'0' + v % 10]);
        3
    } else if v >= 10 {
        out[..2].copy_from_slice(&[b'0' + v / 10, b'0' + v % 10]);
        2
    } else {
        out[0] = b'0' + v;
        1
    }
}

/// The longest `ip_bin_key`: tag, family and prefix length, 16 address bytes.
pub const BIN_KEY_LEN: usize = 3 + 16;

/// A compact binary key for an address masked to `cfg`'s prefixes, for stores no one reads back (a
/// named limit's): `tag`, the family (4 or 6), the prefix length, the masked address bytes; `tag` and
/// `INVALID_KEY` for a malformed address. No formatting: cheaper than `ip_key_of` per request.
pub fn ip_bin_key(ip: Option<IpAddr>, cfg: &IpKeyConfig, tag: u8, out: &mut [u8; BIN_KEY_LEN]) -> usize {
    out[0] = tag;
    match ip {
        None => {
            let n = INVALID_KEY.len().min(BIN_KEY_LEN - 1);
            out[1..1 + n].copy_from_slice(&INVALID_KEY[..n]);
            1 + n
        }
        Some(IpAddr::V4(v4)) => {
            out[1] = 4;
            out[2] = cfg.ipv4_prefix;
            out[3..7].copy_from_slice(&mask_v4(v4, cfg.ipv4_prefix).octets());
            7
        }
        Some(IpAddr::V6(v6)) => {
            out[1] = 6;
            out[2] = cfg.ipv6_prefix;
            out[3..19].copy_from_slice(&mask_v6(v6, cfg.ipv6_prefix).octets());
            19
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_bits_masks_and_keeps_the_families_apart() {
        let c = IpKeyConfig::new(24, 48).unwrap();
        let v4 = |s: &str| ip_bits(Some(s.parse().unwrap()), &c);
        assert_eq!(v4("203.0.113.77"), 0xffff_cb00_7100);
        assert_eq!(v4("203.0.113.1"), v4("203.0.113.254"));
        assert_eq!(v4("2001:db8:1:2::9"), 0x2001_0db8_0001 << 80);
        assert_ne!(v4("0.0.0.0"), ip_bits(None, &c));
        assert_eq!(ip_bits(None, &c), 0);
    }

    /// The byte-level dotted-quad path agrees with the std parser on every input it accepts, and
    /// parse_ip's answer is the general path's answer for edge cases and random byte strings.
    #[test]
    fn the_dotted_quad_fast_path_agrees_with_the_std_parser() {
        let edges = [
            "1.2.3.4",
            "0.0.0.0",
            "255.255.255.255",
            "256.1.1.1",
            "01.2.3.4",
            "1.2.3.04",
            "1.2.3",
            "1.2.3.4.5",
            "1..2.3",
            ".1.2.3",
            "1.2.3.",
            "1.2.3.4 ",
            " 1.2.3.4",
            "1.2.3.4:80",
            "1000.2.3.4",
            "10.0.0.255",
            "100.200.250.255",
            "1.2.3.a",
            "1.2.3.-4",
        ];
        let mut rng = crate::core::defense::rng::SplitMix64::new(5);
        let alphabet = b"0123456789.:a ";
        let mut inputs: Vec<Vec<u8>> = edges.iter().map(|s| s.as_bytes().to_vec()).collect();
        for _ in 0..200_000 {
            let n = 1 + rng.below(16) as usize;
            inputs.push((0..n).map(|_| alphabet[rng.below(alphabet.len() as u64) as usize]).collect());
        }
        for i in &inputs {
            let std = std::str::from_utf8(i).ok().and_then(|s| s.parse::<Ipv4Addr>().ok());
            if let Some(fast) = dotted_quad(i) {
                assert_eq!(Some(fast), std, "{:?}", String::from_utf8_lossy(i));
            } else if i.iter().all(|b| b.is_ascii_digit() || *b == b'.') {
                assert_eq!(std, None, "the fast path must take every plain quad: {:?}", String::from_utf8_lossy(i));
            }
        }
        assert_eq!(parse_ip(b"203.0.113.7"), Some(IpAddr::V4(Ipv4Addr::new(203, 0, 113, 7))));
        assert_eq!(parse_ip(b" 203.0.113.7 "), Some(IpAddr::V4(Ipv4Addr::new(203, 0, 113, 7))));
        assert_eq!(parse_ip(b"01.2.3.4"), None);
    }

    fn key(input: &str, cfg: IpKeyConfig) -> String {
        let mut b = IpKeyBuf::default();
        String::from_utf8(ip_key(input.as_bytes(), &cfg, &mut b).to_vec()).unwrap()
    }

    fn k(input: &str) -> String {
        key(input, IpKeyConfig::default())
    }

    #[test]
    fn ipv4_keys_by_address() {
        assert_eq!(k("203.0.113.7"), "203.0.113.7");
        assert_eq!(k("  203.0.113.7 "), "203.0.113.7");
        assert_eq!(k("203.0.113.7:51234"), "203.0.113.7");
        assert_eq!(k("127.0.0.1"), "127.0.0.1");
        assert_eq!(key("203.0.113.7", IpKeyConfig::new(24, 56).unwrap()), "203.0.113.0/24");
        assert_eq!(key("203.0.113.7", IpKeyConfig::new(0, 56).unwrap()), "0.0.0.0/0");
    }

    #[test]
    fn ipv6_keys_by_prefix_56_by_default() {
        // Two addresses in one /56 share a key; the next /56 does not.
        assert_eq!(k("2001:db8:0:ab12::1"), "2001:db8:0:ab00::/56");
        assert_eq!(k("2001:db8:0:abff:ffff:ffff:ffff:ffff"), "2001:db8:0:ab00::/56");
        assert_eq!(k("2001:db8:0:ac00::1"), "2001:db8:0:ac00::/56");
        assert_eq!(k("2001:DB8:0:AB12::1"), "2001:db8:0:ab00::/56", "case-insensitive");
        assert_eq!(key("2001:db8:0:ab12::1", IpKeyConfig::new(32, 64).unwrap()), "2001:db8:0:ab12::/64");
        assert_eq!(key("2001:db8:0:ab12::1", IpKeyConfig::new(32, 128).unwrap()), "2001:db8:0:ab12::1");
        assert_eq!(key("2001:db8::1", IpKeyConfig::new(32, 0).unwrap()), "::/0");
        assert_eq!(key("2001:db8:0:ab12::1", IpKeyConfig::new(32, 57).unwrap()), "2001:db8:0:ab00::/57");
        assert_eq!(key("2001:db8:0:ab92::1", IpKeyConfig::new(32, 57).unwrap()), "2001:db8:0:ab80::/57");
    }

    #[test]
    fn ipv4_mapped_addresses_fold_to_ipv4() {
        assert_eq!(k("::ffff:203.0.113.7"), "203.0.113.7");
        assert_eq!(k("::FFFF:cb00:7107"), "203.0.113.7");
        assert_eq!(k("[::ffff:203.0.113.7]:443"), "203.0.113.7");
        assert_eq!(k("::ffff:127.0.0.1"), k("127.0.0.1"));
        // IPv4-compatible (deprecated) and other embeddings are plain IPv6.
        assert_eq!(key("::203.0.113.7", IpKeyConfig::new(32, 128).unwrap()), "::cb00:7107");
    }

    #[test]
    fn decoration_is_removed() {
        assert_eq!(k("[2001:db8::1]"), "2001:db8::/56");
        assert_eq!(k("[2001:db8::1]:8080"), "2001:db8::/56");
        assert_eq!(key("fe80::1%eth0", IpKeyConfig::new(32, 128).unwrap()), "fe80::1");
        assert_eq!(key("[fe80::1%25en0]:1", IpKeyConfig::new(32, 128).unwrap()), "fe80::1");
        assert_eq!(k("::1"), "::/56");
    }

    #[test]
    fn malformed_input_shares_one_key() {
        for bad in [
            "",
            " ",
            "unknown",
            "1.2.3",
            "1.2.3.4.5",
            "256.1.1.1",
            "1.2.3.4:",
            "1.2.3.4:x",
            "1.2.3.4:80:80",
            "[2001:db8::1",
            "[2001:db8::1]x",
            "[2001:db8::1]:",
            "[1.2.3.4]",
            "2001:db8:::1",
            "1.2.3.4, 5.6.7.8",
            "gggg::1",
            "::ffff:999.0.0.1",
            "%eth0",
        ] {
            assert_eq!(k(bad), "invalid-ip", "{bad:?}");
        }
        let long = format!("{}1.2.3.4", " ".repeat(MAX_INPUT_LEN));
        assert_eq!(k(&long), "invalid-ip");
        let mut b = IpKeyBuf::default();
        assert_eq!(ip_key(&[0xff, 0xfe, b'1'], &IpKeyConfig::default(), &mut b), INVALID_KEY);
    }

    #[test]
    fn the_longest_key_fits() {
        let longest = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe";
        assert_eq!(key(longest, IpKeyConfig::new(32, 127).unwrap()), "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe/127");
        assert_eq!(key("255.255.255.255", IpKeyConfig::new(31, 56).unwrap()), "255.255.255.254/31");
    }

    #[test]
    fn binary_keys_mask_like_text_keys() {
        let bin = |input: &str, v4: u8, v6: u8| {
            let mut out = [0u8; BIN_KEY_LEN];
            let n = ip_bin_key(client_addr(input.as_bytes()), &IpKeyConfig::new(v4, v6).unwrap(), 0xFF, &mut out);
            out[..n].to_vec()
        };
        assert_eq!(bin("203.0.113.7", 24, 56), vec![0xFF, 4, 24, 203, 0, 113, 0]);
        assert_eq!(bin("203.0.113.7", 24, 56), bin("::ffff:203.0.113.200", 24, 56), "mapped folds");
        assert_ne!(bin("203.0.113.7", 24, 56), bin("203.0.114.7", 24, 56));
        assert_eq!(bin("2001:db8:0:ab12::1", 32, 56), bin("2001:db8:0:abff::9", 32, 56));
        assert_ne!(bin("2001:db8:0:ab12::1", 32, 56), bin("2001:db8:0:ac00::1", 32, 56));
        assert_eq!(bin("junk", 32, 56), [&[0xFF][..], INVALID_KEY].concat());
        // The IPv4 text key by hand agrees with the formatter.
        for (ip, p) in [("0.0.0.0", 32), ("9.10.99.100", 32), ("255.255.255.255", 32), ("203.0.113.77", 25), ("1.2.3.4", 0)] {
            let a: Ipv4Addr = ip.parse().unwrap();
            let want = if p == 32 { a.to_string() } else { format!("{}/{p}", mask_v4(a, p)) };
            assert_eq!(key(ip, IpKeyConfig::new(p, 56).unwrap()), want);
        }
    }

    #[test]
    fn prefixes_are_validated() {
        assert!(IpKeyConfig::new(33, 56).is_err());
        assert!(IpKeyConfig::new(32, 129).is_err());
        assert_eq!(IpKeyConfig::new(32, 56).unwrap(), IpKeyConfig::default());
    }
}
