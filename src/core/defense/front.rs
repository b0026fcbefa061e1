//! The defense as a request reaches it: from what the binding reads off the request (the client
//! address as text, a challenge pass, each limit's key or "by address", the costs) to the chain's
//! verdict (`chain.rs`) and the figures the response needs. Also the composition the chain is built
//! from (limits, bans, the challenge, prefix strikes, the fair-share backstop) and the operator's view
//! of it (a ban target as text, a client's ban key, a pass to mint).
//!
//! The binding only reads arguments and writes results; every rule lives here, on time it is given
//! (`now_ns` on the monotonic clock the table runs on, `now_unix_ms` for passes: read together).
use super::ban::{BanEvent, BanTarget};
use super::chain::{Defense, Outcome, Request, Verdict};
use super::cidr::Cidr;
use super::fair::{FairShare, FairShareSpec};
use super::lists::AccessLists;
use super::rules::{BanSpec, StrikeKind};
use super::table::BanTable;
use crate::core::gate::IP_KEY_TAG;
use crate::core::health::LoopHealth;
use crate::core::ledger::ConfigError;
use crate::core::limit::{LimitSet, LimitSpec, Tightest, MAX_LIMITS};
use crate::core::net::ipkey::{client_addr, ip_bin_key, ip_key, ip_key_of, parse_ip, IpKeyBuf, IpKeyConfig, BIN_KEY_LEN};
use crate::core::shed::LagSignal;
use crate::core::token::pass::{PassError, PassSigner, MAX_PASS_LEN};
use std::net::IpAddr;

/// Client addresses longer than this are not addresses (`ipkey::MAX_INPUT_LEN` is 96): cut, they still
/// parse as none.
pub const MAX_IP_INPUT: usize = 128;

/// Prefix lengths (IPv4, IPv6) as the options give them, checked: 0..32 and 0..128.
pub fn address_prefixes(v4: u32, v6: u32, at: &str) -> Result<IpKeyConfig, ConfigError> {
    let (Ok(a), Ok(b)) = (u8::try_from(v4), u8::try_from(v6)) else {
        return Err(ConfigError(format!("{at}: prefixes must be 0..32 and 0..128")));
    };
    IpKeyConfig::new(a, b).map_err(|e| ConfigError(format!("{at}: {e}")))
}

/// Everything the defense is built from, read from the options.
pub struct FrontSpec<S> {
    pub limits: Vec<LimitSpec>,
    /// Per limit, the prefixes its address keys are masked to (`address_prefixes`).
    pub limit_prefixes: Vec<IpKeyConfig>,
    pub bans: BanSpec,
    /// Challenge-pass secrets, the first one minting; empty: no passes.
    pub challenge_secrets: Vec<S>,
    /// Live strikes at which a client is challenged; needs a secret.
    pub challenge_after: Option<u32>,
    /// The ban key's prefixes (the gatekeeper's `ipv4Prefix` / `ipv6Prefix`).
    pub ban_prefixes: IpKeyConfig,
    /// The fair-share backstop in front of the tier pool; `None`: off.
    pub fair_share: Option<FairShareSpec>,
}

/// A limit's key for one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeySpan {
    /// The limit does not apply.
    None,
    /// Count by the client address, masked to the limit's prefixes.
    Address,
    /// A given key (a header's value, a function's result): `keys[start..start + len]`.
    Given(u32, u32),
}

/// One request as the binding read it. Given keys are in the caller's buffer (`Scratch::keys`).
pub struct ClientRequest<'a> {
    /// The client address as text (cut to `MAX_IP_INPUT`).
    pub ip: &'a [u8],
    /// A challenge pass, if one came (longer than `MAX_PASS_LEN`: malformed).
    pub pass: Option<&'a [u8]>,
    /// The user's `skip(req)` said so.
    pub skip: bool,
    /// One per limit.
    pub keys: &'a [KeySpan],
    /// One cost for every limit, or (when not empty) one per limit.
    pub cost: u32,
    pub costs: &'a [u32],
}

/// What became of a challenge pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PassCheck {
    Absent,
    Valid,
    Refused(PassError),
}

/// A decision, with what the response needs (details per limit in `Scratch::outcome`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Answer {
    pub verdict: Verdict,
    pub pass: PassCheck,
    /// The client address, parsed once (the fair-share backstop ranks by it).
    pub ip: Option<IpAddr>,
    /// A refusal's wait (`RateLimited` only; else 0).
    pub retry_after_ns: u64,
    /// A shaper's delay for an admitted request (`Pass` only; else 0).
    pub delay_ns: u64,
    /// A ban's time left (`u64::MAX`: permanent) and whether it is a CIDR ban; 0 and false: none.
    pub ban_left_ns: u64,
    pub by_cidr: bool,
    /// `Pass` or `RateLimited` with a named limit that applied: the limit the response speaks of
    /// (`req.rateLimit`, the single-limit `RateLimit` fields; `Decision::tightest`). Else `None`.
    pub tightest: Option<Tightest>,
}

impl Answer {
    /// Whether the gate (tier pool, shed controller) decides this request in the same call: a `Pass`
    /// the shaper does not delay, or an `Exempt` one unless exempt requests end here (`exempt_ends`,
    /// the gatekeeper's `exemptSkipsShedding`). Refusals and delayed requests do not reach it.
    pub fn gate_follows(&self, exempt_ends: bool) -> bool {
        match self.verdict {
            Verdict::Pass => self.delay_ns == 0,
            Verdict::Exempt => !exempt_ends,
            _ => false,
        }
    }
}

/// Buffers a decision reuses (one per calling thread).
#[derive(Default)]
pub struct Scratch {
    /// Given keys, then the address keys made for this request.
    pub keys: Vec<u8>,
    pub outcome: Outcome,
    /// Ban changes this decision made.
    pub events: Vec<BanEvent>,
}

pub struct DefenseFront {
    defense: Defense,
    signer: Option<PassSigner>,
    /// Per limit, the prefixes its address keys are masked to.
    limit_prefixes: Vec<IpKeyConfig>,
    ban_prefixes: IpKeyConfig,
    fair: Option<FairShare>,
}

impl DefenseFront {
    /// Builds the chain from `spec`; `seed` drives the bans' jitter.
    pub fn new<S: AsRef<[u8]>>(spec: FrontSpec<S>, seed: u64) -> Result<DefenseFront, ConfigError> {
        let set = LimitSet::new(&spec.limits)?;
        let bans = spec.bans.validate("bans")?;
        let mut defense = Defense::new(set, BanTable::new(bans, seed));
        let signer = if spec.challenge_secrets.is_empty() { None } else { Some(PassSigner::new(&spec.challenge_secrets)?) };
        if let Some(after) = spec.challenge_after {
            if signer.is_none() {
                return Err(ConfigError("challenge.secret is required".into()));
            }
            defense = defense.with_challenge(after as usize);
        }
        // A limit by a wider prefix than the ban key's strikes (and bans) its prefix: header and
        // function limits carry the gatekeeper's prefixes, the ban key's, so they strike the ban key.
        let by_prefix: Vec<Option<(u8, u8)>> = spec.limit_prefixes.iter().map(|c| Some((c.ipv4_prefix, c.ipv6_prefix))).collect();
        let defense = defense.with_prefix_strikes(&by_prefix, (spec.ban_prefixes.ipv4_prefix, spec.ban_prefixes.ipv6_prefix));
        let fair = match spec.fair_share {
            Some(f) => Some(FairShare::new(f.validate("fairShare")?, spec.ban_prefixes)),
            None => None,
        };
        Ok(DefenseFront { defense, signer, limit_prefixes: spec.limit_prefixes, ban_prefixes: spec.ban_prefixes, fair })
    }

    /// Per limit, the prefixes its address keys are masked to (an admin call names a key as `decide`
    /// makes it).
    pub fn limit_prefixes(&self) -> &[IpKeyConfig] {
        &self.limit_prefixes
    }

    pub fn defense(&self) -> &Defense {
        &self.defense
    }

    pub fn fair_share(&self) -> Option<&FairShare> {
        self.fair.as_ref()
    }

    /// The fair-share backstop and the loop's load it ranks under (`health`: this thread's loop, for
    /// its lag part; `None`: the pool's level only).
    pub fn ranked(&self, health: Option<&LoopHealth>) -> Option<(&FairShare, f64)> {
        let f = self.fair.as_ref()?;
        Some((f, health.map_or(0.0, |h| f.load(LagSignal::Max.of(&h.sample())))))
    }

    /// The ban key of a client address as text (what bans, strikes and passes are bound to).
    pub fn ban_key<'b>(&self, ip: &[u8], buf: &'b mut IpKeyBuf) -> &'b [u8] {
        ip_key(ip, &self.ban_prefixes, buf)
    }

    /// An operator's target: a CIDR prefix (`/n`), or an address, keyed as requests are.
    pub fn operator_target(&self, text: &str) -> Result<BanTarget, ConfigError> {
        if text.contains('/') {
            return Cidr::parse(text).map(BanTarget::Cidr).map_err(|e| ConfigError(e.0));
        }
        if parse_ip(text.as_bytes()).is_none() {
            return Err(ConfigError(format!("{text:?} is not an IP address or CIDR prefix")));
        }
        let mut buf = IpKeyBuf::default();
        Ok(BanTarget::Key(self.ban_key(text.as_bytes(), &mut buf).into()))
    }

    /// Counts a strike of `kind` against the client at `ip` (text); the events (a ban, if a rule fired).
    pub fn report(&self, ip: &[u8], kind: StrikeKind, now_ns: u64, events: &mut Vec<BanEvent>) {
        let mut buf = IpKeyBuf::default();
        self.defense.report(self.ban_key(ip, &mut buf), kind, now_ns, events);
    }

    /// A challenge pass for the client at `ip`, valid until `expires_at_sec` (Unix seconds, whole).
    pub fn mint_pass(&self, ip: &[u8], expires_at_sec: f64) -> Result<String, ConfigError> {
        let Some(signer) = &self.signer else {
            return Err(ConfigError("mintPass needs options.challenge.secret".into()));
        };
        if !(expires_at_sec.is_finite() && expires_at_sec >= 0.0 && expires_at_sec.fract() == 0.0) {
            return Err(ConfigError("expiresAt must be a whole number of seconds >= 0".into()));
        }
        let mut buf = IpKeyBuf::default();
        signer.mint(self.ban_key(ip, &mut buf), expires_at_sec as u64)
    }

    /// Decides `req` at `now_ns` (`now_unix_ms` is read only to check a pass). Given keys are read
    /// from `sc.keys`, where the address keys are added; the details go to `sc.outcome`, ban changes
    /// to `sc.events`.
    #[inline]
    pub fn decide(&self, lists: &AccessLists, req: &ClientRequest, now_ns: u64, now_unix_ms: impl FnOnce() -> u64, sc: &mut Scratch) -> Answer {
        let n = self.defense.limits().len().min(req.keys.len());
        // Parsed once: the lists, the ban key and every limit's address key come from this.
        let ip = client_addr(&req.ip[..req.ip.len().min(MAX_IP_INPUT)]);
        // The ban key is text (what an operator writes in `bans.add`), so making it costs: it is made
        // up front only when something before the limits reads it (a pass, a ban held, the challenge).
        // Otherwise only a refusal needs it, for its strike, and it is made then (below). (A ban added
        // while this request runs may miss it by key, as if the request had come first.)
        let eager = req.pass.is_some() || self.defense.challenge_after().is_some() || !self.defense.bans().is_empty();
        let mut bkbuf = IpKeyBuf::default();
        let ban_key: &[u8] = if eager { ip_key_of(ip, &self.ban_prefixes, &mut bkbuf) } else { &[] };

        // A pass first: a valid one clears the key's strikes, so the challenge lets it on.
        let pass = match req.pass {
            None => PassCheck::Absent,
            Some(p) => match &self.signer {
                Some(signer) if p.len() <= MAX_PASS_LEN => match self.defense.honour_pass(signer, p, ban_key, now_ns, now_unix_ms()) {
                    Ok(_) => PassCheck::Valid,
                    Err(e) => PassCheck::Refused(e),
                },
                _ => PassCheck::Refused(PassError::Malformed),
            },
        };

        // Address keys: tagged binary (no one reads a limit's keys back), never equal to a given
        // key's UTF-8.
        let mut spans = [KeySpan::None; MAX_LIMITS];
        spans[..n].copy_from_slice(&req.keys[..n]);
        for (i, span) in spans.iter_mut().enumerate().take(n) {
            if *span == KeySpan::Address {
                let mut kb = [0u8; BIN_KEY_LEN];
                let len = ip_bin_key(ip, &self.limit_prefixes[i], IP_KEY_TAG, &mut kb);
                *span = KeySpan::Given(sc.keys.len() as u32, len as u32);
                sc.keys.extend_from_slice(&kb[..len]);
            }
        }
        let mut keys: [Option<&[u8]>; MAX_LIMITS] = [None; MAX_LIMITS];
        for (k, span) in keys.iter_mut().zip(&spans[..n]) {
            if let KeySpan::Given(a, l) = *span {
                *k = Some(&sc.keys[a as usize..(a + l) as usize]);
            }
        }
        let costs = if req.costs.is_empty() { &[][..] } else { &req.costs[..n.min(req.costs.len())] };
        let chain_req = Request { ip, skip: req.skip, ban_key, limit_keys: &keys[..n], cost: req.cost, costs, passed: pass == PassCheck::Valid };
        let verdict = self.defense.decide(lists, &chain_req, now_ns, &mut sc.outcome, &mut sc.events);
        if verdict == Verdict::RateLimited && !eager {
            // The strike the chain counts for a refusal with a ban key (chain.rs), counted here with
            // the key made now.
            let mut late = IpKeyBuf::default();
            self.defense.report(ip_key_of(ip, &self.ban_prefixes, &mut late), StrikeKind::RateLimited, now_ns, &mut sc.events);
        }
        let d = &sc.outcome.limits;
        let (ban_left_ns, by_cidr) = sc.outcome.ban.as_ref().map_or((0, false), |hit| (hit.retry_after_ns(now_ns), hit.by_cidr));
        Answer {
            verdict,
            pass,
            ip,
            retry_after_ns: if verdict == Verdict::RateLimited { d.retry_after_ns } else { 0 },
            delay_ns: if verdict == Verdict::Pass { d.delay_ns } else { 0 },
            ban_left_ns,
            by_cidr,
            tightest: if matches!(verdict, Verdict::Pass | Verdict::RateLimited) { d.tightest() } else { None },
        }
    }
}
