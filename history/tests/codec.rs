//! The JSONL codec against DESIGN.md's example and the bad inputs a reader must survive.

use history::{read_ops_from, History, HistoryWriter, Op, OpType, Outcome, Process, ReadError, F};
use std::path::Path;

const DESIGN_EXAMPLE: &str = r#"{"index":0,"time_ns":1200,"process":3,"type":"invoke","f":"acquire","lock":"L0","value":{"ttl_ms":2000}}
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
    let (ops, warnings) = read(DESIGN_EXAMPLE).unwrap();
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
    assert_eq!(out, DESIGN_EXAMPLE);
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
    let text = format!("{}\n{{\"index\":9,\"time_ns\":1,\"process\":1,\"type\":\"bogus\",\"f\":\"acquire\"}}\n{{}}\n", DESIGN_EXAMPLE.lines().next().unwrap());
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
    let cut = &DESIGN_EXAMPLE[..DESIGN_EXAMPLE.len() - 20];
    let (ops, warnings) = read(cut).unwrap();
    assert_eq!(ops.len(), 8);
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0].line, 9);
}

#[test]
fn a_bad_line_in_the_middle_is_not_excused_as_truncation() {
    let mut lines: Vec<&str> = DESIGN_EXAMPLE.lines().collect();
    lines[3] = r#"{"index":3,"time_ns":1100000,"proc"#;
    let err = read(&(lines.join("\n") + "\n")).unwrap_err().to_string();
    assert!(err.starts_with("h.jsonl:4: "), "{err}");
}

#[test]
fn a_complete_final_line_without_newline_is_fine() {
    let (ops, warnings) = read(DESIGN_EXAMPLE.trim_end()).unwrap();
    assert_eq!(ops.len(), 9);
    assert!(warnings.is_empty());
}

#[test]
fn index_must_ascend() {
    let mut lines: Vec<&str> = DESIGN_EXAMPLE.lines().collect();
    lines.swap(1, 2);
    let err = read(&lines.join("\n")).unwrap_err().to_string();
    assert!(
        err.starts_with("h.jsonl:3: ") && err.contains("ascend"),
        "{err}"
    );
}

#[test]
fn blank_lines_are_skipped() {
    let text = DESIGN_EXAMPLE.replace('\n', "\n\n");
    assert_eq!(read(&text).unwrap().0.len(), 9);
}

#[test]
fn pairs_operations_and_outcomes() {
    let (ops, _) = read(DESIGN_EXAMPLE).unwrap();
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

/// The parallel reader must agree with the streaming one on every rule, whatever the block and
/// piece boundaries: many lines, so the input spans several pieces per thread.
#[test]
fn parallel_reader_agrees_with_streaming_reader_on_large_input() {
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

    // A cut final line is a warning, also on the large path.
    let cut = &text[..text.len() - 7];
    let (ops, warnings) = read(cut).unwrap();
    assert_eq!(ops.len() as u64, n - 1);
    assert_eq!(warnings[0].line, n);
}
