//! Signed tier tokens: a tier claim that a client cannot forge or keep using past its expiry.
//!
//! Format (ASCII, at most `MAX_TOKEN_LEN` bytes):
//!
//! ```text
//! t1.<tier>.<expires>.<mac>
//! ```
//! - `tier`: 1–64 bytes of `[A-Za-z0-9_-]` (the tier's name);
//! - `expires`: Unix time in whole seconds, 1–12 decimal digits; the token is valid while `now < expires`;
//! - `mac`: base64url without padding (43 characters) of HMAC-SHA256(secret, "t1.<tier>.<expires>").
//!
//! Verification is bounded (longer input is rejected before any work), parses without allocating, and
//! compares the MAC in constant time (`Mac::verify_slice`). Several secrets may be configured for
//! rotation: tokens are minted with the first and accepted under any.
use super::base64url;
use super::keys::{KeysError, MacKeys};
use std::fmt;

pub const PREFIX: &[u8] = b"t1.";
pub const MAX_TIER_LEN: usize = 64;
pub const MAX_EXPIRY_DIGITS: usize = 12;
const MAC_LEN: usize = 32;
const MAC_B64_LEN: usize = 43;
/// Longest well-formed token: prefix, tier, dot, expiry, dot, MAC.
pub const MAX_TOKEN_LEN: usize = PREFIX.len() + MAX_TIER_LEN + 1 + MAX_EXPIRY_DIGITS + 1 + MAC_B64_LEN;
pub use super::keys::MIN_SECRET_LEN;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerifyError {
    /// Not a token at all, or not of this format (too long, bad characters, bad field lengths).
    Malformed,
    /// Well-formed but the MAC does not match under any configured secret.
    BadSignature,
    /// Authentic but `now >= expires`.
    Expired,
}

impl VerifyError {
    pub fn as_str(self) -> &'static str {
        match self {
            VerifyError::Malformed => "malformed",
            VerifyError::BadSignature => "bad-signature",
            VerifyError::Expired => "expired",
        }
    }
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignerError(pub &'static str);

impl fmt::Display for SignerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for SignerError {}

/// Whether `name` can be carried in a token: 1–64 bytes of `[A-Za-z0-9_-]`.
pub fn is_token_tier(name: &[u8]) -> bool {
    !name.is_empty() && name.len() <= MAX_TIER_LEN && name.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Whether `v` looks like a token (starts with the format prefix); plain tier names never do.
pub fn looks_like_token(v: &[u8]) -> bool {
    v.starts_with(PREFIX)
}

#[derive(Clone)]
pub struct TierSigner {
    keys: MacKeys,
}

impl fmt::Debug for TierSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TierSigner({} secret(s))", self.keys.len())
    }
}

impl TierSigner {
    /// `secrets[0]` mints; all verify. Each must be at least `MIN_SECRET_LEN` bytes.
    pub fn new<S: AsRef<[u8]>>(secrets: &[S]) -> Result<TierSigner, SignerError> {
        match MacKeys::new(secrets) {
            Ok(keys) => Ok(TierSigner { keys }),
            Err(KeysError::Empty) => Err(SignerError("tierSecret: at least one secret is required")),
            Err(KeysError::TooShort(_)) => Err(SignerError("tierSecret: each secret must be at least 16 bytes (32 random bytes recommended)")),
        }
    }

    /// Mints a token for `tier` valid until `expires_sec` (Unix seconds, exclusive).
    pub fn sign(&self, tier: &str, expires_sec: u64) -> Result<String, SignerError> {
        if !is_token_tier(tier.as_bytes()) {
            return Err(SignerError("tier: must be 1-64 characters of A-Z a-z 0-9 _ -"));
        }
        if expires_sec >= 10u64.pow(MAX_EXPIRY_DIGITS as u32) {
            return Err(SignerError("expiresAt: out of range"));
        }
        let mut token = String::with_capacity(MAX_TOKEN_LEN);
        token.push_str("t1.");
        token.push_str(tier);
        token.push('.');
        token.push_str(&expires_sec.to_string());
        let tag = self.keys.sign(token.as_bytes());
        token.push('.');
        base64url::encode(&tag, &mut token);
        Ok(token)
    }

    /// Verifies `token` at `now_sec` and returns the tier name it carries (a slice of `token`).
    pub fn verify<'a>(&self, token: &'a [u8], now_sec: u64) -> Result<&'a [u8], VerifyError> {
        let (signed, tier, expires, mac_b64) = parse(token).ok_or(VerifyError::Malformed)?;
        let mut tag = [0u8; MAC_LEN];
        if !base64url::decode(mac_b64, &mut tag) {
            return Err(VerifyError::Malformed);
        }
        if !self.keys.verify_any(signed, &tag) {
            return Err(VerifyError::BadSignature);
        }
        if now_sec >= expires {
            return Err(VerifyError::Expired);
        }
        Ok(tier)
    }
}

/// A token's fields: the signed part, the tier, the expiry, the MAC (still base64url).
type Parts<'a> = (&'a [u8], &'a [u8], u64, &'a [u8]);

/// Splits a token into its parts. No allocation; `None` when malformed.
fn parse(token: &[u8]) -> Option<Parts<'_>> {
    if token.len() > MAX_TOKEN_LEN || !token.starts_with(PREFIX) {
        return None;
    }
    let last_dot = token.iter().rposition(|&b| b == b'.')?;
    let (signed, mac_b64) = (&token[..last_dot], &token[last_dot + 1..]);
    if mac_b64.len() != MAC_B64_LEN {
        return None;
    }
    let exp_dot = signed.iter().rposition(|&b| b == b'.')?;
    if exp_dot < PREFIX.len() {
        return None;
    }
    let tier = &signed[PREFIX.len()..exp_dot];
    let exp = &signed[exp_dot + 1..];
    if !is_token_tier(tier) || exp.is_empty() || exp.len() > MAX_EXPIRY_DIGITS || !exp.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let expires = exp.iter().fold(0u64, |acc, &d| acc * 10 + u64::from(d - b'0'));
    Some((signed, tier, expires, mac_b64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hmac::{Hmac, Mac};
    type HmacSha256 = Hmac<sha2::Sha256>;

    const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";

    fn signer() -> TierSigner {
        TierSigner::new(&[SECRET]).unwrap()
    }

    #[test]
    fn a_minted_token_verifies_until_it_expires() {
        let s = signer();
        let t = s.sign("critical", 1_000).unwrap();
        assert!(t.starts_with("t1.critical.1000."));
        assert_eq!(t.len(), "t1.critical.1000.".len() + 43);
        assert_eq!(s.verify(t.as_bytes(), 999), Ok(&b"critical"[..]));
        assert_eq!(s.verify(t.as_bytes(), 1_000), Err(VerifyError::Expired));
        assert_eq!(s.verify(t.as_bytes(), u64::MAX), Err(VerifyError::Expired));
    }

    #[test]
    fn the_mac_is_hmac_sha256_of_the_signed_part() {
        // RFC 4231 test case 2 checks the primitive; here the token's last field must be its base64url.
        let mut mac = HmacSha256::new_from_slice(SECRET).unwrap();
        mac.update(b"t1.gold.42");
        let mut expect = String::new();
        base64url::encode(&mac.finalize().into_bytes(), &mut expect);
        assert_eq!(signer().sign("gold", 42).unwrap(), format!("t1.gold.42.{expect}"));
        let mut m = HmacSha256::new_from_slice(b"Jefe").unwrap();
        m.update(b"what do ya want for nothing?");
        let hex: String = m.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    }

    #[test]
    fn any_tampering_is_rejected() {
        let s = signer();
        let t = s.sign("standard", 5_000).unwrap();
        // Promote the tier, extend the expiry, flip a MAC character.
        let promoted = t.replacen("standard", "critical", 1);
        assert_eq!(s.verify(promoted.as_bytes(), 0), Err(VerifyError::BadSignature));
        let extended = t.replacen(".5000.", ".9000.", 1);
        assert_eq!(s.verify(extended.as_bytes(), 0), Err(VerifyError::BadSignature));
        let mut flipped = t.clone().into_bytes();
        let last = flipped.len() - 2;
        flipped[last] = if flipped[last] == b'A' { b'B' } else { b'A' };
        assert_eq!(s.verify(&flipped, 0), Err(VerifyError::BadSignature));
        // Another secret's token.
        let other = TierSigner::new(&[b"another secret, 32 bytes long!!!"]).unwrap();
        assert_eq!(s.verify(other.sign("standard", 5_000).unwrap().as_bytes(), 0), Err(VerifyError::BadSignature));
    }

    #[test]
    fn malformed_input_is_rejected_before_any_mac_work() {
        let s = signer();
        let good = s.sign("critical", 77).unwrap();
        let mac = &good[good.len() - 43..];
        let cases: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"critical".to_vec(),
            b"t1.".to_vec(),
            b"t1...".to_vec(),
            format!("t2.critical.77.{mac}").into_bytes(),
            format!("t1..77.{mac}").into_bytes(),
            format!("t1.crit ical.77.{mac}").into_bytes(),
            format!("t1.critical..{mac}").into_bytes(),
            format!("t1.critical.7x.{mac}").into_bytes(),
            format!("t1.critical.-77.{mac}").into_bytes(),
            format!("t1.critical.1234567890123.{mac}").into_bytes(),
            format!("t1.critical.77.{}", &mac[..42]).into_bytes(),
            format!("t1.critical.77.{mac}A").into_bytes(),
            format!("t1.critical.77.{}=", &mac[..42]).into_bytes(),
            format!("t1.critical.77.{}+", &mac[..42]).into_bytes(),
            format!("t1.{}.77.{mac}", "a".repeat(65)).into_bytes(),
            format!("t1.critical.77.{mac}").into_bytes().into_iter().chain(std::iter::repeat_n(b'x', 10_000)).collect(),
            format!("t1.crit\u{e9}cal.77.{mac}").into_bytes(),
            vec![0xff; 100],
        ];
        for c in cases {
            assert_eq!(s.verify(&c, 0), Err(VerifyError::Malformed), "{:?}", String::from_utf8_lossy(&c));
        }
    }

    #[test]
    fn non_canonical_base64_spelling_is_rejected() {
        let s = signer();
        let t = s.sign("x", 9).unwrap();
        // The last character carries 4 bits of padding; changing only those must not verify.
        let mut b = t.into_bytes();
        let last = b.len() - 1;
        let v = base64url::value(b[last]).unwrap();
        b[last] = base64url::ALPHABET[(v ^ 1) as usize];
        assert_eq!(s.verify(&b, 0), Err(VerifyError::Malformed));
    }

    #[test]
    fn rotation_mints_with_the_first_and_accepts_any() {
        let old = TierSigner::new(&[b"old-secret-old-secret-old-secret"]).unwrap();
        let rotated = TierSigner::new(&[&b"new-secret-new-secret-new-secret"[..], &b"old-secret-old-secret-old-secret"[..]]).unwrap();
        let from_old = old.sign("gold", 100).unwrap();
        assert_eq!(rotated.verify(from_old.as_bytes(), 1), Ok(&b"gold"[..]));
        let from_new = rotated.sign("gold", 100).unwrap();
        assert_ne!(from_new, from_old);
        assert_eq!(old.verify(from_new.as_bytes(), 1), Err(VerifyError::BadSignature));
    }

    #[test]
    fn secrets_and_tiers_are_validated() {
        assert!(TierSigner::new::<&[u8]>(&[]).is_err());
        assert!(TierSigner::new(&[b"short"]).is_err());
        let s = signer();
        assert!(s.sign("", 1).is_err());
        assert!(s.sign("a.b", 1).is_err());
        assert!(s.sign(&"a".repeat(65), 1).is_err());
        assert!(s.sign("ok", 10u64.pow(12)).is_err());
        let longest = s.sign(&"a".repeat(64), 10u64.pow(12) - 1).unwrap();
        assert_eq!(longest.len(), MAX_TOKEN_LEN);
        assert!(s.verify(longest.as_bytes(), 0).is_ok());
    }

    #[test]
    fn base64url_round_trips() {
        {
            let len = 32usize;
            let bytes: Vec<u8> = (0..len as u8).map(|b| b.wrapping_mul(37).wrapping_add(11)).collect();
            let mut s = String::new();
            base64url::encode(&bytes, &mut s);
            assert_eq!(s.len(), 43);
            let mut out = [0u8; 32];
            assert!(base64url::decode(s.as_bytes(), &mut out));
            assert_eq!(&out[..], &bytes[..]);
        }
        assert!(looks_like_token(b"t1.x"));
        assert!(!looks_like_token(b"critical"));
    }
}
