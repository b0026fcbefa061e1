//! The ban table: escalation, expiry, permanence, eviction, CIDR bans, lifting, export and import,
//! memory under a flood. Time is injected (`now_ns` on every call).
use super::*;
use std::net::IpAddr;

const MIN: u64 = 60_000_000_000;
const MIN_MS: f64 = 60_000.0;

fn spec(permanent_after: Option<f64>, jitter: f64) -> BanSpec {
    BanSpec {
        rules: vec![
            StrikeRuleSpec { name: "rate-limit".into(), on: StrikeKind::RateLimited, threshold: 3.0, window_ms: MIN_MS, ban_ms: 5.0 * MIN_MS },
            StrikeRuleSpec { name: "probe".into(), on: StrikeKind::Probe, threshold: 20.0, window_ms: MIN_MS, ban_ms: 30.0 * MIN_MS },
        ],
        escalation: EscalationSpec { factor: 2.0, max_ban_ms: 60.0 * MIN_MS, memory_ms: 60.0 * MIN_MS, permanent_after, jitter },
        max_bans: 1000.0,
        max_tracked: 1000.0,
    }
}

fn table(s: BanSpec) -> BanTable {
    BanTable::new(s.validate("bans").unwrap(), 42)
}

fn key(k: &str) -> BanTarget {
    BanTarget::Key(k.as_bytes().into())
}

fn cidr(c: &str) -> BanTarget {
    BanTarget::Cidr(Cidr::parse(c).unwrap())
}

fn ip(s: &str) -> Option<IpAddr> {
    Some(s.parse().unwrap())
}

/// Three rate-limit strikes at `t`: the ban they cause, if any.
fn strike3(t: &BanTable, k: &str, now: u64, ev: &mut Vec<BanEvent>) -> Option<Ban> {
    t.record(k.as_bytes(), StrikeKind::RateLimited, now, ev);
    t.record(k.as_bytes(), StrikeKind::RateLimited, now, ev);
    t.record(k.as_bytes(), StrikeKind::RateLimited, now, ev)
}

fn kinds(ev: &[BanEvent]) -> Vec<BanEventKind> {
    ev.iter().map(|e| e.kind).collect()
}

#[test]
fn rule_bans_escalate_expire_and_turn_permanent() {
    let t = table(spec(Some(2.0), 0.0));
    let mut ev = Vec::new();
    assert!(t.record(b"1.2.3.4", StrikeKind::RateLimited, 0, &mut ev).is_none());
    assert!(t.record(b"1.2.3.4", StrikeKind::RateLimited, 0, &mut ev).is_none());
    assert!(t.lookup(b"1.2.3.4", None, 0).is_none());
    let b = t.record(b"1.2.3.4", StrikeKind::RateLimited, 0, &mut ev).unwrap();
    assert_eq!((b.until_ns, b.offense, b.source, &*b.reason), (Some(5 * MIN), 1, BanSource::Rule, "rate-limit"));
    assert_eq!(kinds(&ev), vec![BanEventKind::Added]);
    let hit = t.lookup(b"1.2.3.4", None, MIN).unwrap();
    assert_eq!((hit.retry_after_ns(MIN), hit.by_cidr), (4 * MIN, false));
    assert!(t.lookup(b"1.2.3.5", None, MIN).is_none());
    // Expired: ignored at once, removed (and reported) by the next change or sweep.
    assert!(t.lookup(b"1.2.3.4", None, 5 * MIN).is_none());
    ev.clear();
    t.sweep(5 * MIN, &mut ev);
    assert_eq!((kinds(&ev), t.len()), (vec![BanEventKind::Expired], 0));
    // Repeats within the memory period double: 10, then 20 minutes; after 2 escalations, permanent.
    let mut now = 5 * MIN;
    for (offense, minutes) in [(2, Some(10)), (3, Some(20)), (4, None)] {
        let b = strike3(&t, "1.2.3.4", now, &mut ev).unwrap();
        assert_eq!((b.offense, b.until_ns), (offense, minutes.map(|m: u64| now + m * MIN)));
        now += minutes.unwrap_or(0) * MIN;
    }
    let hit = t.lookup(b"1.2.3.4", None, u64::MAX - 1).unwrap();
    assert_eq!((hit.until_ns, hit.retry_after_ns(0)), (None, u64::MAX));
    assert_eq!(t.stats().expired, 3, "each earlier ban expired before the next");
}

#[test]
fn the_escalation_is_forgotten_after_the_memory_period() {
    let t = table(spec(None, 0.0));
    let mut ev = Vec::new();
    assert_eq!(strike3(&t, "k", 0, &mut ev).unwrap().offense, 1);
    // Ends at 5 min; remembered for 60 min after that.
    assert_eq!(strike3(&t, "k", 64 * MIN, &mut ev).unwrap().offense, 2);
    // That one ended at 74 min: at 134 min it is forgotten.
    let b = strike3(&t, "k", 134 * MIN, &mut ev).unwrap();
    assert_eq!((b.offense, b.until_ns), (1, Some(139 * MIN)));
}

#[test]
fn jitter_is_seeded_bounded_and_only_lengthens() {
    let ends = |seed: u64| {
        let t = BanTable::new(spec(None, 0.5).validate("bans").unwrap(), seed);
        let mut ev = Vec::new();
        (0..50).map(|i| strike3(&t, &format!("k{i}"), 0, &mut ev).unwrap().until_ns.unwrap()).collect::<Vec<_>>()
    };
    let a = ends(7);
    assert_eq!(a, ends(7), "the same seed gives the same durations");
    assert_ne!(a, ends(8));
    assert!(a.iter().all(|&u| (5 * MIN..=15 * MIN / 2).contains(&u)));
    assert!(a.iter().any(|&u| u != a[0]));
}

#[test]
fn at_the_cap_expired_bans_go_first_then_the_temporary_ban_closest_to_its_end() {
    let mut s = spec(None, 0.0);
    s.max_bans = 3.0;
    let t = table(s);
    let mut ev = Vec::new();
    t.ban(key("a"), "x", Some(10 * MIN), 0, &mut ev).unwrap();
    t.ban(key("b"), "x", Some(30 * MIN), 0, &mut ev).unwrap();
    t.ban(key("c"), "x", Some(20 * MIN), 0, &mut ev).unwrap();
    ev.clear();
    t.ban(key("d"), "x", Some(40 * MIN), 10 * MIN, &mut ev).unwrap();
    assert_eq!(kinds(&ev), vec![BanEventKind::Expired, BanEventKind::Added], "a expired: nothing live was dropped");
    ev.clear();
    t.ban(key("e"), "x", Some(40 * MIN), 11 * MIN, &mut ev).unwrap();
    assert_eq!(kinds(&ev), vec![BanEventKind::Evicted, BanEventKind::Added]);
    assert_eq!(ev[0].ban.target, key("c"), "c (ending at 20 min) was closest to its end");
    assert_eq!(t.len(), 3);
    assert_eq!(t.stats().evicted, 1);
}

#[test]
fn rules_fill_at_most_half_the_table_with_permanent_bans() {
    let mut s = spec(Some(0.0), 0.0);
    s.max_bans = 6.0;
    let t = table(s);
    let mut ev = Vec::new();
    // permanentAfter 0: a key's second ban is permanent. Six keys earn two bans each.
    let mut ends = Vec::new();
    for i in 0..6 {
        let k = format!("k{i}");
        strike3(&t, &k, 0, &mut ev).unwrap();
        ends.push(strike3(&t, &k, MIN, &mut ev).unwrap().until_ns);
    }
    // Three permanent (half of 6), then the longest temporary ban (60 min) instead.
    assert_eq!(ends, vec![None, None, None, Some(61 * MIN), Some(61 * MIN), Some(61 * MIN)]);
    assert_eq!((t.len(), t.stats().refused), (6, 0));
    // The table still takes new bans: the temporary ones make room.
    assert!(strike3(&t, "new", 2 * MIN, &mut ev).is_some());
    assert_eq!(t.stats().evicted, 1);
    // An operator's permanent ban is not capped.
    t.ban(key("op"), "op", None, 2 * MIN, &mut ev).unwrap();
    assert!(t.get(&key("op"), 2 * MIN).unwrap().is_permanent());
}

#[test]
fn permanent_bans_are_never_dropped_a_full_table_refuses_and_counts() {
    let mut s = spec(None, 0.0);
    s.max_bans = 2.0;
    let t = table(s);
    let mut ev = Vec::new();
    t.ban(key("p1"), "op", None, 0, &mut ev).unwrap();
    t.ban(key("tmp"), "op", Some(MIN), 0, &mut ev).unwrap();
    t.ban(key("p2"), "op", None, 1, &mut ev).unwrap();
    assert!(t.get(&key("tmp"), 1).is_none(), "the temporary ban made room");
    ev.clear();
    assert_eq!(t.ban(key("p3"), "op", None, 2, &mut ev), Err(BanTableFull));
    assert_eq!(t.ban(key("t3"), "op", Some(MIN), 2, &mut ev), Err(BanTableFull));
    assert!(strike3(&t, "rule-key", 2, &mut ev).is_none(), "a rule ban is refused too");
    assert_eq!(kinds(&ev), vec![BanEventKind::Refused; 3]);
    assert_eq!(t.stats().refused, 3);
    assert!(t.lookup(b"p1", None, u64::MAX - 1).is_some() && t.lookup(b"p2", None, u64::MAX - 1).is_some());
    assert!(t.lookup(b"p3", None, 3).is_none());
    // An operator lifts one: room again.
    assert!(t.lift(&key("p1"), 3, &mut ev));
    assert!(t.ban(key("p3"), "op", None, 3, &mut ev).is_ok());
}

#[test]
fn cidr_bans_match_v4_v6_and_mapped_addresses() {
    let t = table(spec(None, 0.0));
    let mut ev = Vec::new();
    t.ban(cidr("10.0.0.0/8"), "range", None, 0, &mut ev).unwrap();
    t.ban(cidr("2001:db8::/32"), "range6", Some(MIN), 0, &mut ev).unwrap();
    let hit = t.lookup(b"", ip("10.1.2.3"), 1).unwrap();
    assert_eq!((&*hit.reason, hit.by_cidr), ("range", true));
    assert!(t.lookup(b"whatever", ip("::ffff:10.1.2.3"), 1).is_some());
    assert!(t.lookup(b"", ip("11.0.0.1"), 1).is_none());
    assert!(t.lookup(b"", ip("2001:db8:ffff::1"), 1).is_some());
    assert!(t.lookup(b"", ip("2001:db8::1"), MIN).is_none(), "expired");
    assert!(t.lookup(b"", None, 1).is_none());
    // A live wider prefix still covers when the more specific one has expired (before any sweep).
    t.ban(cidr("10.1.0.0/16"), "narrow", Some(MIN), 0, &mut Vec::new()).unwrap();
    assert_eq!(&*t.lookup(b"", ip("10.1.2.3"), 1).unwrap().reason, "narrow");
    assert_eq!(&*t.lookup(b"", ip("10.1.2.3"), 2 * MIN).unwrap().reason, "range");
    assert!(t.lift(&cidr("10.0.0.0/8"), 2 * MIN, &mut ev));
    assert!(t.lookup(b"", ip("10.1.2.3"), 2 * MIN).is_none());
    // Edge prefixes.
    t.ban(cidr("0.0.0.0/0"), "all4", None, 0, &mut ev).unwrap();
    assert!(t.lookup(b"", ip("255.255.255.255"), 3 * MIN).is_some() && t.lookup(b"", ip("2001:db9::1"), 3 * MIN).is_none());
    t.ban(cidr("2001:db9::1/128"), "one", None, 0, &mut ev).unwrap();
    assert!(t.lookup(b"", ip("2001:db9::1"), 3 * MIN).is_some() && t.lookup(b"", ip("2001:db9::2"), 3 * MIN).is_none());
}

#[test]
fn lifting_forgets_the_history_and_re_adding_reports_only_a_longer_ban() {
    let t = table(spec(Some(0.0), 0.0));
    let mut ev = Vec::new();
    assert_eq!(strike3(&t, "k", 0, &mut ev).unwrap().until_ns, Some(5 * MIN));
    let b = strike3(&t, "k", 6 * MIN, &mut ev).unwrap();
    assert!(b.is_permanent(), "one escalation allowed: none, so the second ban is permanent");
    ev.clear();
    assert!(t.lift(&key("k"), 7 * MIN, &mut ev));
    assert_eq!(kinds(&ev), vec![BanEventKind::Lifted]);
    assert!(!t.lift(&key("k"), 7 * MIN, &mut ev));
    assert_eq!(strike3(&t, "k", 8 * MIN, &mut ev).unwrap().offense, 1, "history forgotten with the lift");
    ev.clear();
    t.ban(key("k"), "op", Some(MIN), 8 * MIN, &mut ev).unwrap();
    assert!(ev.is_empty(), "shorter than the ban held: nothing changes");
    t.ban(key("k"), "op", Some(60 * MIN), 8 * MIN, &mut ev).unwrap();
    assert_eq!(kinds(&ev), vec![BanEventKind::Added]);
    assert_eq!(t.get(&key("k"), 8 * MIN).unwrap().until_ns, Some(68 * MIN));
    assert_eq!(t.list(8 * MIN).len(), 1);
}

#[test]
fn export_and_import_carry_bans_and_history_in_wall_time() {
    let a = table(spec(None, 0.0));
    let mut ev = Vec::new();
    strike3(&a, "1.2.3.4", 0, &mut ev).unwrap();
    strike3(&a, "1.2.3.4", 10 * MIN, &mut ev).unwrap(); // offense 2: 10 min, to 20 min
    a.ban(cidr("2001:db8::/32"), "range", None, 10 * MIN, &mut ev).unwrap();
    a.ban(key("short"), "op", Some(3 * MIN), 10 * MIN, &mut ev).unwrap();
    // Exported at monotonic 12 min = Unix 1_700_000_000_000 ms.
    let unix = 1_700_000_000_000u64;
    let records = a.export(12 * MIN, unix);
    assert_eq!(records.len(), 3);
    let r = records.iter().find(|r| r.target == key("1.2.3.4")).unwrap();
    assert_eq!((r.since_unix_ms, r.until_unix_ms, r.offense, r.source), (unix - 2 * 60_000, Some(unix + 8 * 60_000), 2, BanSource::Rule));
    let p = records.iter().find(|r| r.target == cidr("2001:db8::/32")).unwrap();
    assert_eq!(p.until_unix_ms, None);
    // Another process (its own monotonic origin), 30 s of wall time later.
    let b = table(spec(None, 0.0));
    let mut ev = Vec::new();
    let report = b.import(&records, 5 * MIN, unix + 30_000, &mut ev);
    assert_eq!(report, ImportReport { applied: 3, skipped: 0, refused: 0 });
    assert_eq!(kinds(&ev), vec![BanEventKind::Added; 3]);
    assert_eq!(b.get(&key("1.2.3.4"), 5 * MIN).unwrap().until_ns, Some(5 * MIN + 7 * MIN + 30 * 1_000_000_000));
    assert!(b.lookup(b"", ip("2001:db8::9"), u64::MAX - 1).is_some());
    // Importing the same records again changes nothing and reports nothing (no echo in a cluster).
    ev.clear();
    assert_eq!(b.import(&records, 5 * MIN, unix + 30_000, &mut ev), ImportReport { applied: 0, skipped: 3, refused: 0 });
    assert!(ev.is_empty());
    // ... also when this side's clock pair is read a moment apart (the monotonic clock 0.7 ms on).
    assert_eq!(b.import(&records, 5 * MIN + 700_000, unix + 30_000, &mut ev), ImportReport { applied: 0, skipped: 3, refused: 0 });
    assert!(ev.is_empty());
    // Expired records are skipped.
    let c = table(spec(None, 0.0));
    assert_eq!(c.import(&records, 0, unix + 60 * 60_000, &mut ev).skipped, 2);
    // The history came along: the next offence on b is the third.
    let after = 5 * MIN + 8 * MIN;
    assert_eq!(strike3(&b, "1.2.3.4", after, &mut ev).unwrap().offense, 3);
}

#[test]
fn cleared_strikes_stay_cleared_until_the_given_time() {
    let t = table(spec(None, 0.0));
    let mut ev = Vec::new();
    t.record(b"k", StrikeKind::RateLimited, 0, &mut ev);
    t.record(b"k", StrikeKind::RateLimited, 0, &mut ev);
    t.clear_strikes(b"k", 10 * MIN, 0);
    assert_eq!(t.strikes(b"k", 0, 0), 0);
    assert!(strike3(&t, "k", MIN, &mut ev).is_none());
    assert!(strike3(&t, "k", 10 * MIN, &mut ev).is_some());
}

/// A unique-IP flood where every address earns a ban: the bans stay at `max_bans`, the tracked keys at
/// `max_tracked`, and what the table allocated with them.
#[test]
fn memory_stays_bounded_under_a_flood_of_unique_offenders() {
    let mut s = spec(None, 0.1);
    s.max_bans = 1000.0;
    s.max_tracked = 5000.0;
    let t = table(s);
    let mut ev = Vec::new();
    for i in 0..30_000u32 {
        let k = format!("198.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255);
        strike3(&t, &k, u64::from(i) * 1000, &mut ev);
        ev.clear();
    }
    assert_eq!(t.len(), 1000);
    assert!(t.tracked() <= 5000);
    let st = t.stats();
    assert_eq!((st.added, st.evicted, st.refused), (30_000, 29_000, 0));
    assert!(t.state.lock().slots_used() <= 1000, "freed slots are reused");
}
