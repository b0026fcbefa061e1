//! Signed tokens: HMAC tier tokens.
pub mod signature;
