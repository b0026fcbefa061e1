//! The engine's tests beyond its parts' own: its flows by hand (`engine.rs`), and the accounting
//! invariants over a simulated cluster (`sim.rs`, `invariants.rs`) against the reference store
//! (`store.rs`).
mod engine;
mod invariants;
mod rng;
mod sim;
mod store;
mod vectors;
