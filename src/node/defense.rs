//! `DefenseHandle`: the napi face of `core::defense::Defense` (allow/deny lists, bans, strike rules,
//! challenge passes, named limits), the abuse-defense half of the gatekeeper's decision.
//!
//! Construction, the ban API, the lists and passes are ordinary `#[napi]` (off the hot path). The
//! per-request decision is one raw callback, `defend(flags, ip, pass, cost, key0, ..)`, that `bind`
//! defines with the shared state as its data pointer: the client address and the keys are read into
//! stack buffers and a scratch buffer reused across calls, the details go to a Float64Array (`result`)
//! and the verdict comes back as a small integer. No allocation per request once warm.
//! `bind_gate` defines `defendAndDecide`, the same with the gate's `decide` (src/node/gate.rs) run in
//! the same call when the defense lets the request on: the gatekeeper crosses into Rust once.
//!
//! Keys: each limit's argument is `undefined` (the limit does not apply), `true` (count by the
//! client address, masked to the limit's prefixes) or a string (a header's value, a function's
//! result). Address keys are tagged (`IP_KEY_TAG`) so that a given key can never collide with one.
//! The ban key (what bans, strikes and passes are bound to) is the client-IP key, untagged: it is what
//! an operator writes in `bans.add('203.0.113.7')`.
use crate::core::clock::{Clock, MonotonicClock};
use crate::core::defense::{
    rng, AccessLists, Ban, BanEvent, BanRecord, BanSource, BanSpec, BanTable, BanTarget, Cidr, Defense, EscalationSpec, FairShare, FairShareSpec, Outcome,
    PassError, PassSigner, Request, StrikeKind, StrikeRuleSpec, Verdict, MAX_PASS_LEN,
};
use crate::core::gate::IP_KEY_TAG;
use crate::core::health::{sampler::SamplerOptions, LoopHealth};
use crate::core::limit::{AlgorithmKind, LimitSet, LimitSpec, MAX_LIMITS, NEVER};
use crate::core::names::named_enum;
use crate::core::net::ipkey::{client_addr, ip_bin_key, ip_key, ip_key_of, parse_ip, IpKeyBuf, IpKeyConfig, BIN_KEY_LEN};
use crate::core::shed::LagSignal;
use crate::node::gate::{decide_args, gate_now_ns, invalid, read_bounded, Bound as GateBound, GateHandle};
use crate::node::lag::{acquire_thread_sampler_with, SamplerGuard};
use crate::node::ledger::MAX_KEY_BYTES;
use crate::node::raw;
use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;
use parking_lot::{Mutex, RwLock};
use std::cell::UnsafeCell;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

named_enum! {
    /// The fixed part of the Float64Array `defend` fills; then, per limit i, its remaining units at
    /// `LIMITS + 2i` and its reset (ms) at `LIMITS + 2i + 1`, meaningful where `EVALUATED` has bit i.
    #[derive(Clone, Copy)]
    enum R: u8 {
        Verdict = "VERDICT",
        /// The refusing limit's index, or -1.
        RefusedBy = "REFUSED_BY",
        RetryAfterMs = "RETRY_AFTER_MS",
        /// A shaper's delay for an admitted request.
        DelayMs = "DELAY_MS",
        /// A ban's time left (Infinity: permanent).
        BanLeftMs = "BAN_LEFT_MS",
        ByCidr = "BY_CIDR",
        /// Ban events waiting for `takeEvents()`.
        Events = "EVENTS",
        /// 0: no pass presented; 1: valid; 2 + `PassError`: refused.
        Pass = "PASS",
        Evaluated = "EVALUATED",
        Limits = "LIMITS",
    }
}

/// The fixed fields (`R::Limits` names where the per-limit pairs start).
const FIXED: usize = R::NAMES.len() - 1;
const RESULT_LEN: usize = FIXED + 2 * MAX_LIMITS;
/// `defend`'s leading arguments before the keys.
const ARGS: usize = 4;
/// `flags` bit: the user's `skip(req)` said so.
const FLAG_SKIP: i32 = 1;
/// `flags` bit (the combined call): an exempt request is served without the gate (`exemptSkipsShedding`).
const FLAG_EXEMPT_ENDS: i32 = 2;
/// The combined call's gate arguments, before the defense's.
const GATE_ARGS: usize = 3;
/// Limits whose keys the hot path reads in its first `napi_get_cb_info`: N-API fills every slot it is
/// given (the missing ones with `undefined`, a few instructions each), so sets of more limits are read
/// again with room for `MAX_LIMITS`.
const FEW_LIMITS: usize = 4;
/// Client addresses longer than this are not addresses (`ipkey::MAX_INPUT_LEN` is 96).
const MAX_IP_INPUT: usize = 128;

#[napi(object)]
pub struct LimitOptions {
    pub name: String,
    pub algorithm: String,
    pub limit: f64,
    pub window_ms: f64,
    pub burst: Option<f64>,
    pub max_delay_ms: Option<f64>,
    pub max_keys: Option<f64>,
    /// The prefixes an address key is masked to (lib/defense checks them).
    pub ipv4_prefix: u32,
    pub ipv6_prefix: u32,
}

#[napi(object)]
pub struct StrikeRuleOptions {
    pub name: String,
    /// 'rate-limited' or 'probe'.
    pub on: String,
    pub threshold: f64,
    pub window_ms: f64,
    pub ban_ms: f64,
}

#[napi(object)]
pub struct BanOptions {
    pub rules: Vec<StrikeRuleOptions>,
    pub factor: f64,
    pub max_ban_ms: f64,
    pub memory_ms: f64,
    /// Absent: never permanent.
    pub permanent_after: Option<f64>,
    pub jitter: f64,
    pub max_bans: f64,
    pub max_tracked: f64,
}

/// `fairShare` (lib/defense fills in the defaults, `defenseConstants().fairShareDefaults`).
#[napi(object)]
pub struct FairShareOptions {
    pub reserve: f64,
    pub window_ms: f64,
    pub max_share: f64,
    /// The subnet's prefixes; absent: addresses only.
    pub subnet_v4: Option<u32>,
    pub subnet_v6: Option<u32>,
    pub slots: f64,
    /// The loop lag above which the pool counts as short; 0: the pool's level only.
    pub lag_ms: f64,
}

#[napi(object)]
pub struct DefenseOptions {
    pub limits: Vec<LimitOptions>,
    pub bans: BanOptions,
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    /// Challenge-pass secrets, the first one minting.
    pub challenge_secrets: Option<Vec<Buffer>>,
    /// Live strikes at which a client is challenged.
    pub challenge_after: Option<u32>,
    /// The ban key's prefixes (the gatekeeper's `ipv4Prefix` / `ipv6Prefix`).
    pub ipv4_prefix: u32,
    pub ipv6_prefix: u32,
    /// The fair-share backstop in front of the tier pool; absent: off.
    pub fair_share: Option<FairShareOptions>,
}

/// A ban as JS sees it: times in Unix milliseconds.
#[napi(object)]
pub struct BanInfo {
    /// The banned key (a client-IP key) or prefix, as text.
    pub target: String,
    pub cidr: bool,
    pub reason: String,
    pub source: String,
    pub offense: u32,
    pub since: f64,
    /// null: permanent.
    pub until: Option<f64>,
}

#[napi(object)]
pub struct BanEventInfo {
    pub kind: String,
    pub ban: BanInfo,
}

#[napi(object)]
pub struct ImportResult {
    pub applied: u32,
    pub skipped: u32,
    pub refused: u32,
}

#[napi(object)]
pub struct LimitPolicy {
    pub name: String,
    pub quota: f64,
    pub window_ms: f64,
}

#[napi(object)]
pub struct LimitStats {
    pub name: String,
    pub keys: u32,
    pub max_keys: u32,
}

#[napi(object)]
pub struct DefenseStats {
    pub bans: u32,
    pub tracked: u32,
    pub added: f64,
    pub lifted: f64,
    pub expired: f64,
    pub evicted: f64,
    pub refused: f64,
    pub limits: Vec<LimitStats>,
    /// Requests the fair-share backstop refused (0 when it is off).
    pub fair_share_refused: f64,
}

struct Lists {
    access: AccessLists,
    allow: Vec<String>,
    deny: Vec<String>,
}

pub(crate) struct Shared {
    pub(crate) defense: Defense,
    /// Replaced whole by `setLists`; a decision reads whichever it locked (core/defense/lists.rs).
    lists: RwLock<Arc<Lists>>,
    signer: Option<PassSigner>,
    /// Per limit, the prefixes its address keys are masked to.
    pub(crate) ip_cfgs: Vec<IpKeyConfig>,
    ban_ip: IpKeyConfig,
    /// Ban events the hot path produced, for `takeEvents()`.
    pending: Mutex<Vec<BanEvent>>,
    fair: Option<FairShare>,
    /// This thread's loop health, for the fair-share backstop's lag part (`lagMs` > 0).
    loop_health: Option<Arc<LoopHealth>>,
}

/// What the raw callback carries: the shared state and this thread's reusable buffers.
struct Bound {
    shared: Arc<Shared>,
    out: Box<UnsafeCell<[f64; RESULT_LEN]>>,
    scratch: UnsafeCell<Scratch>,
}

#[derive(Default)]
struct Scratch {
    keys: Vec<u8>,
    outcome: Outcome,
    events: Vec<BanEvent>,
}

// `out` and `scratch` are only used by the JS thread that owns the function (one call at a time).
unsafe impl Send for Bound {}
unsafe impl Sync for Bound {}

#[napi]
pub struct DefenseHandle {
    pub(crate) shared: Arc<Shared>,
    /// Keeps this thread's lag sampler running for `loop_health`.
    _sampler: Option<SamplerGuard>,
    /// What `bind` gave `defend` (its result buffer is the one JS reads), for `bind_gate`.
    bound: Mutex<Option<Arc<Bound>>>,
}

/// The combined call's state: the defense's and the gate's, on the thread that bound both.
struct Both {
    defense: Arc<Bound>,
    gate: Arc<GateBound>,
}

fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// The monotonic clock the table runs on and the wall clock records use, read together.
fn now_pair() -> (u64, u64) {
    (MonotonicClock.now_ns(), unix_ms())
}

fn prefixes(v4: u32, v6: u32, at: &str) -> Result<IpKeyConfig> {
    let (Ok(a), Ok(b)) = (u8::try_from(v4), u8::try_from(v6)) else {
        return Err(invalid(format!("{at}: prefixes must be 0..32 and 0..128")));
    };
    IpKeyConfig::new(a, b).map_err(|e| invalid(format!("{at}: {e}")))
}

fn limit_spec(l: &LimitOptions, i: usize) -> Result<LimitSpec> {
    let algorithm = AlgorithmKind::parse(&format!("limits[{i}]"), &l.algorithm).map_err(|e| invalid(e.0))?;
    Ok(LimitSpec {
        name: l.name.clone(),
        algorithm,
        limit: l.limit,
        window_ms: l.window_ms,
        burst: l.burst,
        max_delay_ms: l.max_delay_ms,
        max_keys: l.max_keys,
    })
}

fn ban_spec(b: &BanOptions) -> Result<BanSpec> {
    let mut rules = Vec::with_capacity(b.rules.len());
    for (i, r) in b.rules.iter().enumerate() {
        let on = StrikeKind::ALL
            .iter()
            .copied()
            .find(|k| k.as_str() == r.on)
            .ok_or_else(|| invalid(format!("bans.rules[{i}].on must be one of {} (got {:?})", StrikeKind::NAMES.join(", "), r.on)))?;
        rules.push(StrikeRuleSpec { name: r.name.clone(), on, threshold: r.threshold, window_ms: r.window_ms, ban_ms: r.ban_ms });
    }
    Ok(BanSpec {
        rules,
        escalation: EscalationSpec { factor: b.factor, max_ban_ms: b.max_ban_ms, memory_ms: b.memory_ms, permanent_after: b.permanent_after, jitter: b.jitter },
        max_bans: b.max_bans,
        max_tracked: b.max_tracked,
    })
}

fn lists(allow: Vec<String>, deny: Vec<String>) -> Result<Lists> {
    let access = AccessLists::new(&allow, &deny).map_err(|e| invalid(e.0))?;
    Ok(Lists { access, allow, deny })
}

fn target_text(t: &BanTarget) -> (String, bool) {
    match t {
        BanTarget::Key(k) => (String::from_utf8_lossy(k).into_owned(), false),
        BanTarget::Cidr(c) => (c.to_string(), true),
    }
}

fn ban_info(b: &Ban, now_ns: u64, now_ms: u64) -> BanInfo {
    let (target, cidr) = target_text(&b.target);
    let since = now_ms.saturating_sub(now_ns.saturating_sub(b.since_ns) / 1_000_000) as f64;
    let until =
        b.until_ns.map(|u| if u >= now_ns { now_ms as f64 + ((u - now_ns) as f64 / 1e6).ceil() } else { now_ms as f64 - ((now_ns - u) as f64 / 1e6).floor() });
    BanInfo { target, cidr, reason: b.reason.to_string(), source: b.source.as_str().to_string(), offense: b.offense, since, until }
}

fn event_infos(events: Vec<BanEvent>, now_ns: u64, now_ms: u64) -> Vec<BanEventInfo> {
    events.into_iter().map(|e| BanEventInfo { kind: e.kind.as_str().to_string(), ban: ban_info(&e.ban, now_ns, now_ms) }).collect()
}

impl Shared {
    /// An operator's target: a CIDR prefix (`/n`), or an address, keyed as requests are.
    fn target(&self, text: &str) -> Result<BanTarget> {
        if text.contains('/') {
            return Cidr::parse(text).map(BanTarget::Cidr).map_err(|e| invalid(e.0));
        }
        if parse_ip(text.as_bytes()).is_none() {
            return Err(invalid(format!("{text:?} is not an IP address or CIDR prefix")));
        }
        let mut buf = IpKeyBuf::default();
        Ok(BanTarget::Key(ip_key(text.as_bytes(), &self.ban_ip, &mut buf).into()))
    }
}

fn ms_to_ns(ms: f64, at: &str) -> Result<u64> {
    if ms.is_finite() && ms > 0.0 && ms <= 1e12 {
        Ok(((ms * 1e6).round() as u64).max(1))
    } else {
        Err(invalid(format!("{at} must be a finite number > 0 and at most 1e12 ms")))
    }
}

#[napi]
impl DefenseHandle {
    #[napi(constructor, catch_unwind)]
    pub fn new(env: Env, o: DefenseOptions) -> Result<Self> {
        let _panic = raw::throw_on_panic(&env, "DefenseHandle::new");
        let specs: Vec<LimitSpec> = o.limits.iter().enumerate().map(|(i, l)| limit_spec(l, i)).collect::<Result<_>>()?;
        let set = LimitSet::new(&specs).map_err(|e| invalid(e.0))?;
        let ip_cfgs: Vec<IpKeyConfig> =
            o.limits.iter().enumerate().map(|(i, l)| prefixes(l.ipv4_prefix, l.ipv6_prefix, &format!("limits[{i}].by"))).collect::<Result<_>>()?;
        let cfg = ban_spec(&o.bans)?.validate("bans").map_err(|e| invalid(e.0))?;
        let mut defense = Defense::new(set, BanTable::new(cfg, rng::random_seed()));
        let signer = match &o.challenge_secrets {
            Some(s) if !s.is_empty() => Some(PassSigner::new(s).map_err(|e| invalid(e.0))?),
            _ => None,
        };
        if let Some(after) = o.challenge_after {
            if signer.is_none() {
                return Err(invalid("challenge.secret is required"));
            }
            defense = defense.with_challenge(after as usize);
        }
        let ban_ip = prefixes(o.ipv4_prefix, o.ipv6_prefix, "ipv4Prefix/ipv6Prefix")?;
        // A limit by a wider prefix than the ban key's strikes (and bans) its prefix: header and
        // function limits carry the gatekeeper's prefixes, the ban key's, so they strike the ban key.
        let by_prefix: Vec<Option<(u8, u8)>> = ip_cfgs.iter().map(|c: &IpKeyConfig| Some((c.ipv4_prefix, c.ipv6_prefix))).collect();
        let defense = defense.with_prefix_strikes(&by_prefix, (ban_ip.ipv4_prefix, ban_ip.ipv6_prefix));
        let lists = lists(o.allow, o.deny)?;
        let fair = match &o.fair_share {
            None => None,
            Some(f) => {
                let subnet = match (f.subnet_v4, f.subnet_v6) {
                    (Some(a), Some(b)) => Some((a, b)),
                    (None, None) => None,
                    _ => return Err(invalid("fairShare.subnet needs both prefixes")),
                };
                let spec = FairShareSpec { reserve: f.reserve, window_ms: f.window_ms, max_share: f.max_share, subnet, slots: f.slots, lag_ms: f.lag_ms };
                Some(FairShare::new(spec.validate("fairShare").map_err(|e| invalid(e.0))?, ban_ip))
            }
        };
        // The gate's sampler may be off (shed: false): the backstop's lag part keeps its own.
        let sampler = match &fair {
            Some(f) if f.config().lag_ms > 0.0 => Some(acquire_thread_sampler_with(env.raw(), SamplerOptions::default())?),
            _ => None,
        };
        let loop_health = sampler.as_ref().map(|g| g.health().clone());
        let shared =
            Arc::new(Shared { defense, lists: RwLock::new(Arc::new(lists)), signer, ip_cfgs, ban_ip, pending: Mutex::new(Vec::new()), fair, loop_health });
        Ok(DefenseHandle { shared, _sampler: sampler, bound: Mutex::new(None) })
    }

    /// Defines the hot-path function `defend` and the Float64Array `result` on `target`.
    #[napi(catch_unwind)]
    pub fn bind(&self, env: Env, target: Object) -> Result<()> {
        let _panic = raw::throw_on_panic(&env, "DefenseHandle::bind");
        let scratch = Scratch { keys: Vec::with_capacity(1024), ..Scratch::default() };
        let bound = Arc::new(Bound { shared: self.shared.clone(), out: Box::new(UnsafeCell::new([0.0; RESULT_LEN])), scratch: UnsafeCell::new(scratch) });
        let (env, target) = (env.raw(), target.raw());
        unsafe {
            raw::define_f64_view(env, target, c"result", bound.out.get() as *mut f64, RESULT_LEN, &bound)?;
            raw::define_fn(env, target, "defend", defend, bound.clone())?;
        }
        *self.bound.lock() = Some(bound);
        Ok(())
    }

    /// Defines `defendAndDecide(sel, header, key, flags, ip, pass, cost, key0, ..)` on `target`: the
    /// defense and, when it lets the request on at once, the gate's decision in the same native call
    /// (one crossing, one clock read for each). Returns `defense verdict | (gate verdict + 1) << 4`,
    /// the high part 0 when the gate did not decide (a refusal, a shaper's delay, or an exempt request
    /// with `FLAG_EXEMPT_ENDS`). Both results go to their `result` arrays. Call after both `bind`s.
    #[napi(catch_unwind)]
    pub fn bind_gate(&self, env: Env, target: Object, gate: &GateHandle) -> Result<()> {
        let _panic = raw::throw_on_panic(&env, "DefenseHandle::bind_gate");
        let (Some(defense), Some(gate)) = (self.bound.lock().clone(), gate.bound()) else {
            return Err(invalid("bind_gate: bind the defense and the gate first"));
        };
        unsafe { raw::define_fn(env.raw(), target.raw(), "defendAndDecide", defend_and_decide, Arc::new(Both { defense, gate })) }
    }

    /// Replaces both lists at once (errors name the entry; nothing changes on an error).
    #[napi(catch_unwind)]
    pub fn set_lists(&self, env: Env, allow: Vec<String>, deny: Vec<String>) -> Result<()> {
        let _panic = raw::throw_on_panic(&env, "DefenseHandle::set_lists");
        let l = Arc::new(lists(allow, deny)?);
        *self.shared.lists.write() = l;
        Ok(())
    }

    /// `[allow, deny]` as given.
    #[napi(catch_unwind)]
    pub fn lists(&self, env: Env) -> Vec<Vec<String>> {
        let _panic = raw::throw_on_panic(&env, "DefenseHandle::lists");
        let l = self.shared.lists.read().clone();
        vec![l.allow.clone(), l.deny.clone()]
    }

    /// An operator's ban of an address (keyed as requests are) or a CIDR prefix, for `duration_ms`
    /// (absent: permanent). Returns the events (empty if a longer ban was already there).
    #[napi(catch_unwind)]
    pub fn ban(&self, env: Env, target: String, duration_ms: Option<f64>, reason: String) -> Result<Vec<BanEventInfo>> {
        let _panic = raw::throw_on_panic(&env, "DefenseHandle::ban");
        let t = self.shared.target(&target)?;
        let d = duration_ms.map(|ms| ms_to_ns(ms, "durationMs")).transpose()?;
        let (ns, ms) = now_pair();
        let mut ev = Vec::new();
        let full = self.shared.defense.bans().ban(t, &reason, d, ns, &mut ev).is_err();
        let out = event_infos(ev, ns, ms);
        if full {
            return Err(Error::new(Status::GenericFailure, "the ban table is full of permanent bans (bans.maxBans)".to_string()));
        }
        Ok(out)
    }

    /// Lifts the ban on `target`; the events (empty when there was none).
    #[napi(catch_unwind)]
    pub fn lift(&self, env: Env, target: String) -> Result<Vec<BanEventInfo>> {
        let _panic = raw::throw_on_panic(&env, "DefenseHandle::lift");
        let t = self.shared.target(&target)?;
        let (ns, ms) = now_pair();
        let mut ev = Vec::new();
        self.shared.defense.bans().lift(&t, ns, &mut ev);
        Ok(event_infos(ev, ns, ms))
    }

    /// The ban on `target`, if one is live.
    #[napi(catch_unwind)]
    pub fn get(&self, env: Env, target: String) -> Result<Option<BanInfo>> {
        let _panic = raw::throw_on_panic(&env, "DefenseHandle::get");
        let t = self.shared.target(&target)?;
        let (ns, ms) = now_pair();
        Ok(self.shared.defense.bans().get(&t, ns).map(|b| ban_info(&b, ns, ms)))
    }

    #[napi(catch_unwind)]
    pub fn list(&self, env: Env) -> Vec<BanInfo> {
        let _panic = raw::throw_on_panic(&env, "DefenseHandle::list");
        let (ns, ms) = now_pair();
        self.shared.defense.bans().list(ns).iter().map(|b| ban_info(b, ns, ms)).collect()
    }

    /// Removes expired bans; their `expired` events.
    #[napi(catch_unwind)]
    pub fn sweep(&self, env: Env) -> Vec<BanEventInfo> {
        let _panic = raw::throw_on_panic(&env, "DefenseHandle::sweep");
        let (ns, ms) = now_pair();
        let mut ev = Vec::new();
        self.shared.defense.bans().sweep(ns, &mut ev);
        event_infos(ev, ns, ms)
    }

    /// The events decisions produced since the last call.
    #[napi(catch_unwind)]
    pub fn take_events(&self, env: Env) -> Vec<BanEventInfo> {
        let _panic = raw::throw_on_panic(&env, "DefenseHandle::take_events");
        let ev = std::mem::take(&mut *self.shared.pending.lock());
        let (ns, ms) = now_pair();
        event_infos(ev, ns, ms)
    }

    /// Counts what a response showed ('probe') or any strike kind against the client at `ip`; the
    /// events (a ban, if a rule fired).
    #[napi(catch_unwind)]
    pub fn report(&self, env: Env, ip: String, kind: String) -> Result<Vec<BanEventInfo>> {
        let _panic = raw::throw_on_panic(&env, "DefenseHandle::report");
        let kind = StrikeKind::ALL
            .iter()
            .copied()
            .find(|k| k.as_str() == kind)
            .ok_or_else(|| invalid(format!("kind must be one of {}", StrikeKind::NAMES.join(", "))))?;
        let mut buf = IpKeyBuf::default();
        let key = ip_key(ip.as_bytes(), &self.shared.ban_ip, &mut buf);
        let (ns, ms) = now_pair();
        let mut ev = Vec::new();
        self.shared.defense.report(key, kind, ns, &mut ev);
        Ok(event_infos(ev, ns, ms))
    }

    /// The live bans as records (Unix ms), for persistence and sharing.
    #[napi(catch_unwind)]
    pub fn export(&self, env: Env) -> Vec<BanInfo> {
        let _panic = raw::throw_on_panic(&env, "DefenseHandle::export");
        let (ns, ms) = now_pair();
        self.shared
            .defense
            .bans()
            .export(ns, ms)
            .into_iter()
            .map(|r| {
                let (target, cidr) = target_text(&r.target);
                BanInfo {
                    target,
                    cidr,
                    reason: r.reason,
                    source: r.source.as_str().to_string(),
                    offense: r.offense,
                    since: r.since_unix_ms as f64,
                    until: r.until_unix_ms.map(|u| u as f64),
                }
            })
            .collect()
    }

    /// Adds exported records (the longer ban wins). Returns the counts and queues the events.
    #[napi(catch_unwind)]
    pub fn import(&self, env: Env, records: Vec<BanInfo>) -> Result<ImportResult> {
        let _panic = raw::throw_on_panic(&env, "DefenseHandle::import");
        let ms_field =
            |v: f64, at: String| if v.is_finite() && v >= 0.0 { Ok(v as u64) } else { Err(invalid(format!("{at} must be a finite number >= 0 (Unix ms)"))) };
        let mut recs = Vec::with_capacity(records.len());
        for (i, r) in records.into_iter().enumerate() {
            let target = if r.cidr {
                BanTarget::Cidr(Cidr::parse(&r.target).map_err(|e| invalid(format!("records[{i}].target: {}", e.0)))?)
            } else {
                BanTarget::Key(r.target.as_bytes().into())
            };
            let source = BanSource::ALL
                .iter()
                .copied()
                .find(|s| s.as_str() == r.source)
                .ok_or_else(|| invalid(format!("records[{i}].source must be one of {}", BanSource::NAMES.join(", "))))?;
            let until_unix_ms = r.until.map(|u| ms_field(u, format!("records[{i}].until"))).transpose()?;
            recs.push(BanRecord {
                target,
                reason: r.reason,
                since_unix_ms: ms_field(r.since, format!("records[{i}].since"))?,
                until_unix_ms,
                offense: r.offense,
                source,
            });
        }
        let (ns, ms) = now_pair();
        let mut ev = Vec::new();
        let rep = self.shared.defense.bans().import(&recs, ns, ms, &mut ev);
        self.shared.pending.lock().extend(ev);
        Ok(ImportResult { applied: rep.applied as u32, skipped: rep.skipped as u32, refused: rep.refused as u32 })
    }

    /// The ban key of a client address (what bans and passes are bound to).
    #[napi(catch_unwind)]
    pub fn ban_key(&self, env: Env, ip: String) -> String {
        let _panic = raw::throw_on_panic(&env, "DefenseHandle::ban_key");
        let mut buf = IpKeyBuf::default();
        String::from_utf8_lossy(ip_key(ip.as_bytes(), &self.shared.ban_ip, &mut buf)).into_owned()
    }

    /// A challenge pass for the client at `ip`, valid until `expires_at_sec` (Unix seconds).
    #[napi(catch_unwind)]
    pub fn mint_pass(&self, env: Env, ip: String, expires_at_sec: f64) -> Result<String> {
        let _panic = raw::throw_on_panic(&env, "DefenseHandle::mint_pass");
        let Some(signer) = &self.shared.signer else {
            return Err(invalid("mintPass needs options.challenge.secret"));
        };
        if !(expires_at_sec.is_finite() && expires_at_sec >= 0.0 && expires_at_sec.fract() == 0.0) {
            return Err(invalid("expiresAt must be a whole number of seconds >= 0"));
        }
        let mut buf = IpKeyBuf::default();
        signer.mint(ip_key(ip.as_bytes(), &self.shared.ban_ip, &mut buf), expires_at_sec as u64).map_err(|e| invalid(e.0))
    }

    /// Each limit's `q` and `w` (for RateLimit-Policy), in order.
    #[napi(catch_unwind)]
    pub fn policies(&self, env: Env) -> Vec<LimitPolicy> {
        let _panic = raw::throw_on_panic(&env, "DefenseHandle::policies");
        let l = self.shared.defense.limits();
        (0..l.len())
            .map(|i| LimitPolicy { name: l.name(i).to_string(), quota: l.policy(i).quota as f64, window_ms: l.policy(i).window_ns as f64 / 1e6 })
            .collect()
    }

    #[napi(catch_unwind)]
    pub fn stats(&self, env: Env) -> DefenseStats {
        let _panic = raw::throw_on_panic(&env, "DefenseHandle::stats");
        let b = self.shared.defense.bans();
        let s = b.stats();
        let l = self.shared.defense.limits();
        DefenseStats {
            bans: b.len() as u32,
            tracked: b.tracked() as u32,
            added: s.added as f64,
            lifted: s.lifted as f64,
            expired: s.expired as f64,
            evicted: s.evicted as f64,
            refused: s.refused as f64,
            limits: (0..l.len())
                .map(|i| LimitStats { name: l.name(i).to_string(), keys: l.limit(i).len() as u32, max_keys: l.limit(i).max_keys() as u32 })
                .collect(),
            fair_share_refused: self.shared.fair.as_ref().map_or(0.0, |f| f.refused() as f64),
        }
    }
}

/// What lib/defense shares with `defend`, declared once on this side: `result` (indices; `LIMITS`
/// is where the per-limit pairs start, `LENGTH`), `verdictNames`, `verdictStatus`, `passErrors`,
/// `algorithms`, `strikeKinds`, `maxLimits`, `flags` (`SKIP`), `args` (leading arguments), and
/// `banDefaults` (the default rules and escalation, as options). Frozen.
#[napi(js_name = "defenseConstants", catch_unwind)]
pub fn defense_constants(env: Env) -> Result<Object<'static>> {
    let _panic = raw::throw_on_panic(&env, "defense_constants");
    let freeze = |o: Object| -> Result<Object<'static>> {
        unsafe {
            raw::check(sys::napi_object_freeze(env.raw(), o.raw()))?;
            Ok(Object::from_raw(env.raw(), o.raw()))
        }
    };
    let mut result = Object::new(&env)?;
    for (i, n) in R::NAMES.iter().enumerate() {
        result.set(n, i as u32)?;
    }
    result.set("LENGTH", RESULT_LEN as u32)?;
    let d = BanSpec::default();
    let mut rules = Vec::new();
    for r in &d.rules {
        let mut o = Object::new(&env)?;
        o.set("name", r.name.as_str())?;
        o.set("on", r.on.as_str())?;
        o.set("threshold", r.threshold)?;
        o.set("windowMs", r.window_ms)?;
        o.set("banMs", r.ban_ms)?;
        rules.push(freeze(o)?);
    }
    let mut esc = Object::new(&env)?;
    esc.set("factor", d.escalation.factor)?;
    esc.set("maxBanMs", d.escalation.max_ban_ms)?;
    esc.set("memoryMs", d.escalation.memory_ms)?;
    match d.escalation.permanent_after {
        Some(k) => esc.set("permanentAfter", k)?,
        None => esc.set("permanentAfter", false)?,
    }
    esc.set("jitter", d.escalation.jitter)?;
    let mut bans = Object::new(&env)?;
    bans.set("rules", rules)?;
    bans.set("escalation", freeze(esc)?)?;
    bans.set("maxBans", d.max_bans)?;
    bans.set("maxTracked", d.max_tracked)?;
    let f = FairShareSpec::default();
    let mut fair = Object::new(&env)?;
    fair.set("reserve", f.reserve)?;
    fair.set("windowMs", f.window_ms)?;
    fair.set("maxShare", f.max_share)?;
    if let Some((v4, v6)) = f.subnet {
        let mut sub = Object::new(&env)?;
        sub.set("v4", v4)?;
        sub.set("v6", v6)?;
        fair.set("subnet", freeze(sub)?)?;
    }
    fair.set("slots", f.slots)?;
    fair.set("lagMs", f.lag_ms)?;
    let mut flags = Object::new(&env)?;
    flags.set("SKIP", FLAG_SKIP)?;
    flags.set("EXEMPT_ENDS", FLAG_EXEMPT_ENDS)?;
    let statuses: Vec<u32> = Verdict::ALL.iter().map(|v| u32::from(v.http_status())).collect();
    let mut o = Object::new(&env)?;
    o.set("result", freeze(result)?)?;
    o.set("verdictNames", Verdict::NAMES.to_vec())?;
    o.set("verdictStatus", statuses)?;
    o.set("passErrors", PassError::NAMES.to_vec())?;
    o.set("algorithms", AlgorithmKind::NAMES.to_vec())?;
    o.set("strikeKinds", StrikeKind::NAMES.to_vec())?;
    o.set("maxLimits", MAX_LIMITS as u32)?;
    o.set("maxPassLength", MAX_PASS_LEN as u32)?;
    o.set("args", ARGS as u32)?;
    o.set("flags", freeze(flags)?)?;
    o.set("banDefaults", freeze(bans)?)?;
    o.set("fairShareDefaults", freeze(fair)?)?;
    freeze(o)
}

#[inline(always)]
fn ms(ns: u64) -> f64 {
    if ns == NEVER || ns == u64::MAX {
        f64::INFINITY
    } else {
        ns as f64 / 1e6
    }
}

#[inline(always)]
fn whole_cost(c: f64) -> Option<u32> {
    // Whole and in range iff the saturating conversion gives it back (NaN gives 0, which differs);
    // cheaper than `fract()`, which is a libm call on this target.
    let w = c as u32;
    (f64::from(w) == c).then_some(w)
}

/// A Float64Array's elements; `None` for anything else.
#[inline(always)]
unsafe fn f64_array<'a>(env: sys::napi_env, v: sys::napi_value) -> Option<&'a [f64]> {
    let mut is = false;
    if sys::napi_is_typedarray(env, v, &mut is) != sys::Status::napi_ok || !is {
        return None;
    }
    let (mut ty, mut len, mut data, mut ab, mut off) = (0, 0usize, std::ptr::null_mut(), std::ptr::null_mut(), 0usize);
    if sys::napi_get_typedarray_info(env, v, &mut ty, &mut len, &mut data, &mut ab, &mut off) != sys::Status::napi_ok
        || ty != sys::TypedarrayType::float64_array
    {
        return None;
    }
    if len == 0 {
        return Some(&[]);
    }
    Some(std::slice::from_raw_parts(data as *const f64, len))
}

raw::guarded!(defend = "Defense.defend" => defend_unguarded);
/// `defend(flags, ip, pass?, cost, key0, .., keyN-1) -> verdict` (`Verdict` codes); details in `result`.
#[inline(always)]
unsafe fn defend_unguarded(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    let (argv, argc, data) = raw::args::<{ ARGS + FEW_LIMITS }>(env, info);
    let bound = &*(data as *const Bound);
    if bound.shared.defense.limits().len() > FEW_LIMITS {
        let (argv, argc, _) = raw::args::<{ ARGS + MAX_LIMITS }>(env, info);
        return defend_on(env, bound, &argv, argc);
    }
    defend_on(env, bound, &argv, argc)
}

#[inline(always)]
unsafe fn defend_on(env: sys::napi_env, bound: &Bound, argv: &[sys::napi_value], argc: usize) -> sys::napi_value {
    match defend_args(env, bound, argv, argc, gate_now_ns()) {
        Some((v, _, _)) => raw::int32(env, v as i32),
        None => std::ptr::null_mut(),
    }
}

raw::guarded!(defend_and_decide = "Defense.defendAndDecide" => defend_and_decide_unguarded);
/// See `DefenseHandle::bind_gate`.
#[inline(always)]
unsafe fn defend_and_decide_unguarded(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    let (argv, argc, data) = raw::args::<{ GATE_ARGS + ARGS + FEW_LIMITS }>(env, info);
    let both = &*(data as *const Both);
    if both.defense.shared.defense.limits().len() > FEW_LIMITS {
        let (argv, argc, _) = raw::args::<{ GATE_ARGS + ARGS + MAX_LIMITS }>(env, info);
        return defend_and_decide_on(env, both, &argv, argc);
    }
    defend_and_decide_on(env, both, &argv, argc)
}

#[inline(always)]
unsafe fn defend_and_decide_on(env: sys::napi_env, both: &Both, argv: &[sys::napi_value], argc: usize) -> sys::napi_value {
    // One clock reading for both (the gate's clock, the one the limits and bans run on too).
    let now_ns = gate_now_ns();
    let Some((v, flags, ip)) = defend_args(env, &both.defense, &argv[GATE_ARGS..], argc.saturating_sub(GATE_ARGS), now_ns) else {
        return std::ptr::null_mut();
    };
    let out = &*both.defense.out.get();
    let go = match v {
        Verdict::Pass => out[R::DelayMs as usize] == 0.0,
        Verdict::Exempt => flags & FLAG_EXEMPT_ENDS == 0,
        _ => false,
    };
    if !go {
        return raw::int32(env, v as i32);
    }
    // The fair-share backstop ranks what reaches the pool: requests the defense let on.
    let shared = &*both.defense.shared;
    let ranked = shared.fair.as_ref().filter(|_| v == Verdict::Pass).map(|f| {
        let load = shared.loop_health.as_ref().map_or(0.0, |h| f.load(LagSignal::Max.of(&h.sample())));
        (f, ip, load)
    });
    match decide_args(env, &both.gate, &argv[..GATE_ARGS], GATE_ARGS, now_ns, ranked) {
        Some(g) => raw::int32(env, v as i32 | ((g + 1) << 4)),
        None => std::ptr::null_mut(),
    }
}

/// `defend`'s work on its arguments `argv[..argc]`: the verdict, the flags and the client address,
/// or `None` with an exception pending.
#[inline(always)]
unsafe fn defend_args(env: sys::napi_env, bound: &Bound, argv: &[sys::napi_value], argc: usize, now_ns: u64) -> Option<(Verdict, i32, Option<IpAddr>)> {
    let s = &*bound.shared;
    let n = s.defense.limits().len();
    if argc < ARGS + n {
        raw::throw_type_error(env, "defend: expected (flags, ip, pass, cost) and one key per limit");
        return None;
    }
    let flags = match raw::get_f64(env, argv[0]) {
        Some(f) if f64::from(f as u8) == f => i32::from(f as u8),
        _ => {
            raw::throw_type_error(env, "defend: flags must be an integer 0..255");
            return None;
        }
    };
    let mut ipbuf = [0u8; 256];
    let mut ipheap = Vec::new();
    let Some(ip_in) = raw::get_key(env, argv[1], &mut ipbuf, &mut ipheap) else {
        raw::throw_type_error(env, "defend: ip must be a string");
        return None;
    };
    // Longer is not an address (`ipkey::MAX_INPUT_LEN`): cut, it still parses as none.
    let ip_in = &ip_in[..ip_in.len().min(MAX_IP_INPUT)];
    // One cost for every limit, or a Float64Array of one per limit.
    let mut costs = [0u32; MAX_LIMITS];
    let ncosts = match raw::get_f64(env, argv[3]) {
        Some(c) => match whole_cost(c) {
            Some(c) => {
                costs[0] = c;
                1
            }
            None => {
                raw::throw_range_error(env, "defend: cost must be an integer 0..4294967295");
                return None;
            }
        },
        None => match f64_array(env, argv[3]) {
            Some(a) if a.len() >= n => {
                for (c, &v) in costs.iter_mut().zip(&a[..n]) {
                    match whole_cost(v) {
                        Some(v) => *c = v,
                        None => {
                            raw::throw_range_error(env, "defend: every cost must be an integer 0..4294967295");
                            return None;
                        }
                    }
                }
                n.max(1)
            }
            _ => {
                raw::throw_type_error(env, "defend: cost must be a number or a Float64Array of one cost per limit");
                return None;
            }
        },
    };
    // Parsed once: the lists, the ban key and every limit's address key come from this.
    let ip = client_addr(ip_in);
    // The ban key is text (what an operator writes in `bans.add`), so making it costs: it is made
    // up front only when something before the limits reads it (a pass, a ban held, the challenge).
    // Otherwise only a refusal needs it, for its strike, and it is made then (below). (A ban added
    // while this request runs may miss it by key, as if the request had come first.)
    let pass_given = raw::is_string(env, argv[2]);
    let eager = pass_given || s.defense.challenge_after().is_some() || !s.defense.bans().is_empty();
    let mut bkbuf = IpKeyBuf::default();
    let ban_key: &[u8] = if eager { ip_key_of(ip, &s.ban_ip, &mut bkbuf) } else { &[] };
    let out = &mut *bound.out.get();
    let sc = &mut *bound.scratch.get();

    // A pass first: a valid one clears the key's strikes, so the challenge below lets it on.
    out[R::Pass as usize] = 0.0;
    if pass_given {
        let mut pbuf = [0u8; MAX_PASS_LEN + 8];
        let code = match (&s.signer, read_bounded(env, argv[2], &mut pbuf)) {
            (Some(signer), Some(len)) if len <= MAX_PASS_LEN => match s.defense.honour_pass(signer, &pbuf[..len], ban_key, now_ns, unix_ms()) {
                Ok(_) => 1.0,
                Err(e) => 2.0 + f64::from(e as u8),
            },
            _ => 2.0 + f64::from(PassError::Malformed as u8),
        };
        out[R::Pass as usize] = code;
    }

    // Keys, one per limit, into the reused scratch buffer: (start, len), or None.
    sc.keys.clear();
    // (start, len) per limit; NO_KEY where it does not apply. Compact: zeroed on every call.
    const NO_KEY: (u32, u32) = (u32::MAX, 0);
    let mut spans = [NO_KEY; MAX_LIMITS];
    let mut kstack = [0u8; 256];
    let mut kheap = Vec::new();
    for (i, span) in spans.iter_mut().enumerate().take(n) {
        let v = argv[ARGS + i];
        // In the order of their frequency, each test one check (`napi_typeof` runs up to ten).
        if raw::get_bool(env, v).is_some() {
            // Tagged binary (no one reads a limit's keys back): never equal to a given key's UTF-8.
            let mut kb = [0u8; BIN_KEY_LEN];
            let len = ip_bin_key(ip, &s.ip_cfgs[i], IP_KEY_TAG, &mut kb);
            *span = (sc.keys.len() as u32, len as u32);
            sc.keys.extend_from_slice(&kb[..len]);
            continue;
        }
        match raw::get_key(env, v, &mut kstack, &mut kheap) {
            Some(k) if k.len() <= MAX_KEY_BYTES => {
                let start = sc.keys.len();
                sc.keys.extend_from_slice(k);
                *span = (start as u32, k.len() as u32);
            }
            Some(k) => {
                raw::throw_range_error(env, &format!("defend: key {i} is {} bytes long; the limit is {MAX_KEY_BYTES}", k.len()));
                return None;
            }
            None => match raw::type_of(env, v) {
                sys::ValueType::napi_undefined | sys::ValueType::napi_null => {}
                _ => {
                    raw::throw_type_error(env, "defend: a key must be undefined, true or a string");
                    return None;
                }
            },
        }
    }
    let mut keys: [Option<&[u8]>; MAX_LIMITS] = [None; MAX_LIMITS];
    for i in 0..n {
        let (a, l) = spans[i];
        if a != u32::MAX {
            keys[i] = Some(&sc.keys[a as usize..(a + l) as usize]);
        }
    }
    let (cost, per_limit) = if ncosts == 1 { (costs[0], &costs[..0]) } else { (1, &costs[..n]) };
    let req = Request { ip, skip: flags & FLAG_SKIP != 0, ban_key, limit_keys: &keys[..n], cost, costs: per_limit, passed: out[R::Pass as usize] == 1.0 };
    let verdict = {
        let lists = s.lists.read();
        s.defense.decide(&lists.access, &req, now_ns, &mut sc.outcome, &mut sc.events)
    };
    if verdict == Verdict::RateLimited && !eager {
        // The strike the chain counts for a refusal with a ban key (core/defense/chain.rs), counted
        // here with the key made now.
        let mut late = IpKeyBuf::default();
        s.defense.report(ip_key_of(ip, &s.ban_ip, &mut late), StrikeKind::RateLimited, now_ns, &mut sc.events);
    }
    let d = &sc.outcome.limits;
    out[R::Verdict as usize] = f64::from(verdict as u8);
    out[R::RefusedBy as usize] = d.refused_by.map_or(-1.0, |i| i as f64);
    out[R::RetryAfterMs as usize] = if verdict == Verdict::RateLimited { ms(d.retry_after_ns) } else { 0.0 };
    out[R::DelayMs as usize] = if verdict == Verdict::Pass { ms(d.delay_ns) } else { 0.0 };
    let (left, by_cidr) = match &sc.outcome.ban {
        Some(hit) => (ms(hit.retry_after_ns(now_ns)), hit.by_cidr),
        None => (0.0, false),
    };
    out[R::BanLeftMs as usize] = left;
    out[R::ByCidr as usize] = f64::from(u8::from(by_cidr));
    out[R::Evaluated as usize] = f64::from(d.evaluated);
    let mut bits = d.evaluated;
    while bits != 0 {
        let i = bits.trailing_zeros() as usize;
        bits &= bits - 1;
        out[FIXED + 2 * i] = d.checks[i].remaining as f64;
        out[FIXED + 2 * i + 1] = ms(d.checks[i].reset_ns);
    }
    if !sc.events.is_empty() {
        let mut p = s.pending.lock();
        p.append(&mut sc.events);
        out[R::Events as usize] = p.len() as f64;
    } else {
        out[R::Events as usize] = 0.0;
    }
    Some((verdict, flags, ip))
}
