//! Unpadded base64url (RFC 4648 section 5), the encoding of every MAC in tier tokens and passes:
//! no allocation when decoding, and one spelling per value (non-zero trailing bits are refused).
pub const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

pub fn encode(bytes: &[u8], out: &mut String) {
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
}

/// The 6-bit value of one base64url character.
pub fn value(c: u8) -> Option<u32> {
    Some(u32::from(match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'-' => 62,
        b'_' => 63,
        _ => return None,
    }))
}

/// Decodes `s` into exactly `out.len()` bytes; refuses other alphabets, other lengths and non-zero
/// trailing bits.
pub fn decode(s: &[u8], out: &mut [u8]) -> bool {
    if s.len() != (out.len() * 4).div_ceil(3) {
        return false;
    }
    let mut o = 0;
    for chunk in s.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            match value(c) {
                Some(v) => n |= v << (18 - 6 * i),
                None => return false,
            }
        }
        let bytes = chunk.len() - 1;
        for i in 0..bytes {
            out[o] = (n >> (16 - 8 * i)) as u8;
            o += 1;
        }
        if n & (0xff_ffff >> (8 * bytes)) != 0 {
            return false;
        }
    }
    o == out.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_other_spellings() {
        for len in 0..40 {
            let bytes: Vec<u8> = (0..len as u8).map(|b| b.wrapping_mul(37)).collect();
            let mut s = String::new();
            encode(&bytes, &mut s);
            let mut out = vec![0u8; len];
            assert!(decode(s.as_bytes(), &mut out));
            assert_eq!(out, bytes);
        }
        let mut out = [0u8; 1];
        assert!(decode(b"AA", &mut out));
        assert!(!decode(b"AB", &mut out), "non-zero trailing bits: a second spelling of 0x00");
        assert!(!decode(b"A=", &mut out));
        assert!(!decode(b"AAA", &mut out));
    }
}
