//! Bans, their events and the defense's figures as JS sees them: times in Unix milliseconds, read
//! against the monotonic clock the ban table runs on.
use crate::core::clock::{Clock, MonotonicClock};
use crate::core::defense::{Ban, BanEvent, BanTarget};
use napi_derive::napi;
use std::time::{SystemTime, UNIX_EPOCH};

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

pub(crate) fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// The monotonic clock the table runs on and the wall clock records use, read together.
pub(crate) fn now_pair() -> (u64, u64) {
    (MonotonicClock.now_ns(), unix_ms())
}

pub(crate) fn target_text(t: &BanTarget) -> (String, bool) {
    match t {
        BanTarget::Key(k) => (String::from_utf8_lossy(k).into_owned(), false),
        BanTarget::Cidr(c) => (c.to_string(), true),
    }
}

pub(crate) fn ban_info(b: &Ban, now_ns: u64, now_ms: u64) -> BanInfo {
    let (target, cidr) = target_text(&b.target);
    let (since, until) = b.unix_ms(now_ns, now_ms);
    BanInfo {
        target,
        cidr,
        reason: b.reason.to_string(),
        source: b.source.as_str().to_string(),
        offense: b.offense,
        since: since as f64,
        until: until.map(|u| u as f64),
    }
}

pub(crate) fn event_infos(events: Vec<BanEvent>, now_ns: u64, now_ms: u64) -> Vec<BanEventInfo> {
    events.into_iter().map(|e| BanEventInfo { kind: e.kind.as_str().to_string(), ban: ban_info(&e.ban, now_ns, now_ms) }).collect()
}
