//! The abuse-defense part of the one decision per request, in order:
//!
//! 1. allow list, or the user's `skip`: exempt, nothing below is looked at (not even the deny list);
//! 2. deny list: refused (403);
//! 3. ban table, by the request's ban key or a CIDR ban on its address: refused (403);
//!    3½. the challenge step-up, when configured (`with_challenge`): a client whose ban key, or one of
//!    the prefixes it belongs to that prefix limits strike (step 4), has at least that many live
//!    strikes (under every rule together) is answered with the application's challenge instead of
//!    being served: the challenge comes before a rule's ban, a CIDR ban of the client's /24 included.
//!    A request with a valid pass (`honour_pass`, checked by the binding before deciding: it has
//!    cleared the ban key's strikes; `Request::passed`) goes on, and its refusals strike nothing: one
//!    solved challenge clears no prefix's strikes for the other clients in it;
//! 4. every named limit that applies, all or nothing: refused (429), which counts a strike against
//!    what the refusing limit counts by (enough of them ban it: `rules.rs`): the ban key, or, for a
//!    limit over a wider address prefix than the ban key's (`with_prefix_strikes`), that prefix, banned
//!    as a CIDR. A crawler spread over a /24 then earns one ban for the /24 from its first refusals,
//!    instead of a strike per address that each of its hundreds of addresses must collect;
//! 5. pass: the caller goes on to the tier pool and the shed controller (elsewhere), after the
//!    shaper's delay if one asked for it.
//!
//! The lists are passed in on each call rather than held: the binding keeps them in an `Arc` it swaps
//! when an operator replaces them, and a decision uses whichever lists it picked up.
use super::ban::{Ban, BanEvent, BanHit};
use super::cidr::{Addr, Cidr};
use super::lists::{Access, AccessLists};
use super::rules::StrikeKind;
use super::table::BanTable;
use crate::core::limit::{Decision, LimitSet};
use crate::core::names::named_enum;
use crate::core::token::pass::{PassError, PassSigner};
use std::net::IpAddr;

named_enum! {
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Verdict: u8 {
        /// Through every defense check: on to the tier pool.
        Pass = "pass",
        /// Allow-listed or skipped: on to the tier pool without any defense check.
        Exempt = "exempt",
        DenyListed = "deny-listed",
        Banned = "banned",
        RateLimited = "rate-limited",
        /// Suspicious (the challenge's soft threshold): answered with the application's challenge.
        Challenged = "challenged",
    }
}

impl Verdict {
    /// The HTTP status of a refusal (200 for `Pass` and `Exempt`).
    pub fn http_status(self) -> u16 {
        match self {
            Verdict::Pass | Verdict::Exempt => 200,
            Verdict::DenyListed | Verdict::Banned | Verdict::Challenged => 403,
            Verdict::RateLimited => 429,
        }
    }
}

/// One request, as the JS side describes it.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    /// The client's address (for the lists and CIDR bans); `None` when unknown.
    pub ip: Option<IpAddr>,
    /// The user's `skip(req)` said so.
    pub skip: bool,
    /// The key bans and strikes count by (usually the client-IP key); empty for none.
    pub ban_key: &'a [u8],
    /// One entry per named limit: its key, or `None` where it does not apply.
    pub limit_keys: &'a [Option<&'a [u8]>],
    pub cost: u32,
    /// One cost per limit (`limit_keys.len()` of them); empty: `cost` for every limit.
    pub costs: &'a [u32],
    /// The request carried a valid challenge pass for its ban key.
    pub passed: bool,
}

/// A decision's details, reused across calls.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    pub verdict: Option<Verdict>,
    /// `Banned`: the ban that applies.
    pub ban: Option<BanHit>,
    /// The named limits' decision (meaningful from step 4 on: `Pass` or `RateLimited`).
    pub limits: Decision,
}

/// In `strike_prefixes`: this family's refusals strike the ban key.
const BAN_KEY: u8 = u8::MAX;

pub struct Defense {
    limits: LimitSet,
    bans: BanTable,
    /// The challenge's soft threshold: live strikes at which a key is challenged (`None`: never).
    challenge_after: Option<usize>,
    /// Per limit, the (IPv4, IPv6) prefix lengths whose prefix a refusal strikes; empty, or `None` for
    /// a limit: the ban key.
    strike_prefixes: Vec<Option<(u8, u8)>>,
    /// The distinct (IPv4, IPv6) lengths of `strike_prefixes`, whose strikes the challenge reads too.
    challenge_prefixes: Vec<(u8, u8)>,
}

impl Defense {
    pub fn new(limits: LimitSet, bans: BanTable) -> Defense {
        Defense { limits, bans, challenge_after: None, strike_prefixes: Vec::new(), challenge_prefixes: Vec::new() }
    }

    /// Per limit (in order), the (IPv4, IPv6) prefix lengths of the address prefix its refusals strike
    /// and ban, for limits that count by a prefix wider than the ban key; `None`: the ban key. A
    /// family whose length is not shorter than `ban_prefixes`' strikes the ban key (the same scope).
    pub fn with_prefix_strikes(mut self, prefixes: &[Option<(u8, u8)>], ban_prefixes: (u8, u8)) -> Defense {
        let wider = |len: u8, ban: u8| if len < ban { len } else { BAN_KEY };
        self.strike_prefixes = prefixes.iter().map(|p| p.map(|(v4, v6)| (wider(v4, ban_prefixes.0), wider(v6, ban_prefixes.1)))).collect();
        self.challenge_prefixes = self.strike_prefixes.iter().flatten().copied().filter(|&(v4, v6)| v4 != BAN_KEY || v6 != BAN_KEY).collect();
        self.challenge_prefixes.sort_unstable();
        self.challenge_prefixes.dedup();
        self
    }

    /// Whether the client has `after` live strikes by its ban key or by a prefix it is in.
    fn suspicious(&self, req: &Request, after: usize, now_ns: u64) -> bool {
        if !req.ban_key.is_empty() && self.bans.live_strikes(req.ban_key, now_ns) >= after {
            return true;
        }
        let Some(ip) = req.ip else { return false };
        let addr = Addr::of(ip);
        self.challenge_prefixes.iter().any(|&(v4, v6)| {
            let len = if addr.v6 { v6 } else { v4 };
            len != BAN_KEY && self.bans.live_strikes(&Cidr::around(addr, len, len).strike_key(), now_ns) >= after
        })
    }

    /// The prefix a refusal by limit `refused_by` strikes, when it is wider than the ban key's.
    #[inline]
    fn strike_cidr(&self, refused_by: Option<usize>, ip: Option<IpAddr>) -> Option<Cidr> {
        let (v4, v6) = (*self.strike_prefixes.get(refused_by?)?)?;
        let addr = Addr::of(ip?);
        let len = if addr.v6 { v6 } else { v4 };
        (len != BAN_KEY).then(|| Cidr::around(addr, len, len))
    }

    /// Challenges a key once it has `after` (≥ 1) live strikes: below every rule's threshold to come
    /// before the ban.
    pub fn with_challenge(mut self, after: usize) -> Defense {
        self.challenge_after = Some(after.max(1));
        self
    }

    pub fn challenge_after(&self) -> Option<usize> {
        self.challenge_after
    }

    pub fn limits(&self) -> &LimitSet {
        &self.limits
    }

    pub fn bans(&self) -> &BanTable {
        &self.bans
    }

    /// Decides `req` at `now_ns`. Ban changes (a strike that banned) go to `events`.
    pub fn decide(&self, lists: &AccessLists, req: &Request, now_ns: u64, out: &mut Outcome, events: &mut Vec<BanEvent>) -> Verdict {
        out.ban = None;
        out.limits.evaluated = 0;
        out.limits.refused_by = None;
        let v = self.verdict(lists, req, now_ns, out, events);
        out.verdict = Some(v);
        v
    }

    fn verdict(&self, lists: &AccessLists, req: &Request, now_ns: u64, out: &mut Outcome, events: &mut Vec<BanEvent>) -> Verdict {
        if req.skip {
            return Verdict::Exempt;
        }
        match lists.classify(req.ip) {
            Access::Allow => return Verdict::Exempt,
            Access::Deny => return Verdict::DenyListed,
            Access::Neutral => {}
        }
        if let Some(hit) = self.bans.lookup(req.ban_key, req.ip, now_ns) {
            out.ban = Some(hit);
            return Verdict::Banned;
        }
        if let Some(after) = self.challenge_after {
            if !req.passed && self.suspicious(req, after, now_ns) {
                return Verdict::Challenged;
            }
        }
        let costs = if req.costs.is_empty() { std::slice::from_ref(&req.cost) } else { req.costs };
        if self.limits.decide_costs(req.limit_keys, costs, now_ns, &mut out.limits) {
            return Verdict::Pass;
        }
        if let Some(cidr) = self.strike_cidr(out.limits.refused_by, req.ip) {
            if !req.passed {
                self.bans.record_cidr(cidr, StrikeKind::RateLimited, now_ns, events);
            }
        } else if !req.ban_key.is_empty() {
            self.bans.record(req.ban_key, StrikeKind::RateLimited, now_ns, events);
        }
        Verdict::RateLimited
    }

    /// Counts what the response showed (a 404/400/405, a malformed request) against `ban_key`.
    pub fn report(&self, ban_key: &[u8], kind: StrikeKind, now_ns: u64, events: &mut Vec<BanEvent>) -> Option<Ban> {
        self.bans.record(ban_key, kind, now_ns, events)
    }

    /// Verifies a challenge pass for `ban_key` and, when valid, clears the key's strikes for the pass's
    /// lifetime. `now_ns` and `now_unix_ms` are read together. Returns the pass's expiry (Unix seconds).
    pub fn honour_pass(&self, signer: &PassSigner, pass: &[u8], ban_key: &[u8], now_ns: u64, now_unix_ms: u64) -> Result<u64, PassError> {
        let expires = signer.verify(pass, ban_key, now_unix_ms / 1000)?;
        let left_ms = expires.saturating_mul(1000).saturating_sub(now_unix_ms);
        self.bans.clear_strikes(ban_key, now_ns.saturating_add(left_ms.saturating_mul(1_000_000)), now_ns);
        Ok(expires)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::defense::{BanSpec, BanTarget, Cidr};
    use crate::core::limit::{AlgorithmKind, LimitSpec};

    const S: u64 = 1_000_000_000;
    const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";

    fn defense(max_keys: f64, max_bans: f64) -> Defense {
        let mut l = LimitSpec::new("per-ip", AlgorithmKind::FixedWindow, 2.0, 1000.0);
        l.max_keys = Some(max_keys);
        let mut b = BanSpec::default();
        b.escalation.jitter = 0.0;
        b.max_bans = max_bans;
        b.max_tracked = max_keys;
        Defense::new(LimitSet::new(&[l]).unwrap(), BanTable::new(b.validate("bans").unwrap(), 1))
    }

    fn req<'a>(ip: &str, keys: &'a [Option<&'a [u8]>]) -> Request<'a> {
        Request { ip: Some(ip.parse().unwrap()), skip: false, ban_key: keys[0].unwrap_or_default(), limit_keys: keys, cost: 1, costs: &[], passed: false }
    }

    #[test]
    fn allow_beats_deny_bans_and_limits_and_deny_beats_bans() {
        let d = defense(1000.0, 1000.0);
        let lists = AccessLists::new(&["10.0.0.0/8"], &["10.1.2.3", "192.0.2.0/24"]).unwrap();
        let mut ev = Vec::new();
        d.bans().ban(BanTarget::Key(b"10.1.2.3"[..].into()), "op", None, 0, &mut ev).unwrap();
        d.bans().ban(BanTarget::Cidr(Cidr::parse("192.0.2.0/24").unwrap()), "op", None, 0, &mut ev).unwrap();
        let mut out = Outcome::default();
        let k = [Some(&b"10.1.2.3"[..])];
        // Allow-listed: exempt from the deny list, the ban and the limit (never counted).
        for _ in 0..10 {
            assert_eq!(d.decide(&lists, &req("10.1.2.3", &k), 0, &mut out, &mut ev), Verdict::Exempt);
        }
        assert_eq!(d.limits().limit(0).check(b"10.1.2.3", 0, 0).remaining, 2);
        // Deny-listed and banned: the deny list answers first.
        let k2 = [Some(&b"192.0.2.9"[..])];
        assert_eq!(d.decide(&lists, &req("192.0.2.9", &k2), 0, &mut out, &mut ev), Verdict::DenyListed);
        assert!(out.ban.is_none());
        // Banned only (by CIDR here): 403 with the ban, and the limit is not counted.
        let open = AccessLists::default();
        assert_eq!(d.decide(&open, &req("192.0.2.9", &k2), 0, &mut out, &mut ev), Verdict::Banned);
        assert_eq!((out.ban.as_ref().unwrap().by_cidr, Verdict::Banned.http_status()), (true, 403));
        assert_eq!(d.limits().limit(0).check(b"192.0.2.9", 0, 0).remaining, 2);
        // skip() exempts like the allow list.
        let skipped = Request { skip: true, ..req("192.0.2.9", &k2) };
        assert_eq!(d.decide(&lists, &skipped, 0, &mut out, &mut ev), Verdict::Exempt);
    }

    #[test]
    fn three_refusals_ban_the_key_until_the_ban_expires() {
        let d = defense(1000.0, 1000.0);
        let lists = AccessLists::default();
        let (mut out, mut ev) = (Outcome::default(), Vec::new());
        let k = [Some(&b"203.0.113.7"[..])];
        let r = req("203.0.113.7", &k);
        let verdicts: Vec<Verdict> = (0..6).map(|_| d.decide(&lists, &r, 0, &mut out, &mut ev)).collect();
        use Verdict::*;
        assert_eq!(verdicts, vec![Pass, Pass, RateLimited, RateLimited, RateLimited, Banned]);
        assert_eq!(ev.len(), 1, "the third refusal banned");
        assert_eq!(RateLimited.http_status(), 429);
        assert_eq!(out.ban.as_ref().unwrap().retry_after_ns(0), 300 * S);
        // The default rule: 5 minutes. Then the window and the ban are over.
        assert_eq!(d.decide(&lists, &r, 300 * S - 1, &mut out, &mut ev), Banned);
        assert_eq!(d.decide(&lists, &r, 300 * S, &mut out, &mut ev), Pass);
        // Another client is unaffected throughout.
        let k2 = [Some(&b"203.0.113.8"[..])];
        assert_eq!(d.decide(&lists, &req("203.0.113.8", &k2), 0, &mut out, &mut ev), Pass);
    }

    #[test]
    fn a_valid_pass_clears_strikes_for_its_lifetime() {
        let d = defense(1000.0, 1000.0);
        let signer = PassSigner::new(&[SECRET]).unwrap();
        let lists = AccessLists::default();
        let (mut out, mut ev) = (Outcome::default(), Vec::new());
        let k = [Some(&b"203.0.113.7"[..])];
        let r = req("203.0.113.7", &k);
        // Unix time 1_000_000 s at monotonic 0; the pass runs to 1_000_600 s (10 minutes).
        let pass = signer.mint(b"203.0.113.7", 1_000_600).unwrap();
        assert_eq!(d.honour_pass(&signer, pass.as_bytes(), b"203.0.113.8", 0, 1_000_000_000), Err(PassError::WrongKey));
        assert_eq!(d.honour_pass(&signer, pass.as_bytes(), b"203.0.113.7", 0, 1_000_000_000), Ok(1_000_600));
        let mut refused = 0;
        for i in 0..20 {
            for _ in 0..5 {
                let v = d.decide(&lists, &r, i * S, &mut out, &mut ev);
                assert_ne!(v, Verdict::Banned, "cleared: refusals count no strikes");
                refused += usize::from(v == Verdict::RateLimited);
            }
        }
        assert_eq!((refused, ev.len()), (60, 0));
        // After the pass's lifetime, strikes count again.
        let t = 600 * S;
        let vs: Vec<Verdict> = (0..6).map(|_| d.decide(&lists, &r, t, &mut out, &mut ev)).collect();
        assert_eq!(vs.last(), Some(&Verdict::Banned));
        assert_eq!(d.honour_pass(&signer, pass.as_bytes(), b"203.0.113.7", t, 1_000_600_000), Err(PassError::Expired));
    }

    #[test]
    fn a_suspicious_key_is_challenged_until_a_pass_clears_its_strikes() {
        let d = defense(1000.0, 1000.0).with_challenge(2);
        let signer = PassSigner::new(&[SECRET]).unwrap();
        let lists = AccessLists::default();
        let (mut out, mut ev) = (Outcome::default(), Vec::new());
        let k = [Some(&b"203.0.113.7"[..])];
        let r = req("203.0.113.7", &k);
        use Verdict::*;
        let vs: Vec<Verdict> = (0..5).map(|_| d.decide(&lists, &r, 0, &mut out, &mut ev)).collect();
        // Two refusals are two strikes: challenged from then on (no third strike, so no ban).
        assert_eq!(vs, vec![Pass, Pass, RateLimited, RateLimited, Challenged]);
        assert_eq!((d.limits().limit(0).check(b"203.0.113.7", 0, 0).remaining, ev.len()), (0, 0));
        assert_eq!(Challenged.http_status(), 403);
        let pass = signer.mint(b"203.0.113.7", 1_000_600).unwrap();
        d.honour_pass(&signer, pass.as_bytes(), b"203.0.113.7", S / 2, 1_000_000_000).unwrap();
        // Cleared: the limit answers again (refusing until its window ends, counting no strike), then serves.
        for _ in 0..3 {
            assert_eq!(d.decide(&lists, &r, S / 2, &mut out, &mut ev), RateLimited);
        }
        assert_eq!((d.bans().live_strikes(b"203.0.113.7", S / 2), ev.len()), (0, 0));
        assert_eq!(d.decide(&lists, &r, S, &mut out, &mut ev), Pass);
        // Another key is not challenged.
        let k2 = [Some(&b"203.0.113.8"[..])];
        assert_eq!(d.decide(&lists, &req("203.0.113.8", &k2), 2 * S, &mut out, &mut ev), Pass);
    }

    /// Per IP 2 and per /24 4 per second (fixed windows), the /24 limit striking the /24; no jitter.
    fn per_ip_and_per_24() -> Defense {
        let mut per_ip = LimitSpec::new("per-ip", AlgorithmKind::FixedWindow, 2.0, 1000.0);
        per_ip.max_keys = Some(1000.0);
        let per_24 = LimitSpec::new("per-24", AlgorithmKind::FixedWindow, 4.0, 1000.0);
        let mut b = BanSpec::default();
        b.escalation.jitter = 0.0;
        Defense::new(LimitSet::new(&[per_ip, per_24]).unwrap(), BanTable::new(b.validate("bans").unwrap(), 1))
            .with_prefix_strikes(&[Some((32, 56)), Some((24, 48))], (32, 56))
    }

    /// One request from each of 198.51.100.1 ..= 10, a second apart: their verdicts.
    fn one_request_per_address_of_a_24(d: &Defense, lists: &AccessLists, out: &mut Outcome, ev: &mut Vec<BanEvent>) -> Vec<Verdict> {
        (1..=10u8)
            .map(|host| {
                let ip = format!("198.51.100.{host}");
                let keys = [Some(ip.as_bytes()), Some(&b"198.51.100.0/24"[..])];
                d.decide(lists, &req(&ip, &keys), u64::from(host) * 1000, out, ev)
            })
            .collect()
    }

    /// A crawler spread over a /24, one request per address: the /24 limit refuses, each refusal
    /// strikes the /24 (not the address, which has no strikes of its own), and the third bans the /24
    /// as a CIDR for the rule's 5 minutes. A per-IP refusal still strikes the address.
    #[test]
    fn a_refusal_by_a_prefix_limit_strikes_and_bans_the_prefix() {
        let d = per_ip_and_per_24();
        let lists = AccessLists::default();
        let (mut out, mut ev) = (Outcome::default(), Vec::new());
        use Verdict::*;
        let verdicts = one_request_per_address_of_a_24(&d, &lists, &mut out, &mut ev);
        for host in 1..=10u8 {
            assert_eq!(d.bans().live_strikes(format!("198.51.100.{host}").as_bytes(), 0), 0, "the address has no strike");
        }
        assert_eq!(verdicts, vec![Pass, Pass, Pass, Pass, RateLimited, RateLimited, RateLimited, Banned, Banned, Banned]);
        let cidr = Cidr::parse("198.51.100.0/24").unwrap();
        assert_eq!((ev.len(), &ev[0].ban.target), (1, &BanTarget::Cidr(cidr)));
        assert_eq!(d.bans().get(&BanTarget::Cidr(cidr), 0).unwrap().until_ns, Some(7000 + 300 * S));
        assert!(out.ban.as_ref().unwrap().by_cidr);
        // The next /24 is not banned; its per-IP refusals strike the address, as before.
        let k = [Some(&b"198.51.101.1"[..]), Some(&b"198.51.101.0/24"[..])];
        let vs: Vec<Verdict> = (0..6).map(|_| d.decide(&lists, &req("198.51.101.1", &k), 2 * S, &mut out, &mut ev)).collect();
        assert_eq!(vs, vec![Pass, Pass, RateLimited, RateLimited, RateLimited, Banned]);
        assert_eq!(ev[1].ban.target, BanTarget::Key(b"198.51.101.1"[..].into()));
        assert!(!out.ban.as_ref().unwrap().by_cidr);
        // Lifting the CIDR ban forgets the prefix's strikes (and its offence history).
        assert!(d.bans().lift(&BanTarget::Cidr(cidr), 3 * S, &mut ev));
        assert_eq!(d.bans().live_strikes(&cidr.strike_key(), 3 * S), 0);
        // An IPv6 client: the /48 limit is wider than the ban key's /56, so its /48 is struck.
        assert_eq!(d.strike_cidr(Some(1), Some("2001:db8:1:2::9".parse().unwrap())).unwrap().to_string(), "2001:db8:1::/48");
        // The per-IP limit (same prefixes as the ban key) strikes the ban key in both families.
        assert_eq!(d.strike_cidr(Some(0), Some("2001:db8:1:2::9".parse().unwrap())), None);
        assert_eq!(d.strike_cidr(Some(0), Some("198.51.100.1".parse().unwrap())), None);
    }

    /// With a challenge, a /24 whose limit refuses is challenged before the rule bans it: its strikes
    /// count for the challenge as its addresses' own do. A client with a valid pass goes on (the /24
    /// limit still refuses it) and its refusals strike nothing.
    #[test]
    fn a_prefix_with_strikes_is_challenged_before_it_is_banned() {
        let d = per_ip_and_per_24().with_challenge(2);
        let lists = AccessLists::default();
        let (mut out, mut ev) = (Outcome::default(), Vec::new());
        use Verdict::*;
        let verdicts = one_request_per_address_of_a_24(&d, &lists, &mut out, &mut ev);
        assert_eq!(verdicts, vec![Pass, Pass, Pass, Pass, RateLimited, RateLimited, Challenged, Challenged, Challenged, Challenged]);
        let cidr = Cidr::parse("198.51.100.0/24").unwrap();
        assert_eq!((ev.len(), d.bans().live_strikes(&cidr.strike_key(), 0)), (0, 2), "challenged, not banned");
        // A client of the /24 with a valid pass: refused by the /24 limit, never challenged, no strike.
        let keys = [Some(&b"198.51.100.77"[..]), Some(&b"198.51.100.0/24"[..])];
        let passed = Request { passed: true, ..req("198.51.100.77", &keys) };
        for _ in 0..5 {
            assert_eq!(d.decide(&lists, &passed, 20_000, &mut out, &mut ev), RateLimited);
        }
        assert_eq!((ev.len(), d.bans().live_strikes(&cidr.strike_key(), 0)), (0, 2));
        // Another /24 and IPv6 clients are not challenged by this one's strikes.
        let k = [Some(&b"198.51.101.1"[..]), Some(&b"198.51.101.0/24"[..])];
        assert_eq!(d.decide(&lists, &req("198.51.101.1", &k), 30_000, &mut out, &mut ev), Pass);
        let k6 = [Some(&b"2001:db8::1"[..]), Some(&b"2001:db8::/48"[..])];
        assert_eq!(d.decide(&lists, &req("2001:db8::1", &k6), 30_000, &mut out, &mut ev), Pass);
    }

    /// Every request from a new address, each hitting its limit and earning a ban: the limit's keys,
    /// the tracked strikes and the bans all stay at their caps.
    #[test]
    fn a_unique_ip_flood_through_the_chain_stays_bounded() {
        let d = defense(2000.0, 500.0);
        let lists = AccessLists::default();
        let (mut out, mut ev) = (Outcome::default(), Vec::new());
        for i in 0..30_000u32 {
            let ip = format!("100.{}.{}.{}", 64 + (i >> 16), (i >> 8) & 255, i & 255);
            let k = [Some(ip.as_bytes())];
            for _ in 0..5 {
                d.decide(&lists, &req(&ip, &k), u64::from(i) * 1000, &mut out, &mut ev);
            }
            ev.clear();
        }
        assert!(d.limits().limit(0).len() <= 2000);
        assert!(d.bans().tracked() <= 2000);
        assert_eq!(d.bans().len(), 500);
        assert_eq!(d.bans().stats().added, 30_000);
    }
}
