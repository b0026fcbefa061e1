//! A ban, and the events the ban table reports so that the binding can publish them (hooks,
//! diagnostics_channel, the cluster's pub/sub).
use super::cidr::Cidr;
use crate::core::names::named_enum;
use std::sync::Arc;

/// What a ban applies to: one key (as the decision's ban key: usually the client-IP key) or every
/// address in a prefix.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum BanTarget {
    Key(Box<[u8]>),
    Cidr(Cidr),
}

named_enum! {
    /// Who banned (kept through export and import, so a ban keeps its origin across restarts and
    /// cluster nodes).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum BanSource: u8 {
        /// A strike rule fired.
        Rule = "rule",
        Operator = "operator",
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Ban {
    pub target: BanTarget,
    /// The rule's name, or the operator's words.
    pub reason: Arc<str>,
    pub since_ns: u64,
    /// `None`: permanent (until an operator lifts it).
    pub until_ns: Option<u64>,
    /// Which ban of the key this is within the escalation's memory (1 for a first ban; 0 when not
    /// from a rule).
    pub offense: u32,
    pub source: BanSource,
}

impl Ban {
    #[inline]
    pub fn is_live(&self, now_ns: u64) -> bool {
        self.until_ns.is_none_or(|u| u > now_ns)
    }

    pub fn is_permanent(&self) -> bool {
        self.until_ns.is_none()
    }
}

/// What a lookup returns for a banned request (no allocation: the reason is shared).
#[derive(Clone, Debug, PartialEq)]
pub struct BanHit {
    pub reason: Arc<str>,
    pub until_ns: Option<u64>,
    /// The ban is on a prefix containing the client's address, not on its key.
    pub by_cidr: bool,
}

impl BanHit {
    /// For `Retry-After`: nanoseconds until the ban ends (`u64::MAX` for a permanent one).
    pub fn retry_after_ns(&self, now_ns: u64) -> u64 {
        self.until_ns.map_or(u64::MAX, |u| u.saturating_sub(now_ns))
    }
}

named_enum! {
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum BanEventKind: u8 {
        /// A new ban, or an existing one lengthened (the event carries the ban as it now is).
        Added = "added",
        /// An operator removed it.
        Lifted = "lifted",
        Expired = "expired",
        /// Dropped to make room at the cap (always the temporary ban closest to its end).
        Evicted = "evicted",
        /// Not added: the table is full of permanent bans (counted in `BanStats::refused`).
        Refused = "refused",
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct BanEvent {
    pub kind: BanEventKind,
    pub ban: Ban,
}

/// Counters since the table was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BanStats {
    pub added: u64,
    pub lifted: u64,
    pub expired: u64,
    pub evicted: u64,
    pub refused: u64,
}
