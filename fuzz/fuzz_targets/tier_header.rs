//! The tier header's parser (`Gate::header_tier`), as `decide` calls it with the header's raw value.
//! Input: [gate config, mode, now (5 bytes), ...]; 16 gates over one four-tier ledger: every default
//! tier, trusted or not, with or without a token secret.
//! - mode even: the rest is the header value;
//! - mode odd: [tier choice, expiry (5 bytes), decoration, flip position, flip value] mint a token
//!   (with the gate's key, or another), then pad, repeat or change it.
//! Properties, beyond "no panic":
//! - the tier is a tier of the ledger; an over-long value gets the lowest tier;
//! - an untrusted header never promotes a request above the default tier without a valid signature;
//! - `Signed` only for a token whose MAC was made with the gate's key (independent HMAC), that names
//!   the tier returned and has not expired; `Header` only for the exact name of the tier returned;
//! - `Default` exactly for a blank value (within the length limit); `Invalid` gets the lowest tier;
//! - the clock is read only for a token, and padding with spaces changes nothing.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::cell::Cell;
use std::sync::{Arc, OnceLock};
use tiergate::core::gate::{Gate, GateConfig, TierSource, MAX_HEADER_LEN};
use tiergate::core::health::LoopHealth;
use tiergate::core::ledger::{Ledger, TierConfig};
use tiergate::core::signature::{looks_like_token, TierSigner};
use tiergate_fuzz::{expiry, fields, mac_made_with, take_u64, OTHER, SECRET};

const TIERS: [&str; 4] = ["critical", "gold", "standard", "background"];

struct Case {
    gate: Gate,
    default_tier: usize,
    trusted: bool,
    signed: bool,
}

fn cases() -> &'static [Case] {
    static C: OnceLock<Vec<Case>> = OnceLock::new();
    C.get_or_init(|| {
        let tiers = TIERS
            .iter()
            .enumerate()
            .map(|(i, n)| TierConfig { name: n.to_string(), capacity: 10.0, refill_per_sec: 10.0, protected: i == 0, per_key: None })
            .collect();
        let ledger = Arc::new(Ledger::new(tiers).unwrap());
        let mut v = Vec::new();
        for default_tier in 0..TIERS.len() {
            for trusted in [false, true] {
                for signed in [false, true] {
                    let mut cfg = GateConfig::new(default_tier);
                    cfg.trust_header = trusted;
                    cfg.signer = signed.then(|| TierSigner::new(&[SECRET]).unwrap());
                    let gate = Gate::new(ledger.clone(), cfg, Arc::new(LoopHealth::default())).unwrap();
                    v.push(Case { gate, default_tier, trusted, signed });
                }
            }
        }
        v
    })
}

/// A header value built around a real token (the fuzzer cannot forge a MAC by itself).
fn token_value(rest: &[u8]) -> Option<Vec<u8>> {
    let [choice, rest @ ..] = rest else { return None };
    let (expires, rest) = take_u64(rest, 5);
    let [deco, pos, val, ..] = *rest else { return None };
    let name = ["critical", "gold", "standard", "background", "unknown"][usize::from(choice % 5)];
    let key = if choice & 0x80 != 0 { OTHER } else { SECRET };
    let mut v = TierSigner::new(&[key]).unwrap().sign(name, expires % 10u64.pow(12)).ok()?.into_bytes();
    if deco & 1 != 0 {
        v.splice(0..0, *b" \t");
    }
    if deco & 2 != 0 {
        v.extend_from_slice(b"  ");
    }
    if deco & 4 != 0 {
        v.extend_from_slice(b", critical");
    }
    if deco & 8 != 0 {
        let i = usize::from(pos) % v.len();
        v[i] = val;
    }
    if deco & 16 != 0 {
        v.resize(MAX_HEADER_LEN + usize::from(pos % 4), b' ');
    }
    Some(v)
}

fuzz_target!(|data: &[u8]| {
    let [which, mode, rest @ ..] = data else { return };
    let case = &cases()[usize::from(*which) % cases().len()];
    let (now, rest) = take_u64(rest, 5);
    let value = if mode % 2 == 0 {
        rest.to_vec()
    } else {
        match token_value(rest) {
            Some(v) => v,
            None => return,
        }
    };
    let read_clock = Cell::new(false);
    let (tier, source) = case.gate.header_tier(&value, || {
        read_clock.set(true);
        now
    });
    let show = || String::from_utf8_lossy(&value).into_owned();
    let lowest = TIERS.len() - 1;
    assert!(tier < TIERS.len(), "tier {tier} out of range for {:?}", show());
    if value.len() > MAX_HEADER_LEN {
        assert_eq!((tier, source), (lowest, TierSource::Invalid), "over-long {:?}", show());
    }
    let v = value.trim_ascii();
    if !case.trusted && source != TierSource::Signed {
        assert!(tier >= case.default_tier, "promoted to {tier} (default {}) by {:?} ({source:?})", case.default_tier, show());
    }
    match source {
        TierSource::Signed => {
            assert!(case.signed, "signed without a secret: {:?}", show());
            assert!(mac_made_with(SECRET, v), "honoured a token not made with the key: {:?}", show());
            let (_, name, digits, _) = fields(v).unwrap();
            assert_eq!(name, TIERS[tier].as_bytes());
            assert!(now < expiry(digits).unwrap(), "honoured an expired token at {now}: {:?}", show());
        }
        TierSource::Header => assert_eq!(v, TIERS[tier].as_bytes(), "{:?}", show()),
        TierSource::Default => assert!(v.is_empty() && tier == case.default_tier, "{:?}", show()),
        TierSource::Invalid => assert_eq!(tier, lowest, "{:?}", show()),
        TierSource::Untrusted => {
            assert!(!case.trusted && tier == case.default_tier, "{:?}", show());
            assert!(TIERS[..case.default_tier].iter().any(|n| n.as_bytes() == v), "{:?}", show());
        }
        TierSource::BadSignature | TierSource::Expired => assert_eq!(tier, case.default_tier, "{:?}", show()),
        TierSource::Given => panic!("the header cannot give a tier"),
    }
    if v.is_empty() && value.len() <= MAX_HEADER_LEN {
        assert_eq!(source, TierSource::Default, "blank {:?}", show());
    }
    if read_clock.get() {
        assert!(looks_like_token(v), "read the clock for {:?}", show());
    }
    // Padding with spaces (within the length limit) changes nothing.
    if value.len() + 2 <= MAX_HEADER_LEN {
        let padded = [b" ".as_slice(), &value, b" "].concat();
        assert_eq!(case.gate.header_tier(&padded, || now), (tier, source), "padding changed {:?}", show());
    }
});
