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
//!   ones, the stale write's, the grant on an expired lease); it never pulls further grants in,
//!   so two stalls one after the other stay two incidents. A violation that joins nothing starts
//!   an incident of its own; `lock-stuck` is always its own.
//!
//! Every violation is in exactly one incident. The root of an incident is its first double
//! grant, else its first violation.

use crate::model::{Func, Model, NO_GRANT};
use crate::text::{op_list, secs, token};
use crate::FxMap;
use history::{Incident, TokenReset, Violation, ViolationKind};
use std::collections::BTreeMap;

/// Groups `vs` (sorted as `Results::violations` is) into incidents, in order of their first
/// member.
pub(crate) fn group(m: &Model, vs: &[Violation]) -> Vec<Incident> {
    if vs.is_empty() {
        return Vec::new();
    }
    let look = Lookup::new(m, vs);
    let eras = Eras::new(m);
    let mut g = Grouping {
        units: Units::default(),
        claimed: FxMap::default(),
        unit_of: vec![usize::MAX; vs.len()],
    };
    for (e, era) in eras.list.iter().enumerate() {
        let u = g.units.add(Some(e as u32));
        for &grant in std::iter::once(&era.frontier).chain(&era.members) {
            g.claimed.entry(grant).or_insert(u);
        }
    }
    g.double_grants(&look, vs);
    g.the_rest(m, &look, vs);
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
        .map(|(u, list)| incident(m, &look, &eras, vs, g.units.era_of(u), list))
        .collect();
    out.sort_by_key(|inc| inc.violations.iter().min().copied());
    out
}

/// The incidents being formed: units (merged as they meet), the grants they claimed, and each
/// violation's unit.
struct Grouping {
    units: Units,
    /// grant -> the first unit that claimed it
    claimed: FxMap<u32, usize>,
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
    fn the_rest(&mut self, m: &Model, look: &Lookup, vs: &[Violation]) {
        let mut rest: Vec<usize> = (0..vs.len())
            .filter(|&i| vs[i].kind != ViolationKind::DoubleGrant)
            .collect();
        rest.sort_by_key(|&i| (priority(vs[i].kind), i));
        // key or lock -> the unit of its latest pairwise lost-update
        let mut lost: BTreeMap<Option<&str>, usize> = BTreeMap::new();
        for i in rest {
            let v = &vs[i];
            let (fault, claims) = look.at_fault(m, v);
            let found = fault.iter().find_map(|g| self.claimed.get(g).copied());
            let u = match (v.kind, found) {
                (ViolationKind::LockStuck, _) => self.units.add(None),
                (ViolationKind::LostUpdate, _) if look.is_final_read(m, v) => {
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
            if v.kind == ViolationKind::LostUpdate && !look.is_final_read(m, v) {
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
        _ => 6,
    }
}

fn incident(
    m: &Model,
    look: &Lookup,
    eras: &Eras,
    vs: &[Violation],
    era: Option<u32>,
    mut list: Vec<usize>,
) -> Incident {
    debug_assert!(
        !list.is_empty(),
        "an incident groups at least one violation"
    );
    list.sort_unstable();
    let root = list
        .iter()
        .copied()
        .find(|&i| vs[i].kind == ViolationKind::DoubleGrant)
        .unwrap_or(list[0]);
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
        .filter(|&i| look.regressed_by_overlap(m, &vs[i]))
        .collect();
    let token_reset = era.map(|e| eras.reset(m, e));
    let r = &vs[root];
    let (cause, explanation) =
        cause_of(m, look, r, token_reset.as_ref(), by_overlap.contains(&root));
    let explanation = match token_reset {
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
/// reset (the era's), an overlap (`overlap`: `r` is a regressed token that overlapping grants
/// explain), or the root's kind.
fn cause_of(
    m: &Model,
    look: &Lookup,
    r: &Violation,
    token_reset: Option<&TokenReset>,
    overlap: bool,
) -> (String, String) {
    let name = r.lock.as_deref().unwrap_or("?");
    match r.kind {
        ViolationKind::DoubleGrant => (
            "double-grant".to_string(),
            double_grant_sentence(m, look, r, name),
        ),
        _ if token_reset.is_some() => {
            let t = token_reset.expect("matched");
            // When the lower token was granted (the violation's window starts at the earlier
            // grant it is measured against).
            let at_ns = m
                .grants
                .iter()
                .find(|g| m.ops[g.op].index == t.op)
                .map_or(r.window_ns[0], |g| g.complete_ns);
            (
                "token-reset".to_string(),
                format!(
                    "token reset on {name} at {}: token {} was granted (op {}) after token {} had been granted",
                    secs(at_ns),
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
                op_list(&look.grant_ops(m, r)),
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
/// (or session) lasted.
fn double_grant_sentence(m: &Model, look: &Lookup, r: &Violation, name: &str) -> String {
    let mut s = format!("double grant of {name} at {}", secs(r.window_ns[0]));
    if let [a, b] = look.grants(r)[..] {
        let (a, b) = (&m.grants[a as usize], &m.grants[b as usize]);
        // The one whose hold the other came into: the earlier to be granted.
        let (a, b) = if a.complete_ns <= b.complete_ns {
            (a, b)
        } else {
            (b, a)
        };
        let whose = if a.process == b.process {
            "its own".to_string()
        } else {
            format!("p{}'s", a.process)
        };
        // A session's grant is no lease: what lasted was its holder's belief.
        let lasted = if m.is_session(a) {
            format!(
                "{whose} session grant ({}, op {}) was still believed held",
                token(a.token),
                m.ops[a.op].index
            )
        } else {
            format!(
                "{whose} lease ({}, op {}) surely lasted",
                token(a.token),
                m.ops[a.op].index
            )
        };
        s.push_str(&format!(
            ": p{} was granted it ({}, op {}) while {lasted}",
            b.process,
            token(b.token),
            m.ops[b.op].index,
        ));
    }
    s
}

/// The ops violations name, found in the model.
struct Lookup {
    /// op index -> position in `Model::ops`
    pos: FxMap<u64, usize>,
    /// position of an ok acquire -> its grant
    grant_at: FxMap<usize, u32>,
}

impl Lookup {
    fn new(m: &Model, vs: &[Violation]) -> Lookup {
        let named: FxMap<u64, ()> = vs
            .iter()
            .flat_map(|v| v.ops.iter().map(|&i| (i, ())))
            .collect();
        let mut pos = FxMap::default();
        for (p, o) in m.ops.iter().enumerate() {
            if named.contains_key(&o.index) {
                pos.insert(o.index, p);
            }
        }
        let grant_at = m
            .grants
            .iter()
            .enumerate()
            .filter(|(_, g)| named.contains_key(&m.ops[g.op].index))
            .map(|(i, g)| (g.op, i as u32))
            .collect();
        Lookup { pos, grant_at }
    }

    /// The grants a violation's ok acquires are, in op order.
    fn grants(&self, v: &Violation) -> Vec<u32> {
        v.ops
            .iter()
            .filter_map(|i| self.pos.get(i))
            .filter_map(|p| self.grant_at.get(p).copied())
            .collect()
    }

    fn grant_ops(&self, m: &Model, v: &Violation) -> Vec<u64> {
        self.grants(v)
            .iter()
            .map(|&g| m.ops[m.grants[g as usize].op].index)
            .collect()
    }

    /// The grants the ops other than acquires act for, with the op's position, in op order.
    fn used(&self, m: &Model, v: &Violation) -> Vec<(usize, u32)> {
        v.ops
            .iter()
            .filter_map(|i| self.pos.get(i).copied())
            .filter(|p| !self.grant_at.contains_key(p))
            .filter_map(|p| match m.grant_of[p] {
                NO_GRANT => None,
                g => Some((p, g)),
            })
            .collect()
    }

    /// A `lost-update` of the closing read (lower than the writes acknowledged before it):
    /// the sum of every increment lost, not one pair's.
    fn is_final_read(&self, m: &Model, v: &Violation) -> bool {
        v.ops.iter().filter_map(|i| self.pos.get(i)).any(|&p| {
            let o = &m.ops[p];
            o.func == Func::Read && o.is_final
        })
    }

    /// The grants a violation is about, most directly first, and how many of them an incident
    /// it starts claims: the culprit only (a stale write's grant, not the newer one it came
    /// after; none of a lost update's two writes), so that later violations do not chain
    /// through a grant that was merely there.
    fn at_fault(&self, m: &Model, v: &Violation) -> (Vec<u32>, usize) {
        use ViolationKind::*;
        let grants = self.grants(v);
        match v.kind {
            TokenReused => {
                let mut g = grants;
                g.sort_by_key(|&x| (m.grants[x as usize].complete_ns, x));
                (g.into_iter().rev().take(1).collect(), 1)
            }
            TokenRegressed => {
                let mut g = grants;
                // The lower token first: the grant out of place.
                g.sort_by_key(|&x| (m.grants[x as usize].token, x));
                // Both: by exclusivity, the pair that overlapped.
                (g, 2)
            }
            StaleRenewAccepted | StaleReleaseAccepted => {
                let mut g: Vec<u32> = self.used(m, v).into_iter().map(|(_, g)| g).collect();
                g.extend(grants);
                (g, 1)
            }
            StaleWriteAccepted => {
                let mut used = self.used(m, v);
                // The lower token first: the stale write.
                used.sort_by_key(|&(p, _)| (m.ops[p].token(), p));
                (used.into_iter().map(|(_, g)| g).collect(), 1)
            }
            LostUpdate => {
                let mut used = self.used(m, v);
                // The lower token first: the holder more likely stale.
                used.sort_by_key(|&(p, _)| (m.ops[p].token(), p));
                (used.into_iter().map(|(_, g)| g).collect(), 0)
            }
            LockStuck => (Vec::new(), 0),
            _ => (grants, 1),
        }
    }

    /// A `token-regressed` of the exclusivity reading: the grant with the higher token did not
    /// complete before the lower one was invoked (in real time the tokens did not go back).
    fn regressed_by_overlap(&self, m: &Model, v: &Violation) -> bool {
        if v.kind != ViolationKind::TokenRegressed {
            return false;
        }
        let [a, b] = self.grants(v)[..] else {
            return false;
        };
        let (a, b) = (&m.grants[a as usize], &m.grants[b as usize]);
        let (hi, lo) = if a.token > b.token { (a, b) } else { (b, a) };
        hi.complete_ns >= lo.invoke_ns
    }
}

/// Where a lock's tokens went back: each grant whose token is not above the highest token of a
/// grant completed before it was invoked (its frontier), grouped by frontier.
struct Eras {
    list: Vec<Era>,
}

struct Era {
    frontier: u32,
    /// In invoke order.
    members: Vec<u32>,
}

impl Eras {
    fn new(m: &Model) -> Eras {
        // The grants behind their frontier, as token-regressed finds them in real time (and
        // token-reused where the tokens are equal): the same sweep.
        let asked = crate::tokens::tokened_grants_by(m, |g| g.invoke_ns);
        let mut list: Vec<Era> = Vec::new();
        let mut era_of: FxMap<u32, usize> = FxMap::default();
        crate::tokens::frontier_sweep(m, &asked, |b, best| {
            let tok_b = m.grants[b as usize].token.expect("tokened grants only");
            if let Some((_, a)) = best.filter(|&(x, a)| x >= tok_b && a != b) {
                let e = *era_of.entry(a).or_insert_with(|| {
                    list.push(Era {
                        frontier: a,
                        members: Vec::new(),
                    });
                    list.len() - 1
                });
                list[e].members.push(b);
            }
        });
        Eras { list }
    }

    fn reset(&self, m: &Model, e: u32) -> TokenReset {
        let era = &self.list[e as usize];
        let first = &m.grants[era.members[0] as usize];
        TokenReset {
            from: m.grants[era.frontier as usize].token.unwrap_or(0),
            to: first.token.unwrap_or(0),
            op: m.ops[first.op].index,
        }
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
