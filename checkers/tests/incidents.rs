//! Incidents (issue 24): the violations of one root cause are one incident, with the
//! consequences under it; counts per kind and the verdict are unchanged.

// The fault families' entries, which the nemesis's modules register (history::FAULT_FAMILIES):
// without them linked, this test would read every fault op by the start-/stop- convention.
use nemesis as _;

use checkers::{check, CheckConfig};
use history::{History, Op, OpType, OpValue, Process, Results, Validity, F};
use std::collections::BTreeMap;

/// A history written op by op: `acq(p, from_ms, to_ms, token)` and friends, on lock L0 with
/// 1 s leases; indices in call order, ops sorted by time at the end.
#[derive(Default)]
struct H {
    ops: Vec<(u64, Op)>,
}

const TTL: u64 = 1000;

impl H {
    fn push(&mut self, ms: u64, p: Process, kind: OpType, f: F, v: OpValue, target: Target) {
        let op = Op::new(0, ms * 1_000_000, p, kind, f).with_value(v);
        let op = match target {
            Target::Lock => op.with_lock("L0"),
            Target::Key => op.with_key("counter-L0"),
            Target::None => op,
        };
        self.ops.push((ms, op));
    }

    fn lock_op(
        &mut self,
        p: u64,
        f: F,
        (from, to): (u64, u64),
        inv: OpValue,
        done: (OpType, OpValue),
    ) {
        let c = Process::Client(p);
        self.push(from, c, OpType::Invoke, f.clone(), inv, Target::Lock);
        self.push(to, c, done.0, f, done.1, Target::Lock);
    }

    fn acq(&mut self, p: u64, from: u64, to: u64, token: u64) -> &mut Self {
        let v = OpValue::default().with_ttl_ms(TTL);
        self.lock_op(
            p,
            F::Acquire,
            (from, to),
            v.clone(),
            (OpType::Ok, v.with_token(token)),
        );
        self
    }

    fn renew(&mut self, p: u64, from: u64, to: u64, token: u64) -> &mut Self {
        let v = OpValue::default().with_token(token).with_ttl_ms(TTL);
        self.lock_op(p, F::Renew, (from, to), v.clone(), (OpType::Ok, v));
        self
    }

    fn release(&mut self, p: u64, from: u64, to: u64, token: u64, ok: bool) -> &mut Self {
        let v = OpValue::default().with_token(token);
        let done = if ok {
            (OpType::Ok, v.clone())
        } else {
            (OpType::Fail, v.clone().with_error("not-holder"))
        };
        self.lock_op(p, F::Release, (from, to), v, done);
        self
    }

    fn write(&mut self, p: u64, from: u64, to: u64, token: u64, value: i64, seq: u64) -> &mut Self {
        let c = Process::Client(p);
        let v = OpValue::default().with_token(token).with_value(value);
        self.push(from, c, OpType::Invoke, F::Write, v.clone(), Target::Key);
        self.push(to, c, OpType::Ok, F::Write, v.with_seq(seq), Target::Key);
        self
    }

    fn kill(&mut self, from: u64, to: u64) -> &mut Self {
        let n = Process::Nemesis;
        self.push(
            from,
            n,
            OpType::Info,
            F::Other("kill".into()),
            OpValue::default(),
            Target::None,
        );
        self.push(
            to,
            n,
            OpType::Info,
            F::Other("restart".into()),
            OpValue::default(),
            Target::None,
        );
        self
    }

    fn check(&self) -> Results {
        let mut ops = self.ops.clone();
        ops.sort_by_key(|(ms, _)| *ms);
        let ops = ops
            .into_iter()
            .enumerate()
            .map(|(i, (_, mut o))| {
                o.index = i as u64;
                o
            })
            .collect();
        check(
            &History::new(ops).expect("a well-formed history"),
            &CheckConfig::default(),
        )
    }
}

enum Target {
    Lock,
    Key,
    None,
}

/// Every violation is in exactly one incident, and each incident's counts are its members'.
fn assert_partition(r: &Results) {
    let mut seen = vec![0; r.violations.len()];
    for inc in &r.incidents {
        assert_eq!(inc.violations[0], inc.root, "the root comes first: {inc:?}");
        let mut kinds: BTreeMap<String, u64> = BTreeMap::new();
        for &i in &inc.violations {
            seen[i] += 1;
            *kinds
                .entry(r.violations[i].kind.as_str().to_string())
                .or_default() += 1;
        }
        assert_eq!(kinds, inc.kinds, "{inc:?}");
    }
    assert!(
        seen.iter().all(|&n| n == 1),
        "each violation in one incident: {seen:?}"
    );
}

fn kinds_of(r: &Results) -> BTreeMap<&'static str, usize> {
    let mut k = BTreeMap::new();
    for v in &r.violations {
        *k.entry(v.kind.as_str()).or_default() += 1;
    }
    k
}

/// p0 holds tokens 1, 2, then 3; the service restarts without its state and grants tokens 1
/// and 2 again inside p0's lease, accepting their releases and renews.
fn one_reset(h: &mut H) {
    h.acq(0, 0, 10, 1).release(0, 100, 110, 1, true);
    h.acq(0, 200, 210, 2).release(0, 300, 310, 2, true);
    h.acq(0, 400, 410, 3);
    h.kill(500, 600);
    h.acq(1, 700, 710, 1).release(1, 800, 810, 1, true);
    h.acq(2, 900, 910, 2)
        .renew(2, 1000, 1010, 2)
        .release(2, 1100, 1110, 2, true);
    h.release(0, 1300, 1310, 3, false);
    h.acq(3, 2000, 2010, 3).release(3, 2100, 2110, 3, true);
    h.acq(3, 2200, 2210, 4).release(3, 2300, 2310, 4, true);
}

#[test]
fn one_token_reset_is_one_incident_with_its_consequences_under_it() {
    let mut h = H::default();
    one_reset(&mut h);
    let r = h.check();
    assert_eq!(r.valid, Validity::Invalid);
    let kinds = kinds_of(&r);
    // The rules each still say their part.
    for k in [
        "double-grant",
        "token-reused",
        "token-regressed",
        "stale-release-accepted",
    ] {
        assert!(kinds.contains_key(k), "{k} missing: {kinds:?}");
    }
    assert!(r.violations.len() >= 8, "{kinds:?}");
    assert_partition(&r);
    assert_eq!(r.incidents.len(), 1, "{:#?}", r.incidents);
    let inc = &r.incidents[0];
    assert_eq!(inc.cause, "double-grant");
    assert_eq!(r.violations[inc.root].kind.as_str(), "double-grant");
    let reset = inc.token_reset.expect("the tokens went back");
    assert_eq!((reset.from, reset.to), (3, 1), "{reset:?}");
    assert!(
        inc.explanation
            .starts_with("double grant of L0 at 0.710 s: p1 was granted it (token 1"),
        "{}",
        inc.explanation
    );
    assert!(
        inc.explanation.contains("went back from 3 to 1"),
        "{}",
        inc.explanation
    );
}

#[test]
fn two_resets_are_two_incidents() {
    let mut h = H::default();
    one_reset(&mut h);
    // Tokens recover past 3 (token 4 above), p3 holds token 5, and a second restart hands out
    // token 1 inside that lease.
    h.acq(3, 2400, 2410, 5);
    h.kill(2500, 2600);
    h.acq(4, 2700, 2710, 1).release(4, 2800, 2810, 1, true);
    let r = h.check();
    assert_partition(&r);
    assert_eq!(r.incidents.len(), 2, "{:#?}", r.incidents);
    let resets: Vec<(u64, u64)> = r
        .incidents
        .iter()
        .map(|i| i.token_reset.map(|t| (t.from, t.to)).expect("a reset each"))
        .collect();
    assert_eq!(resets, [(3, 1), (5, 1)]);
    assert!(r.incidents.iter().all(|i| i.cause == "double-grant"));
}

/// Without a lock bug: two stalled holders, one after the other, each writing stale to an
/// unfenced store. Two incidents (each a stale write and the lost update it made), not one
/// chain through the holder they share.
#[test]
fn consecutive_stale_writes_stay_apart() {
    let mut h = H::default();
    h.acq(0, 0, 10, 1);
    // p0 stalls past its lease; p1 is granted after it surely ended.
    h.acq(1, 1100, 1110, 2).write(1, 1150, 1160, 2, 1, 1);
    h.write(0, 1200, 1210, 1, 1, 2);
    // p1 stalls in turn; p2 is granted after p1's lease surely ended.
    h.acq(2, 2200, 2210, 3).write(2, 2250, 2260, 3, 2, 3);
    h.write(1, 2300, 2310, 2, 2, 4);
    let r = h.check();
    let kinds = kinds_of(&r);
    assert_eq!(kinds.get("stale-write-accepted"), Some(&2), "{kinds:?}");
    assert_eq!(kinds.get("lost-update"), Some(&2), "{kinds:?}");
    assert!(!kinds.contains_key("double-grant"), "{kinds:?}");
    assert_partition(&r);
    assert_eq!(r.incidents.len(), 2, "{:#?}", r.incidents);
    for inc in &r.incidents {
        assert_eq!(inc.cause, "stale-write-accepted", "{inc:?}");
        assert_eq!(inc.violations.len(), 2, "{inc:?}");
    }
}

/// A bank's lost update: a stalled holder's write lands, unfenced, over a newer balance. The
/// cycle of critical sections it makes (`non-serializable`) names that write, so it joins the
/// stale write's incident, rooted at the stale write (its cause); the changed total, which
/// names only the closing reads, stays its own.
#[test]
fn a_cycle_of_sections_joins_the_stale_write_that_made_it() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/bank-total-changed-by-a-stale-half.jsonl");
    let (r, _) = checkers::check_path(&path, &CheckConfig::default()).unwrap();
    assert_partition(&r);
    let kind_of = |i: usize| r.violations[i].kind.as_str();
    let mut incidents: Vec<Vec<&str>> = (r.incidents.iter())
        .map(|inc| inc.violations.iter().map(|&i| kind_of(i)).collect())
        .collect();
    incidents.sort();
    assert_eq!(
        incidents,
        [
            vec!["stale-write-accepted", "non-serializable"],
            vec!["total-changed"]
        ],
        "{:#?}",
        r.incidents
    );
    let joined = (r.incidents.iter())
        .find(|inc| inc.violations.len() == 2)
        .unwrap();
    assert_eq!(joined.cause, "stale-write-accepted", "{joined:?}");
}

/// Grouping is presentation: the violations and the verdict are those of the rules.
#[test]
fn a_correct_history_has_no_incident_and_old_results_read_without_them() {
    let mut h = H::default();
    h.acq(0, 0, 10, 1).release(0, 100, 110, 1, true);
    h.acq(1, 200, 210, 2).release(1, 300, 310, 2, true);
    let r = h.check();
    assert_eq!(r.valid, Validity::Valid);
    assert!(r.incidents.is_empty());
    let json = serde_json::to_value(&r).unwrap();
    assert!(
        json.get("incidents").is_none(),
        "an empty list is not written"
    );
    // A results.json from before incidents reads as having none.
    let back: Results = serde_json::from_value(json).unwrap();
    assert!(back.incidents.is_empty());
}

/// One grant overlapped by two: p0 holds L0 (token 1) and keeps renewing it; p1 is granted
/// inside that lease early on, p2 much later, the two windows far apart. One cause (p0's lease
/// was not respected), so one incident with both double grants, rooted at the first.
#[test]
fn two_double_grants_sharing_a_grant_are_one_incident_however_far_apart() {
    let mut h = H::default();
    h.acq(0, 0, 10, 1);
    // p1 granted 100 ms into p0's lease; it lets go at once.
    h.acq(1, 100, 110, 2).release(1, 150, 160, 2, true);
    // p0 renews its lease every 400 ms, to 4 s.
    for k in 1..=10 {
        h.renew(0, k * 400, k * 400 + 10, 1);
    }
    // p2 granted at 3.6 s, inside the renewed lease: a second double grant, long after the
    // first one's window ended.
    h.acq(2, 3600, 3610, 3).release(2, 3650, 3660, 3, true);
    h.release(0, 4100, 4110, 1, true);
    let r = h.check();
    let doubles: Vec<usize> = (0..r.violations.len())
        .filter(|&i| r.violations[i].kind.as_str() == "double-grant")
        .collect();
    assert_eq!(doubles.len(), 2, "{:#?}", r.violations);
    let (a, b) = (&r.violations[doubles[0]], &r.violations[doubles[1]]);
    assert!(
        a.window_ns[1] < b.window_ns[0],
        "the windows do not touch: {:?} {:?}",
        a.window_ns,
        b.window_ns
    );
    // Both name p0's grant (op 1).
    assert!(a.ops.contains(&1) && b.ops.contains(&1), "{a:?}\n{b:?}");
    assert_partition(&r);
    let holding: Vec<&history::Incident> = r
        .incidents
        .iter()
        .filter(|i| doubles.iter().any(|d| i.violations.contains(d)))
        .collect();
    assert_eq!(holding.len(), 1, "{:#?}", r.incidents);
    let inc = holding[0];
    assert_eq!(inc.cause, "double-grant");
    assert_eq!(inc.root, doubles[0]);
    assert_eq!(inc.kinds.get("double-grant"), Some(&2), "{inc:?}");
    assert_eq!(inc.window_ns[0], a.window_ns[0].min(b.window_ns[0]));
    assert!(inc.window_ns[1] >= b.window_ns[1]);
}

/// The near miss: two double grants of one lock that share no grant (two holders, each
/// overlapped once, far apart) stay two incidents.
#[test]
fn two_double_grants_sharing_no_grant_stay_two_incidents() {
    let mut h = H::default();
    h.acq(0, 0, 10, 1);
    h.acq(1, 100, 110, 2).release(1, 150, 160, 2, true);
    h.release(0, 200, 210, 1, true);
    h.acq(2, 3000, 3010, 3);
    h.acq(3, 3100, 3110, 4).release(3, 3150, 3160, 4, true);
    h.release(2, 3200, 3210, 3, true);
    let r = h.check();
    let doubles = r
        .violations
        .iter()
        .filter(|v| v.kind.as_str() == "double-grant")
        .count();
    assert_eq!(doubles, 2, "{:#?}", r.violations);
    assert_partition(&r);
    assert_eq!(r.incidents.len(), 2, "{:#?}", r.incidents);
    assert!(r.incidents.iter().all(|i| i.cause == "double-grant"));
}

/// A grant's own violation is told at the moment the grant was answered: p2's acquire was sent
/// at 0.100 s and granted at 5.000 s without its lock key, and the incident says 5.000 s.
#[test]
fn a_grant_without_its_key_is_told_at_its_answer_not_its_send() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/grant-without-key.jsonl");
    let (r, _) = checkers::check_path(&path, &CheckConfig::default()).unwrap();
    let inc = r
        .incidents
        .iter()
        .find(|i| i.explanation.starts_with("grant-without-key"))
        .expect("an incident of the keyless grant");
    assert_eq!(inc.explanation, "grant-without-key on L0 at 5.000 s");
}
