//! The plan's enums that a flag or `schedule.json` names by a word (clock modes, partition
//! topologies, stall aims, wake-up ops), each declared by [`named_enum!`] from one list of
//! its values and their words; one parser for a word and one for a comma-separated list, whose
//! refusals list the words from the enum itself, so no message types them out.

/// An enum with a word per value.
pub(crate) trait Named: Copy + PartialEq + 'static {
    /// Every value, in the order help and refusals list them.
    const VALUES: &'static [Self];
    /// What a refusal calls one (`clock fault`).
    const WHAT: &'static str;
    fn word(self) -> &'static str;
}

/// Declares an enum whose values are named by words, from one list of `Variant => "word"`:
/// the enum (with the derives the plan's enums share), `ALL` in the list's order, `as_str`,
/// `Display`, `FromStr` (whose refusal names every word) and [`Named`], where `WHAT` is what a
/// refusal calls one value.
macro_rules! named_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident: $what:literal {
            $( $(#[$vmeta:meta])* $variant:ident => $word:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant ),+
        }

        impl $name {
            /// Every value, in the order help and refusals list them.
            pub const ALL: [$name; [$($word),+].len()] = [$($name::$variant),+];

            /// The value's word, as flags and `schedule.json` name it.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $word),+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl $crate::named::Named for $name {
            const VALUES: &'static [Self] = &$name::ALL;
            const WHAT: &'static str = $what;
            fn word(self) -> &'static str {
                self.as_str()
            }
        }

        impl std::str::FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                $crate::named::parse(s)
            }
        }
    };
}
pub(crate) use named_enum;

/// Every value's word, as refusals list them: `a, b, c`.
pub(crate) fn words<T: Named>() -> String {
    T::VALUES
        .iter()
        .map(|v| v.word())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The value named `s`, or a refusal naming every word.
pub(crate) fn parse<T: Named>(s: &str) -> Result<T, String> {
    T::VALUES
        .iter()
        .copied()
        .find(|v| v.word() == s)
        .ok_or_else(|| {
            let meant = history::nearest::did_you_mean(s, T::VALUES.iter().map(|v| v.word()));
            format!(
                "unknown {} {s:?} (expected {}){meant}",
                T::WHAT,
                words::<T>()
            )
        })
}

/// A comma-separated list of words, each value once, in the order first given.
pub(crate) fn parse_list<T: Named>(s: &str) -> Result<Vec<T>, String> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let v = parse::<T>(part.trim())?;
        if !out.contains(&v) {
            out.push(v);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use crate::fault::client_pause::parse_client_faults;
    use crate::fault::clock::parse_clock_modes;
    use crate::fault::partition::parse_topologies;

    /// The refusals list every word of the enum, in the order help gives them.
    #[test]
    fn a_refusal_names_every_word() {
        assert_eq!(
            parse_clock_modes("fast,nope").unwrap_err(),
            "unknown clock fault \"nope\" (expected bump-forward, bump-back, strobe, fast, slow)"
        );
        assert_eq!(
            parse_topologies("x").unwrap_err(),
            "unknown partition topology \"x\" (expected isolate, halves, majorities-ring, bridge, clients)"
        );
        assert_eq!(
            parse_client_faults("boundary,zzz").unwrap_err(),
            "unknown client fault \"zzz\" (expected boundary, next-grant, long, waiter (stall aims), \
             renew, write, release, read (wake-up ops))"
        );
        assert_eq!(
            "nap"
                .parse::<crate::fault::client_pause::WakeOp>()
                .unwrap_err(),
            "unknown wake-up op \"nap\" (expected renew, write, release, read)"
        );
        // A misspelt word is also answered with the one it most likely meant.
        assert_eq!(
            parse_clock_modes("fsat").unwrap_err(),
            "unknown clock fault \"fsat\" (expected bump-forward, bump-back, strobe, fast, slow) \
             (did you mean `fast`?)"
        );
        assert_eq!(
            parse_topologies("halfs").unwrap_err(),
            "unknown partition topology \"halfs\" (expected isolate, halves, majorities-ring, \
             bridge, clients) (did you mean `halves`?)"
        );
        assert_eq!(
            parse_clock_modes("slow, slow,fast").unwrap(),
            [
                crate::fault::clock::ClockMode::Slow,
                crate::fault::clock::ClockMode::Fast
            ]
        );
    }
}
