//! The word a misspelt one most likely meant: what "did you mean" offers after a refusal that
//! lists the words a flag or a config key takes.

/// How alike (Jaro-Winkler, 0 to 1) a misspelt word and a known one must be to be offered:
/// clap's own threshold for misspelt flags, so both kinds of refusal guess alike.
const ALIKE_MIN: f64 = 0.8;

/// The one of `known` that `given` most likely misspells, if any is alike enough.
pub fn nearest<'a>(given: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    known
        .into_iter()
        .map(|k| (strsim::jaro_winkler(given, k), k))
        .filter(|&(score, _)| score > ALIKE_MIN)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k)
}

/// ` (did you mean `word`?)` for the nearest of `known`, else nothing: the tail of a refusal.
pub fn did_you_mean<'a>(given: &str, known: impl IntoIterator<Item = &'a str>) -> String {
    nearest(given, known)
        .map(|k| format!(" (did you mean `{k}`?)"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misspelling_finds_its_word_and_nonsense_finds_none() {
        let known = ["mutex", "counter", "bank"];
        for (given, want) in [
            ("mutx", Some("mutex")),
            ("conter", Some("counter")),
            ("bnak", Some("bank")),
            ("zzz", None),
            ("", None),
        ] {
            assert_eq!(nearest(given, known), want, "{given}");
        }
        assert_eq!(did_you_mean("mutx", known), " (did you mean `mutex`?)");
        assert_eq!(did_you_mean("zzz", known), "");
    }
}
