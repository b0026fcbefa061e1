//! The defense as a request reaches it (`front.rs`): the late strike, prefix strikes, tagged address
//! keys, passes, the composition's checks, the operator's targets. Time is injected.
use super::*;
use crate::core::limit::{AlgorithmKind, LimitSpec};
use crate::core::net::ipkey::{IpKeyBuf, IpKeyConfig};

const S: u64 = 1_000_000_000;
/// The wall clock at monotonic 0, ms.
const UNIX0_MS: u64 = 1_700_000_000_000;
const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";
const BY_ADDRESS: &[KeySpan] = &[KeySpan::Address];

fn prefixes(v4: u32, v6: u32) -> IpKeyConfig {
    address_prefixes(v4, v6, "test").unwrap()
}

/// One fixed-window limit of `limit` a second by address masked to `by`; bans keyed by the whole address.
fn spec(limit: f64, by: (u32, u32)) -> FrontSpec<&'static [u8]> {
    let mut bans = BanSpec::default();
    bans.escalation.jitter = 0.0;
    FrontSpec {
        limits: vec![LimitSpec::new("per-ip", AlgorithmKind::FixedWindow, limit, 1000.0)],
        limit_prefixes: vec![prefixes(by.0, by.1)],
        bans,
        challenge_secrets: Vec::new(),
        challenge_after: None,
        ban_prefixes: prefixes(32, 128),
        fair_share: None,
    }
}

fn ask(f: &DefenseFront, ip: &str, keys: &[KeySpan], given: &[u8], pass: Option<&[u8]>, now: u64) -> (Answer, Vec<BanEvent>) {
    let mut sc = Scratch::default();
    sc.keys.extend_from_slice(given);
    let req = ClientRequest { ip: ip.as_bytes(), pass, skip: false, keys, cost: 1, costs: &[] };
    let a = f.decide(&AccessLists::default(), &req, now, || UNIX0_MS + now / 1_000_000, &mut sc);
    (a, sc.events)
}

#[test]
fn refusals_strike_the_ban_key_made_late_and_enough_of_them_ban_the_client() {
    let f = DefenseFront::new(spec(1.0, (32, 128)), 1).unwrap();
    let (a, _) = ask(&f, "203.0.113.7", BY_ADDRESS, b"", None, 0);
    assert_eq!((a.verdict, a.retry_after_ns, a.delay_ns), (Verdict::Pass, 0, 0));
    // No ban held, no challenge, no pass: the ban key is made only for the refusals' strikes.
    let mut events = Vec::new();
    for _ in 0..3 {
        let (a, ev) = ask(&f, "203.0.113.7", BY_ADDRESS, b"", None, 0);
        assert_eq!(a.verdict, Verdict::RateLimited);
        assert!(a.retry_after_ns > 0 && a.delay_ns == 0, "{a:?}");
        events.extend(ev);
    }
    assert_eq!(events.iter().map(|e| e.kind).collect::<Vec<_>>(), vec![BanEventKind::Added], "the third strike bans (the default rule)");
    let target = f.operator_target("203.0.113.7").unwrap();
    assert_eq!(events[0].ban.target, target, "banned by the key an operator writes");
    let (a, _) = ask(&f, "203.0.113.7", BY_ADDRESS, b"", None, S);
    assert_eq!((a.verdict, a.by_cidr, a.retry_after_ns), (Verdict::Banned, false, 0));
    assert_eq!(a.ban_left_ns, 5 * 60 * S - S);
}

#[test]
fn a_limit_over_a_wider_prefix_strikes_and_bans_the_prefix() {
    let f = DefenseFront::new(spec(1.0, (24, 48)), 1).unwrap();
    // Three addresses of one /24 share the limit's key: its refusals strike the /24, not each address.
    assert_eq!(ask(&f, "198.51.100.1", BY_ADDRESS, b"", None, 0).0.verdict, Verdict::Pass);
    for ip in ["198.51.100.2", "198.51.100.3", "198.51.100.4"] {
        assert_eq!(ask(&f, ip, BY_ADDRESS, b"", None, 0).0.verdict, Verdict::RateLimited);
    }
    let (a, _) = ask(&f, "198.51.100.200", BY_ADDRESS, b"", None, 0);
    assert_eq!((a.verdict, a.by_cidr), (Verdict::Banned, true));
    assert_eq!(ask(&f, "198.51.101.1", BY_ADDRESS, b"", None, 0).0.verdict, Verdict::Pass, "the next /24 is not banned");
}

#[test]
fn address_keys_never_share_a_bucket_with_an_equal_given_key() {
    let f = DefenseFront::new(spec(1.0, (32, 128)), 1).unwrap();
    let given = b"203.0.113.7";
    let as_given = [KeySpan::Given(0, given.len() as u32)];
    assert_eq!(ask(&f, "203.0.113.7", &as_given, given, None, 0).0.verdict, Verdict::Pass);
    assert_eq!(ask(&f, "203.0.113.7", BY_ADDRESS, b"", None, 0).0.verdict, Verdict::Pass, "its own bucket");
    assert_eq!(ask(&f, "203.0.113.7", &as_given, given, None, 0).0.verdict, Verdict::RateLimited);
    let (a, _) = ask(&f, "203.0.113.7", &[KeySpan::None], b"", None, 0);
    assert_eq!(a.verdict, Verdict::Pass, "a limit without a key does not apply");
}

#[test]
fn a_valid_pass_gets_past_the_challenge_and_a_bad_one_is_refused() {
    let mut s = spec(1.0, (32, 128));
    s.challenge_secrets = vec![SECRET];
    s.challenge_after = Some(1);
    let f = DefenseFront::new(s, 1).unwrap();
    let ip = "203.0.113.7";
    assert_eq!(ask(&f, ip, BY_ADDRESS, b"", None, 0).0.verdict, Verdict::Pass);
    assert_eq!(ask(&f, ip, BY_ADDRESS, b"", None, 0).0.verdict, Verdict::RateLimited, "one strike");
    assert_eq!(ask(&f, ip, BY_ADDRESS, b"", None, 0).0.verdict, Verdict::Challenged);
    let pass = f.mint_pass(ip.as_bytes(), (UNIX0_MS / 1000 + 60) as f64).unwrap();
    let (a, _) = ask(&f, ip, BY_ADDRESS, b"", Some(pass.as_bytes()), 0);
    assert_eq!(a.pass, PassCheck::Valid);
    assert_ne!(a.verdict, Verdict::Challenged);
    let long = vec![b'p'; MAX_PASS_LEN + 1];
    assert_eq!(ask(&f, ip, BY_ADDRESS, b"", Some(&long), 0).0.pass, PassCheck::Refused(PassError::Malformed));
    let other = f.mint_pass(b"203.0.113.8", (UNIX0_MS / 1000 + 60) as f64).unwrap();
    assert_eq!(ask(&f, ip, BY_ADDRESS, b"", Some(other.as_bytes()), 0).0.pass, PassCheck::Refused(PassError::WrongKey));
    // Without a secret every pass is malformed, and none can be minted.
    let plain = DefenseFront::new(spec(1.0, (32, 128)), 1).unwrap();
    assert_eq!(ask(&plain, ip, BY_ADDRESS, b"", Some(pass.as_bytes()), 0).0.pass, PassCheck::Refused(PassError::Malformed));
    assert_eq!(plain.mint_pass(ip.as_bytes(), f64::NAN).unwrap_err().0, "mintPass needs options.challenge.secret");
    for bad in [f64::NAN, -1.0, 1.5, f64::INFINITY] {
        assert!(f.mint_pass(ip.as_bytes(), bad).is_err(), "{bad}");
    }
}

#[test]
fn the_composition_is_checked() {
    let mut s = spec(1.0, (32, 128));
    s.challenge_after = Some(3);
    assert_eq!(DefenseFront::new(s, 1).err().unwrap().0, "challenge.secret is required");
    assert!(address_prefixes(33, 128, "ipv4Prefix/ipv6Prefix").unwrap_err().0.starts_with("ipv4Prefix/ipv6Prefix: "));
    assert_eq!(address_prefixes(300, 64, "limits[0].by").unwrap_err().0, "limits[0].by: prefixes must be 0..32 and 0..128");
    let mut s = spec(0.0, (32, 128));
    s.limits[0].window_ms = f64::NAN;
    assert!(DefenseFront::new(s, 1).is_err(), "the limits are validated");
}

#[test]
fn operator_targets_are_prefixes_or_addresses_keyed_as_requests_are() {
    let mut s = spec(1.0, (32, 128));
    s.ban_prefixes = prefixes(24, 48);
    let f = DefenseFront::new(s, 1).unwrap();
    assert!(matches!(f.operator_target("192.0.2.0/24").unwrap(), BanTarget::Cidr(_)));
    let mut buf = IpKeyBuf::default();
    let key: Box<[u8]> = f.ban_key(b"203.0.113.7", &mut buf).into();
    assert_eq!(f.operator_target("203.0.113.7").unwrap(), BanTarget::Key(key.clone()));
    assert_eq!(f.operator_target("203.0.113.99").unwrap(), BanTarget::Key(key), "masked to the ban key's /24");
    assert!(f.operator_target("not-an-ip").is_err());
    assert!(f.operator_target("10.0.0.0/33").is_err());
}

#[test]
fn the_gate_follows_an_undelayed_pass_or_an_exempt_request() {
    let a =
        |verdict, delay_ns| Answer { verdict, pass: PassCheck::Absent, ip: None, retry_after_ns: 0, delay_ns, ban_left_ns: 0, by_cidr: false, tightest: None };
    assert!(a(Verdict::Pass, 0).gate_follows(false));
    assert!(!a(Verdict::Pass, 1).gate_follows(false), "a shaper's delay: the gate decides after it");
    assert!(a(Verdict::Exempt, 0).gate_follows(false));
    assert!(!a(Verdict::Exempt, 0).gate_follows(true), "exemptSkipsShedding");
    for v in [Verdict::DenyListed, Verdict::Banned, Verdict::RateLimited, Verdict::Challenged] {
        assert!(!a(v, 0).gate_follows(false), "{v:?}");
    }
}

#[test]
fn ban_times_in_unix_ms_round_a_future_end_up_and_a_past_one_down() {
    let ban = |since_ns, until_ns| Ban { target: BanTarget::Key(b"k"[..].into()), reason: "r".into(), since_ns, until_ns, offense: 1, source: BanSource::Rule };
    let now = 10 * S;
    assert_eq!(ban(now - 1_500_000, Some(now + 1_500_000)).unix_ms(now, UNIX0_MS), (UNIX0_MS - 1, Some(UNIX0_MS + 2)));
    assert_eq!(ban(0, Some(now - 1_500_000)).unix_ms(now, UNIX0_MS), (UNIX0_MS - 10_000, Some(UNIX0_MS - 1)));
    assert_eq!(ban(now, None).unix_ms(now, UNIX0_MS), (UNIX0_MS, None));
}

/// The answer names the tightest limit with its figures: the refusing one, else the one with the
/// fewest units left, a tie going to the later reset; none when no limit applied or for a verdict
/// before the limits. The clock is injected: resets are exact.
#[test]
fn the_answer_carries_the_tightest_limit_and_its_figures() {
    let mut s = spec(5.0, (32, 128));
    // 0: 5 per second (fixed); 1: 3 per 10 s (fixed); 2: 5 per 2 s (fixed).
    s.limits.push(LimitSpec::new("slow", AlgorithmKind::FixedWindow, 3.0, 10_000.0));
    s.limits.push(LimitSpec::new("wide", AlgorithmKind::FixedWindow, 5.0, 2000.0));
    s.limit_prefixes = vec![prefixes(32, 128); 3];
    let f = DefenseFront::new(s, 1).unwrap();
    let all = [KeySpan::Address; 3];
    let t = |a: Answer| a.tightest.map(|t| (t.index, t.remaining, t.reset_ns));
    // 4, 2, 4 left: the slow limit, 10 s to its reset.
    assert_eq!(t(ask(&f, "192.0.2.1", &all, b"", None, 0).0), Some((1, 2, 10 * S)));
    // Only limits 0 and 2 apply: 4 and 4 left (a fresh key of each), the tie to the later reset.
    let two = [KeySpan::Address, KeySpan::None, KeySpan::Address];
    assert_eq!(t(ask(&f, "192.0.2.2", &two, b"", None, 0).0), Some((2, 4, 2 * S)));
    // Equal figures: the first in order.
    let (a, _) = ask(&f, "192.0.2.3", &[KeySpan::Address, KeySpan::None, KeySpan::None], b"", None, 500_000_000);
    assert_eq!(t(a), Some((0, 4, S / 2)));
    // The slow limit at 1 left and the wide one run out by requests of its own; then a request of
    // cost 2 the slow limit refuses (1 left) is spoken of by the slow limit, though the wide one,
    // read after the refusal, has 0 left.
    assert_eq!(t(ask(&f, "192.0.2.1", &all, b"", None, S / 4).0), Some((1, 1, 10 * S - S / 4)));
    for left in [2, 1, 0] {
        assert_eq!(t(ask(&f, "192.0.2.1", &[KeySpan::None, KeySpan::None, KeySpan::Address], b"", None, S / 4).0), Some((2, left, 2 * S - S / 4)));
    }
    let mut sc = Scratch::default();
    let req = ClientRequest { ip: b"192.0.2.1", pass: None, skip: false, keys: &all, cost: 1, costs: &[1, 2, 1] };
    let a = f.decide(&AccessLists::default(), &req, S / 2, || UNIX0_MS, &mut sc);
    assert_eq!((a.verdict, sc.outcome.limits.checks[2].remaining), (Verdict::RateLimited, 0));
    assert_eq!(t(a), Some((1, 1, 10 * S - S / 2)));
    // No limit applies: none. Banned: none, though the limits would apply.
    assert_eq!(ask(&f, "192.0.2.9", &[KeySpan::None; 3], b"", None, S).0.tightest, None);
    let mut ev = Vec::new();
    f.defense().bans().ban(f.operator_target("192.0.2.8").unwrap(), "op", None, 0, &mut ev).unwrap();
    let (a, _) = ask(&f, "192.0.2.8", &all, b"", None, S);
    assert_eq!((a.verdict, a.tightest), (Verdict::Banned, None));
}
