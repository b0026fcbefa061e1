//! Challenge passes: what a client that solved a challenge presents, so that it is let through (and
//! its strikes cleared) for a while. Bound to the client's key, so a pass cannot be shared out to a
//! botnet; signed, so it cannot be forged or extended; expiring.
//!
//! Format (ASCII, at most `MAX_PASS_LEN` bytes), in the style of the tier tokens (`core::token`):
//!
//! ```text
//! p1.<key-hash>.<expires>.<mac>
//! ```
//! - `key-hash`: base64url (22 characters) of the first 16 bytes of SHA-256("tiergate pass\0" ‖ key),
//!   the key being the decision's ban key (the client-IP key). Not secret: it only lets a pass for
//!   another key be told apart (`WrongKey`) before any MAC work;
//! - `expires`: Unix time in whole seconds, 1–12 digits; valid while `now < expires`;
//! - `mac`: base64url (43 characters) of HMAC-SHA256(secret, "p1.<key-hash>.<expires>").
//!
//! Verification is bounded (longer input is rejected first), parses without allocating, and compares
//! the MAC in constant time (`Mac::verify_slice`) under every configured secret (rotation: the first
//! mints, any verifies).
use super::base64url;
use super::keys::{KeysError, MacKeys};
use crate::core::ledger::ConfigError;
use crate::core::names::named_enum;
use sha2::{Digest, Sha256};

pub const PASS_PREFIX: &[u8] = b"p1.";
const KEY_HASH_LEN: usize = 16;
const KEY_HASH_B64: usize = 22;
const MAC_LEN: usize = 32;
const MAC_B64: usize = 43;
const MAX_EXPIRY_DIGITS: usize = 12;
pub const MAX_PASS_LEN: usize = PASS_PREFIX.len() + KEY_HASH_B64 + 1 + MAX_EXPIRY_DIGITS + 1 + MAC_B64;
pub use super::keys::MIN_SECRET_LEN;
const KEY_DOMAIN: &[u8] = b"tiergate pass\0";

named_enum! {
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum PassError: u8 {
        Malformed = "malformed",
        /// Authentic or not, it was minted for another key.
        WrongKey = "wrong-key",
        BadSignature = "bad-signature",
        Expired = "expired",
    }
}

#[derive(Clone)]
pub struct PassSigner {
    keys: MacKeys,
}

impl std::fmt::Debug for PassSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PassSigner({} secret(s))", self.keys.len())
    }
}

fn key_hash(key: &[u8]) -> [u8; KEY_HASH_LEN] {
    let d = Sha256::new().chain_update(KEY_DOMAIN).chain_update(key).finalize();
    let mut out = [0u8; KEY_HASH_LEN];
    out.copy_from_slice(&d[..KEY_HASH_LEN]);
    out
}

impl PassSigner {
    /// `secrets[0]` mints; all verify. Each at least `MIN_SECRET_LEN` bytes.
    pub fn new<S: AsRef<[u8]>>(secrets: &[S]) -> Result<PassSigner, ConfigError> {
        match MacKeys::new(secrets) {
            Ok(keys) => Ok(PassSigner { keys }),
            Err(KeysError::Empty) => Err(ConfigError("challengeSecret: at least one secret is required".into())),
            Err(KeysError::TooShort(i)) => {
                Err(ConfigError(format!("challengeSecret[{i}] must be at least {MIN_SECRET_LEN} bytes (32 random bytes recommended)")))
            }
        }
    }

    /// A pass for `key` valid until `expires_sec` (Unix seconds, exclusive).
    pub fn mint(&self, key: &[u8], expires_sec: u64) -> Result<String, ConfigError> {
        if expires_sec >= 10u64.pow(MAX_EXPIRY_DIGITS as u32) {
            return Err(ConfigError("expiresAt: out of range".into()));
        }
        let mut pass = String::with_capacity(MAX_PASS_LEN);
        pass.push_str("p1.");
        base64url::encode(&key_hash(key), &mut pass);
        pass.push('.');
        pass.push_str(&expires_sec.to_string());
        let tag = self.keys.sign(pass.as_bytes());
        pass.push('.');
        base64url::encode(&tag, &mut pass);
        Ok(pass)
    }

    /// Verifies `pass` for `key` at `now_sec`; returns its expiry (Unix seconds).
    pub fn verify(&self, pass: &[u8], key: &[u8], now_sec: u64) -> Result<u64, PassError> {
        let (signed, kh, expires, mac_b64) = parse(pass).ok_or(PassError::Malformed)?;
        let mut got_kh = [0u8; KEY_HASH_LEN];
        let mut tag = [0u8; MAC_LEN];
        if !base64url::decode(kh, &mut got_kh) || !base64url::decode(mac_b64, &mut tag) {
            return Err(PassError::Malformed);
        }
        if got_kh != key_hash(key) {
            return Err(PassError::WrongKey);
        }
        if !self.keys.verify_any(signed, &tag) {
            return Err(PassError::BadSignature);
        }
        if now_sec >= expires {
            return Err(PassError::Expired);
        }
        Ok(expires)
    }
}

/// A pass's fields: the signed part, the key hash and the MAC (still base64url), the expiry.
type Parts<'a> = (&'a [u8], &'a [u8], u64, &'a [u8]);

/// Splits a pass into its parts (signed, key hash, expiry, MAC); `None` when malformed. No allocation.
fn parse(pass: &[u8]) -> Option<Parts<'_>> {
    if pass.len() > MAX_PASS_LEN || !pass.starts_with(PASS_PREFIX) {
        return None;
    }
    let body = &pass[PASS_PREFIX.len()..];
    let kh = body.get(..KEY_HASH_B64)?;
    if body.get(KEY_HASH_B64) != Some(&b'.') {
        return None;
    }
    let rest = &body[KEY_HASH_B64 + 1..];
    let dot = rest.iter().position(|&b| b == b'.')?;
    let (exp, mac) = (&rest[..dot], &rest[dot + 1..]);
    if exp.is_empty() || exp.len() > MAX_EXPIRY_DIGITS || !exp.iter().all(u8::is_ascii_digit) || mac.len() != MAC_B64 {
        return None;
    }
    let expires = exp.iter().fold(0u64, |a, &d| a * 10 + u64::from(d - b'0'));
    let signed = &pass[..PASS_PREFIX.len() + KEY_HASH_B64 + 1 + dot];
    Some((signed, kh, expires, mac))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hmac::{Hmac, Mac};
    type HmacSha256 = Hmac<sha2::Sha256>;

    const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";

    fn signer() -> PassSigner {
        PassSigner::new(&[SECRET]).unwrap()
    }

    #[test]
    fn a_pass_verifies_for_its_key_until_it_expires() {
        let s = signer();
        let p = s.mint(b"203.0.113.7", 1_000).unwrap();
        assert!(p.starts_with("p1.") && p.len() == 3 + 22 + 1 + 4 + 1 + 43, "{p}");
        assert_eq!(s.verify(p.as_bytes(), b"203.0.113.7", 999), Ok(1_000));
        assert_eq!(s.verify(p.as_bytes(), b"203.0.113.7", 1_000), Err(PassError::Expired));
        assert_eq!(s.verify(p.as_bytes(), b"203.0.113.8", 999), Err(PassError::WrongKey));
    }

    #[test]
    fn the_mac_is_hmac_sha256_of_the_signed_part() {
        let p = signer().mint(b"k", 42).unwrap();
        let (signed, mac) = p.rsplit_once('.').unwrap();
        let mut m = HmacSha256::new_from_slice(SECRET).unwrap();
        m.update(signed.as_bytes());
        let mut expect = String::new();
        base64url::encode(&m.finalize().into_bytes(), &mut expect);
        assert_eq!(mac, expect);
        let mut kh = String::new();
        base64url::encode(&Sha256::digest(b"tiergate pass\0k")[..16], &mut kh);
        assert_eq!(signed, format!("p1.{kh}.42"));
    }

    #[test]
    fn tampering_and_other_secrets_are_rejected() {
        let s = signer();
        let p = s.mint(b"k", 5_000).unwrap();
        let extended = p.replacen(".5000.", ".9000.", 1);
        assert_eq!(s.verify(extended.as_bytes(), b"k", 0), Err(PassError::BadSignature));
        let other = PassSigner::new(&[b"another secret, 32 bytes long!!!"]).unwrap();
        assert_eq!(s.verify(other.mint(b"k", 5_000).unwrap().as_bytes(), b"k", 0), Err(PassError::BadSignature));
        // Re-binding to another key by swapping the key hash breaks the MAC.
        let mine = s.mint(b"mine", 5_000).unwrap();
        let theirs = s.mint(b"theirs", 5_000).unwrap();
        let swapped = format!("{}{}", &theirs[..26], &mine[26..]);
        assert_eq!(s.verify(swapped.as_bytes(), b"theirs", 0), Err(PassError::BadSignature));
        // Rotation: minted under the old secret, accepted by a signer that still lists it.
        let rotated = PassSigner::new(&[&b"new-secret-new-secret-new-secret"[..], SECRET]).unwrap();
        assert_eq!(rotated.verify(p.as_bytes(), b"k", 0), Ok(5_000));
    }

    #[test]
    fn malformed_input_is_rejected() {
        let s = signer();
        let good = s.mint(b"k", 77).unwrap();
        let (kh, mac) = (&good[3..25], &good[good.len() - 43..]);
        let cases: Vec<String> = vec![
            String::new(),
            "p1.".into(),
            format!("p2.{kh}.77.{mac}"),
            format!("p1.{}.77.{mac}", &kh[..21]),
            format!("p1.{kh}..{mac}"),
            format!("p1.{kh}.7x.{mac}"),
            format!("p1.{kh}.1234567890123.{mac}"),
            format!("p1.{kh}.77.{}", &mac[..42]),
            format!("p1.{kh}.77.{mac}A"),
            format!("p1.{kh}.77.{}+", &mac[..42]),
            format!("p1.{kh}.77.{mac}{}", "x".repeat(1000)),
        ];
        for c in cases {
            assert_eq!(s.verify(c.as_bytes(), b"k", 0), Err(PassError::Malformed), "{c}");
        }
        // The key hash's last character carries 4 spare bits: flipping only those is malformed.
        let mut b = good.into_bytes();
        let v = base64url::value(b[24]).unwrap();
        b[24] = base64url::ALPHABET[(v ^ 1) as usize];
        assert_eq!(s.verify(&b, b"k", 0), Err(PassError::Malformed));
    }

    #[test]
    fn secrets_are_validated() {
        assert!(PassSigner::new::<&[u8]>(&[]).is_err());
        assert_eq!(PassSigner::new(&[b"short"]).unwrap_err().0, "challengeSecret[0] must be at least 16 bytes (32 random bytes recommended)");
        assert!(signer().mint(b"k", 10u64.pow(12)).is_err());
        let longest = signer().mint(b"k", 10u64.pow(12) - 1).unwrap();
        assert_eq!(longest.len(), MAX_PASS_LEN);
    }
}
