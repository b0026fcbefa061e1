//! Cache-line padding for state that different threads write.

/// Keeps each lock on its own cache line, so two threads on different shards do not slow each other.
#[repr(align(128))]
pub(crate) struct Padded<T>(pub(crate) T);
