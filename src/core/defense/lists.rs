//! The allow and deny lists: two frozen prefix tries, replaced together as one value.
//!
//! Order, as the decision applies it: a client on the allow list is let through without looking at the
//! deny list, bans or limits (it is trusted infrastructure: a health checker, an internal network);
//! otherwise a client on the deny list is refused (403); otherwise the decision goes on. The allow list
//! wins whatever the prefixes' lengths: `allow 10.0.0.0/8` with `deny 10.1.2.3` lets 10.1.2.3 through.
use super::cidr::Cidr;
use super::trie::{PrefixTrie, TrieBuilder};
use crate::core::ledger::ConfigError;
use crate::core::names::named_enum;
use std::net::IpAddr;

named_enum! {
    /// Where a client stands with the lists.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Access: u8 {
        /// On neither list: the decision goes on (bans, limits).
        Neutral = "neutral",
        Allow = "allow-listed",
        Deny = "deny-listed",
    }
}

#[derive(Clone, Debug, Default)]
pub struct AccessLists {
    allow: PrefixTrie<()>,
    deny: PrefixTrie<()>,
}

fn build<S: AsRef<str>>(name: &str, items: &[S]) -> Result<PrefixTrie<()>, ConfigError> {
    let mut b = TrieBuilder::new();
    for (i, s) in items.iter().enumerate() {
        let c = Cidr::parse(s.as_ref()).map_err(|e| ConfigError(format!("{name}[{i}]: {e}")))?;
        b.insert(c, ());
    }
    Ok(b.build())
}

impl AccessLists {
    /// Parses both lists; an error names the entry (`deny[3]: "10.0.0.1/8" has bits set ...`).
    pub fn new<A: AsRef<str>, D: AsRef<str>>(allow: &[A], deny: &[D]) -> Result<AccessLists, ConfigError> {
        Ok(AccessLists { allow: build("allow", allow)?, deny: build("deny", deny)? })
    }

    /// `ip` is `None` when the client's address is unknown or not an address: only the lists' absence
    /// of an opinion applies then (neither list can match it).
    #[inline]
    pub fn classify(&self, ip: Option<IpAddr>) -> Access {
        let Some(ip) = ip else { return Access::Neutral };
        if self.allow.contains(ip) {
            Access::Allow
        } else if self.deny.contains(ip) {
            Access::Deny
        } else {
            Access::Neutral
        }
    }

    pub fn allow(&self) -> &PrefixTrie<()> {
        &self.allow
    }

    pub fn deny(&self) -> &PrefixTrie<()> {
        &self.deny
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn allow_overrides_deny_whatever_the_prefix_lengths() {
        let l = AccessLists::new(&["10.0.0.0/8", "2001:db8::/32"], &["10.1.2.3", "0.0.0.0/0", "2001:db8::1", "::/0"]).unwrap();
        assert_eq!(l.classify(ip("10.1.2.3")), Access::Allow);
        assert_eq!(l.classify(ip("::ffff:10.1.2.3")), Access::Allow);
        assert_eq!(l.classify(ip("11.0.0.1")), Access::Deny);
        assert_eq!(l.classify(ip("2001:db8::1")), Access::Allow);
        assert_eq!(l.classify(ip("2001:db9::1")), Access::Deny);
        assert_eq!(l.classify(None), Access::Neutral);
        let d = AccessLists::new::<&str, &str>(&[], &["192.0.2.0/24"]).unwrap();
        assert_eq!((d.classify(ip("192.0.2.9")), d.classify(ip("192.0.3.9"))), (Access::Deny, Access::Neutral));
    }

    #[test]
    fn errors_name_the_entry() {
        let e = AccessLists::new(&["10.0.0.0/8"], &["::/0", "10.0.0.1/8"]).unwrap_err();
        assert_eq!(e.0, "deny[1]: \"10.0.0.1/8\" has bits set past its /8 prefix (did you mean 10.0.0.0/8?)");
        let e = AccessLists::new(&["junk"], &["::/0"]).unwrap_err();
        assert!(e.0.starts_with("allow[0]: \"junk\" is not an IP address"));
    }

    #[test]
    fn lists_are_replaced_whole_by_swapping_an_arc() {
        let shared = parking_lot::RwLock::new(Arc::new(AccessLists::new::<&str, &str>(&[], &["203.0.113.0/24"]).unwrap()));
        let before = shared.read().clone();
        *shared.write() = Arc::new(AccessLists::new::<&str, &str>(&[], &["198.51.100.0/24"]).unwrap());
        // A reader holding the old lists keeps a consistent view; new readers see the new lists.
        assert_eq!(before.classify(ip("203.0.113.1")), Access::Deny);
        assert_eq!(shared.read().classify(ip("203.0.113.1")), Access::Neutral);
        assert_eq!(shared.read().classify(ip("198.51.100.1")), Access::Deny);
    }
}
