//! The tier-token verifier (`core::signature`). Input: [mode, now (5 bytes), ...]:
//! - mode even: the rest is a token as a client would send it;
//! - mode odd: [expiry (5 bytes), flip position, flip value, tier name...] is minted with the key, then
//!   verified as is and with one byte changed (the fuzzer cannot forge a MAC, so it needs a real one to
//!   reach the checks past it).
//! Properties, beyond "no panic":
//! - an accepted token's MAC was made with the key (checked by an independent HMAC), it carries the
//!   tier returned, and it has not expired; an expired one is authentic; a bad signature is not;
//! - rotation: a verifier with another secret first accepts exactly the same, one with only the other
//!   secret accepts nothing;
//! - a minted token verifies until it expires, and changing any one of its bytes makes it fail.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;
use tiergate::core::signature::{is_token_tier, TierSigner, VerifyError, MAX_EXPIRY_DIGITS, MAX_TOKEN_LEN};
use tiergate_fuzz::{expiry, fields, mac_made_with, take_u64, OTHER, SECRET};

struct Signers {
    key: TierSigner,
    rotated: TierSigner,
    other: TierSigner,
}

fn signers() -> &'static Signers {
    static S: OnceLock<Signers> = OnceLock::new();
    S.get_or_init(|| Signers {
        key: TierSigner::new(&[SECRET]).unwrap(),
        rotated: TierSigner::new(&[OTHER, SECRET]).unwrap(),
        other: TierSigner::new(&[OTHER]).unwrap(),
    })
}

fn check(token: &[u8], now: u64) -> Result<Vec<u8>, VerifyError> {
    let s = signers();
    let r = s.key.verify(token, now).map(<[u8]>::to_vec);
    let show = || String::from_utf8_lossy(token).into_owned();
    if token.len() > MAX_TOKEN_LEN {
        assert_eq!(r, Err(VerifyError::Malformed), "over-long {:?}", show());
    }
    match &r {
        Ok(tier) => {
            assert!(mac_made_with(SECRET, token), "accepted a token whose MAC was not made with the key: {:?}", show());
            let (_, t, digits, _) = fields(token).unwrap();
            assert_eq!(tier.as_slice(), t, "returned a tier the token does not carry: {:?}", show());
            assert!(is_token_tier(tier));
            assert!(now < expiry(digits).unwrap(), "accepted an expired token at {now}: {:?}", show());
        }
        Err(VerifyError::Expired) => {
            assert!(mac_made_with(SECRET, token), "an inauthentic token reported as expired: {:?}", show());
            let (_, _, digits, _) = fields(token).unwrap();
            assert!(now >= expiry(digits).unwrap());
        }
        Err(VerifyError::BadSignature) => {
            assert!(!mac_made_with(SECRET, token), "an authentic token refused as forged: {:?}", show());
        }
        Err(VerifyError::Malformed) => {}
    }
    assert_eq!(s.rotated.verify(token, now).map(<[u8]>::to_vec), r, "rotation changed the verdict on {:?}", show());
    assert!(s.other.verify(token, now).is_err() || mac_made_with(OTHER, token), "the other key accepted {:?}", show());
    r
}

fuzz_target!(|data: &[u8]| {
    let [mode, rest @ ..] = data else { return };
    let (now, rest) = take_u64(rest, 5);
    if mode % 2 == 0 {
        let _ = check(rest, now);
        return;
    }
    let (expires, rest) = take_u64(rest, 5);
    let [pos, val, name @ ..] = rest else { return };
    let Ok(tier) = std::str::from_utf8(name) else { return };
    let token = match signers().key.sign(tier, expires) {
        Ok(t) => t.into_bytes(),
        Err(_) => {
            assert!(!is_token_tier(name) || expires >= 10u64.pow(MAX_EXPIRY_DIGITS as u32), "refused to sign {tier:?} until {expires}");
            return;
        }
    };
    assert!(token.len() <= MAX_TOKEN_LEN);
    let want = if now < expires { Ok(name.to_vec()) } else { Err(VerifyError::Expired) };
    assert_eq!(check(&token, now), want, "a minted token: {:?}", String::from_utf8_lossy(&token));
    let mut changed = token.clone();
    let i = usize::from(*pos) % changed.len();
    changed[i] = *val;
    if changed != token {
        assert!(check(&changed, now).is_err(), "a changed token verified: {:?}", String::from_utf8_lossy(&changed));
    }
});
