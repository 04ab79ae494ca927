//! Formatting for explanations: a reader checks them against history.jsonl by hand, so times
//! are in seconds with millisecond precision, as the report shows them.

use std::fmt::Write;

/// `1.204 s`.
pub fn secs(ns: u64) -> String {
    let ms = ns / 1_000_000;
    format!("{}.{:03} s", ms / 1000, ms % 1000)
}

/// `token 4`, or `no token` when the history does not say.
pub fn token(t: Option<u64>) -> String {
    match t {
        Some(t) => format!("token {t}"),
        None => "no token".to_string(),
    }
}

/// `ops 3, 7 and 9`.
pub fn op_list(indices: &[u64]) -> String {
    let mut s = String::new();
    for (i, ix) in indices.iter().enumerate() {
        if i > 0 {
            s.push_str(if i + 1 == indices.len() {
                " and "
            } else {
                ", "
            });
        }
        let _ = write!(s, "{ix}");
    }
    if indices.len() == 1 {
        format!("op {s}")
    } else {
        format!("ops {s}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(secs(1_204_999_999), "1.204 s");
        assert_eq!(secs(0), "0.000 s");
        assert_eq!(secs(62_050_000_000), "62.050 s");
        assert_eq!(op_list(&[3]), "op 3");
        assert_eq!(op_list(&[3, 7]), "ops 3 and 7");
        assert_eq!(op_list(&[3, 7, 9]), "ops 3, 7 and 9");
    }
}
