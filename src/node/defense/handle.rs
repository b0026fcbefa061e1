//! The `#[napi]` class `DefenseHandle`: construction, binding the hot path, the lists, the ban API,
//! passes, policies and stats. Off the hot path: the decisions are the core's (`DefenseFront`).
use super::hot::{defend, defend_and_decide, Both, Bound, RESULT_LEN};
use super::options::{front_spec, lists, ms_to_ns, DefenseOptions, Lists};
use super::records::{ban_info, event_infos, now_pair, target_text, BanEventInfo, BanInfo, DefenseStats, ImportResult, LimitPolicy, LimitStats};
use crate::core::defense::{rng, BanEvent, BanRecord, BanSource, BanTarget, Cidr, DefenseFront, Scratch, StrikeKind};
use crate::core::health::{sampler::SamplerOptions, LoopHealth};
use crate::core::net::ipkey::IpKeyBuf;
use crate::node::gate::{invalid, GateHandle};
use crate::node::lag::{acquire_thread_sampler_with, SamplerGuard};
use crate::node::raw;
use napi::bindgen_prelude::*;
use napi_derive::napi;
use parking_lot::{Mutex, RwLock};
use std::cell::UnsafeCell;
use std::sync::Arc;

pub(crate) struct Shared {
    pub(crate) front: DefenseFront,
    /// Replaced whole by `setLists`; a decision reads whichever it locked (core/defense/lists.rs).
    pub(crate) lists: RwLock<Arc<Lists>>,
    /// Ban events the hot path produced, for `takeEvents()`.
    pub(crate) pending: Mutex<Vec<BanEvent>>,
    /// This thread's loop health, for the fair-share backstop's lag part (`lagMs` > 0).
    pub(crate) loop_health: Option<Arc<LoopHealth>>,
}

#[napi]
pub struct DefenseHandle {
    pub(crate) shared: Arc<Shared>,
    /// Keeps this thread's lag sampler running for `loop_health`.
    pub(crate) _sampler: Option<SamplerGuard>,
    /// What `bind` gave `defend` (its result buffer is the one JS reads), for `bind_gate`.
    pub(crate) bound: Mutex<Option<Arc<Bound>>>,
}

impl Shared {
    /// An operator's target: a CIDR prefix (`/n`), or an address, keyed as requests are.
    fn target(&self, text: &str) -> Result<BanTarget> {
        self.front.operator_target(text).map_err(|e| invalid(e.0))
    }
}

#[napi]
impl DefenseHandle {
    #[napi(constructor, catch_unwind)]
    pub fn new(env: Env, mut o: DefenseOptions) -> Result<Self> {
        let _panic = raw::throw_on_panic(&env, "DefenseHandle::new");
        let front = DefenseFront::new(front_spec(&mut o)?, rng::random_seed()).map_err(|e| invalid(e.0))?;
        let lists = lists(o.allow, o.deny)?;
        // The gate's sampler may be off (shed: false): the backstop's lag part keeps its own.
        let sampler = match front.fair_share() {
            Some(f) if f.config().lag_ms > 0.0 => Some(acquire_thread_sampler_with(env.raw(), SamplerOptions::default())?),
            _ => None,
        };
        let loop_health = sampler.as_ref().map(|g| g.health().clone());
        let shared = Arc::new(Shared { front, lists: RwLock::new(Arc::new(lists)), pending: Mutex::new(Vec::new()), loop_health });
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
        let full = self.shared.front.defense().bans().ban(t, &reason, d, ns, &mut ev).is_err();
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
        self.shared.front.defense().bans().lift(&t, ns, &mut ev);
        Ok(event_infos(ev, ns, ms))
    }

    /// The ban on `target`, if one is live.
    #[napi(catch_unwind)]
    pub fn get(&self, env: Env, target: String) -> Result<Option<BanInfo>> {
        let _panic = raw::throw_on_panic(&env, "DefenseHandle::get");
        let t = self.shared.target(&target)?;
        let (ns, ms) = now_pair();
        Ok(self.shared.front.defense().bans().get(&t, ns).map(|b| ban_info(&b, ns, ms)))
    }

    #[napi(catch_unwind)]
    pub fn list(&self, env: Env) -> Vec<BanInfo> {
        let _panic = raw::throw_on_panic(&env, "DefenseHandle::list");
        let (ns, ms) = now_pair();
        self.shared.front.defense().bans().list(ns).iter().map(|b| ban_info(b, ns, ms)).collect()
    }

    /// Removes expired bans; their `expired` events.
    #[napi(catch_unwind)]
    pub fn sweep(&self, env: Env) -> Vec<BanEventInfo> {
        let _panic = raw::throw_on_panic(&env, "DefenseHandle::sweep");
        let (ns, ms) = now_pair();
        let mut ev = Vec::new();
        self.shared.front.defense().bans().sweep(ns, &mut ev);
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
        let kind = StrikeKind::from_name(&kind).ok_or_else(|| invalid(format!("kind must be one of {}", StrikeKind::NAMES.join(", "))))?;
        let (ns, ms) = now_pair();
        let mut ev = Vec::new();
        self.shared.front.report(ip.as_bytes(), kind, ns, &mut ev);
        Ok(event_infos(ev, ns, ms))
    }

    /// The live bans as records (Unix ms), for persistence and sharing.
    #[napi(catch_unwind)]
    pub fn export(&self, env: Env) -> Vec<BanInfo> {
        let _panic = raw::throw_on_panic(&env, "DefenseHandle::export");
        let (ns, ms) = now_pair();
        self.shared
            .front
            .defense()
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
            let source =
                BanSource::from_name(&r.source).ok_or_else(|| invalid(format!("records[{i}].source must be one of {}", BanSource::NAMES.join(", "))))?;
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
        let rep = self.shared.front.defense().bans().import(&recs, ns, ms, &mut ev);
        self.shared.pending.lock().extend(ev);
        Ok(ImportResult { applied: rep.applied as u32, skipped: rep.skipped as u32, refused: rep.refused as u32 })
    }

    /// The ban key of a client address (what bans and passes are bound to).
    #[napi(catch_unwind)]
    pub fn ban_key(&self, env: Env, ip: String) -> String {
        let _panic = raw::throw_on_panic(&env, "DefenseHandle::ban_key");
        let mut buf = IpKeyBuf::default();
        String::from_utf8_lossy(self.shared.front.ban_key(ip.as_bytes(), &mut buf)).into_owned()
    }

    /// A challenge pass for the client at `ip`, valid until `expires_at_sec` (Unix seconds).
    #[napi(catch_unwind)]
    pub fn mint_pass(&self, env: Env, ip: String, expires_at_sec: f64) -> Result<String> {
        let _panic = raw::throw_on_panic(&env, "DefenseHandle::mint_pass");
        self.shared.front.mint_pass(ip.as_bytes(), expires_at_sec).map_err(|e| invalid(e.0))
    }

    /// Each limit's `q` and `w` (for RateLimit-Policy), in order.
    #[napi(catch_unwind)]
    pub fn policies(&self, env: Env) -> Vec<LimitPolicy> {
        let _panic = raw::throw_on_panic(&env, "DefenseHandle::policies");
        let l = self.shared.front.defense().limits();
        (0..l.len())
            .map(|i| LimitPolicy { name: l.name(i).to_string(), quota: l.policy(i).quota as f64, window_ms: l.policy(i).window_ns as f64 / 1e6 })
            .collect()
    }

    #[napi(catch_unwind)]
    pub fn stats(&self, env: Env) -> DefenseStats {
        let _panic = raw::throw_on_panic(&env, "DefenseHandle::stats");
        let b = self.shared.front.defense().bans();
        let s = b.stats();
        let l = self.shared.front.defense().limits();
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
            fair_share_refused: self.shared.front.fair_share().map_or(0.0, |f| f.refused() as f64),
        }
    }
}
