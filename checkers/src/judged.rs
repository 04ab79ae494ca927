//! What each checker had to judge, counted as a streaming reader walks the ops and closes the
//! grants: the facts behind the checkers' notes and `not_judged` that no streamed rule keeps
//! already. Each is a flag or a count, so what this keeps is bounded by the locks. The batch
//! checkers read the same facts off the whole model and word them with the same functions;
//! they are the oracle (`digest::walk_order_tests`).

use crate::evidence::KeyEvidence;
use crate::model::{ClientOp, Func, Grant, NO_GRANT, NO_TARGET};
use crate::window::Window;
use history::Outcome;

/// The facts, as read so far.
#[derive(Default)]
pub(crate) struct Judged {
    /// Per lock id, the grants closed, counted to two: any, those that prove a hold (a lease
    /// or a session), those with a token.
    twice: Vec<[u8; 3]>,
    /// Grants closed, and those with no token.
    pub(crate) grants: u64,
    pub(crate) untokened: u64,
    /// An ok renew or release the `stale-lock-ops` rules read (one with a token, its own or
    /// its grant's, or one that acts on a grant).
    pub(crate) stale_read: bool,
    /// Ok writes with no seq or no token (left out of the store order), and whether one had
    /// both.
    pub(crate) writes_unordered: u64,
    pub(crate) writes_fenced: bool,
    /// A counter write (acknowledged or not) or final read, outside the accounts.
    pub(crate) counter: bool,
    /// An acquire answered `held`.
    pub(crate) held: bool,
    /// Ok acquires read back at their answer's revision, per `KeyState`; whether the record
    /// decided one (present or absent), and whether one carried the adapter's lease evidence.
    pub(crate) key_states: [u64; 4],
    pub(crate) decided: bool,
    pub(crate) lease_judged: bool,
}

/// The three readings of "granted twice" [`Judged::granted_twice`] answers.
#[derive(Clone, Copy)]
pub(crate) enum Twice {
    Any = 0,
    ProvingHold = 1,
    Tokened = 2,
}

impl Judged {
    /// Grant `g` closed (its ttl, holds and token final).
    pub(crate) fn closed(&mut self, g: &Grant) {
        self.grants += 1;
        self.untokened += u64::from(g.token.is_none());
        let l = g.lock as usize;
        if self.twice.len() <= l {
            self.twice.resize(l + 1, [0; 3]);
        }
        let counts = &mut self.twice[l];
        let proves_hold = g.ttl_ms.is_some() || !g.holds.is_empty();
        for (i, counted) in [true, proves_hold, g.token.is_some()]
            .into_iter()
            .enumerate()
        {
            if counted {
                counts[i] = (counts[i] + 1).min(2);
            }
        }
    }

    /// Whether some lock had two grants of reading `t`.
    pub(crate) fn granted_twice(&self, t: Twice) -> bool {
        self.twice.iter().any(|c| c[t as usize] >= 2)
    }

    /// Op `o` was walked: `account`, its key is an account (a transfer touched it);
    /// `(grant, grants)`, the grant it acts on ([`NO_GRANT`]: none
    /// found) among the grants kept; `errors`, the errors' texts by id.
    pub(crate) fn walked(
        &mut self,
        o: &ClientOp,
        account: bool,
        (grant, grants): (u32, &Window<Grant>),
        errors: &[String],
    ) {
        let ok = o.outcome == Outcome::Ok;
        match o.func {
            Func::Renew | Func::Release if ok => {
                // A grant dropped already still counts as one it acts on.
                let grant_token =
                    (grant != NO_GRANT).then(|| grants.get(grant as usize).and_then(|g| g.token));
                let token = o.token().or(grant_token.flatten());
                self.stale_read |=
                    grant_token.is_some() || (o.target != NO_TARGET && token.is_some());
            }
            Func::Acquire if o.outcome == Outcome::Fail && o.target != NO_TARGET => {
                let reason = (errors.get(o.error as usize)).map(|e| history::reason::reason_of(e));
                self.held |= reason == Some("held");
            }
            Func::Write if o.target != NO_TARGET => {
                if ok {
                    match (o.seq(), o.token()) {
                        (Some(_), Some(_)) => self.writes_fenced = true,
                        _ => self.writes_unordered += 1,
                    }
                }
                self.counter |= !account && o.outcome != Outcome::Fail;
            }
            Func::Read if ok && o.is_final && o.target != NO_TARGET => self.counter |= !account,
            _ => {}
        }
    }

    /// Op `o` was answered with `lease` and `key` evidence.
    pub(crate) fn answered(&mut self, o: &ClientOp, lease: bool, key: Option<&KeyEvidence>) {
        if o.func != Func::Acquire || o.outcome != Outcome::Ok {
            return;
        }
        if let Some(k) = key {
            self.key_states[k.state as usize] += 1;
            self.decided |= matches!(
                k.state,
                crate::evidence::KeyState::Present | crate::evidence::KeyState::Absent
            );
        }
        self.lease_judged |= lease && o.complete_ns().is_some();
    }
}
