//! What the fuzz targets share: the secrets, and an oracle for tier tokens written independently of
//! the code under test (HMAC from the `hmac` crate, base64url here), so that "the verifier accepted it"
//! can be checked against "its MAC was made with the key".
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The key tokens are minted and verified with.
pub const SECRET: &[u8] = b"fuzz-secret-0123456789abcdef-0123";
/// Another key: tokens verified under it alone must fail; with it first, SECRET still verifies.
pub const OTHER: &[u8] = b"fuzz-other-secret-0123456789abcde";

/// A token's fields, split from the right at its last two dots: (signed part, tier, expiry digits, MAC
/// field). `None` unless the token starts with `t1.` and has both dots after it.
pub fn fields(token: &[u8]) -> Option<(&[u8], &[u8], &[u8], &[u8])> {
    let body = token.strip_prefix(b"t1.")?;
    let mac_dot = body.iter().rposition(|&b| b == b'.')?;
    let (rest, mac) = (&body[..mac_dot], &body[mac_dot + 1..]);
    let exp_dot = rest.iter().rposition(|&b| b == b'.')?;
    Some((&token[..3 + mac_dot], &rest[..exp_dot], &rest[exp_dot + 1..], mac))
}

/// Whether `token`'s last field is the base64url (no padding) of HMAC-SHA256(`secret`, everything
/// before its last dot).
pub fn mac_made_with(secret: &[u8], token: &[u8]) -> bool {
    let Some((signed, _, _, field)) = fields(token) else { return false };
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("any key length");
    mac.update(signed);
    base64url(&mac.finalize().into_bytes()) == field
}

/// The expiry of a token whose fields parsed: its digits as a number, `None` if not all digits or too
/// long to matter.
pub fn expiry(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

fn base64url(bytes: &[u8]) -> Vec<u8> {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut bits = 0u32;
    let mut nbits = 0;
    let mut out = Vec::new();
    for &b in bytes {
        bits = (bits << 8) | u32::from(b);
        nbits += 8;
        while nbits >= 6 {
            nbits -= 6;
            out.push(ABC[((bits >> nbits) & 63) as usize]);
        }
    }
    if nbits > 0 {
        out.push(ABC[((bits << (6 - nbits)) & 63) as usize]);
    }
    out
}

/// Reads up to `n` bytes little-endian from the front of `data` (missing bytes are 0).
pub fn take_u64<'a>(data: &'a [u8], n: usize) -> (u64, &'a [u8]) {
    let n = n.min(data.len());
    let v = data[..n].iter().rev().fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
    (v, &data[n..])
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64url_matches_rfc4648_without_padding() {
        assert_eq!(super::base64url(b"foob"), b"Zm9vYg");
        assert_eq!(super::base64url(&[0xfb, 0xff]), b"-_8");
    }
}
