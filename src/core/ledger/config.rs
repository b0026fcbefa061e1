//! A ledger's configuration: tiers, their per-key buckets, and validation with messages that name the
//! option as a JS user writes it.
use std::fmt;

#[derive(Clone, Debug, PartialEq)]
pub struct TierConfig {
    pub name: String,
    pub capacity: f64,
    pub refill_per_sec: f64,
    pub protected: bool,
    pub per_key: Option<PerKeyConfig>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct PerKeyConfig {
    pub capacity: f64,
    pub refill_per_sec: f64,
    pub max_keys: usize,
    pub idle_ttl_ms: f64,
}

/// An invalid configuration; `Display` names the offending option as a JS user writes it
/// (`tiers[1].refillPerSec`).
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// A number as JavaScript prints it (`Infinity`, not `inf`), for messages a JS user reads.
pub fn js_number(v: f64) -> String {
    if v.is_infinite() {
        return (if v > 0.0 { "Infinity" } else { "-Infinity" }).to_string();
    }
    if v == 0.0 {
        return "0".to_string(); // -0 too, as JS prints it
    }
    let a = v.abs();
    // JS switches to exponent notation at 1e21 and below 1e-6; Rust's `{}` never does (1e308 would be
    // printed as 309 digits).
    if !(1e-6..1e21).contains(&a) {
        let s = format!("{v:e}");
        return match s.split_once('e') {
            Some((m, e)) if !e.starts_with('-') => format!("{m}e+{e}"),
            _ => s,
        };
    }
    format!("{v}")
}

/// The largest capacity (and rate) a bucket takes: at 1e15 tokens an f64 still resolves 1/8 of a
/// token, so a debit of 1 (and a fractional refill) is exact; above 2^53 a debit of 1 is lost to
/// rounding. It is also the largest integer a rate-limit header field carries (15 digits).
pub const MAX_AMOUNT: f64 = 1e15;

fn check_amount(what: String, v: f64) -> Result<(), ConfigError> {
    if v.is_finite() && v > 0.0 && v <= MAX_AMOUNT {
        Ok(())
    } else {
        Err(ConfigError(format!("{what} must be a finite number > 0 and <= 1e15 (got {})", js_number(v))))
    }
}

fn check_rate_amount(what: String, v: f64) -> Result<(), ConfigError> {
    if v.is_finite() && (0.0..=MAX_AMOUNT).contains(&v) {
        Ok(())
    } else {
        Err(ConfigError(format!("{what} must be a finite number >= 0 and <= 1e15 (got {})", js_number(v))))
    }
}

fn check_positive(what: String, v: f64) -> Result<(), ConfigError> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(ConfigError(format!("{what} must be a finite number > 0 (got {})", js_number(v))))
    }
}

pub(crate) fn validate(tiers: &[TierConfig]) -> Result<(), ConfigError> {
    if tiers.is_empty() {
        return Err(ConfigError("tiers must list at least one tier".into()));
    }
    for (i, t) in tiers.iter().enumerate() {
        if t.name.is_empty() {
            return Err(ConfigError(format!("tiers[{i}].name must be a non-empty string")));
        }
        if let Some(j) = tiers[..i].iter().position(|o| o.name == t.name) {
            return Err(ConfigError(format!("tiers[{i}].name {:?} is a duplicate of tiers[{j}].name", t.name)));
        }
        check_amount(format!("tiers[{i}].capacity"), t.capacity)?;
        check_rate_amount(format!("tiers[{i}].refillPerSec"), t.refill_per_sec)?;
        if let Some(pk) = &t.per_key {
            check_amount(format!("tiers[{i}].perKey.capacity"), pk.capacity)?;
            check_rate_amount(format!("tiers[{i}].perKey.refillPerSec"), pk.refill_per_sec)?;
            if pk.max_keys == 0 || pk.max_keys > u32::MAX as usize {
                return Err(ConfigError(format!("tiers[{i}].perKey.maxKeys must be an integer from 1 to {} (got {})", u32::MAX, pk.max_keys)));
            }
            check_positive(format!("tiers[{i}].perKey.idleTtlMs"), pk.idle_ttl_ms)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod number_text_tests {
    use super::js_number;

    #[test]
    fn numbers_print_as_javascript_prints_them() {
        for (v, s) in [
            (1e308, "1e+308"),
            (1e21, "1e+21"),
            (1e20, "100000000000000000000"),
            (2.5, "2.5"),
            (-0.0, "0"),
            (1e-7, "1e-7"),
            (-1e300, "-1e+300"),
            (f64::INFINITY, "Infinity"),
        ] {
            assert_eq!(js_number(v), s);
        }
    }
}
