//! The secrets behind tier tokens and challenge passes: one keyed HMAC-SHA256 state per secret (cloned
//! per use, so no key schedule per token); the first signs, every one verifies (rotation).
use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// Secrets shorter than this are refused.
pub const MIN_SECRET_LEN: usize = 16;

#[derive(Clone)]
pub struct MacKeys {
    macs: Vec<HmacSha256>,
}

/// Why a secret list was refused: no secret, or secret `i` too short.
#[derive(Debug, PartialEq, Eq)]
pub enum KeysError {
    Empty,
    TooShort(usize),
}

impl MacKeys {
    pub fn new<S: AsRef<[u8]>>(secrets: &[S]) -> Result<MacKeys, KeysError> {
        if secrets.is_empty() {
            return Err(KeysError::Empty);
        }
        let mut macs = Vec::with_capacity(secrets.len());
        for (i, s) in secrets.iter().enumerate() {
            if s.as_ref().len() < MIN_SECRET_LEN {
                return Err(KeysError::TooShort(i));
            }
            // HMAC takes keys of any length: this cannot fail.
            macs.push(HmacSha256::new_from_slice(s.as_ref()).expect("HMAC accepts any key length"));
        }
        Ok(MacKeys { macs })
    }

    pub fn len(&self) -> usize {
        self.macs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.macs.is_empty()
    }

    /// The MAC of `msg` under the first secret.
    pub fn sign(&self, msg: &[u8]) -> [u8; 32] {
        let mut mac = self.macs[0].clone();
        mac.update(msg);
        mac.finalize().into_bytes().into()
    }

    /// Whether `tag` is the MAC of `msg` under any secret: every secret is checked (no early exit on
    /// which matched), each comparison in constant time, so timing says nothing either.
    pub fn verify_any(&self, msg: &[u8], tag: &[u8]) -> bool {
        let mut ok = false;
        for m in &self.macs {
            let mut mac = m.clone();
            mac.update(msg);
            ok |= mac.verify_slice(tag).is_ok();
        }
        ok
    }
}
