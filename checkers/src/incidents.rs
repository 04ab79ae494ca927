//! Incidents: the violations of one root cause, grouped after every checker has run.
//!
//! A service that forgets its lock and its token counter on a restart breaks several rules at
//! once: it grants the lock inside the holder's lease (`double-grant`), hands out tokens it
//! already gave (`token-reused`) and lower than one it gave (`token-regressed`), and accepts
//! the releases and renews of those low tokens (`stale-release-accepted`, ...). Each is a true
//! statement, and each rule reports its own; a reader wants the one cause, with what followed
//! from it under it. This post-pass groups [`Results::violations`](history::Results) into
//! [`Incident`]s without changing any of them, any count, or the verdict:
//!
//! - **Token resets.** A grant whose token is not above one granted before it was invoked (the
//!   highest such grant is the reset's *frontier*) belongs to the frontier's reset, with every
//!   other such grant behind the same frontier: the era in which the lock's tokens were behind.
//! - **Double grants.** A double grant joins the reset that holds either of its grants, and
//!   every other double grant that shares a grant with it, whether or not their windows meet:
//!   one lease overlapped by two grants is one cause.
//! - **Consequences.** Every other violation joins the first incident holding the grant it is
//!   about (the stale op's grant, the later of two equal tokens, the lower of two regressed
//!   ones, the stale write's, the grant on an expired lease, a cycle of critical sections'
//!   writes' grants); it never pulls further grants in, so two stalls one after the other stay
//!   two incidents. A violation that joins nothing starts an incident of its own; `lock-stuck`
//!   is always its own.
//!
//! Every violation is in exactly one incident. The root of an incident is its first double
//! grant, else its first violation of the kind nearest the cause ([`priority`]).
//!
//! Grouping reads only [`Facts`]: a few fields of the ops the violations name, of their
//! grants, and the token resets. The whole check takes them from its model; a check too long
//! to read whole takes them in a second streamed reading ([`Capture`]), with the resets the
//! first reading's `fencing-tokens` rule marked ([`EraMark`]), so that its memory stays the
//! live window's whatever it found.

use crate::model::{Func, Model, NO_GRANT};
use crate::text::{op_list, secs, token};
use crate::FxMap;
use history::{Incident, TokenReset, Violation, ViolationKind};
use std::collections::BTreeMap;

/// What grouping reads of a history: the ops the violations name, by index; the grants those
/// ops make or use, and those of the token resets, by their acquire's position in the ops
/// (the order the grants were made in); and the token resets. The whole check takes them from
/// its model ([`Facts::of_model`]); a streamed check reads them again from the file
/// (`digest.rs`), keeping only these.
#[derive(Debug, Default)]
pub(crate) struct Facts {
    pub(crate) ops: FxMap<u64, OpFacts>,
    pub(crate) grants: FxMap<usize, GrantFacts>,
    pub(crate) eras: Vec<Era>,
}

/// What grouping reads of one op a violation names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OpFacts {
    /// Its position in the ops, in invoke order.
    pub(crate) pos: usize,
    pub(crate) func: Func,
    pub(crate) is_final: bool,
    pub(crate) token: Option<u64>,
    /// It is the ok acquire of a grant, found in [`Facts::grants`] at `pos`.
    pub(crate) makes_grant: bool,
    /// The position of the acquire of the grant whose token it uses, if any.
    pub(crate) uses: Option<usize>,
    /// When it was answered, unless it is pending.
    pub(crate) done_ns: Option<u64>,
}

/// What grouping reads of one grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GrantFacts {
    /// The index naming its acquire in violations.
    pub(crate) op_index: u64,
    pub(crate) process: u64,
    pub(crate) token: Option<u64>,
    pub(crate) invoke_ns: u64,
    pub(crate) complete_ns: u64,
    /// A session's grant (model item 9), no lease.
    pub(crate) session: bool,
}

impl GrantFacts {
    pub(crate) fn of(m: &Model, g: &crate::model::Grant) -> GrantFacts {
        GrantFacts {
            op_index: m.ops[g.op].index,
            process: g.process,
            token: g.token,
            invoke_ns: g.invoke_ns,
            complete_ns: g.complete_ns,
            session: m.is_session(g),
        }
    }
}

/// Where a lock's tokens went back: the grants whose token is not above the highest token of a
/// grant of their lock completed before they were invoked, behind that grant (the era's
/// frontier). Grants by their acquire's position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Era {
    pub(crate) frontier: usize,
    /// In invoke order.
    pub(crate) members: Vec<usize>,
}

impl Facts {
    /// The facts of the whole model: the ops `vs` name, their grants, and every token reset.
    pub(crate) fn of_model(m: &Model, vs: &[Violation]) -> Facts {
        let named: FxMap<u64, ()> = vs
            .iter()
            .flat_map(|v| v.ops.iter().map(|&i| (i, ())))
            .collect();
        let mut facts = Facts::default();
        for (p, o) in m.ops.iter().enumerate() {
            if named.contains_key(&o.index) {
                let uses = match m.grant_of[p] {
                    NO_GRANT => None,
                    g => Some(m.grants[g as usize].op),
                };
                facts.ops.insert(
                    o.index,
                    OpFacts {
                        pos: p,
                        func: o.func,
                        is_final: o.is_final,
                        token: o.token(),
                        makes_grant: false,
                        uses,
                        done_ns: o.complete_ns(),
                    },
                );
            }
        }
        for g in &m.grants {
            if let Some(o) = facts.ops.get_mut(&m.ops[g.op].index) {
                o.makes_grant = true;
                facts.grants.insert(g.op, GrantFacts::of(m, g));
            }
        }
        let used: crate::model::FxSet<usize> = facts.ops.values().filter_map(|o| o.uses).collect();
        let (eras, ids) = eras_of(m);
        facts.eras = eras;
        for g in (m.grants.iter()).filter(|g| used.contains(&g.op)) {
            facts.grants.insert(g.op, GrantFacts::of(m, g));
        }
        for g in ids {
            let g = &m.grants[g as usize];
            facts.grants.insert(g.op, GrantFacts::of(m, g));
        }
        facts
    }
}

/// [`group`] with the facts of the whole model (read only when there is something to group).
pub(crate) fn group_model(m: &Model, vs: &[Violation]) -> Vec<Incident> {
    if vs.is_empty() {
        return Vec::new();
    }
    group(&Facts::of_model(m, vs), vs)
}

/// Groups `vs` (sorted as `Results::violations` is) into incidents, in order of their first
/// member, from what `facts` tell of the ops they name.
pub(crate) fn group(facts: &Facts, vs: &[Violation]) -> Vec<Incident> {
    if vs.is_empty() {
        return Vec::new();
    }
    let look = Lookup { facts };
    let mut g = Grouping {
        units: Units::default(),
        claimed: FxMap::default(),
        unit_of: vec![usize::MAX; vs.len()],
    };
    for (e, era) in facts.eras.iter().enumerate() {
        let u = g.units.add(Some(e as u32));
        for &grant in std::iter::once(&era.frontier).chain(&era.members) {
            g.claimed.entry(grant).or_insert(u);
        }
    }
    g.double_grants(&look, vs);
    g.the_rest(&look, vs);
    debug_assert!(
        g.unit_of.iter().all(|&u| u != usize::MAX),
        "every violation joins an incident"
    );
    let mut members: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (i, &u) in g.unit_of.iter().enumerate() {
        members.entry(g.units.find(u)).or_default().push(i);
    }
    let mut out: Vec<Incident> = members
        .into_iter()
        .map(|(u, list)| incident(&look, vs, g.units.era_of(u), list))
        .collect();
    out.sort_by_key(|inc| inc.violations.iter().min().copied());
    out
}

/// The incidents being formed: units (merged as they meet), the grants they claimed, and each
/// violation's unit.
struct Grouping {
    units: Units,
    /// grant (its acquire's position) -> the first unit that claimed it
    claimed: FxMap<usize, usize>,
    /// Per violation, its unit (`usize::MAX`: not yet placed).
    unit_of: Vec<usize>,
}

impl Grouping {
    /// Each double grant joins the unit that already claimed one of its grants (merging them
    /// when it meets several), else starts one.
    fn double_grants(&mut self, look: &Lookup, vs: &[Violation]) {
        for (i, v) in vs.iter().enumerate() {
            if v.kind != ViolationKind::DoubleGrant {
                continue;
            }
            let grants = look.grants(v);
            let mut mine: Option<usize> = None;
            // A grant another double grant (or a reset) already holds: the same cause, one
            // lease overlapped twice, however far apart the two overlaps are.
            for g in &grants {
                let Some(&u) = self.claimed.get(g) else {
                    continue;
                };
                let r = self.units.find(u);
                mine = Some(match mine {
                    Some(x) => self.units.union(x, r),
                    None => r,
                });
            }
            let u = mine.unwrap_or_else(|| self.units.add(None));
            for g in grants {
                self.claimed.entry(g).or_insert(u);
            }
            self.units.widen(u, v.window_ns);
            self.unit_of[i] = u;
        }
    }

    /// The rest, the kinds that name a grant most directly first: each joins the unit that
    /// claimed the grant at fault, else starts one.
    fn the_rest(&mut self, look: &Lookup, vs: &[Violation]) {
        let mut rest: Vec<usize> = (0..vs.len())
            .filter(|&i| vs[i].kind != ViolationKind::DoubleGrant)
            .collect();
        rest.sort_by_key(|&i| (priority(vs[i].kind), i));
        // key or lock -> the unit of its latest pairwise lost-update
        let mut lost: BTreeMap<Option<&str>, usize> = BTreeMap::new();
        for i in rest {
            let v = &vs[i];
            let (fault, claims) = look.at_fault(v);
            let found = fault.iter().find_map(|g| self.claimed.get(g).copied());
            let u = match (v.kind, found) {
                (ViolationKind::LockStuck, _) => self.units.add(None),
                (ViolationKind::LostUpdate, _) if look.is_final_read(v) => {
                    match lost.get(&v.lock.as_deref()) {
                        Some(&u) => u,
                        None => self.units.add(None),
                    }
                }
                (_, Some(u)) => u,
                (_, None) => {
                    let u = self.units.add(None);
                    for &g in fault.iter().take(claims) {
                        self.claimed.entry(g).or_insert(u);
                    }
                    u
                }
            };
            if v.kind == ViolationKind::LostUpdate && !look.is_final_read(v) {
                lost.insert(v.lock.as_deref(), u);
            }
            self.units.widen(u, v.window_ns);
            self.unit_of[i] = u;
        }
    }
}

/// The order in which the violations other than double grants look for their incident (and
/// start one when none holds their grant).
fn priority(k: ViolationKind) -> u8 {
    use ViolationKind::*;
    match k {
        GrantWithoutKey | GrantOnExpiredLease => 0,
        TokenRegressed => 1,
        TokenReused => 2,
        StaleRenewAccepted | StaleReleaseAccepted => 3,
        StaleWriteAccepted => 4,
        LostUpdate => 5,
        NonSerializable => 6,
        _ => 7,
    }
}

fn incident(look: &Lookup, vs: &[Violation], era: Option<u32>, mut list: Vec<usize>) -> Incident {
    debug_assert!(
        !list.is_empty(),
        "an incident groups at least one violation"
    );
    list.sort_unstable();
    // A double grant, else the kind nearest the cause (a stale write before the cycle of
    // critical sections it made), the first of it.
    let first_of = |&i: &usize| {
        (
            vs[i].kind != ViolationKind::DoubleGrant,
            priority(vs[i].kind),
            i,
        )
    };
    let root = (list.iter().copied())
        .min_by_key(first_of)
        .expect("an incident is never empty");
    let mut ordered = vec![root];
    ordered.extend(list.iter().copied().filter(|&i| i != root));
    let mut kinds: BTreeMap<String, u64> = BTreeMap::new();
    let mut window = [u64::MAX, 0];
    for &i in &ordered {
        *kinds.entry(vs[i].kind.as_str().to_string()).or_default() += 1;
        window[0] = window[0].min(vs[i].window_ns[0]);
        window[1] = window[1].max(vs[i].window_ns[1]);
    }
    let by_overlap: Vec<usize> = ordered
        .iter()
        .copied()
        .filter(|&i| look.regressed_by_overlap(&vs[i]))
        .collect();
    let reset = era.map(|e| look.reset(e));
    let r = &vs[root];
    let (cause, explanation) = cause_of(look, r, reset.as_ref(), by_overlap.contains(&root));
    let token_reset = reset.map(|(t, _)| t);
    let explanation = match &token_reset {
        Some(t) if cause == "double-grant" => format!(
            "{explanation}; the lock's tokens went back from {} to {} (op {})",
            t.from, t.to, t.op
        ),
        _ => explanation,
    };
    Incident {
        cause,
        lock: r.lock.clone(),
        root,
        violations: ordered,
        kinds,
        window_ns: window,
        token_reset,
        by_overlap,
        explanation,
    }
}

/// An incident's cause and sentence, from its root violation `r`: a double grant, a token
/// reset (the era's, with when its first lower token was granted), an overlap (`overlap`: `r`
/// is a regressed token that overlapping grants explain), or the root's kind.
fn cause_of(
    look: &Lookup,
    r: &Violation,
    reset: Option<&(TokenReset, u64)>,
    overlap: bool,
) -> (String, String) {
    let name = r.lock.as_deref().unwrap_or("?");
    match r.kind {
        ViolationKind::DoubleGrant => (
            "double-grant".to_string(),
            double_grant_sentence(look, r, name),
        ),
        _ if reset.is_some() => {
            let (t, at_ns) = reset.expect("matched");
            (
                "token-reset".to_string(),
                format!(
                    "token reset on {name} at {}: token {} was granted (op {}) after token {} had been granted",
                    secs(*at_ns),
                    t.to,
                    t.op,
                    t.from
                ),
            )
        }
        ViolationKind::TokenRegressed if overlap => (
            "overlap".to_string(),
            format!(
                "overlapping grants of {name} at {}: one was granted while the other's lease surely lasted ({}); their tokens rose in the order they were answered, so the token counter did not go back",
                secs(r.window_ns[0]),
                op_list(&look.grant_ops(r)),
            ),
        ),
        k => {
            // A violation of one grant's own answer is about the moment it was answered (its
            // window's end; the window starts at the acquire's send, seconds earlier when it
            // waited out a fault); the other kinds start where their proof does.
            let at_ns = match k {
                ViolationKind::GrantWithoutKey | ViolationKind::GrantOnExpiredLease => {
                    r.window_ns[1]
                }
                _ => r.window_ns[0],
            };
            (
                k.as_str().to_string(),
                format!("{k} on {name} at {}", secs(at_ns)),
            )
        }
    }
}

/// A double grant's sentence: the two grants, the later granted while the earlier's lease
/// (or session) lasted. A hold the violation proves by an accepted renew names it: a late
/// renew is where such a double grant starts (p1's lease lasted because a renew of it was
/// accepted after it had lapsed), and a sentence naming the grants alone hides it.
fn double_grant_sentence(look: &Lookup, r: &Violation, name: &str) -> String {
    let mut s = format!("double grant of {name} at {}", secs(r.window_ns[0]));
    if let [a, b] = look.grants(r)[..] {
        let (renews_a, renews_b) = (look.renews(r, a), look.renews(r, b));
        // The one whose hold the other came into: the hold that began first, at its grant or
        // at the first renew the violation names (the hold that renew proves).
        let (start_a, start_b) = (look.hold_start(a, &renews_a), look.hold_start(b, &renews_b));
        let ((a, renews_a), (b, renews_b)) = if start_a <= start_b {
            ((a, renews_a), (b, renews_b))
        } else {
            ((b, renews_b), (a, renews_a))
        };
        let (a, b) = (look.grant(a), look.grant(b));
        let whose = if a.process == b.process {
            "its own".to_string()
        } else {
            format!("p{}'s", a.process)
        };
        // A session's grant is no lease: what lasted was its holder's belief.
        let lasted = if a.session {
            format!(
                "{whose} session grant ({}) was still believed held",
                grant_words(a, &renews_a)
            )
        } else {
            format!(
                "{whose} lease ({}) surely lasted",
                grant_words(a, &renews_a)
            )
        };
        let came = if renews_b.is_empty() {
            "was granted it"
        } else {
            "held it"
        };
        s.push_str(&format!(
            ": p{} {came} ({}) while {lasted}",
            b.process,
            grant_words(b, &renews_b),
        ));
    }
    s
}

/// A grant in an incident's sentence: its token, its acquire and the renews of it that the
/// violation names.
fn grant_words(g: &GrantFacts, renews: &[u64]) -> String {
    let mut s = format!("{}, op {}", token(g.token), g.op_index);
    if !renews.is_empty() {
        s.push_str(&format!(", renewed by {}", op_list(renews)));
    }
    s
}

/// The ops violations name and their grants, read from the [`Facts`].
struct Lookup<'a> {
    facts: &'a Facts,
}

impl Lookup<'_> {
    fn grant(&self, pos: usize) -> &GrantFacts {
        &self.facts.grants[&pos]
    }

    /// The grants a violation's ok acquires are, in op order.
    fn grants(&self, v: &Violation) -> Vec<usize> {
        v.ops
            .iter()
            .filter_map(|i| self.facts.ops.get(i))
            .filter(|o| o.makes_grant)
            .map(|o| o.pos)
            .collect()
    }

    fn grant_ops(&self, v: &Violation) -> Vec<u64> {
        self.grants(v)
            .iter()
            .map(|&g| self.grant(g).op_index)
            .collect()
    }

    /// When grant `g`'s hold began, as a violation naming its `renews` proves it: at the
    /// first of them answered, else at its grant.
    fn hold_start(&self, g: usize, renews: &[u64]) -> u64 {
        let renewed = (renews.iter())
            .filter_map(|i| self.facts.ops.get(i)?.done_ns)
            .min();
        let granted = self.grant(g).complete_ns;
        renewed.map_or(granted, |r| r.max(granted))
    }

    /// The indices of the renews violation `v` names that act for grant `g`, in op order.
    fn renews(&self, v: &Violation, g: usize) -> Vec<u64> {
        (v.ops.iter().copied())
            .filter(|i| {
                self.facts
                    .ops
                    .get(i)
                    .is_some_and(|o| o.func == Func::Renew && o.uses == Some(g))
            })
            .collect()
    }

    /// The grants the ops other than acquires act for, with the op, in op order.
    fn used(&self, v: &Violation) -> Vec<(&OpFacts, usize)> {
        v.ops
            .iter()
            .filter_map(|i| self.facts.ops.get(i))
            .filter(|o| !o.makes_grant)
            .filter_map(|o| o.uses.map(|g| (o, g)))
            .collect()
    }

    /// A `lost-update` of the closing read (lower than the writes acknowledged before it):
    /// the sum of every increment lost, not one pair's.
    fn is_final_read(&self, v: &Violation) -> bool {
        (v.ops.iter())
            .filter_map(|i| self.facts.ops.get(i))
            .any(|o| o.func == Func::Read && o.is_final)
    }

    /// The grants a violation is about, most directly first, and how many of them an incident
    /// it starts claims: the culprit only (a stale write's grant, not the newer one it came
    /// after; none of a lost update's two writes), so that later violations do not chain
    /// through a grant that was merely there.
    fn at_fault(&self, v: &Violation) -> (Vec<usize>, usize) {
        use ViolationKind::*;
        let grants = self.grants(v);
        match v.kind {
            TokenReused => {
                let mut g = grants;
                g.sort_by_key(|&x| (self.grant(x).complete_ns, x));
                (g.into_iter().rev().take(1).collect(), 1)
            }
            TokenRegressed => {
                let mut g = grants;
                // The lower token first: the grant out of place.
                g.sort_by_key(|&x| (self.grant(x).token, x));
                // Both: by exclusivity, the pair that overlapped.
                (g, 2)
            }
            StaleRenewAccepted | StaleReleaseAccepted => {
                let mut g: Vec<usize> = self.used(v).into_iter().map(|(_, g)| g).collect();
                g.extend(grants);
                (g, 1)
            }
            StaleWriteAccepted | LostUpdate | NonSerializable => {
                let mut used = self.used(v);
                // The lower token first: the stale write (the holder more likely stale).
                used.sort_by_key(|&(o, _)| (o.token, o.pos));
                // A cycle of critical sections names the reads and writes that prove it: it
                // joins the incident of a stale write among them, and claims none of their
                // grants (each was merely there).
                let claims = if v.kind == StaleWriteAccepted { 1 } else { 0 };
                (used.into_iter().map(|(_, g)| g).collect(), claims)
            }
            LockStuck => (Vec::new(), 0),
            _ => (grants, 1),
        }
    }

    /// A `token-regressed` of the exclusivity reading: the grant with the higher token did not
    /// complete before the lower one was invoked (in real time the tokens did not go back).
    fn regressed_by_overlap(&self, v: &Violation) -> bool {
        if v.kind != ViolationKind::TokenRegressed {
            return false;
        }
        let [a, b] = self.grants(v)[..] else {
            return false;
        };
        let (a, b) = (self.grant(a), self.grant(b));
        let (hi, lo) = if a.token > b.token { (a, b) } else { (b, a) };
        hi.complete_ns >= lo.invoke_ns
    }

    /// Era `e`'s token reset, and when its first lower token was granted.
    fn reset(&self, e: u32) -> (TokenReset, u64) {
        let era = &self.facts.eras[e as usize];
        let first = self.grant(era.members[0]);
        let reset = TokenReset {
            from: self.grant(era.frontier).token.unwrap_or(0),
            to: first.token.unwrap_or(0),
            op: first.op_index,
        };
        (reset, first.complete_ns)
    }
}

/// The model's token resets, and the numbers of the grants they name.
fn eras_of(m: &Model) -> (Vec<Era>, Vec<u32>) {
    // The grants behind their frontier, as token-regressed finds them in real time (and
    // token-reused where the tokens are equal): the same sweep.
    let asked = crate::tokens::tokened_grants_by(m, |g| g.invoke_ns);
    let mut list: Vec<Era> = Vec::new();
    let mut ids = Vec::new();
    let mut era_of: FxMap<u32, usize> = FxMap::default();
    crate::tokens::frontier_sweep(m, &asked, |b, best| {
        let tok_b = m.grants[b as usize].token.expect("tokened grants only");
        if let Some((_, a)) = best.filter(|&(x, a)| x >= tok_b && a != b) {
            let e = *era_of.entry(a).or_insert_with(|| {
                list.push(Era {
                    frontier: m.grants[a as usize].op,
                    members: Vec::new(),
                });
                ids.push(a);
                list.len() - 1
            });
            list[e].members.push(m.grants[b as usize].op);
            ids.push(b);
        }
    });
    (list, ids)
}

/// An era's grant as the streamed `fencing-tokens` reading meets it (`fencing.rs`): a grant
/// whose token is not above the highest of its lock's grants completed before it was invoked.
/// Ops by the index naming them in violations; there is one per `token-regressed` or
/// `token-reused` that names the member in real time, so the marks are as many as those.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct EraMark {
    /// The order of the whole check's sweep: lock, invoke, grant number.
    pub(crate) lock: u32,
    pub(crate) invoke_ns: u64,
    pub(crate) grant: u32,
    pub(crate) member: u64,
    pub(crate) frontier: u64,
}

impl EraMark {
    /// The ops of the grants the marks name, for a second reading to find.
    pub(crate) fn ops(marks: &[EraMark]) -> impl Iterator<Item = u64> + '_ {
        marks.iter().flat_map(|m| [m.member, m.frontier])
    }
}

/// What a second streamed reading of a history keeps for the incidents of the violations the
/// first one proved: the [`Facts`] of the ops they name (by index, `named`) and of those ops'
/// grants, each taken while the reader still holds it. The reader calls [`Capture::walked`]
/// for each op it walks, [`Capture::closed`] for each grant it closes, and
/// [`Capture::dropping`] before it drops ops (and at the end, for every op).
pub(crate) struct Capture {
    named: crate::model::FxSet<u64>,
    /// Positions of the named ops walked and not yet taken, in position order.
    waiting: Vec<usize>,
    /// The grants the named ops were given when walked, until each closes.
    wanted: crate::model::FxSet<u32>,
    /// The named ops walked without a grant and not yet taken, in position order: a name
    /// that points ahead is given its grant once that is made (before it closes).
    ungiven: Vec<usize>,
    /// Grant number -> its acquire's position, of the grants whose facts are taken.
    taken: FxMap<u32, usize>,
    /// The acquires of the named ops that made a grant, by position.
    made: crate::model::FxSet<usize>,
    facts: Facts,
    /// Named ops whose grant was gone before it was taken: the facts are then incomplete
    /// (the reader keeps an op's grant at least until it closes, so none is expected).
    pub(crate) missed: u64,
}

impl Capture {
    pub(crate) fn new(named: impl IntoIterator<Item = u64>) -> Capture {
        Capture {
            named: named.into_iter().collect(),
            waiting: Vec::new(),
            wanted: Default::default(),
            ungiven: Vec::new(),
            taken: FxMap::default(),
            made: Default::default(),
            facts: Facts::default(),
            missed: 0,
        }
    }

    /// The op at `pos` was walked and given `grant` (or none yet): its index is final (its
    /// completion's, if it has one).
    pub(crate) fn walked(&mut self, pos: usize, op: &crate::model::ClientOp, grant: u32) {
        if self.named.contains(&op.index) {
            self.waiting.push(pos);
            match grant {
                NO_GRANT => self.ungiven.push(pos),
                g => {
                    self.wanted.insert(g);
                }
            }
        }
    }

    /// Grant `g` closed: every op that uses it was walked and given it (one given it later
    /// makes the reading not the batch's). Its facts are taken if a named op made or uses it.
    pub(crate) fn closed(
        &mut self,
        g: u32,
        grant: &crate::model::Grant,
        session: bool,
        (ops, grant_of): (&crate::walk::Ops, &crate::window::Window<u32>),
    ) {
        let own = self.named.contains(&ops[grant.op].index);
        if own {
            self.made.insert(grant.op);
        }
        let used = self.wanted.remove(&g);
        // Few: only the named ops whose name pointed ahead when walked.
        let given_later = || (self.ungiven.iter()).any(|&p| grant_of.get(p) == Some(&g));
        if own || used || given_later() {
            self.take_grant(g, grant, session, ops[grant.op].index);
        }
    }

    fn take_grant(&mut self, g: u32, grant: &crate::model::Grant, session: bool, op_index: u64) {
        self.taken.insert(g, grant.op);
        self.facts.grants.insert(
            grant.op,
            GrantFacts {
                op_index,
                process: grant.process,
                token: grant.token,
                invoke_ns: grant.invoke_ns,
                complete_ns: grant.complete_ns,
                session,
            },
        );
    }

    /// The ops before `before` are about to be dropped (`usize::MAX`: the history is read, the
    /// walk ended): the named ones among them are taken, with the grant each uses if it is
    /// still kept (`grants`, `sessions`: the walk's).
    pub(crate) fn dropping(
        &mut self,
        before: usize,
        (ops, grant_of): (&crate::walk::Ops, &crate::window::Window<u32>),
        (grants, sessions): (&crate::window::Window<crate::model::Grant>, &[usize]),
    ) {
        let gone = self.waiting.partition_point(|&p| p < before);
        let waiting: Vec<usize> = self.waiting.drain(..gone).collect();
        let gone = self.ungiven.partition_point(|&p| p < before);
        self.ungiven.drain(..gone);
        for p in waiting {
            let op = &ops[p];
            let uses = match grant_of[p] {
                NO_GRANT => None,
                g => match (self.taken.get(&g).copied(), grants.get(g as usize)) {
                    (Some(at), _) => Some(at),
                    (None, Some(grant)) => {
                        let session = sessions.binary_search(&grant.op).is_ok();
                        self.take_grant(g, grant, session, ops[grant.op].index);
                        Some(grant.op)
                    }
                    (None, None) => {
                        self.missed += 1;
                        None
                    }
                },
            };
            self.facts.ops.insert(
                op.index,
                OpFacts {
                    pos: p,
                    func: op.func,
                    is_final: op.is_final,
                    token: op.token(),
                    makes_grant: self.made.contains(&p),
                    uses,
                    done_ns: op.complete_ns(),
                },
            );
        }
    }

    /// The facts taken, with the token resets the first reading's `marks` make (each mark's
    /// ops among the named); `None` if a named op or grant was not found.
    pub(crate) fn into_facts(mut self, marks: &[EraMark]) -> Option<Facts> {
        if self.missed > 0 || !self.waiting.is_empty() {
            return None;
        }
        let mut marks = marks.to_vec();
        marks.sort_unstable();
        let mut era_of: FxMap<u64, usize> = FxMap::default();
        for m in &marks {
            let pos = |i: u64| {
                self.facts
                    .ops
                    .get(&i)
                    .filter(|o| o.makes_grant)
                    .map(|o| o.pos)
            };
            let (member, frontier) = (pos(m.member)?, pos(m.frontier)?);
            let eras = &mut self.facts.eras;
            let e = *era_of.entry(m.frontier).or_insert_with(|| {
                eras.push(Era {
                    frontier,
                    members: Vec::new(),
                });
                eras.len() - 1
            });
            eras[e].members.push(member);
        }
        Some(self.facts)
    }
}

/// Incidents under construction: a union-find over units, each with its joined window and the
/// token reset it began as, if any.
#[derive(Default)]
struct Units {
    parent: Vec<usize>,
    window: Vec<[u64; 2]>,
    era: Vec<Option<u32>>,
}

impl Units {
    fn add(&mut self, era: Option<u32>) -> usize {
        self.parent.push(self.parent.len());
        self.window.push([u64::MAX, 0]);
        self.era.push(era);
        self.parent.len() - 1
    }

    fn find(&mut self, mut u: usize) -> usize {
        while self.parent[u] != u {
            self.parent[u] = self.parent[self.parent[u]];
            u = self.parent[u];
        }
        u
    }

    fn union(&mut self, a: usize, b: usize) -> usize {
        let (a, b) = (self.find(a), self.find(b));
        if a == b {
            return a;
        }
        let (keep, gone) = (a.min(b), a.max(b));
        self.parent[gone] = keep;
        self.window[keep] = [
            self.window[keep][0].min(self.window[gone][0]),
            self.window[keep][1].max(self.window[gone][1]),
        ];
        self.era[keep] = self.era[keep].or(self.era[gone]);
        keep
    }

    fn widen(&mut self, u: usize, w: [u64; 2]) {
        let r = self.find(u);
        self.window[r] = [self.window[r][0].min(w[0]), self.window[r][1].max(w[1])];
    }

    fn era_of(&self, root: usize) -> Option<u32> {
        self.era[root]
    }
}

#[cfg(test)]
mod capture_tests {
    use super::*;
    use crate::model::{ClientOp, Grant};
    use crate::window::Window;
    use history::Outcome;

    /// An ok acquire at `index`, invoked at `invoke_ns`, answered 1 ms later with `token`.
    fn acquire(index: u64, invoke_ns: u64, token: u64) -> ClientOp {
        let mut op = ClientOp::invoked(Func::Acquire, index, 0, invoke_ns, index, false);
        op.complete(Outcome::Ok, invoke_ns + 1_000_000);
        op.set_token(Some(token));
        op
    }

    fn grant_of_op(pos: usize, op: &ClientOp) -> Grant {
        Grant {
            op: pos,
            lock: 0,
            process: op.process,
            token: op.token(),
            ttl_ms: Some(1000),
            invoke_ns: op.invoke_ns,
            complete_ns: op.complete_ns().expect("answered"),
            epoch_ops: Vec::new(),
            holds: Vec::new(),
            release_op: None,
            lease_lb_ns: 0,
            surely_dead_ns: None,
            alive_until_ns: 0,
        }
    }

    /// Four grants of one lock, tokens 5, 6, 1, 2: the last two are behind the first two's
    /// frontier (6). The marks come in any order; the eras are the whole check's sweep's: by
    /// lock, then invoke, one per frontier, members in invoke order.
    #[test]
    fn the_marks_make_the_sweeps_eras_whatever_their_order() {
        let ops: Vec<ClientOp> = [(10, 0, 5), (20, 10, 6), (30, 20, 1), (40, 30, 2)]
            .iter()
            .map(|&(i, t, tok)| acquire(i, t * 1_000_000, tok))
            .collect();
        let grants: Vec<Grant> = (ops.iter().enumerate())
            .map(|(p, o)| grant_of_op(p, o))
            .collect();
        let mark = |g: u32, frontier: u64| EraMark {
            lock: 0,
            invoke_ns: ops[g as usize].invoke_ns,
            grant: g,
            member: ops[g as usize].index,
            frontier,
        };
        let marks = [mark(3, 20), mark(2, 20)];
        let mut c = Capture::new([10, 20, 30, 40]);
        let (ops, grants) = (Window::from(ops), Window::from(grants));
        let grant_of: Window<u32> = Window::from(vec![NO_GRANT; 4]);
        for p in 0..4 {
            c.walked(p, &ops[p], NO_GRANT);
        }
        for g in 0..4 {
            c.closed(g, &grants[g as usize], false, (&ops, &grant_of));
        }
        c.dropping(usize::MAX, (&ops, &grant_of), (&grants, &[]));
        let facts = c.into_facts(&marks).expect("every fact found");
        assert_eq!(
            facts.eras,
            vec![Era {
                frontier: 1,
                members: vec![2, 3]
            }]
        );
        assert!(facts.ops.values().all(|o| o.makes_grant), "{facts:?}");
        assert_eq!(facts.grants[&2].token, Some(1));
    }

    /// An op dropped while the grant it uses is still open takes the grant's facts then; one
    /// given its grant after it was walked takes it when the grant closes; one whose grant was
    /// neither taken nor kept leaves the facts incomplete, never wrong.
    #[test]
    fn an_op_takes_its_grant_while_it_is_kept_or_when_it_closes_else_nothing() {
        let mut write = ClientOp::invoked(Func::Write, 1, 0, 5_000_000, 7, false);
        write.complete(Outcome::Ok, 6_000_000);
        write.set_token(Some(5));
        let acquire = acquire(3, 0, 5);
        let grant = grant_of_op(0, &acquire);
        let ops = Window::from(vec![acquire, write]);
        let grant_of: Window<u32> = Window::from(vec![NO_GRANT, 0]);
        let mut c = Capture::new([7]);
        c.walked(1, &ops[1], 0);
        let grants = Window::from(vec![grant]);
        c.dropping(usize::MAX, (&ops, &grant_of), (&grants, &[0]));
        let facts = c.into_facts(&[]).expect("every fact found");
        assert_eq!(facts.ops[&7].uses, Some(0));
        assert!(!facts.ops[&7].makes_grant);
        assert_eq!(facts.grants[&0].op_index, 3);
        assert!(
            facts.grants[&0].session,
            "its session read from the walk's list"
        );

        // Walked before its grant was made (a name that points ahead), given it later: taken
        // when the grant closes, found after the grant was dropped.
        let mut c = Capture::new([7]);
        c.walked(1, &ops[1], NO_GRANT);
        c.closed(0, &grants[0], true, (&ops, &grant_of));
        let none: Window<Grant> = Window::from(Vec::new());
        c.dropping(usize::MAX, (&ops, &grant_of), (&none, &[]));
        let facts = c.into_facts(&[]).expect("every fact found");
        assert_eq!(facts.ops[&7].uses, Some(0));
        assert_eq!(facts.grants[&0].op_index, 3);

        let mut c = Capture::new([7]);
        c.walked(1, &ops[1], 0);
        c.dropping(usize::MAX, (&ops, &grant_of), (&none, &[]));
        assert!(
            c.into_facts(&[]).is_none(),
            "a grant gone before it was taken"
        );
    }
}
