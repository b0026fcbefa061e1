//! Signed tokens: HMAC tier tokens and challenge passes, both base64url-encoded HMAC-SHA256.
pub mod base64url;
pub mod keys;
pub mod pass;
pub mod signature;
