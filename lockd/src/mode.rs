use std::fmt;
use std::str::FromStr;

use crate::error::ParseModeError;

/// A mode's names, all from its `name()`: [`fmt::Display`] writes it, [`FromStr`] reads it
/// back, and `$names` (every name, in `ALL`'s order) is what a parse error lists as valid.
macro_rules! named_modes {
    ($t:ident, $kind:literal, $names:ident) => {
        const $names: &[&str] = &{
            let mut names = [""; $t::ALL.len()];
            let mut i = 0;
            while i < names.len() {
                names[i] = $t::ALL[i].name();
                i += 1;
            }
            names
        };

        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }

        impl FromStr for $t {
            type Err = ParseModeError;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $t::ALL
                    .into_iter()
                    .find(|m| m.name() == s)
                    .ok_or_else(|| ParseModeError {
                        kind: $kind,
                        given: s.to_owned(),
                        valid: $names,
                    })
            }
        }
    };
}

/// A deliberately broken lockd behaviour; `None` in [`crate::LockdConfig`] means correct.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnsafeMode {
    /// Token counter only in memory: restarts from 1 on every start.
    ReuseTokens,
    /// Leases never expire: a crashed or paused holder blocks everyone forever.
    NoTtl,
    /// Lease expiry judged on the realtime clock: a clock jump expires leases early.
    WallClock,
    /// Renew and release accept any client and token.
    SkipTokenCheck,
    /// Acquire checks, yields, then grants unconditionally: two holders at once.
    Racy,
    /// Multi-node only: a member that cannot reach the primary grants from its own
    /// in-memory table and token counter, so a partition yields two holders.
    SplitBrain,
    /// A renew up to a quarter of its ttl after the lease expired is accepted (a grace period
    /// for late renewals), even when the lock was granted to another client in that time: the
    /// grace is not honoured by acquire. A holder that wakes into a renew just past its lease
    /// (the `boundary` client-pause) is told it still holds the lock the next holder holds.
    RenewGrace,
    /// Release frees the lock whoever holds it, once the releasing client's own lease has
    /// lapsed (a "clean up my lapsed lease" path that deletes by lock name, the way a bare
    /// `DEL lock` does): a holder that wakes into a release long after its lease (the `long`
    /// client-pause) frees the next holder's lock, and a third client is granted it.
    UncheckedRelease,
    /// Single instance only: nothing of the lock table survives a restart, and no
    /// `recovering` window covers the leases the previous incarnation granted, so the first
    /// acquire after a restart is granted while the old holder's lease still runs. The
    /// failover anti-pattern of a lock server that keeps its locks in memory (tokens stay
    /// durable, so the break shows as a double grant, not as reused tokens).
    Volatile,
    /// Timestamp order only: a request enters when no known request has a smaller timestamp,
    /// with no tie-break, so requests stamped in the same tick all enter together.
    NoTiebreak,
    /// An acquire that waits for a held lock is never refused when its `wait_ms` is over: it
    /// waits until the lock is free (or the client hangs up). Clients that each hold one lock
    /// and wait for another's (the bank workload with `--lock-order-policy random`) then wait
    /// for each other forever: a deadlock the service would have broken with a `held`.
    NoWaitTimeout,
    /// Ring order only: a member that has not seen the token for a while (the `ring`
    /// module's `REGENERATE_AFTER_MS`) makes a new one without asking anyone, as a "repair"
    /// for a lost token. A pause or a partition longer than that leaves two tokens going
    /// round, and two members grant the same lock at once.
    RingRegenerate,
}

impl UnsafeMode {
    pub const ALL: [UnsafeMode; 12] = [
        UnsafeMode::ReuseTokens,
        UnsafeMode::NoTtl,
        UnsafeMode::WallClock,
        UnsafeMode::SkipTokenCheck,
        UnsafeMode::Racy,
        UnsafeMode::SplitBrain,
        UnsafeMode::RenewGrace,
        UnsafeMode::UncheckedRelease,
        UnsafeMode::Volatile,
        UnsafeMode::NoTiebreak,
        UnsafeMode::NoWaitTimeout,
        UnsafeMode::RingRegenerate,
    ];

    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            UnsafeMode::ReuseTokens => "reuse-tokens",
            UnsafeMode::NoTtl => "no-ttl",
            UnsafeMode::WallClock => "wall-clock",
            UnsafeMode::SkipTokenCheck => "skip-token-check",
            UnsafeMode::Racy => "racy",
            UnsafeMode::SplitBrain => "split-brain",
            UnsafeMode::RenewGrace => "renew-grace",
            UnsafeMode::UncheckedRelease => "unchecked-release",
            UnsafeMode::Volatile => "volatile",
            UnsafeMode::NoTiebreak => "no-tiebreak",
            UnsafeMode::NoWaitTimeout => "no-wait-timeout",
            UnsafeMode::RingRegenerate => "ring-regenerate",
        }
    }

    /// The lock order this mode is a bug of, when it is not the primary scheme's, with why:
    /// the mode exists in that order only.
    #[must_use]
    pub fn order(self) -> Option<(&'static str, &'static str)> {
        match self {
            UnsafeMode::NoTiebreak => Some((
                "timestamp",
                "the tie-break it drops is the timestamp order's",
            )),
            UnsafeMode::RingRegenerate => Some(("ring", "the token it makes again is the ring's")),
            _ => None,
        }
    }

    /// What breaks, for the start-up warning.
    #[must_use]
    pub fn consequence(self) -> &'static str {
        match self {
            UnsafeMode::ReuseTokens => "fencing tokens restart at 1 after every restart",
            UnsafeMode::NoTtl => "leases never expire; a dead holder blocks its lock forever",
            UnsafeMode::WallClock => {
                "leases expire by the realtime clock; a clock jump breaks them"
            }
            UnsafeMode::SkipTokenCheck => "renew and release succeed for anyone with any token",
            UnsafeMode::Racy => "acquire races with itself; two clients can hold a lock at once",
            UnsafeMode::SplitBrain => {
                "a member that cannot reach the primary grants locks from its own table and \
                 token counter; in a partition two clients hold a lock at once and tokens \
                 repeat or go backwards"
            }
            UnsafeMode::RenewGrace => {
                "a renew up to ttl/4 after its lease expired is accepted even when the lock was \
                 granted to another client meanwhile; the late renewer and the new holder both \
                 hold it"
            }
            UnsafeMode::UncheckedRelease => {
                "a release from a client whose lease lapsed frees the lock whoever holds it now"
            }
            UnsafeMode::Volatile => {
                "locks live in memory only and a restart grants at once; a holder from before \
                 the restart and the next one both hold the lock"
            }
            UnsafeMode::NoTiebreak => {
                "requests are ordered by timestamp alone; requests stamped in the same tick \
                 all enter, and their clients hold the lock at once"
            }
            UnsafeMode::NoWaitTimeout => {
                "an acquire waits until the lock is free, whatever its wait_ms; clients that \
                 hold one lock and wait for another's wait for each other forever"
            }
            UnsafeMode::RingRegenerate => {
                "a ring member that has not seen the token for 2 s makes a new one; after a \
                 pause or a partition two tokens go round and two members grant the same lock"
            }
        }
    }
}

named_modes!(UnsafeMode, "unsafe mode", UNSAFE_NAMES);

/// Which operations the fenced store checks against, and advances, its fence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FenceMode {
    /// Reads and writes: protects read-modify-write.
    All,
    /// Writes only: a stale read-modify-write can still lose an update.
    Write,
    /// Nothing is rejected: the unfenced anti-pattern.
    None,
    /// Reads and writes, but a token exactly one below the fence passes (`<` where `<=` was
    /// meant, or a fence that trails the last token by one): a stale holder whose write lands
    /// right after the next holder's first op (the `next-grant` client-pause) gets through.
    OffByOne,
    /// The textbook's fenced write as written: read the last written token, reject a lower
    /// one, then put value and token, as two steps with [`CHECK_PUT_GAP_MS`] between them
    /// (the store's round trip to its own storage). A stale holder whose check passes just
    /// before the next holder's write has its put land after it: a lower token accepted after
    /// a higher one. Reads are not fenced (the textbook fences the write only).
    CheckThenPut,
    /// Every register fenced as in [`FenceMode::All`] but the one whose name ends in the
    /// number 0 (`balance-A0`, the bank's first account; `counter-L0`), which is not fenced at
    /// all ([`FenceMode::None`]): a resource one of whose tables lacks the check. A bank
    /// transfer's stale holder writes both accounts; one write is refused, the other lands
    /// over the next holder's.
    OneUnfenced,
}

/// The gap between a `check-then-put` write's check and its put: about one hold of the
/// short-lease runs lockpick's shapes use, so a stale write checked right after the next
/// grant usually puts after the next holder's write.
pub const CHECK_PUT_GAP_MS: u64 = 100;

impl FenceMode {
    pub const ALL: [FenceMode; 6] = [
        FenceMode::All,
        FenceMode::Write,
        FenceMode::None,
        FenceMode::OffByOne,
        FenceMode::CheckThenPut,
        FenceMode::OneUnfenced,
    ];

    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            FenceMode::All => "all",
            FenceMode::Write => "write",
            FenceMode::None => "none",
            FenceMode::OffByOne => "off-by-one",
            FenceMode::CheckThenPut => "check-then-put",
            FenceMode::OneUnfenced => "one-unfenced",
        }
    }
}

named_modes!(FenceMode, "fence mode", FENCE_NAMES);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for m in UnsafeMode::ALL {
            assert_eq!(m.to_string().parse::<UnsafeMode>(), Ok(m));
        }
        for m in FenceMode::ALL {
            assert_eq!(m.to_string().parse::<FenceMode>(), Ok(m));
        }
        assert_eq!(UNSAFE_NAMES.len(), UnsafeMode::ALL.len());
        assert_eq!(FENCE_NAMES.len(), FenceMode::ALL.len());
    }

    #[test]
    fn parse_error_lists_valid_names() {
        let msg = "fast".parse::<UnsafeMode>().unwrap_err().to_string();
        assert_eq!(
            msg,
            "unknown unsafe mode `fast`; valid names: reuse-tokens, no-ttl, wall-clock, \
             skip-token-check, racy, split-brain, renew-grace, unchecked-release, volatile, \
             no-tiebreak, no-wait-timeout, ring-regenerate"
        );
        let msg = "some".parse::<FenceMode>().unwrap_err().to_string();
        assert_eq!(
            msg,
            "unknown fence mode `some`; valid names: all, write, none, off-by-one, \
             check-then-put, one-unfenced"
        );
    }
}
