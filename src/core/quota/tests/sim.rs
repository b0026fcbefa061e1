//! A deterministic simulation of a cluster: `P` processes, each with its own engine and clock
//! offset, one reference store (`store.rs`) behind a network with random latency, spikes past the
//! caller's timeout, outages, restarts, and processes that die. Events run in time order from one
//! seed; the run records every admission and what the invariants need.
use super::rng::Rng;
use super::store::{Store, StoreAlg};
use crate::core::quota::*;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

pub const MS: u64 = 1_000_000;
pub const SEC: u64 = 1_000_000_000;

#[derive(Clone)]
pub struct Scenario {
    pub seed: u64,
    pub processes: usize,
    pub keys: usize,
    pub limit: LimitConfig,
    pub store: StoreAlg,
    pub duration_ns: u64,
    /// Mean arrivals per second at each process, over all keys (key `i` of `n` drawn as
    /// `floor(u² · n)`: the first keys hot, the last ones cool).
    pub arrivals_per_sec: f64,
    /// With `Some(len)`: demand moves between the even and the odd processes every `len` (the idle
    /// half asks at 5% of the rate), so leases are left over when a window ends.
    pub phase_ns: Option<u64>,
    pub max_cost: u64,
    /// One-way latency, uniform in `latency_ns`, or in `spike_ns` with `spike_chance`.
    pub latency_ns: (u64, u64),
    pub spike_chance: f64,
    pub spike_ns: (u64, u64),
    /// The caller's store timeout: a request unanswered this long fails; a spend waits no longer.
    pub timeout_ns: u64,
    pub poll_ns: u64,
    /// Spans during which the store is unreachable (requests and returns sent to it are lost).
    pub outages: Vec<(u64, u64)>,
    /// Times at which the store restarts empty.
    pub restarts: Vec<u64>,
    /// `(t, p)`: process `p` dies at `t` (its state dropped, nothing returned); a fresh one replaces it.
    pub kills: Vec<(u64, usize)>,
    pub max_keys: usize,
}

impl Scenario {
    pub fn new(seed: u64, store: StoreAlg, limit: LimitConfig) -> Scenario {
        Scenario {
            seed,
            processes: 6,
            keys: 5,
            limit,
            store,
            duration_ns: 20 * SEC,
            arrivals_per_sec: 400.0,
            phase_ns: None,
            max_cost: 3,
            latency_ns: (MS, 8 * MS),
            spike_chance: 0.03,
            spike_ns: (30 * MS, 80 * MS),
            timeout_ns: 40 * MS,
            poll_ns: 5 * MS,
            outages: vec![],
            restarts: vec![],
            kills: vec![],
            max_keys: 1000,
        }
    }
}

/// The engine options the scenarios share (`max_lease` 50).
pub fn limit_config() -> LimitConfig {
    LimitConfig {
        renewal_period_ms: 200.0,
        lead_time_ms: 30.0,
        lease_ttl_ms: 2000.0,
        max_lease: 50,
        initial_lease: 5,
        retry_ms: 100.0,
        // Algorithm: only the fallback share reads it; scenarios set it to match their store.
        ..LimitConfig::new("sim", Algorithm::Window { limit: 1.0, window_ms: 1000.0 })
    }
}

#[derive(Clone, Copy, Debug)]
pub struct Admit {
    pub t: u64,
    pub key: usize,
    pub cost: u64,
    pub source: Source,
    pub p: usize,
}

pub struct Run {
    pub admits: Vec<Admit>,
    /// `(t, key, cost)` of every spend asked.
    pub arrivals: Vec<(u64, usize, u64)>,
    pub refused: u64,
    /// Spends refused because the store did not answer within the caller's timeout.
    pub waited_out: u64,
    /// `(t, key, process, net tokens debited)`: the store's grants (+) and credited returns (−), in
    /// order.
    pub debits: Vec<(u64, usize, usize, i64)>,
    /// Tokens of grants handed back as late or unusable that the store did not credit, by
    /// (key, lease id): debited, never spendable.
    pub lost_grants: HashMap<(usize, u64), u64>,
    /// `(t, p, key, held + in flight)` at each death.
    pub killed: Vec<(u64, usize, usize, u64)>,
    /// `(t, key, held + in flight over all processes)` at each store restart.
    pub restarted: Vec<(u64, usize, u64)>,
    /// The most one process held + had in flight for one key, at any poll.
    pub max_outstanding: u64,
    /// The most keys one engine tracked, at any poll.
    pub max_keys: usize,
    pub store: Store,
    pub stats: Vec<Stats>,
}

enum Ev {
    Arrive { p: usize },
    Poll { p: usize },
    AtStore { p: usize, epoch: u32, req: Request },
    Reply { p: usize, epoch: u32, req: Request, grant: Grant },
    Timeout { p: usize, epoch: u32, id: RequestId },
    ReturnAtStore { p: usize, ret: Return },
    Deadline { p: usize, epoch: u32, waiter: u64 },
    Kill { p: usize },
    Restart,
}

struct Sched {
    at: u64,
    seq: u64,
    ev: Ev,
}

impl PartialEq for Sched {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Sched {}
impl PartialOrd for Sched {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Sched {
    // Reversed: the heap pops the earliest.
    fn cmp(&self, o: &Self) -> Ordering {
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

struct Flight {
    key: usize,
    size: u64,
    timed_out: bool,
}

struct Waiter {
    id: u64,
    key: usize,
    cost: u64,
}

struct Proc {
    q: Quota,
    epoch: u32,
    offset: u64,
    waiters: Vec<Waiter>,
    flights: HashMap<RequestId, Flight>,
}

struct Sim<'a> {
    sc: &'a Scenario,
    rng: Rng,
    heap: BinaryHeap<Sched>,
    seq: u64,
    now: u64,
    procs: Vec<Proc>,
    names: Vec<Vec<u8>>,
    index: HashMap<Vec<u8>, usize>,
    limit: LimitId,
    polls: usize,
    next_waiter: u64,
    run: Run,
}

fn engine(sc: &Scenario) -> Quota {
    Quota::new(QuotaConfig { max_keys: sc.max_keys, ..QuotaConfig::new(vec![sc.limit.clone()]) }).unwrap()
}

pub fn run(sc: &Scenario) -> Run {
    let mut rng = Rng::new(sc.seed);
    let procs =
        (0..sc.processes).map(|_| Proc { q: engine(sc), epoch: 0, offset: rng.range(0, 3600 * SEC), waiters: vec![], flights: HashMap::new() }).collect();
    let limit = engine(sc).limit_at(0).unwrap();
    let mut sim = Sim {
        sc,
        rng,
        heap: BinaryHeap::new(),
        seq: 0,
        now: 0,
        procs,
        names: (0..sc.keys).map(|k| format!("key{k}").into_bytes()).collect(),
        index: (0..sc.keys).map(|k| (format!("key{k}").into_bytes(), k)).collect(),
        limit,
        polls: 0,
        next_waiter: 0,
        run: Run {
            admits: vec![],
            arrivals: vec![],
            refused: 0,
            waited_out: 0,
            debits: vec![],
            lost_grants: HashMap::new(),
            killed: vec![],
            restarted: vec![],
            max_outstanding: 0,
            max_keys: 0,
            store: Store::new(sc.store),
            stats: vec![],
        },
    };
    for p in 0..sc.processes {
        let first = sim.gap(p);
        sim.at(first, Ev::Arrive { p });
        let poll = sim.rng.range(0, sc.poll_ns);
        sim.at(poll, Ev::Poll { p });
    }
    for &(t, p) in &sc.kills {
        sim.at(t, Ev::Kill { p });
    }
    for &t in &sc.restarts {
        sim.at(t, Ev::Restart);
    }
    while let Some(s) = sim.heap.pop() {
        if s.at > sc.duration_ns {
            break;
        }
        sim.now = s.at;
        sim.handle(s.ev);
    }
    sim.run.store.close_all();
    sim.run.stats = sim.procs.iter().map(|p| p.q.stats()).collect();
    sim.run
}

impl Sim<'_> {
    fn at(&mut self, t: u64, ev: Ev) {
        self.seq += 1;
        self.heap.push(Sched { at: t, seq: self.seq, ev });
    }

    fn gap(&mut self, p: usize) -> u64 {
        let idle = self.sc.phase_ns.is_some_and(|len| (self.now / len) as usize % 2 != p % 2);
        let rate = if idle { self.sc.arrivals_per_sec * 0.05 } else { self.sc.arrivals_per_sec };
        self.rng.exp(1e9 / rate)
    }

    fn latency(&mut self) -> u64 {
        let (lo, hi) = if self.rng.chance(self.sc.spike_chance) { self.sc.spike_ns } else { self.sc.latency_ns };
        self.rng.range(lo, hi)
    }

    fn store_down(&self) -> bool {
        self.sc.outages.iter().any(|&(a, b)| a <= self.now && self.now < b)
    }

    fn local(&self, p: usize) -> u64 {
        self.now + self.procs[p].offset
    }

    fn key_index(&self, name: &[u8]) -> usize {
        self.index[name]
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Arrive { p } => {
                let u = self.rng.unit();
                let key = ((u * u) * self.sc.keys as f64) as usize;
                let cost = self.rng.range(1, self.sc.max_cost);
                self.run.arrivals.push((self.now, key, cost));
                self.spend(p, key, cost, None);
                let next = self.now + self.gap(p);
                self.at(next, Ev::Arrive { p });
            }
            Ev::Poll { p } => {
                let local = self.local(p);
                for a in self.procs[p].q.poll(local) {
                    match a {
                        Action::Request(r) => self.send(p, r),
                        Action::Return(r) => self.send_return(p, r),
                    }
                }
                self.measure(p);
                let next = self.now + self.sc.poll_ns;
                self.at(next, Ev::Poll { p });
            }
            Ev::AtStore { p, epoch, req } => {
                if self.store_down() {
                    return;
                }
                let holder = p as u64 * 1000 + u64::from(epoch);
                let g = self.run.store.request(holder, &req.key, req.size, req.ttl_ns, self.now);
                assert!(g.granted <= req.size);
                let key = self.key_index(&req.key);
                self.run.debits.push((self.now, key, p, g.granted as i64));
                let back = self.now + self.latency();
                self.at(back, Ev::Reply { p, epoch, req, grant: g });
            }
            Ev::Reply { p, epoch, req, grant } => {
                if self.procs[p].epoch != epoch {
                    return; // the process died: these tokens are stranded (counted at the kill)
                }
                let f = self.procs[p].flights.remove(&req.id).expect("a reply to a request sent");
                let local = self.local(p);
                let back = self.procs[p].q.grant(self.limit, &req.key, req.id, grant, local);
                if f.timed_out {
                    assert!(grant.granted == 0 || back.as_ref().is_some_and(|r| r.reason == ReturnReason::Late), "a grant after its timeout goes back whole");
                }
                if let Some(r) = back {
                    self.send_return(p, r);
                }
                self.wake(p, f.key);
            }
            Ev::Timeout { p, epoch, id } => {
                if self.procs[p].epoch != epoch {
                    return;
                }
                let Some(f) = self.procs[p].flights.get_mut(&id) else { return };
                f.timed_out = true;
                let key = f.key;
                let local = self.local(p);
                let name = self.names[key].clone();
                self.procs[p].q.fail(self.limit, &name, id, local);
                self.wake(p, key);
            }
            Ev::ReturnAtStore { p, ret } => {
                let key = self.key_index(&ret.key);
                let credited = if self.store_down() { 0 } else { self.run.store.give_back(&ret.key, ret.lease, ret.tokens, ret.idle_ns, self.now) };
                self.run.debits.push((self.now, key, p, -(credited as i64)));
                if matches!(ret.reason, ReturnReason::Late | ReturnReason::Unusable) {
                    *self.run.lost_grants.entry((key, ret.lease.0)).or_default() += ret.tokens - credited;
                }
            }
            Ev::Deadline { p, epoch, waiter } => {
                if self.procs[p].epoch != epoch {
                    return;
                }
                if let Some(i) = self.procs[p].waiters.iter().position(|w| w.id == waiter) {
                    self.procs[p].waiters.remove(i);
                    self.run.refused += 1;
                    self.run.waited_out += 1;
                }
            }
            Ev::Kill { p } => {
                let local = self.local(p);
                for key in 0..self.sc.keys {
                    let held = self.procs[p].q.held(self.limit, &self.names[key], local);
                    let flying: u64 = self.procs[p].flights.values().filter(|f| f.key == key).map(|f| f.size).sum();
                    self.run.killed.push((self.now, p, key, held + flying));
                }
                let pr = &mut self.procs[p];
                self.run.refused += pr.waiters.len() as u64;
                pr.q = engine(self.sc);
                pr.epoch += 1;
                pr.waiters.clear();
                pr.flights.clear();
            }
            Ev::Restart => {
                for key in 0..self.sc.keys {
                    let total = (0..self.sc.processes).map(|p| self.outstanding(p, key, true)).sum();
                    self.run.restarted.push((self.now, key, total));
                }
                self.run.store.restart();
            }
        }
    }

    /// What process `p` holds of `key` plus its requests in flight (`all`: the timed-out ones too).
    fn outstanding(&self, p: usize, key: usize, all: bool) -> u64 {
        let pr = &self.procs[p];
        let flying: u64 = pr.flights.values().filter(|f| f.key == key && (all || !f.timed_out)).map(|f| f.size).sum();
        pr.q.held(self.limit, &self.names[key], self.local(p)) + flying
    }

    /// Up to `MEASURED` keys a poll, in turn.
    fn measure(&mut self, p: usize) {
        const MEASURED: usize = 16;
        self.polls += 1;
        for i in 0..self.sc.keys.min(MEASURED) {
            let key = (self.polls * MEASURED + i) % self.sc.keys;
            let o = self.outstanding(p, key, false);
            self.run.max_outstanding = self.run.max_outstanding.max(o);
        }
        self.run.max_keys = self.run.max_keys.max(self.procs[p].q.keys());
    }

    fn send(&mut self, p: usize, req: Request) {
        let key = self.key_index(&req.key);
        let epoch = self.procs[p].epoch;
        self.procs[p].flights.insert(req.id, Flight { key, size: req.size, timed_out: false });
        let (arrive, id) = (self.now + self.latency(), req.id);
        self.at(arrive, Ev::AtStore { p, epoch, req });
        let timeout = self.now + self.sc.timeout_ns;
        self.at(timeout, Ev::Timeout { p, epoch, id });
    }

    fn send_return(&mut self, p: usize, ret: Return) {
        let arrive = self.now + self.latency();
        self.at(arrive, Ev::ReturnAtStore { p, ret });
    }

    /// One spend: a new one (`waiter: None`) or a waiting one asking again. True when decided.
    fn spend(&mut self, p: usize, key: usize, cost: u64, waiter: Option<u64>) -> bool {
        let local = self.local(p);
        let name = self.names[key].clone();
        let decided = match self.procs[p].q.try_spend(self.limit, &name, cost, local) {
            Spend::Spent(source) => {
                self.run.admits.push(Admit { t: self.now, key, cost, source, p });
                true
            }
            Spend::Refused { .. } => {
                self.run.refused += 1;
                true
            }
            Spend::NeedLease(r) => {
                self.send(p, r);
                false
            }
            Spend::Awaiting => false,
        };
        if !decided && waiter.is_none() {
            self.next_waiter += 1;
            let id = self.next_waiter;
            self.procs[p].waiters.push(Waiter { id, key, cost });
            let (deadline, epoch) = (self.now + self.sc.timeout_ns, self.procs[p].epoch);
            self.at(deadline, Ev::Deadline { p, epoch, waiter: id });
        }
        decided
    }

    /// A request of `key` was answered (or failed): its waiters ask again.
    fn wake(&mut self, p: usize, key: usize) {
        let waiting: Vec<(u64, u64)> = self.procs[p].waiters.iter().filter(|w| w.key == key).map(|w| (w.id, w.cost)).collect();
        for (id, cost) in waiting {
            if self.spend(p, key, cost, Some(id)) {
                self.procs[p].waiters.retain(|w| w.id != id);
            }
        }
    }
}
