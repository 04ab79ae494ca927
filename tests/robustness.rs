//! Bad input and hostile conditions: clear one-line errors with exit 3, and nothing recorded
//! is ever lost.

mod common;

use common::{processes_mentioning, require_python, run, run_with_limit, write_script, BIN};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn unknown_flag_exits_3_with_one_line() {
    let o = run_with_limit(&["run", "--frobnicate"], Duration::from_secs(10));
    assert_eq!(o.status.code(), Some(3));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.lines().next().unwrap().contains("--frobnicate"),
        "{err}"
    );
}

#[test]
fn bad_flag_value_names_the_flag() {
    let o = run_with_limit(&["run", "--ttl", "soon"], Duration::from_secs(10));
    assert_eq!(o.status.code(), Some(3));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--ttl") && err.lines().count() == 1, "{err}");
    let o = run_with_limit(
        &["run", "--nemesis", "pause,partiton"],
        Duration::from_secs(10),
    );
    assert_eq!(o.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&o.stderr).contains("partiton"));
    // Values that mean nothing are refused before a run directory exists, one line each.
    for (args, said) in [
        (["--ops-max", "0"], "--ops-max 0: must be at least 1"),
        (
            ["--nemesis-interval", "0s"],
            "--nemesis-interval 0s: must be at least 1ms",
        ),
        (
            ["--duration", "1us"],
            "--duration 1us: must be at least 1ms",
        ),
        // A value starting with `-` is the flag's value, refused naming the flag.
        (
            ["--duration", "-1s"],
            "--duration \"-1s\": expected a duration",
        ),
        (
            ["--drift", "-1"],
            "--drift -1: expected a fraction in [0, 1)",
        ),
        // Finer than a ppm: the checkers' bounds are whole ppm, so it would be rounded.
        (
            ["--drift", "0.0000001"],
            "--drift 0.0000001: at most six decimals",
        ),
        (["--url", "notaurl"], "--url \"notaurl\": not a URL"),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("runs");
        let mut all = vec!["run", "--out", out.to_str().unwrap()];
        all.extend(args);
        let o = run_with_limit(&all, Duration::from_secs(10));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(3), "{args:?}: {err}");
        assert!(
            err.contains(said) && err.lines().count() == 1,
            "{args:?}: {err}"
        );
        assert!(!out.exists(), "{args:?}: a run directory was made");
    }
}

#[test]
fn server_side_faults_against_a_url_are_refused_up_front() {
    let o = run_with_limit(
        &["run", "--url", "http://127.0.0.1:9", "--nemesis", "pause"],
        Duration::from_secs(10),
    );
    assert_eq!(o.status.code(), Some(3));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--url") && err.contains("pause"), "{err}");
}

#[test]
fn malformed_history_line_exits_3_naming_file_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("h.jsonl");
    std::fs::write(
        &p,
        "{\"index\":0,\"time_ns\":1,\"process\":1,\"type\":\"invoke\",\"f\":\"acquire\",\"lock\":\"L\"}\n\
         {\"index\":1,\"time_ns\":2,\"process\":1,\"type\":\"okay\",\"f\":\"acquire\",\"lock\":\"L\"}\n",
    )
    .unwrap();
    let o = run_with_limit(&["check", p.to_str().unwrap()], Duration::from_secs(10));
    assert_eq!(o.status.code(), Some(3));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&format!("{}:2:", p.display())), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// What one command made of a history: `Err(its one-line message)` when it exits 3, else
/// `Ok(stderr)`.
fn refusal(o: &std::process::Output) -> Result<String, String> {
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    if o.status.code() != Some(3) {
        return Ok(err);
    }
    assert_eq!(err.lines().count(), 1, "{err}");
    Err(err.trim_end().trim_start_matches("error: ").to_string())
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// `check`, `report` and `export` read a history through the one reader: each case is accepted
/// by all three or refused by all three in the same words, naming the line (the structure
/// rules name the op). `export` used to refuse the first four cases, which `check` accepted.
#[test]
fn check_report_and_export_accept_and_refuse_the_same_histories() {
    let first = r#"{"index":0,"time_ns":10,"process":1,"type":"invoke","f":"acquire","lock":"L0","value":{"ttl_ms":1000}}"#;
    // The grant of the first line's acquire, with `value` fields and top-level fields added.
    let ok = |value: &str, top: &str| -> Vec<u8> {
        format!(
            r#"{{"index":1,"time_ns":20,"process":1,"type":"ok","f":"acquire","lock":"L0","value":{{"ttl_ms":1000{value}}}{top}}}"#
        )
        .into_bytes()
    };
    let line = |b: Vec<u8>| [b, b"\n".to_vec()].concat();
    let edit = |from: &str, to: &str| {
        line(
            String::from_utf8(ok("", ""))
                .unwrap()
                .replace(from, to)
                .into_bytes(),
        )
    };
    let deep = format!(r#","x":{}{}"#, "[".repeat(200), "]".repeat(200));
    // (why, what follows the first line, `Some(what the refusal names)` or `None` to accept)
    let cases: Vec<(&str, Vec<u8>, Option<&str>)> = vec![
        (
            "a number out of f64's range, unknown field",
            line(ok(r#","lease_id":1e400"#, "")),
            Some(":2: "),
        ),
        (
            "a lone surrogate, unknown field",
            line(ok("", r#","node":"\ud800""#)),
            Some(":2: "),
        ),
        (
            "invalid UTF-8, unknown field",
            line(
                ok("", r#","node":"?""#)
                    .into_iter()
                    .map(|b| if b == b'?' { 0xff } else { b })
                    .collect(),
            ),
            Some(":2: "),
        ),
        (
            "nesting deeper than serde_json's limit",
            line(ok("", &deep)),
            Some(":2: "),
        ),
        (
            "a token of 2^64",
            line(ok(r#","token":18446744073709551616"#, "")),
            Some(":2: "),
        ),
        (
            "a token of u64::MAX is a token",
            line(ok(r#","token":18446744073709551615"#, "")),
            None,
        ),
        (
            "time_ns going back",
            edit(r#""time_ns":20"#, r#""time_ns":9"#),
            Some(":2: time_ns 9 goes back"),
        ),
        (
            "time_ns equal to the previous event's",
            edit(r#""time_ns":20"#, r#""time_ns":10"#),
            None,
        ),
        (
            "a complete last line that is no op",
            line(br#"{"index":1}"#.to_vec()),
            Some(":2: "),
        ),
        (
            "valid JSON but no op, last line without newline",
            br#"{"index":1}"#.to_vec(),
            Some(":2: "),
        ),
        (
            "an object cut off, without newline",
            ok("", "")[..40].to_vec(),
            None,
        ),
        (
            "a completion without an invoke",
            edit(r#""process":1"#, r#""process":2"#),
            Some(":2: op index 1: ok for process 2"),
        ),
    ];
    let tmp = tempfile::tempdir().unwrap();
    // A results.json for `report`, from the first line alone.
    std::fs::write(tmp.path().join("history.jsonl"), format!("{first}\n")).unwrap();
    let base = run_with_limit(
        &[
            "check",
            "--json",
            tmp.path().join("history.jsonl").to_str().unwrap(),
        ],
        Duration::from_secs(10),
    );
    // `report` exits as `check` did on the history its results.json is of.
    let base_code = base.status.code();
    // Each case's results.json is of the first line alone, the one history every case starts
    // with: written without `judged_from`, as a results.json from before that field, so its
    // staleness goes by mtime (written after the history: current) and `report` renders it
    // whatever follows in the history (tests/run_dir.rs covers the content check).
    let base_json = {
        let mut v: serde_json::Value = serde_json::from_slice(&base.stdout).expect("results");
        v.as_object_mut().unwrap().remove("judged_from");
        serde_json::to_vec_pretty(&v).unwrap()
    };
    for (i, (why, rest, refused)) in cases.iter().enumerate() {
        let dir = tmp.path().join(format!("case{i}"));
        std::fs::create_dir(&dir).unwrap();
        let history = dir.join("history.jsonl");
        std::fs::write(&history, [format!("{first}\n").as_bytes(), rest].concat()).unwrap();
        std::fs::write(dir.join("results.json"), &base_json).unwrap();
        let d = dir.to_str().unwrap();
        let check = refusal(&run_with_limit(&["check", d], Duration::from_secs(10)));
        let export = refusal(&run_with_limit(&["export", d], Duration::from_secs(10)));
        let report = run_with_limit(&["report", d], Duration::from_secs(10));
        assert_eq!(report.status.code(), base_code, "{why}: {report:?}");
        let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
        match (refused, &check, &export) {
            (Some(names), Err(msg), Err(same)) => {
                assert_eq!(msg, same, "{why}: check and export word it differently");
                let file_line = format!("{}{names}", history.display());
                assert!(msg.starts_with(&file_line), "{why}: {msg}");
                let shown = format!("No timeline: {}", html_escape(msg));
                assert!(html.contains(&shown), "{why}: report.html lacks {shown:?}");
            }
            (None, Ok(_), Ok(_)) => {
                assert!(
                    !html.contains("No timeline:"),
                    "{why}: report.html has no timeline"
                );
                assert!(dir.join("history.edn").is_file(), "{why}");
            }
            _ => panic!("{why}: expected {refused:?}; check {check:?}, export {export:?}"),
        }
    }
}

#[test]
fn check_json_prints_results_and_exit_code_follows_the_verdict() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("empty.jsonl");
    std::fs::write(&p, "").unwrap();
    let o = run_with_limit(
        &["check", "--json", p.to_str().unwrap()],
        Duration::from_secs(10),
    );
    assert_eq!(o.status.code(), Some(2), "an empty history proves nothing");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["valid"], serde_json::Value::Null);
    // Why, once for the run: not a note repeated under each checker.
    assert_eq!(
        v["notes"][0], "the history is empty: it proves nothing",
        "{v}"
    );
    let per_checker: Vec<&serde_json::Value> = v["checkers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["notes"].to_string().contains("is empty"))
        .collect();
    assert!(per_checker.is_empty(), "{per_checker:?}");
    // The summary says it beside the verdict, once.
    let o = run_with_limit(&["check", p.to_str().unwrap()], Duration::from_secs(10));
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(
        said.starts_with("verdict: UNKNOWN (the history is empty: it proves nothing)\n")
            && said.matches("is empty").count() == 1,
        "{said}"
    );
}

/// A service that answers health but garbles every lock op: bad JSON, 500s, or silence.
const HOSTILE: &str = r#"
import http.server, json, sys, time, itertools
counter = itertools.count()
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def reply(self, code, body):
        b = body.encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def do_GET(self):
        self.reply(200, json.dumps({"ok": True}))
    def do_POST(self):
        n = int(self.headers.get("Content-Length", 0))
        self.rfile.read(n)
        k = next(counter) % 4
        if k == 0: self.reply(200, "this is not json")
        elif k == 1: self.reply(500, "internal error")
        elif k == 2: time.sleep(1.5); self.reply(200, "{}")
        else: self.reply(409, "{\"error\":\"held\"}")
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"#;

#[test]
fn garbage_answers_are_refused_by_the_probe_and_recorded_with_their_reasons() {
    if !require_python() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let script = write_script(tmp.path(), "hostile.py", HOSTILE);
    let cmd = format!("python3 {} {{port}}", script.display());
    let out = tmp.path().join("runs");
    let args = [
        "--node-cmd",
        &cmd,
        "--workload",
        "mutex",
        "--nemesis",
        "none",
        "--duration",
        "4s",
        "--op-timeout",
        "500ms",
        // Past the op timeout, a slow answer is a timeout: no acquire wait to cover it.
        "--acquire-wait",
        "0s",
        "--clients",
        "3",
    ];
    // Conformance first: its first grant is not JSON.
    let r = run(&out, &args, Duration::from_secs(60));
    assert_eq!(
        r.code,
        3,
        "expected the probe to refuse it; {}",
        r.describe()
    );
    assert!(
        r.stderr
            .contains("probe: POST /v1/locks/lockpick-probe/acquire (probe-1) answered"),
        "{}",
        r.describe()
    );
    // Past the probe, every answer is recorded with its reason; the run reaches a verdict, or
    // stops on the unexpected answers (half of them are) in one line saying so.
    let mut args = args.to_vec();
    args.push("--no-probe");
    let r = run(&out, &args, Duration::from_secs(60));
    assert!(
        (0..=2).contains(&r.code)
            || (r.code == 3 && r.stderr.contains("adapter does not understand")),
        "expected a verdict or the watch's stop; {}",
        r.describe()
    );
    let res = r.results();
    let acquire = &res["stats"]["ops"]["acquire"];
    assert!(acquire["info"].as_u64().unwrap_or(0) > 0, "{res}");
    assert!(acquire["fail"].as_u64().unwrap_or(0) > 0, "{res}");
    let history = std::fs::read_to_string(r.run_dir().join("history.jsonl")).unwrap();
    assert!(
        history.contains("bad-body"),
        "unreadable 200 not recorded as such"
    );
    assert!(history.contains("http-500"));
    assert!(history.contains("timeout"));
    // The breakdown by reason: a refusal is `held`, the rest what the answer was.
    let reasons = &res["stats"]["reasons"]["acquire"];
    assert!(
        reasons["fail"]["held"].as_u64().unwrap_or(0) > 0,
        "{reasons}"
    );
    assert!(
        reasons["info"]["http-500"].as_u64().unwrap_or(0) > 0,
        "{reasons}"
    );
}

#[test]
fn a_node_that_never_answers_health_is_a_setup_error() {
    let tmp = tempfile::tempdir().unwrap();
    let r = run(
        &tmp.path().join("runs"),
        &[
            "--node-cmd",
            "sleep 30",
            "--startup-timeout",
            "1s",
            "--duration",
            "2s",
        ],
        Duration::from_secs(30),
    );
    assert_eq!(r.code, 3, "{}", r.describe());
    assert!(r.stderr.contains("n1"), "{}", r.describe());
    // The run directory exists by then: the reason is written into it, not only printed.
    let dir = r.run_dir();
    let log = std::fs::read_to_string(dir.join("lockpick.log")).unwrap();
    assert!(
        log.contains("the run failed") && log.contains("n1"),
        "{log}"
    );
    let summary = std::fs::read_to_string(dir.join("summary.txt")).unwrap();
    assert!(
        summary.starts_with("run: INCOMPLETE (error): "),
        "{summary}"
    );
    assert!(summary.lines().next().unwrap().contains("n1"), "{summary}");
    let res = r.results();
    assert_eq!(res["completeness"]["state"], "error", "{res}");
    assert_eq!(res["valid"], serde_json::Value::Null, "{res}");
}

#[test]
fn kill_9_of_the_harness_leaves_a_readable_history_and_no_stopped_child() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("runs");
    let mut child = Command::new(BIN)
        .args([
            "run",
            "--out",
            out.to_str().unwrap(),
            "--nemesis",
            "pause",
            "--nemesis-interval",
            "300ms",
            "--ttl",
            "1s",
            "--duration",
            "30s",
            "--seed",
            "11",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the service is paused (a start-pause with no stop-pause after it).
    let start = Instant::now();
    let history = loop {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no pause seen in 20 s"
        );
        std::thread::sleep(Duration::from_millis(50));
        let Ok(link) = std::fs::read_link(out.join("latest")) else {
            continue;
        };
        let h = out.join(link).join("history.jsonl");
        let text = std::fs::read_to_string(&h).unwrap_or_default();
        if text.rfind("start-pause").unwrap_or(0) > text.rfind("stop-pause").unwrap_or(0) {
            break h;
        }
    };
    let run_dir = history.parent().unwrap().to_path_buf();
    let needle = run_dir.display().to_string();
    // The nemesis writes `start-pause` first and then signals: the stop lands a moment later.
    let mut paused = processes_mentioning(&needle);
    for _ in 0..100 {
        if paused.iter().any(|(_, s)| *s == 'T') {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
        paused = processes_mentioning(&needle);
    }
    assert!(
        paused.iter().any(|(_, s)| *s == 'T'),
        "lockd not stopped: {paused:?}"
    );
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // The children die with the harness (PDEATHSIG), even the stopped one.
    let start = Instant::now();
    while !processes_mentioning(&needle).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "children left behind: {:?}",
            processes_mentioning(&needle)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = run_with_limit(
        &["check", run_dir.to_str().unwrap()],
        Duration::from_secs(20),
    );
    assert!(
        (0..=2).contains(&o.status.code().unwrap()),
        "check failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}
