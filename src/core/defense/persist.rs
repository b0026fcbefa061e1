//! The ban table's state as plain records with absolute Unix-millisecond times, for persistence
//! (survive a restart) and cluster sharing (one node publishes, the others import).
//!
//! The table runs on the monotonic clock, which means nothing outside the process; records carry wall
//! times instead, converted with the caller's pair of readings (`now_ns`, `now_unix_ms`) taken
//! together. An end time is rounded up to the millisecond (a ban never comes back shorter), a start
//! time down.
use super::ban::{Ban, BanEvent, BanSource, BanTarget};
use super::table::BanTable;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BanRecord {
    pub target: BanTarget,
    pub reason: String,
    pub since_unix_ms: u64,
    /// `None`: permanent.
    pub until_unix_ms: Option<u64>,
    pub offense: u32,
    pub source: BanSource,
}

/// What an import did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ImportReport {
    /// Added or lengthened.
    pub applied: usize,
    /// Already over (or no longer than the ban held).
    pub skipped: usize,
    /// Not added: the table is full of permanent bans.
    pub refused: usize,
}

const NS_PER_MS: u64 = 1_000_000;

impl Ban {
    /// When the ban began and ends (`None`: permanent), in Unix ms, by the pair (`now_ns`,
    /// `now_unix_ms`) read together. An end still ahead is rounded up (a ban never shows shorter), one
    /// already past (an expired or lifted ban's event) down, as a start is.
    pub fn unix_ms(&self, now_ns: u64, now_unix_ms: u64) -> (u64, Option<u64>) {
        let since = now_unix_ms.saturating_sub(now_ns.saturating_sub(self.since_ns) / NS_PER_MS);
        let until = self.until_ns.map(|u| {
            if u >= now_ns {
                now_unix_ms.saturating_add((u - now_ns).div_ceil(NS_PER_MS))
            } else {
                now_unix_ms.saturating_sub((now_ns - u) / NS_PER_MS)
            }
        });
        (since, until)
    }
}

impl BanTable {
    /// The live bans as records.
    pub fn export(&self, now_ns: u64, now_unix_ms: u64) -> Vec<BanRecord> {
        self.state
            .lock()
            .live(now_ns)
            .map(|b| {
                let (since_unix_ms, until_unix_ms) = b.unix_ms(now_ns, now_unix_ms);
                BanRecord { target: b.target.clone(), reason: b.reason.to_string(), since_unix_ms, until_unix_ms, offense: b.offense, source: b.source }
            })
            .collect()
    }

    /// Adds the records' bans (merging with bans already held: the longer end wins). Expired records
    /// are skipped. Key bans also carry their offence history over, so escalation goes on here.
    pub fn import(&self, records: &[BanRecord], now_ns: u64, now_unix_ms: u64, events: &mut Vec<BanEvent>) -> ImportReport {
        let mut report = ImportReport::default();
        for r in records {
            let until_ns = match r.until_unix_ms {
                Some(u) if u <= now_unix_ms => {
                    report.skipped += 1;
                    continue;
                }
                Some(u) => Some(now_ns.saturating_add((u - now_unix_ms).saturating_mul(NS_PER_MS))),
                None => None,
            };
            let since_ns = now_ns.saturating_sub(now_unix_ms.saturating_sub(r.since_unix_ms).saturating_mul(NS_PER_MS));
            let ban = Ban { target: r.target.clone(), reason: r.reason.as_str().into(), since_ns, until_ns, offense: r.offense, source: r.source };
            let before = events.len();
            let mut st = self.state.lock();
            // Records carry whole milliseconds and each side's clock pair is read at its own instant:
            // an end up to 2 ms later is the same ban, not a longer one to report (and echo back).
            let result = st.upsert(ban, now_ns, 2 * NS_PER_MS, events);
            self.note_len(&st);
            drop(st);
            match result {
                Err(_) => report.refused += 1,
                Ok(()) if events[before..].iter().any(|e| e.kind == super::ban::BanEventKind::Added) => {
                    report.applied += 1;
                    match (&r.target, r.offense > 0) {
                        (BanTarget::Key(k), true) => self.remember(k, r.offense, until_ns, now_ns),
                        (BanTarget::Cidr(c), true) => self.remember(&c.strike_key(), r.offense, until_ns, now_ns),
                        _ => {}
                    }
                }
                Ok(()) => report.skipped += 1,
            }
        }
        report
    }
}
