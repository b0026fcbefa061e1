//! Network identities: client-IP keys.
pub mod ipkey;
