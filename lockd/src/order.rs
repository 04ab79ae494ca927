//! `--lock-order`: how the members of a lockd cluster decide who enters.

use crate::error::ParseOrderError;
use crate::ordered::{TimestampOrder, DEFAULT_GRANULARITY_MS, GRANULARITY_MS_MAX};
use crate::ring::{RingOrder, DEFAULT_IDLE_MS, IDLE_MS_MAX};

/// The three designs of the textbook's chapter on distributed mutual exclusion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LockOrder {
    /// A central coordinator: the member with the smallest address holds all lock state.
    #[default]
    Primary,
    /// Timestamp ordering: the members exchange timestamped requests (the `ordered` module).
    Timestamp(TimestampOrder),
    /// A token passed around a ring of the members (the `ring` module).
    Ring(RingOrder),
}

impl LockOrder {
    /// Reads `primary`, `timestamp[:GRANULARITY]` or `ring[:IDLE]`, each duration in `ms` or
    /// `s`.
    ///
    /// # Errors
    ///
    /// Anything else, or a duration out of its range (1 ms..=1 s for both).
    pub fn parse(s: &str) -> Result<LockOrder, ParseOrderError> {
        let err = |why| ParseOrderError {
            given: s.to_owned(),
            why,
        };
        let (name, arg) = match s.split_once(':') {
            Some((n, a)) => (n, Some(a)),
            None => (s, None),
        };
        let ms = |default: u64, max: u64| -> Result<u64, ParseOrderError> {
            let Some(a) = arg else { return Ok(default) };
            let (num, scale) = if let Some(n) = a.strip_suffix("ms") {
                (n, 1)
            } else if let Some(n) = a.strip_suffix('s') {
                (n, 1000)
            } else {
                return Err(err("the duration needs a unit, ms or s"));
            };
            let v = num
                .parse::<u64>()
                .ok()
                .and_then(|n| n.checked_mul(scale))
                .ok_or_else(|| err("the duration is not a whole number"))?;
            if v == 0 || v > max {
                return Err(err("duration out of range"));
            }
            Ok(v)
        };
        match name {
            "primary" if arg.is_none() => Ok(LockOrder::Primary),
            "timestamp" => Ok(LockOrder::Timestamp(TimestampOrder {
                granularity_ms: ms(DEFAULT_GRANULARITY_MS, GRANULARITY_MS_MAX)?,
                tiebreak: true,
            })),
            "ring" => Ok(LockOrder::Ring(RingOrder {
                idle_ms: ms(DEFAULT_IDLE_MS, IDLE_MS_MAX)?,
            })),
            _ => Err(err("unknown order")),
        }
    }

    /// `primary`, `timestamp` or `ring`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            LockOrder::Primary => "primary",
            LockOrder::Timestamp(_) => "timestamp",
            LockOrder::Ring(_) => "ring",
        }
    }
}

/// The form [`LockOrder::parse`] reads back: a duration only where it is not the default
/// (`timestamp`, `ring:200ms`), so an order given without one is written as it was given.
/// The unsafe `no-tiebreak` is its own `--unsafe` mode, not part of the order's text.
impl std::fmt::Display for LockOrder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())?;
        match self {
            LockOrder::Timestamp(t) if t.granularity_ms != DEFAULT_GRANULARITY_MS => {
                write!(f, ":{}ms", t.granularity_ms)
            }
            LockOrder::Ring(r) if r.idle_ms != DEFAULT_IDLE_MS => write!(f, ":{}ms", r.idle_ms),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What an order shows is what reads back as it.
    #[test]
    fn an_order_reads_back_as_it_shows() {
        for given in [
            "primary",
            "timestamp",
            "timestamp:20ms",
            "timestamp:1s",
            "ring",
            "ring:250ms",
        ] {
            let order = LockOrder::parse(given).unwrap();
            assert_eq!(
                LockOrder::parse(&order.to_string()).unwrap(),
                order,
                "{given}"
            );
        }
        assert_eq!(
            LockOrder::parse("timestamp:10ms").unwrap().to_string(),
            "timestamp"
        );
        assert_eq!(
            LockOrder::parse("ring:1s").unwrap().to_string(),
            "ring:1000ms"
        );
    }

    #[test]
    fn lock_orders_parse() {
        let ts = |g| {
            Ok(LockOrder::Timestamp(TimestampOrder {
                granularity_ms: g,
                tiebreak: true,
            }))
        };
        let ring = |idle_ms| Ok(LockOrder::Ring(RingOrder { idle_ms }));
        let cases = [
            ("primary", Ok(LockOrder::Primary)),
            ("timestamp", ts(10)),
            ("timestamp:25ms", ts(25)),
            ("timestamp:1s", ts(1000)),
            ("ring", ring(DEFAULT_IDLE_MS)),
            ("ring:20ms", ring(20)),
            ("ring:1s", ring(1000)),
        ];
        for (given, want) in cases {
            assert_eq!(LockOrder::parse(given), want, "{given}");
        }
        for bad in [
            "lamport",
            "primary:1s",
            "timestamp:10",
            "timestamp:0ms",
            "timestamp:2s",
            "timestamp:xms",
            "ring:0ms",
            "ring:5",
            "ring:2s",
        ] {
            let e = LockOrder::parse(bad).unwrap_err().to_string();
            assert!(e.starts_with(&format!("lock order `{bad}`")), "{e}");
        }
    }
}
