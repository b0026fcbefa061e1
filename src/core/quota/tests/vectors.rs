//! The shared test vectors' leases (`__test__/fixtures/algorithm-vectors.json`, "leases") against the
//! reference store: the semantics the Redis Lua script and the SQL lease stores implement, which
//! `__test__/vectors/leases.test.js` runs the same vectors against.
use super::store::{Store, StoreAlg};
use crate::core::quota::LeaseId;
use crate::core::test_json::Json;
use std::collections::HashMap;

const VECTORS: &str = include_str!("../../../../__test__/fixtures/algorithm-vectors.json");
const MS: u64 = 1_000_000;

fn run(alg: StoreAlg, case: &Json, name: &str) {
    let mut store = Store::new(alg);
    let mut holders: HashMap<String, u64> = HashMap::new();
    let mut leases: HashMap<String, LeaseId> = HashMap::new();
    for (i, step) in case.at("steps").arr().iter().enumerate() {
        let t = step.at("t").u64() * MS;
        let n = holders.len() as u64 + 1;
        let holder = *holders.entry(step.at("holder").str().to_string()).or_insert(n);
        let at = format!("{name}: {}, step {i} (t {} ms)", case.at("name").str(), t / MS);
        let ms = |k: &str| step.at(k).u64() * MS;
        if step.at("op").str() == "lease" {
            let g = store.request(holder, b"k", step.at("size").u64(), ms("ttlMs"), t);
            let got = (g.granted, g.ttl_ns, g.remaining, u64::from(g.holders), g.retry_after_ns);
            let want = (step.at("granted").u64(), ms("grantedTtlMs"), step.at("remaining").u64(), step.at("holders").u64(), ms("retryAfterMs"));
            assert_eq!(got, want, "{at}: (granted, ttl, remaining, holders, retry)");
            if let Some(w) = step.get("window") {
                assert_eq!(g.lease, LeaseId(w.u64()), "{at}: a fixed window's lease is named by its window");
            }
            if let Some(name) = step.get("as") {
                leases.insert(name.str().to_string(), g.lease);
            }
        } else {
            let lease = leases[step.at("lease").str()];
            let idle = step.get("idleMs").map(|v| v.u64() * MS);
            let credited = store.give_back(b"k", lease, step.at("tokens").u64(), idle, t);
            if step.at("reason").str() == "released" {
                store.release_holder(b"k", holder, t);
            }
            assert_eq!(credited, step.at("credited").u64(), "{at}: credited");
        }
    }
}

#[test]
fn the_reference_store_answers_the_shared_lease_vectors() {
    let v = Json::parse(VECTORS);
    let leases = v.at("leases");
    for (alg, cases) in leases.obj() {
        for case in cases.arr() {
            let (limit, window_ns) = (case.at("limit").u64(), case.at("windowMs").u64() * MS);
            let store_alg = match alg.as_str() {
                "token-bucket" => StoreAlg::Bucket { rate_per_sec: limit as f64 * 1e9 / window_ns as f64, burst: case.at("burst").u64() as f64 },
                "fixed-window" => StoreAlg::Fixed { limit, window_ns },
                "sliding-window" => StoreAlg::Sliding { limit, window_ns },
                other => panic!("no lease store for {other}"),
            };
            run(store_alg, case, alg);
        }
    }
    assert_eq!(leases.obj().len(), 3, "every algorithm a lease store has");
}
