//! The defense's options as lib/defense passes them (complete: lib/defense fills in the defaults), and
//! their reading into the core's specs.
use crate::core::defense::{address_prefixes, AccessLists, BanSpec, EscalationSpec, FairShareSpec, FrontSpec, StrikeKind, StrikeRuleSpec};
use crate::core::limit::{AlgorithmKind, LimitSpec};
use crate::node::gate::invalid;
use napi::bindgen_prelude::*;
use napi_derive::napi;

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

pub(crate) struct Lists {
    pub(crate) access: AccessLists,
    pub(crate) allow: Vec<String>,
    pub(crate) deny: Vec<String>,
}

/// The options, read into the core's composition (which checks the values).
pub(crate) fn front_spec(o: &mut DefenseOptions) -> Result<FrontSpec<Buffer>> {
    let limits = o.limits.iter().enumerate().map(|(i, l)| limit_spec(l, i)).collect::<Result<_>>()?;
    let limit_prefixes = o
        .limits
        .iter()
        .enumerate()
        .map(|(i, l)| address_prefixes(l.ipv4_prefix, l.ipv6_prefix, &format!("limits[{i}].by")).map_err(|e| invalid(e.0)))
        .collect::<Result<_>>()?;
    let fair_share = match &o.fair_share {
        None => None,
        Some(f) => {
            let subnet = match (f.subnet_v4, f.subnet_v6) {
                (Some(a), Some(b)) => Some((a, b)),
                (None, None) => None,
                _ => return Err(invalid("fairShare.subnet needs both prefixes")),
            };
            Some(FairShareSpec { reserve: f.reserve, window_ms: f.window_ms, max_share: f.max_share, subnet, slots: f.slots, lag_ms: f.lag_ms })
        }
    };
    Ok(FrontSpec {
        limits,
        limit_prefixes,
        bans: ban_spec(&o.bans)?,
        challenge_secrets: o.challenge_secrets.take().unwrap_or_default(),
        challenge_after: o.challenge_after,
        ban_prefixes: address_prefixes(o.ipv4_prefix, o.ipv6_prefix, "ipv4Prefix/ipv6Prefix").map_err(|e| invalid(e.0))?,
        fair_share,
    })
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
        let on = StrikeKind::from_name(&r.on)
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

pub(crate) fn lists(allow: Vec<String>, deny: Vec<String>) -> Result<Lists> {
    let access = AccessLists::new(&allow, &deny).map_err(|e| invalid(e.0))?;
    Ok(Lists { access, allow, deny })
}

pub(crate) fn ms_to_ns(ms: f64, at: &str) -> Result<u64> {
    if ms.is_finite() && ms > 0.0 && ms <= 1e12 {
        Ok(((ms * 1e6).round() as u64).max(1))
    } else {
        Err(invalid(format!("{at} must be a finite number > 0 and at most 1e12 ms")))
    }
}
