//! IP prefixes (`203.0.113.0/24`, `2001:db8::/32`, a bare address as its full-length prefix), as
//! allow lists, deny lists and CIDR bans are written.
//!
//! IPv4-mapped IPv6 (`::ffff:a.b.c.d`, how a dual-stack socket reports an IPv4 peer) is folded to IPv4,
//! in prefixes and in looked-up addresses alike, so `10.0.0.0/8` matches a client whichever socket it
//! came in on. Only prefixes inside `::ffff:0:0/96` fold (`::ffff:10.0.0.0/104` is `10.0.0.0/8`); a
//! shorter IPv6 prefix such as `::/0` stays IPv6 and matches IPv6 clients only.
//!
//! Parsing is strict where a typo would silently widen or narrow a list: bits set past the prefix
//! (`10.0.0.1/8`) are an error that says which prefix was probably meant, not a silent mask.
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// An address family and bits, left-aligned in a u128 (IPv4 in the top 32), so that bit `i` from the
/// top is the same walk in the trie for both families.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Addr {
    pub v6: bool,
    pub bits: u128,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cidr {
    pub addr: Addr,
    /// Prefix length: 0..=32 (IPv4) or 0..=128 (IPv6).
    pub len: u8,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CidrError(pub String);

impl fmt::Display for CidrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CidrError {}

/// The top 96 bits of an IPv4-mapped IPv6 address (`::ffff:0:0/96`), shifted down.
const MAPPED_TOP: u128 = 0xffff;

impl Addr {
    /// `ip`, with an IPv4-mapped IPv6 address folded to IPv4.
    #[inline]
    pub fn of(ip: IpAddr) -> Addr {
        match ip {
            IpAddr::V4(v4) => Addr { v6: false, bits: u128::from(u32::from(v4)) << 96 },
            IpAddr::V6(v6) => {
                let b = u128::from(v6);
                if b >> 32 == MAPPED_TOP {
                    Addr { v6: false, bits: b << 96 }
                } else {
                    Addr { v6: true, bits: b }
                }
            }
        }
    }

    pub fn max_len(self) -> u8 {
        if self.v6 {
            128
        } else {
            32
        }
    }
}

/// The mask of the top `len` bits.
#[inline]
pub(crate) fn mask(len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len))
    }
}

/// The bytes of `Cidr::strike_key`: a tag, the family, the length, the 16 address bytes.
pub const CIDR_KEY_LEN: usize = 19;

impl Cidr {
    /// The prefix of length `v4` (IPv4) or `v6` (IPv6, each clamped to the family) containing `addr`.
    pub fn around(addr: Addr, v4: u8, v6: u8) -> Cidr {
        let len = if addr.v6 { v6 } else { v4 }.min(addr.max_len());
        Cidr { addr: Addr { bits: addr.bits & mask(len), ..addr }, len }
    }

    /// The key a prefix's strikes are counted under: binary, starting with a 0 byte, so never equal
    /// to a text key (a client-IP key) in the same table.
    pub fn strike_key(&self) -> [u8; CIDR_KEY_LEN] {
        let mut k = [0u8; CIDR_KEY_LEN];
        k[1] = u8::from(self.addr.v6);
        k[2] = self.len;
        k[3..].copy_from_slice(&self.addr.bits.to_be_bytes());
        k
    }

    /// Whether `addr` lies inside this prefix.
    pub fn contains(&self, addr: Addr) -> bool {
        addr.v6 == self.addr.v6 && (addr.bits ^ self.addr.bits) & mask(self.len) == 0
    }

    /// Parses a prefix or a bare address (trimmed). No allocation unless it fails.
    pub fn parse(input: &str) -> Result<Cidr, CidrError> {
        let s = input.trim();
        let (ip, len) = match s.split_once('/') {
            Some((ip, len)) => (ip, Some(len)),
            None => (s, None),
        };
        let ip: IpAddr = if let Ok(v4) = ip.parse::<Ipv4Addr>() {
            IpAddr::V4(v4)
        } else if let Ok(v6) = ip.parse::<Ipv6Addr>() {
            IpAddr::V6(v6)
        } else {
            return Err(CidrError(format!("{input:?} is not an IP address or CIDR prefix (a.b.c.d, a.b.c.d/n, x::y, x::/n)")));
        };
        let max = if ip.is_ipv4() { 32 } else { 128 };
        let len = match len {
            None => max,
            Some(l) => match l.parse::<u8>() {
                Ok(n) if n <= max && !l.starts_with('+') && l.len() <= 3 => n,
                _ => {
                    let family = if ip.is_ipv4() { "IPv4" } else { "IPv6" };
                    return Err(CidrError(format!("{input:?}: the prefix length must be a whole number from 0 to {max} for {family}")));
                }
            },
        };
        let raw = Addr::of(ip);
        // A mapped address folds to IPv4 only as a prefix inside the mapped /96.
        let folded = ip.is_ipv6() && !raw.v6 && len >= 96;
        let (addr, len) = match ip {
            IpAddr::V6(_) if folded => (raw, len - 96),
            IpAddr::V6(v6) => (Addr { v6: true, bits: u128::from(v6) }, len),
            IpAddr::V4(_) => (raw, len),
        };
        if addr.bits & !mask(len) != 0 {
            let fixed = Cidr { addr: Addr { bits: addr.bits & mask(len), ..addr }, len };
            let written = if folded { len + 96 } else { len };
            return Err(CidrError(format!("{input:?} has bits set past its /{written} prefix (did you mean {fixed}?)")));
        }
        Ok(Cidr { addr, len })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.addr.v6 {
            write!(f, "{}/{}", Ipv6Addr::from(self.addr.bits), self.len)
        } else {
            write!(f, "{}/{}", Ipv4Addr::from((self.addr.bits >> 96) as u32), self.len)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> String {
        Cidr::parse(s).map(|c| c.to_string()).unwrap_or_else(|e| e.0)
    }

    fn ip(s: &str) -> Addr {
        Addr::of(s.parse().unwrap())
    }

    #[test]
    fn parses_prefixes_and_bare_addresses() {
        assert_eq!(p("203.0.113.0/24"), "203.0.113.0/24");
        assert_eq!(p(" 203.0.113.7 "), "203.0.113.7/32");
        assert_eq!(p("0.0.0.0/0"), "0.0.0.0/0");
        assert_eq!(p("2001:db8::/32"), "2001:db8::/32");
        assert_eq!(p("2001:DB8::1"), "2001:db8::1/128");
        assert_eq!(p("::/0"), "::/0");
    }

    #[test]
    fn mapped_prefixes_fold_to_ipv4() {
        assert_eq!(p("::ffff:10.0.0.0/104"), "10.0.0.0/8");
        assert_eq!(p("::ffff:203.0.113.7"), "203.0.113.7/32");
        assert_eq!(p("::ffff:0:0/96"), "0.0.0.0/0");
        // Shorter than the mapped /96: an IPv6 prefix.
        assert_eq!(p("::/95"), "::/95");
        assert!(!Cidr::parse("::/0").unwrap().contains(ip("10.1.2.3")));
        assert!(!Cidr::parse("::/0").unwrap().contains(ip("::ffff:10.1.2.3")));
        assert!(Cidr::parse("::/0").unwrap().contains(ip("2001:db8::1")));
        assert!(Cidr::parse("10.0.0.0/8").unwrap().contains(ip("::ffff:10.1.2.3")));
    }

    #[test]
    fn errors_say_what_is_wrong() {
        assert_eq!(p("10.0.0.1/8"), "\"10.0.0.1/8\" has bits set past its /8 prefix (did you mean 10.0.0.0/8?)");
        assert_eq!(p("2001:db8::1/32"), "\"2001:db8::1/32\" has bits set past its /32 prefix (did you mean 2001:db8::/32?)");
        assert_eq!(p("::ffff:10.0.0.1/104"), "\"::ffff:10.0.0.1/104\" has bits set past its /104 prefix (did you mean 10.0.0.0/8?)");
        assert_eq!(p("::ffff:10.0.0.1/95"), "\"::ffff:10.0.0.1/95\" has bits set past its /95 prefix (did you mean ::fffe:0:0/95?)");
        assert_eq!(p("10.0.0.0/33"), "\"10.0.0.0/33\": the prefix length must be a whole number from 0 to 32 for IPv4");
        assert_eq!(p("::/129"), "\"::/129\": the prefix length must be a whole number from 0 to 128 for IPv6");
        for bad in [
            "",
            "/8",
            "10.0.0.0/",
            "10.0.0.0/x",
            "10.0.0.0/+8",
            "10.0.0.0/-1",
            "10.0.0.0/0008",
            "10.0.0/8",
            "300.0.0.0/8",
            "[::1]",
            "::1%eth0",
            "10.0.0.0/8/8",
            "1.2.3.4:80",
        ] {
            assert!(Cidr::parse(bad).is_err(), "{bad:?}");
        }
        assert!(p("nope").starts_with("\"nope\" is not an IP address or CIDR prefix"));
    }

    #[test]
    fn contains_at_the_edges() {
        let all4 = Cidr::parse("0.0.0.0/0").unwrap();
        assert!(all4.contains(ip("255.255.255.255")) && !all4.contains(ip("::1")));
        let one = Cidr::parse("203.0.113.7/32").unwrap();
        assert!(one.contains(ip("203.0.113.7")) && !one.contains(ip("203.0.113.6")));
        let one6 = Cidr::parse("2001:db8::7/128").unwrap();
        assert!(one6.contains(ip("2001:db8::7")) && !one6.contains(ip("2001:db8::6")));
        assert_eq!(Addr::of("1.2.3.4".parse().unwrap()).max_len(), 32);
    }

    #[test]
    fn the_prefix_around_an_address_and_its_strike_key() {
        let c = Cidr::around(ip("203.0.113.77"), 24, 48);
        assert_eq!(c.to_string(), "203.0.113.0/24");
        assert_eq!(Cidr::around(ip("::ffff:203.0.113.77"), 24, 48), c);
        assert_eq!(Cidr::around(ip("2001:db8:1:2::9"), 24, 48).to_string(), "2001:db8:1::/48");
        assert_eq!(Cidr::around(ip("10.0.0.1"), 40, 48).to_string(), "10.0.0.1/32");
        assert_eq!(Cidr::around(ip("203.0.113.200"), 24, 48).strike_key(), c.strike_key());
        assert_ne!(Cidr::around(ip("203.0.114.1"), 24, 48).strike_key(), c.strike_key());
        assert_ne!(Cidr::around(ip("203.0.113.1"), 25, 48).strike_key(), Cidr::around(ip("203.0.113.1"), 24, 48).strike_key());
        assert_eq!(c.strike_key()[0], 0);
    }
}
