//! The JSONL codec against docs/history.md's example and the bad inputs a reader must survive.

// The fault families' entries and their ops' field types, which the nemesis's modules register
// (history::FAULT_FAMILIES): the refusals below name fields of the families' own ops.
use nemesis as _;
// The services' evidence sets (`redis_offset`, `redlock_nodes`...) are registered by their
// modules in the workloads.
use workloads as _;

use history::{read_ops_from, History, HistoryWriter, Op, OpType, Outcome, Process, ReadError, F};
use std::path::Path;

const FORMAT_EXAMPLE: &str = r#"{"index":0,"time_ns":1200,"process":3,"type":"invoke","f":"acquire","lock":"L0","value":{"ttl_ms":2000}}
{"index":1,"time_ns":880000,"process":3,"type":"ok","f":"acquire","lock":"L0","value":{"token":41,"ttl_ms":2000}}
{"index":2,"time_ns":900000,"process":3,"type":"invoke","f":"read","key":"counter","value":{"token":41}}
{"index":3,"time_ns":1100000,"process":3,"type":"ok","f":"read","key":"counter","value":{"token":41,"value":16}}
{"index":4,"time_ns":1200000,"process":3,"type":"invoke","f":"write","key":"counter","value":{"token":41,"value":17}}
{"index":5,"time_ns":1400000,"process":3,"type":"ok","f":"write","key":"counter","value":{"token":41,"value":17,"seq":88}}
{"index":6,"time_ns":1500000,"process":3,"type":"invoke","f":"release","lock":"L0","value":{"token":41}}
{"index":7,"time_ns":1700000,"process":3,"type":"ok","f":"release","lock":"L0","value":{"token":41}}
{"index":8,"time_ns":2000000,"process":"nemesis","type":"info","f":"start-pause","value":{"nodes":["n1"]}}
"#;

fn read(text: &str) -> Result<(Vec<Op>, Vec<history::ReadWarning>), ReadError> {
    read_ops_from(text.as_bytes(), Path::new("h.jsonl"))
}

#[test]
fn design_example_round_trips_byte_for_byte() {
    let (ops, warnings) = read(FORMAT_EXAMPLE).unwrap();
    assert!(warnings.is_empty());
    assert_eq!(ops.len(), 9);
    assert_eq!(ops[1].value.token, Some(41));
    assert_eq!(ops[5].value.seq, Some(88));
    assert_eq!(ops[8].process, Process::Nemesis);
    assert_eq!(ops[8].f, F::Other("start-pause".into()));
    let mut w = HistoryWriter::new(Vec::new());
    for op in &ops {
        w.write(op).unwrap();
    }
    let out = String::from_utf8(w.into_inner().unwrap()).unwrap();
    assert_eq!(out, FORMAT_EXAMPLE);
}

#[test]
fn unknown_fields_are_kept_and_written_back() {
    let line = r#"{"index":0,"time_ns":5,"process":1,"type":"invoke","f":"acquire","lock":"L","value":{"ttl_ms":10,"lease_id":"abc","final":true},"node":"n2"}"#;
    let (ops, _) = read(line).unwrap();
    assert!(ops[0].value.is_final);
    assert_eq!(ops[0].value.extra["lease_id"], "abc");
    assert_eq!(ops[0].extra["node"], "n2");
    let mut w = HistoryWriter::new(Vec::new());
    w.write(&ops[0]).unwrap();
    let again = read(&String::from_utf8(w.into_inner().unwrap()).unwrap())
        .unwrap()
        .0;
    assert_eq!(again, ops);
}

#[test]
fn malformed_line_names_file_and_line() {
    let text = format!("{}\n{{\"index\":9,\"time_ns\":1,\"process\":1,\"type\":\"bogus\",\"f\":\"acquire\"}}\n{{}}\n", FORMAT_EXAMPLE.lines().next().unwrap());
    let err = read(&text).unwrap_err().to_string();
    assert!(err.starts_with("h.jsonl:2: "), "{err}");
    assert!(err.contains("bogus"), "{err}");
}

#[test]
fn missing_field_is_named() {
    let err = read("{\"index\":0,\"process\":1,\"type\":\"invoke\",\"f\":\"acquire\"}\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("h.jsonl:1") && err.contains("time_ns"),
        "{err}"
    );
}

#[test]
fn truncated_final_line_is_a_warning() {
    let cut = &FORMAT_EXAMPLE[..FORMAT_EXAMPLE.len() - 20];
    let (ops, warnings) = read(cut).unwrap();
    assert_eq!(ops.len(), 8);
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0].line, 9);
}

#[test]
fn a_bad_line_in_the_middle_is_not_excused_as_truncation() {
    let mut lines: Vec<&str> = FORMAT_EXAMPLE.lines().collect();
    lines[3] = r#"{"index":3,"time_ns":1100000,"proc"#;
    let err = read(&(lines.join("\n") + "\n")).unwrap_err().to_string();
    assert!(err.starts_with("h.jsonl:4: "), "{err}");
}

#[test]
fn a_complete_final_line_without_newline_is_fine() {
    let (ops, warnings) = read(FORMAT_EXAMPLE.trim_end()).unwrap();
    assert_eq!(ops.len(), 9);
    assert!(warnings.is_empty());
}

#[test]
fn index_must_ascend() {
    let mut lines: Vec<&str> = FORMAT_EXAMPLE.lines().collect();
    lines.swap(1, 2);
    let err = read(&lines.join("\n")).unwrap_err().to_string();
    assert!(
        err.starts_with("h.jsonl:3: ") && err.contains("ascend"),
        "{err}"
    );
}

#[test]
fn blank_lines_are_skipped() {
    let text = FORMAT_EXAMPLE.replace('\n', "\n\n");
    assert_eq!(read(&text).unwrap().0.len(), 9);
}

#[test]
fn pairs_operations_and_outcomes() {
    let (ops, _) = read(FORMAT_EXAMPLE).unwrap();
    let h = History::new(ops).unwrap();
    let o = h.operations();
    assert_eq!(o.len(), 4);
    assert!(o.iter().all(|o| o.outcome == Outcome::Ok));
    assert_eq!(h.invoke_of(&o[2]).f, F::Write);
    assert_eq!(h.complete_of(&o[2]).unwrap().value.seq, Some(88));
    assert_eq!(h.nemesis().count(), 1);
}

fn op(index: u64, process: u64, kind: OpType, f: F) -> Op {
    Op::new(index, index * 10, Process::Client(process), kind, f)
}

#[test]
fn structure_errors_name_the_op() {
    use OpType::*;
    let two_in_flight = vec![op(0, 1, Invoke, F::Acquire), op(1, 1, Invoke, F::Renew)];
    let e = History::new(two_in_flight).unwrap_err();
    assert_eq!(e.index, 1);
    assert!(e.reason.contains("in flight"), "{e}");

    let orphan = vec![op(0, 1, Ok, F::Acquire)];
    assert!(History::new(orphan)
        .unwrap_err()
        .reason
        .contains("no op in flight"));

    let mismatch = vec![op(0, 1, Invoke, F::Acquire), op(1, 1, Ok, F::Release)];
    assert!(History::new(mismatch)
        .unwrap_err()
        .reason
        .contains("invoked a acquire"));

    let reuse_after_crash = vec![
        op(0, 1, Invoke, F::Acquire),
        op(1, 1, Info, F::Acquire),
        op(2, 1, Invoke, F::Acquire),
    ];
    assert!(History::new(reuse_after_crash)
        .unwrap_err()
        .reason
        .contains("crashed"));

    let pending = History::new(vec![op(0, 1, Invoke, F::Acquire)]).unwrap();
    assert_eq!(pending.operations()[0].outcome, Outcome::Pending);
}

/// The parallel reader keeps every rule whatever the block and piece boundaries: many lines, so
/// the input spans several pieces per thread.
#[test]
fn the_reader_keeps_its_rules_across_piece_boundaries() {
    let mut w = HistoryWriter::new(Vec::new());
    let n = 200_000u64;
    for i in 0..n {
        let kind = if i % 2 == 0 {
            OpType::Invoke
        } else {
            OpType::Ok
        };
        w.write(&Op::new(i, i * 10, Process::Client(i / 2 % 7), kind, F::Acquire).with_lock("L0"))
            .unwrap();
    }
    let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
    let (ops, warnings) = read(&text).unwrap();
    assert_eq!(ops.len() as u64, n);
    assert!(warnings.is_empty());
    assert!(ops.windows(2).all(|w| w[0].index < w[1].index));

    // A bad line deep inside is reported with its exact line number.
    let mut lines: Vec<&str> = text.lines().collect();
    lines[150_000] = "{not json";
    let err = read(&(lines.join("\n") + "\n")).unwrap_err().to_string();
    assert!(err.starts_with("h.jsonl:150001: "), "{err}");

    // An index that goes back across any boundary is caught with its line.
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines[120_000] = lines[100].clone();
    let err = read(&(lines.join("\n") + "\n")).unwrap_err().to_string();
    assert!(
        err.starts_with("h.jsonl:120001: ") && err.contains("ascend"),
        "{err}"
    );

    // So is a time that goes back, and an equal one is fine.
    for (line, time_ns) in [(130_000usize, 5u64), (170_000, 1_699_990)] {
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        lines[line] = lines[line].replace(
            &format!("\"time_ns\":{},", line * 10),
            &format!("\"time_ns\":{time_ns},"),
        );
        let got = read(&(lines.join("\n") + "\n"));
        if time_ns < (line as u64 - 1) * 10 {
            let err = got.unwrap_err().to_string();
            assert!(
                err.starts_with(&format!(
                    "h.jsonl:{}: time_ns {time_ns} goes back",
                    line + 1
                )),
                "{err}"
            );
        } else {
            assert_eq!(got.unwrap().0[line].time_ns, time_ns);
        }
    }

    // A cut final line is a warning, also on the large path.
    let cut = &text[..text.len() - 7];
    let (ops, warnings) = read(cut).unwrap();
    assert_eq!(ops.len() as u64, n - 1);
    assert_eq!(warnings[0].line, n);
}

/// The first event of the reader tables: process 1 invokes an acquire at time 10.
const FIRST: &str = r#"{"index":0,"time_ns":10,"process":1,"type":"invoke","f":"acquire","lock":"L0","value":{"ttl_ms":1000}}"#;

/// Process 1's acquire granted at `time_ns`, with `value` holding `fields` after the ttl.
fn grant(time_ns: &str, fields: &str) -> String {
    format!(
        r#"{{"index":1,"time_ns":{time_ns},"process":1,"type":"ok","f":"acquire","lock":"L0","value":{{"ttl_ms":1000{fields}}}}}"#
    )
}

/// A nemesis event at 20 ns whose `value` holds `fields`.
fn nemesis(f: &str, fields: &str) -> String {
    format!(
        r#"{{"index":1,"time_ns":20,"process":"nemesis","type":"info","f":"{f}","value":{{{fields}}}}}"#
    )
}

/// What the reader must make of `FIRST`, a newline, then a case's text.
enum Want {
    /// Refused: the line it names and words its reason must contain.
    Refused(u64, &'static str),
    /// Read: that many ops, and the line of the warning, if any.
    Read(usize, Option<u64>),
}

/// Each rule of the reader with a case it must refuse (naming the line) and the near-miss it
/// must accept.
fn reader_cases() -> Vec<(&'static str, String, Want)> {
    use Want::*;
    let line = |s: String| s + "\n";
    vec![
        // time_ns never goes back in file order
        (
            "time_ns going back",
            line(grant("9", "")),
            Refused(2, "time_ns 9 goes back (previous event's time_ns 10)"),
        ),
        (
            "time_ns equal to the previous event's",
            line(grant("10", "")),
            Read(2, None),
        ),
        (
            "time_ns going back after a blank line",
            format!("\n{}", line(grant("0", ""))),
            Refused(3, "time_ns 0 goes back"),
        ),
        // only a cut-off object, last and without newline, is forgiven
        (
            "an object cut off without a newline",
            grant("20", "")[..50].to_string(),
            Read(1, Some(2)),
        ),
        (
            "an object cut off inside a string",
            grant("20", "")[..75].to_string(),
            Read(1, Some(2)),
        ),
        (
            "a cut-off line with a newline",
            line(grant("20", "")[..50].to_string()),
            Refused(2, "EOF"),
        ),
        (
            "a complete last line that is not JSON",
            "{not json}\n".into(),
            Refused(2, "key must be a string"),
        ),
        (
            "a last line without newline that is not JSON",
            "{not json".into(),
            Refused(2, "key must be a string"),
        ),
        (
            "a last line without newline that is no object",
            "[1, 2".into(),
            Refused(2, ""),
        ),
        (
            "valid JSON but no op, with a newline",
            "{\"index\":1}\n".into(),
            Refused(2, "missing field `time_ns`"),
        ),
        (
            "valid JSON but no op, without newline",
            "{\"index\":1}".into(),
            Refused(2, "missing field `time_ns`"),
        ),
        ("a whole op without newline", grant("20", ""), Read(2, None)),
        // numbers are what the file says: the extremes are values, not \"absent\"
        (
            "a token of u64::MAX",
            line(grant(
                "20",
                r#","token":18446744073709551615,"seq":18446744073709551615"#,
            )),
            Read(2, None),
        ),
        (
            "a ttl_ms of u64::MAX",
            line(grant("20", "").replace(r#""ttl_ms":1000"#, r#""ttl_ms":18446744073709551615"#)),
            Read(2, None),
        ),
        (
            "a value of i64::MIN",
            line(grant("20", r#","value":-9223372036854775808"#)),
            Read(2, None),
        ),
        (
            "a token of 2^64",
            line(grant("20", r#","token":18446744073709551616"#)),
            Refused(2, "expected u64"),
        ),
        (
            "a negative token",
            line(grant("20", r#","token":-1"#)),
            Refused(2, "expected u64"),
        ),
        (
            "a fractional token",
            line(grant("20", r#","token":1.5"#)),
            Refused(2, "expected u64"),
        ),
        (
            "a token written as an exponent",
            line(grant("20", r#","token":1e3"#)),
            Refused(2, "expected u64"),
        ),
        (
            "a token as a string",
            line(grant("20", r#","token":"7""#)),
            Refused(2, "expected u64"),
        ),
        (
            "a ttl_ms of -1",
            line(grant("20", "").replace(r#""ttl_ms":1000"#, r#""ttl_ms":-1"#)),
            Refused(2, "expected u64"),
        ),
        (
            "a seq of 2^64",
            line(grant("20", r#","seq":18446744073709551616"#)),
            Refused(2, "expected u64"),
        ),
        (
            "a value of i64::MIN - 1",
            line(grant("20", r#","value":-9223372036854775809"#)),
            Refused(2, "expected i64"),
        ),
        (
            "a value of 2^63",
            line(grant("20", r#","value":9223372036854775808"#)),
            Refused(2, "expected i64"),
        ),
        (
            "a time_ns of 2^64",
            line(grant("18446744073709551616", "")),
            Refused(2, "expected u64"),
        ),
        // a known field of the wrong type names the field; the type it must have is read
        (
            "a token as a string, named",
            line(grant("20", r#","token":"7""#)),
            Refused(
                2,
                r#"invalid type: string "7", expected u64 in `value.token`"#,
            ),
        ),
        (
            "a lock as a number",
            line(grant("20", "").replace(r#""lock":"L0""#, r#""lock":0"#)),
            Refused(2, "expected a string in `lock`"),
        ),
        (
            "final as a string",
            line(grant("20", r#","final":"yes""#)),
            Refused(2, "expected a boolean in `value.final`"),
        ),
        (
            "lease_from_ns as a string",
            line(grant("20", r#","lease_from_ns":"5""#)),
            Refused(
                2,
                r#"invalid type: string "5", expected u64 in `value.lease_from_ns`"#,
            ),
        ),
        (
            "key_at_revision with a word the checkers do not know",
            line(grant(
                "20",
                r#","lock_key":"L0/1","answer_revision":7,"key_at_revision":"deleted""#,
            )),
            Refused(
                2,
                r#"invalid value: string "deleted", expected present, absent, compacted or unread in `value.key_at_revision`"#,
            ),
        ),
        (
            "lease_from_ns as a fraction",
            line(grant("20", r#","lease_from_ns":5.5"#)),
            Refused(2, "expected u64 in `value.lease_from_ns`"),
        ),
        (
            "lease_from_ns written with an exponent",
            line(grant("20", r#","lease_from_ns":5e3"#)),
            Refused(2, "expected u64 in `value.lease_from_ns`"),
        ),
        (
            "lease_last_ok_ns negative",
            line(grant("20", r#","lease_last_ok_ns":-1,"lease_ttl_ms":1000"#)),
            Refused(2, "expected u64 in `value.lease_last_ok_ns`"),
        ),
        (
            "lease_ttl_ms as a string",
            line(grant(
                "20",
                r#","lease_last_ok_ns":5,"lease_ttl_ms":"1000""#,
            )),
            Refused(2, "expected u64 in `value.lease_ttl_ms`"),
        ),
        (
            "answer_revision as a string",
            line(grant(
                "20",
                r#","lock_key":"k","answer_revision":"9","key_at_revision":"absent""#,
            )),
            Refused(2, "expected u64 in `value.answer_revision`"),
        ),
        (
            "key_at_revision as a boolean",
            line(grant(
                "20",
                r#","lock_key":"k","answer_revision":9,"key_at_revision":false"#,
            )),
            Refused(2, "expected a string in `value.key_at_revision`"),
        ),
        (
            "lock_key as an object",
            line(grant(
                "20",
                r#","lock_key":{"k":1},"answer_revision":9,"key_at_revision":"absent""#,
            )),
            Refused(2, "expected a string in `value.lock_key`"),
        ),
        (
            "lease_id as a number",
            line(grant("20", r#","lease_id":7"#)),
            Refused(2, "expected a string in `value.lease_id`"),
        ),
        (
            "round as a string",
            line(grant("20", r#","round":"3""#)),
            Refused(2, "expected u64 in `value.round`"),
        ),
        (
            "grant as a number",
            line(grant("20", r#","grant":12"#)),
            Refused(2, "expected a string in `value.grant`"),
        ),
        (
            "redis_offset as a string",
            line(grant(
                "20",
                r#","redis_node":"h:1","redis_role":"master","redis_offset":"4""#,
            )),
            Refused(2, "expected u64 in `value.redis_offset`"),
        ),
        (
            "redlock_nodes holding a number",
            line(grant(
                "20",
                r#","redlock_nodes":["n1",2],"redlock_validity_ms":900"#,
            )),
            Refused(
                2,
                "invalid type: integer `2`, expected an array of strings in `value.redlock_nodes`",
            ),
        ),
        (
            "every evidence field of its type, and null ones, is read",
            line(grant(
                "20",
                r#","grant":"g","lease_last_ok_ns":5,"lease_ttl_ms":1000,"lease_from_ns":4,"lease_gone_ns":null,"lease_id":"abc","redis_node":"h:1","redis_role":"master","redis_offset":0,"redlock_nodes":["n1"],"redlock_validity_ms":900,"lock_key":"k","answer_revision":9,"key_at_revision":"present","round":3,"fence":"any JSON at all""#,
            )),
            Read(2, None),
        ),
        (
            "an unknown field of any type is read",
            line(grant("20", r#","lease_from":"5","x":[1,{"y":2}]"#)),
            Read(2, None),
        ),
        // a nemesis event's fields have the types of docs/history.md's nemesis table
        (
            "a pause's nodes as a string",
            line(nemesis("start-pause", r#""nodes":"n1","fault":"f1""#)),
            Refused(
                2,
                r#"invalid type: string "n1", expected an array of strings in `value.nodes`"#,
            ),
        ),
        (
            "a kill's length_ms as a string",
            line(nemesis("kill", r#""nodes":["n1"],"length_ms":"500""#)),
            Refused(2, "expected u64 in `value.length_ms`"),
        ),
        (
            "a fault id as a number",
            line(nemesis("restart", r#""nodes":["n1"],"fault":1"#)),
            Refused(2, "expected a string in `value.fault`"),
        ),
        (
            "a stall's process negative",
            line(nemesis("start-client-pause", r#""process":-1,"lock":"L0""#)),
            Refused(2, "expected u64 in `value.process`"),
        ),
        (
            "a stall's lease_end_ns as a fraction",
            line(nemesis("start-client-pause", r#""process":1,"lease_end_ns":5.5"#)),
            Refused(2, "expected u64 in `value.lease_end_ns`"),
        ),
        (
            "a stall's shape as a number",
            line(nemesis("start-client-pause", r#""process":1,"shape":3"#)),
            Refused(2, "expected a string in `value.shape`"),
        ),
        (
            "a stall's token as a string (the view's own field)",
            line(nemesis("start-client-pause", r#""process":1,"token":"2""#)),
            Refused(2, "expected u64 in `value.token`"),
        ),
        (
            "a partition's cut with a link of three nodes",
            line(nemesis("start-partition", r#""cut":[["n1","n2","n3"]]"#)),
            Refused(2, "expected an array of pairs of strings in `value.cut`"),
        ),
        (
            "netem's loss_pct as a string",
            line(nemesis("start-netem", r#""netem":{"delay_ms":5,"loss_pct":"1"}"#)),
            Refused(2, "expected a number in `value.netem.loss_pct`"),
        ),
        (
            "netem as a string",
            line(nemesis("start-netem", r#""netem":"delay 5ms""#)),
            Refused(2, "expected an object in `value.netem`"),
        ),
        (
            "a clock's rate as a string",
            line(nemesis("start-clock", r#""mode":"fast","rate":"1.5""#)),
            Refused(2, "expected a number in `value.rate`"),
        ),
        (
            "an observed monotonic_ms negative",
            line(nemesis("clock-observed", r#""monotonic_ms":-4"#)),
            Refused(2, "expected u64 in `value.monotonic_ms`"),
        ),
        (
            "a nemesis event's value before its process",
            r#"{"index":1,"time_ns":20,"value":{"stall_ms":"9"},"process":"nemesis","type":"info","f":"start-client-pause"}"#.to_string() + "\n",
            Refused(2, "expected u64 in `value.stall_ms`"),
        ),
        (
            "every nemesis field of its type, null ones, and unknown ones are read",
            line(nemesis(
                "start-whatever",
                r#""nodes":["n1"],"roles":[],"length_ms":0,"fault":"f1","process":3,"lock":"L0","stall_ms":null,"shape":"sideways","wake":"nap","lease_end_ns":9,"after_ms":0,"acquire":4,"stalled_ms":1,"ended_by":"aim","next_grant_ns":8,"topology":"ring","cut":[["n1","n2"]],"clients_cut_from":["n2"],"netem":{"delay_ms":1,"jitter_ms":0,"loss_pct":0.5,"duplicate_pct":1,"reorder_pct":null,"rate":"x"},"mode":"fast","scope":"all","delta_ms":-5,"rate":2,"realtime_offset_ms":-1,"monotonic_ms":7,"observed_by":"vdso","token":1,"ttl_ms":5,"grant":"g","x":{"nodes":3}"#,
            )),
            Read(2, None),
        ),
        (
            "a client op's nemesis-named fields are unknown fields",
            line(grant("20", r#","nodes":"n1","cut":5,"netem":"x""#)),
            Read(2, None),
        ),
        // a key written twice in one object is refused, wherever it is
        (
            "index twice",
            line(grant("20", "").replace(r#""index":1,"#, r#""index":1,"index":1,"#)),
            Refused(2, "duplicate field `index`"),
        ),
        (
            "lock twice, differing",
            line(grant("20", "").replace(r#""lock":"L0""#, r#""lock":"L0","lock":"L1""#)),
            Refused(2, "duplicate field `lock`"),
        ),
        (
            "token twice in value",
            line(grant("20", r#","token":1,"token":2"#)),
            Refused(2, "duplicate field `value.token`"),
        ),
        (
            "evidence twice in value",
            line(grant("20", r#","lease_from_ns":1,"lease_from_ns":2"#)),
            Refused(2, "duplicate field `value.lease_from_ns`"),
        ),
        (
            "an unknown top-level field twice",
            line(grant("20", "").replace(r#""f":"#, r#""node":"n1","node":"n2","f":"#)),
            Refused(2, "duplicate field `node`"),
        ),
        (
            "a key twice in a nested object",
            line(grant("20", r#","netem":{"delay_ms":1,"delay_ms":2}"#)),
            Refused(2, "duplicate field `delay_ms`"),
        ),
        (
            "value twice",
            line(grant("20", "").replace(r#"}}"#, r#"},"value":{}}"#)),
            Refused(2, "duplicate field `value`"),
        ),
        (
            "the same key in two objects is no duplicate",
            line(
                grant("20", r#","token":1,"x":{"token":2}"#)
                    .replace(r#""f":"#, r#""token":3,"f":"#),
            ),
            Read(2, None),
        ),
    ]
}

#[test]
fn reader_rules_refuse_with_the_line_and_accept_their_near_misses() {
    for (why, rest, want) in reader_cases() {
        let got = read(&format!("{FIRST}\n{rest}"));
        match (want, got) {
            (Want::Refused(line, words), Err(e)) => {
                let e = e.to_string();
                assert!(e.starts_with(&format!("h.jsonl:{line}: ")), "{why}: {e}");
                assert!(e.contains(words), "{why}: {e}");
            }
            (Want::Read(n, warning), Ok((ops, warnings))) => {
                assert_eq!(ops.len(), n, "{why}");
                assert_eq!(
                    warnings.iter().map(|w| w.line).collect::<Vec<_>>(),
                    Vec::from_iter(warning),
                    "{why}"
                );
            }
            (_, got) => panic!("{why}: got {got:?}"),
        }
    }
}

#[test]
fn extreme_numbers_are_read_as_themselves() {
    // In the writer's field order, so that writing it back gives the same text.
    let text = format!(
        "{FIRST}\n{}\n",
        r#"{"index":1,"time_ns":18446744073709551615,"process":1,"type":"ok","f":"acquire","lock":"L0","value":{"token":18446744073709551615,"ttl_ms":18446744073709551615,"value":-9223372036854775808,"seq":18446744073709551615}}"#
    );
    let (ops, _) = read(&text).unwrap();
    let v = &ops[1].value;
    assert_eq!(ops[1].time_ns, u64::MAX);
    assert_eq!(
        (v.token, v.ttl_ms, v.seq),
        (Some(u64::MAX), Some(u64::MAX), Some(u64::MAX))
    );
    assert_eq!(v.value, Some(i64::MIN));
    // And written back as the same numbers.
    let mut w = HistoryWriter::new(Vec::new());
    for op in &ops {
        w.write(op).unwrap();
    }
    assert_eq!(String::from_utf8(w.into_inner().unwrap()).unwrap(), text);
}

#[test]
fn structure_refuses_a_time_that_goes_back_and_accepts_an_equal_one() {
    use OpType::*;
    let at = |index, time_ns, kind| Op::new(index, time_ns, Process::Client(1), kind, F::Acquire);
    let e = History::new(vec![at(0, 10, Invoke), at(1, 9, Ok)]).unwrap_err();
    assert_eq!(e.index, 1);
    assert!(e.reason.contains("time_ns 9 goes back"), "{e}");
    assert!(History::new(vec![at(0, 10, Invoke), at(1, 10, Ok)]).is_ok());
}

#[test]
#[should_panic(expected = "time_ns 9 goes back")]
fn the_writer_refuses_to_write_a_time_that_goes_back() {
    let mut w = HistoryWriter::new(Vec::new());
    w.write(&Op::new(
        0,
        10,
        Process::Client(1),
        OpType::Invoke,
        F::Acquire,
    ))
    .unwrap();
    let _ = w.write(&Op::new(1, 9, Process::Client(1), OpType::Ok, F::Acquire));
}

/// A history built in memory is held to the types the reader holds a file to, in its words.
#[test]
fn history_new_refuses_evidence_of_the_wrong_type_in_the_readers_words() {
    use history::OpValue;
    use serde_json::json;
    let grant = |v: serde_json::Value| {
        let invoke = Op::new(0, 10, Process::Client(1), OpType::Invoke, F::Acquire).with_lock("L0");
        let ok = Op::new(1, 20, Process::Client(1), OpType::Ok, F::Acquire)
            .with_lock("L0")
            .with_value(
                OpValue::default()
                    .with_token(1)
                    .with_extra("lease_from_ns", v),
            );
        History::new(vec![invoke, ok])
    };
    let e = grant(json!("5")).unwrap_err().to_string();
    assert_eq!(
        e,
        r#"op index 1: invalid type: string "5", expected u64 in `value.lease_from_ns`"#
    );
    let line = r#"{"index":1,"time_ns":20,"process":1,"type":"ok","f":"acquire","lock":"L0","value":{"token":1,"lease_from_ns":"5"}}"#;
    let file = read(&format!("{FIRST}\n{line}\n")).unwrap_err().to_string();
    assert!(
        file.starts_with(&format!("h.jsonl:2: {}", &e["op index 1: ".len()..])),
        "{file}"
    );
    assert!(grant(json!(5)).is_ok());
    assert!(grant(json!(null)).is_ok());
}

/// A nemesis event built in memory is held to the nemesis table's types, in the reader's words;
/// the same field on a client op is an unknown field.
#[test]
fn history_new_refuses_nemesis_fields_of_the_wrong_type_in_the_readers_words() {
    use history::OpValue;
    use serde_json::json;
    let stall = |process: Process, v: serde_json::Value| {
        let f = match process {
            Process::Nemesis => F::from("start-client-pause"),
            Process::Client(_) => F::Acquire,
        };
        History::new(vec![Op::new(0, 10, process, OpType::Info, f)
            .with_value(OpValue::default().with_extra("stall_ms", v))])
    };
    let e = stall(Process::Nemesis, json!("5")).unwrap_err().to_string();
    assert_eq!(
        e,
        r#"op index 0: invalid type: string "5", expected u64 in `value.stall_ms`"#
    );
    let line = r#"{"index":0,"time_ns":10,"process":"nemesis","type":"info","f":"start-client-pause","value":{"stall_ms":"5"}}"#;
    let file = read(&format!("{line}\n")).unwrap_err().to_string();
    assert!(
        file.starts_with(&format!("h.jsonl:1: {}", &e["op index 0: ".len()..])),
        "{file}"
    );
    assert!(stall(Process::Nemesis, json!(5)).is_ok());
    assert!(stall(Process::Nemesis, json!(null)).is_ok());
    // On a client op it is unknown: only the pairing's rules apply (an info op that was never
    // invoked is refused for that, not for the field).
    let e = stall(Process::Client(1), json!("5"))
        .unwrap_err()
        .to_string();
    assert!(!e.contains("stall_ms"), "{e}");
}
