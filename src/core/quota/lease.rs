//! The leases one key holds: tokens the store has already debited for this process, each spendable
//! until its expiry (local time, never later than the store's: see `wire`).
//!
//! Spends take from the lease that expires first, so the tokens a renewal overlaps with are the ones
//! used up, and fewer are left to expire. Leases the store names alike (a window store names them by
//! window) merge, keeping the earlier expiry. A key holds at most `MAX_LEASES`; one more returns the
//! smallest (a key asks for a lease ahead of need only below the cap, so this is rare). Each lease
//! remembers when it was last spent from: a sliding window store stops counting its spent tokens one
//! window after that (`wire::Return::idle_ns`).
use super::wire::LeaseId;

/// The most leases a key holds at once.
pub const MAX_LEASES: usize = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    pub id: LeaseId,
    /// Unspent tokens (never 0: an empty lease is dropped).
    pub tokens: u64,
    /// Local time at which the lease stops being spendable.
    pub expires_ns: u64,
    /// Local time of the last spend from it (`None`: never spent from).
    pub last_spend_ns: Option<u64>,
}

impl Lease {
    /// A lease nothing has been spent from yet.
    pub fn new(id: LeaseId, tokens: u64, expires_ns: u64) -> Lease {
        Lease { id, tokens, expires_ns, last_spend_ns: None }
    }

    /// How long before `now_ns` its last spend was (`None`: never spent from).
    pub fn idle_ns(&self, now_ns: u64) -> Option<u64> {
        self.last_spend_ns.map(|t| now_ns.saturating_sub(t))
    }
}

/// A key's leases, ordered by expiry, with their token total.
#[derive(Clone, Debug, Default)]
pub struct Leases {
    held: Vec<Lease>,
    total: u64,
}

impl Leases {
    /// Unspent tokens over all leases (including any past expiry that `expire` has not dropped yet).
    #[inline]
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Unspent tokens of the leases still live at `now_ns`.
    pub fn live(&self, now_ns: u64) -> u64 {
        self.held.iter().filter(|l| l.expires_ns > now_ns).map(|l| l.tokens).sum()
    }

    pub fn len(&self) -> usize {
        self.held.len()
    }

    /// The earliest expiry, if any lease is held.
    pub fn next_expiry(&self) -> Option<u64> {
        self.held.first().map(|l| l.expires_ns)
    }

    /// Drops the leases expired at `now_ns`, passing each to `dropped`.
    #[inline]
    pub fn expire(&mut self, now_ns: u64, mut dropped: impl FnMut(Lease)) {
        while let Some(&l) = self.held.first() {
            if l.expires_ns > now_ns {
                break;
            }
            self.held.remove(0);
            self.total -= l.tokens;
            dropped(l);
        }
    }

    /// Spends `cost` at `now_ns` from the earliest-expiring leases, passing each lease it empties to
    /// `emptied`; false (and nothing spent) if they hold less. Call `expire` first.
    #[inline]
    pub fn spend(&mut self, cost: u64, now_ns: u64, mut emptied: impl FnMut(Lease)) -> bool {
        if cost > self.total {
            return false;
        }
        self.total -= cost;
        let mut left = cost;
        while left > 0 {
            let l = &mut self.held[0];
            let take = left.min(l.tokens);
            l.tokens -= take;
            l.last_spend_ns = Some(now_ns);
            left -= take;
            if l.tokens == 0 {
                emptied(self.held.remove(0));
            }
        }
        true
    }

    /// Adds a lease (`tokens > 0`); returns the lease that no longer fits, if the key held `MAX_LEASES`.
    pub fn add(&mut self, lease: Lease) -> Option<Lease> {
        debug_assert!(lease.tokens > 0);
        self.total += lease.tokens;
        if let Some(same) = self.held.iter_mut().find(|l| l.id == lease.id) {
            same.tokens += lease.tokens;
            same.expires_ns = same.expires_ns.min(lease.expires_ns);
            self.held.sort_by_key(|l| l.expires_ns);
        } else {
            let at = self.held.partition_point(|l| l.expires_ns <= lease.expires_ns);
            self.held.insert(at, lease);
        }
        if self.held.len() <= MAX_LEASES {
            return None;
        }
        let smallest = (0..self.held.len()).min_by_key(|&i| self.held[i].tokens).unwrap();
        let out = self.held.remove(smallest);
        self.total -= out.tokens;
        Some(out)
    }

    /// Removes every lease, passing each to `out`.
    pub fn drain(&mut self, out: impl FnMut(Lease)) {
        self.total = 0;
        self.held.drain(..).for_each(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(id: u64, tokens: u64, expires_ns: u64) -> Lease {
        Lease::new(LeaseId(id), tokens, expires_ns)
    }

    fn spend(l: &mut Leases, cost: u64) -> bool {
        l.spend(cost, 0, |_| {})
    }

    #[test]
    fn spends_the_earliest_expiring_first_across_leases() {
        let mut l = Leases::default();
        assert!(l.add(lease(2, 5, 200)).is_none());
        assert!(l.add(lease(1, 3, 100)).is_none());
        assert_eq!((l.total(), l.next_expiry()), (8, Some(100)));
        assert_eq!((l.live(99), l.live(100), l.live(200)), (8, 5, 0));
        assert!(spend(&mut l, 4));
        assert_eq!((l.total(), l.len(), l.next_expiry()), (4, 1, Some(200)));
        assert!(!spend(&mut l, 5), "more than held: nothing spent");
        assert_eq!(l.total(), 4);
        assert!(spend(&mut l, 4));
        assert!(l.len() == 0 && l.total() == 0);
    }

    #[test]
    fn a_spend_marks_its_leases_and_hands_over_the_ones_it_empties() {
        let mut l = Leases::default();
        l.add(lease(1, 3, 100));
        l.add(lease(2, 5, 200));
        let mut emptied = vec![];
        assert!(l.spend(4, 40, |x| emptied.push(x)));
        assert_eq!(emptied, vec![Lease { id: LeaseId(1), tokens: 0, expires_ns: 100, last_spend_ns: Some(40) }]);
        assert!(l.spend(1, 60, |x| emptied.push(x)));
        assert_eq!(emptied.len(), 1, "lease 2 still holds 3");
        let mut left = vec![];
        l.drain(|x| left.push(x));
        assert_eq!((left[0].tokens, left[0].idle_ns(75)), (3, Some(15)));
        assert_eq!(lease(3, 1, 9).idle_ns(75), None, "never spent from");
    }

    #[test]
    fn expiry_drops_exactly_the_leases_past_their_time() {
        let mut l = Leases::default();
        l.add(lease(1, 3, 100));
        l.add(lease(2, 5, 200));
        let mut dropped = vec![];
        l.expire(99, |x| dropped.push(x));
        assert!(dropped.is_empty());
        l.expire(100, |x| dropped.push(x));
        assert_eq!(dropped, vec![lease(1, 3, 100)]);
        assert_eq!(l.total(), 5);
    }

    #[test]
    fn same_id_merges_with_the_earlier_expiry() {
        let mut l = Leases::default();
        l.add(lease(7, 3, 150));
        l.add(lease(7, 2, 140));
        assert_eq!((l.len(), l.total(), l.next_expiry()), (1, 5, Some(140)));
    }

    #[test]
    fn past_the_cap_the_smallest_lease_goes_back() {
        let mut l = Leases::default();
        for i in 0..MAX_LEASES as u64 {
            assert!(l.add(lease(i, 10 + i, 100 + i)).is_none());
        }
        let out = l.add(lease(99, 50, 50));
        assert_eq!(out, Some(lease(0, 10, 100)));
        assert_eq!(l.len(), MAX_LEASES);
        assert_eq!(l.total(), 11 + 12 + 13 + 50);
        assert_eq!(l.next_expiry(), Some(50));
        let mut all = vec![];
        l.drain(|x| all.push(x.tokens));
        assert_eq!((all.iter().sum::<u64>(), l.total()), (86, 0));
    }
}
