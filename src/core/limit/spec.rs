//! A named limit's options as a JS user writes them, validated at construction: every number is
//! checked (NaN, negatives, Infinity, fractions where a count is meant) and an error names the option
//! (`limits[1].windowMs`). Numbers arrive as f64, as JS has them, so nothing is coerced on the way.
use super::gcra::Gcra;
use super::keyed::{Keyed, KeyedLimit};
use super::sliding::{SlidingWindow, MAX_EXACT_LIMIT};
use super::{counter::SlidingCounter, fixed::FixedWindow, token::TokenBucket};
use crate::core::ledger::{js_number, ConfigError};
use crate::core::names::named_enum;

named_enum! {
    /// The counting algorithm of a named limit.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum AlgorithmKind: u8 {
        TokenBucket = "token-bucket",
        FixedWindow = "fixed-window",
        SlidingWindow = "sliding-window",
        SlidingCounter = "sliding-counter",
        Gcra = "gcra",
    }
}

/// Keys a limit tracks unless told otherwise.
pub const DEFAULT_MAX_KEYS: f64 = 100_000.0;
/// The longest window (and shaper delay): about 31.7 years, far inside u64 nanoseconds.
pub const MAX_WINDOW_MS: f64 = 1e12;
/// What the exact sliding window may hold at most over all its keys (`limit × maxKeys × 8` bytes).
pub const MAX_EXACT_BYTES: f64 = 1024.0 * 1024.0 * 1024.0;

impl AlgorithmKind {
    pub fn parse(path: &str, name: &str) -> Result<AlgorithmKind, ConfigError> {
        Self::from_name(name).ok_or_else(|| ConfigError(format!("{path}.algorithm must be one of {} (got {name:?})", Self::NAMES.join(", "))))
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct LimitSpec {
    pub name: String,
    pub algorithm: AlgorithmKind,
    /// Units per window.
    pub limit: f64,
    pub window_ms: f64,
    /// Token bucket and GCRA: units admissible at once (default `limit`).
    pub burst: Option<f64>,
    /// GCRA only: 0 (the default) meters, more shapes (delays up to this long).
    pub max_delay_ms: Option<f64>,
    /// Keys tracked at most (default `DEFAULT_MAX_KEYS`).
    pub max_keys: Option<f64>,
}

impl LimitSpec {
    /// A spec with the defaults for everything but the essentials.
    pub fn new(name: &str, algorithm: AlgorithmKind, limit: f64, window_ms: f64) -> LimitSpec {
        LimitSpec { name: name.to_string(), algorithm, limit, window_ms, burst: None, max_delay_ms: None, max_keys: None }
    }

    /// Validates and builds the limit; errors name the option under `path` (`limits[0]`).
    pub fn build(&self, path: &str) -> Result<Box<dyn Keyed>, ConfigError> {
        if self.name.is_empty() {
            return Err(ConfigError(format!("{path}.name must be a non-empty string")));
        }
        let limit = count(path, "limit", self.limit)?;
        let window_ns = duration_ns(path, "windowMs", self.window_ms, false)?;
        let max_keys = count(path, "maxKeys", self.max_keys.unwrap_or(DEFAULT_MAX_KEYS))? as usize;
        let kind = self.algorithm;
        let burst = match self.burst {
            Some(_) if !matches!(kind, AlgorithmKind::TokenBucket | AlgorithmKind::Gcra) => {
                return Err(ConfigError(format!("{path}.burst applies to the token-bucket and gcra algorithms only")));
            }
            Some(b) => count(path, "burst", b)?,
            None => limit,
        };
        let max_delay_ns = match self.max_delay_ms {
            Some(_) if kind != AlgorithmKind::Gcra => {
                return Err(ConfigError(format!("{path}.maxDelayMs applies to the gcra algorithm only")));
            }
            Some(ms) => duration_ns(path, "maxDelayMs", ms, true)?,
            None => 0,
        };
        Ok(match kind {
            AlgorithmKind::TokenBucket => Box::new(KeyedLimit::new(TokenBucket::new(limit, window_ns, burst), max_keys)),
            AlgorithmKind::FixedWindow => Box::new(KeyedLimit::new(FixedWindow::new(limit, window_ns), max_keys)),
            AlgorithmKind::SlidingCounter => Box::new(KeyedLimit::new(SlidingCounter::new(limit, window_ns), max_keys)),
            AlgorithmKind::Gcra => Box::new(KeyedLimit::new(Gcra::new(limit, window_ns, burst, max_delay_ns), max_keys)),
            AlgorithmKind::SlidingWindow => {
                if limit > MAX_EXACT_LIMIT {
                    return Err(ConfigError(format!(
                        "{path}.limit must be at most {MAX_EXACT_LIMIT} for the sliding-window algorithm (it keeps one timestamp per unit; got {limit}): use sliding-counter"
                    )));
                }
                let bytes = f64::from(limit) * max_keys as f64 * 8.0;
                if bytes > MAX_EXACT_BYTES {
                    return Err(ConfigError(format!(
                        "{path}.maxKeys: a sliding-window limit holds up to limit × maxKeys × 8 bytes ({} MiB), over the {} MiB budget: lower maxKeys or use sliding-counter",
                        (bytes / 1048576.0).ceil(),
                        MAX_EXACT_BYTES / 1048576.0
                    )));
                }
                Box::new(KeyedLimit::new(SlidingWindow::new(limit, window_ns), max_keys))
            }
        })
    }
}

/// A whole number from 1 to u32::MAX.
fn count(path: &str, field: &str, v: f64) -> Result<u32, ConfigError> {
    if v.is_finite() && v >= 1.0 && v <= f64::from(u32::MAX) && v.fract() == 0.0 {
        Ok(v as u32)
    } else {
        Err(ConfigError(format!("{path}.{field} must be an integer from 1 to {} (got {})", u32::MAX, js_number(v))))
    }
}

/// Milliseconds as whole nanoseconds: finite, > 0 (or >= 0 when `zero_ok`), at most `MAX_WINDOW_MS`,
/// and at least one nanosecond once rounded.
fn duration_ns(path: &str, field: &str, ms: f64, zero_ok: bool) -> Result<u64, ConfigError> {
    let ok = ms.is_finite() && ms <= MAX_WINDOW_MS && if zero_ok { ms >= 0.0 } else { ms * 1e6 >= 0.5 };
    if ok {
        Ok((ms * 1e6).round() as u64)
    } else {
        let what = if zero_ok { ">= 0" } else { "> 0 (at least 1e-6, one nanosecond)" };
        Err(ConfigError(format!("{path}.{field} must be a finite number {what} and at most {} (got {})", js_number(MAX_WINDOW_MS), js_number(ms))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(s: LimitSpec) -> String {
        s.build("limits[2]").err().map(|e| e.0).unwrap_or_default()
    }

    #[test]
    fn every_number_is_checked_and_the_error_names_the_option() {
        let base = LimitSpec::new("per-ip", AlgorithmKind::FixedWindow, 100.0, 60_000.0);
        assert!(base.build("limits[2]").is_ok());
        for (bad, field) in [
            (LimitSpec { limit: f64::NAN, ..base.clone() }, "limits[2].limit must be an integer from 1 to 4294967295 (got NaN)"),
            (LimitSpec { limit: -1.0, ..base.clone() }, "limits[2].limit"),
            (LimitSpec { limit: 1.5, ..base.clone() }, "limits[2].limit"),
            (LimitSpec { limit: 0.0, ..base.clone() }, "limits[2].limit"),
            (LimitSpec { limit: 5e9, ..base.clone() }, "limits[2].limit"),
            (
                LimitSpec { window_ms: f64::INFINITY, ..base.clone() },
                "limits[2].windowMs must be a finite number > 0 (at least 1e-6, one nanosecond) and at most 1000000000000 (got Infinity)",
            ),
            (LimitSpec { window_ms: 0.0, ..base.clone() }, "limits[2].windowMs"),
            (LimitSpec { window_ms: -5.0, ..base.clone() }, "limits[2].windowMs"),
            (LimitSpec { window_ms: 1e-7, ..base.clone() }, "limits[2].windowMs"),
            (LimitSpec { max_keys: Some(0.0), ..base.clone() }, "limits[2].maxKeys"),
            (LimitSpec { burst: Some(3.0), ..base.clone() }, "limits[2].burst applies to the token-bucket and gcra algorithms only"),
            (LimitSpec { max_delay_ms: Some(3.0), ..base.clone() }, "limits[2].maxDelayMs applies to the gcra algorithm only"),
            (LimitSpec { name: String::new(), ..base.clone() }, "limits[2].name must be a non-empty string"),
        ] {
            assert!(err(bad).starts_with(field), "{field}");
        }
        let g = LimitSpec::new("shape", AlgorithmKind::Gcra, 10.0, 1000.0);
        assert!(err(LimitSpec { max_delay_ms: Some(f64::NAN), ..g.clone() }).starts_with("limits[2].maxDelayMs must be a finite number >= 0"));
        assert!(err(LimitSpec { burst: Some(0.0), ..g.clone() }).starts_with("limits[2].burst"));
        assert!(LimitSpec { max_delay_ms: Some(0.0), burst: Some(1.0), ..g }.build("x").is_ok());
    }

    #[test]
    fn the_exact_window_is_capped_in_memory() {
        let s = LimitSpec::new("exact", AlgorithmKind::SlidingWindow, 100_000.0, 1000.0);
        assert!(err(s).starts_with("limits[2].limit must be at most 65536"));
        let s = LimitSpec { max_keys: Some(1e6), ..LimitSpec::new("exact", AlgorithmKind::SlidingWindow, 1000.0, 1000.0) };
        assert!(err(s).starts_with("limits[2].maxKeys: a sliding-window limit holds up to"));
    }

    #[test]
    fn algorithms_parse_by_name() {
        assert_eq!(AlgorithmKind::parse("l", "gcra"), Ok(AlgorithmKind::Gcra));
        let e = AlgorithmKind::parse("limits[0]", "leaky").unwrap_err().0;
        assert_eq!(e, "limits[0].algorithm must be one of token-bucket, fixed-window, sliding-window, sliding-counter, gcra (got \"leaky\")");
    }
}
