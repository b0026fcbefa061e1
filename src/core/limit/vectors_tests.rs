//! The shared test vectors (`__test__/fixtures/algorithm-vectors.json`, "decisions"): every
//! algorithm here answers each step as the vectors say, as the decision service's JS algorithms do
//! (`__test__/vectors/limits.test.js`). Each step is `check`, then `commit` when allowed, as a
//! `LimitSet` does.
use super::*;
use crate::core::test_json::Json;

const VECTORS: &str = include_str!("../../../__test__/fixtures/algorithm-vectors.json");
const MS: u64 = 1_000_000;

/// `slack_ns`: the token bucket rounds its float waits up and adds a nanosecond (`token.rs`), so that
/// retrying at the promised time finds the tokens; the integer algorithms are exact.
fn run<A: Algorithm>(a: &A, case: &Json, alg: &str, slack_ns: u64) {
    let name = format!("{alg}: {}", case.at("name").str());
    let steps = case.at("steps").arr();
    let mut s = a.fresh(steps[0].at("t").u64() * MS);
    for (i, step) in steps.iter().enumerate() {
        let (t, cost) = (step.at("t").u64() * MS, step.at("cost").u64() as u32);
        let c = a.check(&s, cost, t);
        if c.allowed {
            a.commit(&mut s, cost, t);
        }
        let at = format!("{name}, step {i} (t {} ms, cost {cost})", t / MS);
        assert_eq!(c.allowed, step.at("allowed").bool(), "{at}: allowed");
        assert_eq!(c.remaining, step.at("remaining").u64(), "{at}: remaining");
        let near = |got: u64, want_ms: u64, what: &str| {
            let want = want_ms * MS;
            let ok = got >= want && got <= want + if want == 0 { 0 } else { slack_ns };
            assert!(ok, "{at}: {what} {got} ns, the vectors say {want_ms} ms");
        };
        match step.at("retryAfterMs") {
            Json::Null => assert_eq!(c.retry_after_ns, NEVER, "{at}: retry never"),
            ms => near(c.retry_after_ns, ms.u64(), "retry"),
        }
        near(c.reset_ns, step.at("resetMs").u64(), "reset");
        assert_eq!(c.delay_ns, 0, "{at}: a meter delays nothing");
    }
}

#[test]
fn every_algorithm_answers_the_shared_vectors() {
    let v = Json::parse(VECTORS);
    let decisions = v.at("decisions");
    for kind in AlgorithmKind::ALL {
        assert!(decisions.get(kind.as_str()).is_some(), "no vectors for {}", kind.as_str());
    }
    for (alg, cases) in decisions.obj() {
        for case in cases.arr() {
            let limit = case.at("limit").u64() as u32;
            let window_ns = case.at("windowMs").u64() * MS;
            let burst = || case.at("burst").u64() as u32;
            match AlgorithmKind::parse("vectors", alg).unwrap() {
                AlgorithmKind::TokenBucket => run(&TokenBucket::new(limit, window_ns, burst()), case, alg, 1),
                AlgorithmKind::FixedWindow => run(&FixedWindow::new(limit, window_ns), case, alg, 0),
                AlgorithmKind::SlidingWindow => run(&SlidingWindow::new(limit, window_ns), case, alg, 0),
                AlgorithmKind::SlidingCounter => run(&SlidingCounter::new(limit, window_ns), case, alg, 0),
                AlgorithmKind::Gcra => run(&Gcra::new(limit, window_ns, burst(), 0), case, alg, 0),
            }
        }
    }
}
