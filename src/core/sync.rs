//! The ledger's synchronisation primitives: parking_lot's mutex and std's atomics, or loom's under
//! `cfg(loom)`, where the model check (src/core/ledger/model.rs) explores every interleaving of them.
//! Only the ledger and its key map go through here; nothing else in the core needs checking that way.
#[cfg(not(loom))]
mod imp {
    pub(crate) use parking_lot::{Mutex, MutexGuard};
    pub(crate) use std::sync::atomic::AtomicU64;
}

#[cfg(loom)]
mod imp {
    pub(crate) use loom::sync::atomic::AtomicU64;
    pub(crate) use loom::sync::MutexGuard;

    /// loom's mutex with parking_lot's face (no poisoning: a panic in the model fails the check).
    pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

    impl<T> Mutex<T> {
        pub(crate) fn new(v: T) -> Mutex<T> {
            Mutex(loom::sync::Mutex::new(v))
        }

        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            self.0.lock().unwrap()
        }
    }
}

pub(crate) use imp::*;
