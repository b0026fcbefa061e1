//! The tier header: a plain tier name (honoured above the default tier only when trusted) or a
//! signed tier token; anything unreadable gets the lowest tier.
use super::Gate;
use crate::core::names::named_enum;
use crate::core::token::signature::{looks_like_token, TierSigner, VerifyError};

/// Header values longer than this are ignored (the default tier applies).
pub const MAX_HEADER_LEN: usize = 256;

named_enum! {
    /// Where the request's tier came from.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum TierSource: u8 {
        /// No usable tier: the default.
        Default = "default",
        /// Chosen by the caller (route rule or classify function).
        Given = "given",
        /// A plain tier name in the header, honoured.
        Header = "header",
        /// A valid signed token.
        Signed = "signed",
        /// A plain name above the default tier in an untrusted header: not honoured.
        Untrusted = "untrusted",
        /// A token with a bad signature (or tokens not configured): not honoured.
        BadSignature = "bad-signature",
        /// An authentic but expired token: not honoured.
        Expired = "expired",
        /// Malformed token, unknown tier name, several values, or an over-long header: the lowest tier.
        Invalid = "invalid",
    }
}

/// The one rule that turns a tier header value into a tier, for every guard: the gatekeeper's
/// decision (`Gate::header_tier`) and the concurrency gate (through the napi `TierHeader`).
pub struct TierHeaderRule<'a> {
    /// How many tiers there are (ids 0.., highest priority first).
    pub tiers: usize,
    /// A tier's id by its exact name.
    pub lookup: &'a dyn Fn(&[u8]) -> Option<usize>,
    pub default_tier: usize,
    /// Plain names are honoured above the default tier (an authenticating gateway sets the header).
    pub trust_header: bool,
    pub signer: Option<&'a TierSigner>,
}

impl TierHeaderRule<'_> {
    fn tier_id(&self, name: &[u8]) -> Option<usize> {
        (self.lookup)(name)
    }

    /// Resolves a tier header value at Unix time `now_sec` (read only for signed tokens).
    pub fn resolve(&self, value: &[u8], now_sec: impl FnOnce() -> u64) -> (usize, TierSource) {
        // A value that cannot be read as one tier (over-long, several values, malformed, unknown)
        // gets the LOWEST tier, not the default: behind a gateway that appends its own value
        // (`critical, background`) or after a client pads the header past the limit, the default
        // could be above what the gateway meant. Tiers are ordered highest first.
        let lowest = (self.tiers - 1, TierSource::Invalid);
        if value.len() > MAX_HEADER_LEN {
            return lowest;
        }
        let v = value.trim_ascii();
        if v.is_empty() {
            return (self.default_tier, TierSource::Default);
        }
        // Several values (repeated headers are joined with ", "): ambiguous, so none is honoured.
        if v.contains(&b',') {
            return lowest;
        }
        if looks_like_token(v) {
            let Some(signer) = self.signer else {
                return (self.default_tier, TierSource::BadSignature);
            };
            return match signer.verify(v, now_sec()) {
                Ok(name) => match self.tier_id(name) {
                    Some(t) => (t, TierSource::Signed),
                    None => lowest,
                },
                Err(VerifyError::Expired) => (self.default_tier, TierSource::Expired),
                Err(VerifyError::BadSignature) => (self.default_tier, TierSource::BadSignature),
                Err(VerifyError::Malformed) => lowest,
            };
        }
        match self.tier_id(v) {
            // Tiers are ordered highest first: a larger id is a lower tier.
            Some(t) if self.trust_header || t >= self.default_tier => (t, TierSource::Header),
            Some(_) => (self.default_tier, TierSource::Untrusted),
            None => lowest,
        }
    }
}

impl Gate {
    /// Resolves a tier header value at Unix time `now_sec` (read only for signed tokens).
    pub fn header_tier(&self, value: &[u8], now_sec: impl FnOnce() -> u64) -> (usize, TierSource) {
        TierHeaderRule {
            tiers: self.protected.len(),
            lookup: &|name| self.ledger.tier_id(name),
            default_tier: self.cfg.default_tier,
            trust_header: self.cfg.trust_header,
            signer: self.cfg.signer.as_ref(),
        }
        .resolve(value, now_sec)
    }
}
