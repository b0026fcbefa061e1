//! The log-linear histogram behind a `LagWindow`'s quantiles (histogram.rs): counts of drift values
//! in µs buckets, added as samples enter the window and removed as they leave it. Memory is fixed
//! (`BUCKETS + GROUPS` counters); a rank lookup walks at most `GROUPS + SUB_COUNT` of them.

/// Values below `2 * SUB_COUNT` µs are counted exactly (1 µs steps); above, each power of two is split
/// into `SUB_COUNT` buckets, so a bucket spans at most 1/128 of its value (quantiles are reported at the
/// bucket's midpoint: error ≤ 0.4 %).
const SUB_BITS: u32 = 7;
const SUB_COUNT: usize = 1 << SUB_BITS; // 128
const LINEAR: usize = 2 * SUB_COUNT; // 256 exact µs buckets
/// Largest magnitude tracked: 2^36 µs ≈ 19 h. Longer drifts are clamped into the last bucket (their exact
/// value still counts for max and mean).
const MAX_MAGNITUDE: u32 = 36;
const BUCKETS: usize = LINEAR + (MAX_MAGNITUDE as usize - SUB_BITS as usize) * SUB_COUNT;
/// Buckets are summed per group of `SUB_COUNT` so a quantile scan skips empty ranges quickly.
const GROUPS: usize = BUCKETS / SUB_COUNT;

#[inline]
fn bucket_of(us: u64) -> usize {
    if us < LINEAR as u64 {
        return us as usize;
    }
    let magnitude = 63 - us.leading_zeros(); // ≥ 8
    if magnitude >= MAX_MAGNITUDE {
        return BUCKETS - 1;
    }
    let shift = magnitude - SUB_BITS;
    LINEAR + (magnitude - SUB_BITS - 1) as usize * SUB_COUNT + ((us >> shift) as usize - SUB_COUNT)
}

/// Midpoint of a bucket, in µs (exact value for the linear buckets).
#[inline]
fn bucket_mid_us(index: usize) -> f64 {
    if index < LINEAR {
        return index as f64;
    }
    let rel = index - LINEAR;
    let magnitude = (rel / SUB_COUNT) as u32 + SUB_BITS + 1;
    let shift = magnitude - SUB_BITS;
    let low = ((SUB_COUNT + rel % SUB_COUNT) as u64) << shift;
    low as f64 + ((1u64 << shift) as f64 - 1.0) / 2.0
}

/// Counts per bucket, and per group of `SUB_COUNT` buckets.
#[derive(Debug)]
pub(super) struct Buckets {
    counts: Box<[u32]>,
    group_counts: Box<[u32]>,
}

impl Buckets {
    pub(super) fn new() -> Self {
        Buckets { counts: vec![0; BUCKETS].into_boxed_slice(), group_counts: vec![0; GROUPS].into_boxed_slice() }
    }

    #[inline]
    pub(super) fn add(&mut self, us: u64) {
        let b = bucket_of(us);
        self.counts[b] += 1;
        self.group_counts[b / SUB_COUNT] += 1;
    }

    /// Uncounts a value `add` counted.
    #[inline]
    pub(super) fn remove(&mut self, us: u64) {
        let b = bucket_of(us);
        self.counts[b] -= 1;
        self.group_counts[b / SUB_COUNT] -= 1;
    }

    pub(super) fn clear(&mut self) {
        self.counts.fill(0);
        self.group_counts.fill(0);
    }

    /// Midpoint (µs) of the bucket that holds the `from_top`-th largest value counted (1-based);
    /// `None` when fewer are counted. Walks down from the top, skipping whole groups.
    pub(super) fn nth_largest_mid_us(&self, from_top: u64) -> Option<f64> {
        let mut seen = 0u64;
        for g in (0..GROUPS).rev() {
            let gc = self.group_counts[g] as u64;
            if seen + gc < from_top {
                seen += gc;
                continue;
            }
            for b in (g * SUB_COUNT..(g + 1) * SUB_COUNT).rev() {
                seen += self.counts[b] as u64;
                if seen >= from_top {
                    return Some(bucket_mid_us(b));
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotonic_and_tight() {
        let mut last = 0;
        for us in (0..5_000_000u64).step_by(7) {
            let b = bucket_of(us);
            assert!(b >= last, "bucket order at {us}");
            last = b;
            let mid = bucket_mid_us(b);
            let err = (mid - us as f64).abs();
            assert!(err <= (us as f64 / 256.0).max(0.0) + 0.5, "{us} µs → mid {mid}");
        }
        assert_eq!(bucket_of(255), 255);
        assert_eq!(bucket_of(256), 256);
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        assert!(bucket_of((1 << 36) - 1) < BUCKETS);
    }
}
