//! Results are identical across thread counts and runs: the same history checked with one CPU
//! (`taskset -c 0`: the parser then runs one thread) and with all of them, twice, gives the
//! same results.json, byte for byte.

mod common;

use common::{run_with_limit, BIN};
use std::process::Command;
use std::time::Duration;

#[test]
fn check_output_does_not_depend_on_threads_or_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let h = tmp.path().join("h.jsonl");
    for (events, inject) in [("200000", None), ("200000", Some("double-grant"))] {
        let mut args = vec![
            "synth",
            "--events",
            events,
            "--seed",
            "3",
            "--out",
            h.to_str().unwrap(),
        ];
        if let Some(k) = inject {
            args.extend(["--inject", k]);
        }
        let o = run_with_limit(&args, Duration::from_secs(120));
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let all = |_: ()| {
            let o = run_with_limit(
                &["check", "--json", h.to_str().unwrap()],
                Duration::from_secs(120),
            );
            assert!(matches!(o.status.code(), Some(0 | 1)));
            o.stdout
        };
        let first = all(());
        assert_eq!(first, all(()), "two runs differ");
        let one_cpu = Command::new("taskset")
            .args(["-c", "0", BIN, "check", "--json", h.to_str().unwrap()])
            .output()
            .expect("taskset (util-linux) runs");
        assert!(matches!(one_cpu.status.code(), Some(0 | 1)));
        assert_eq!(
            first, one_cpu.stdout,
            "one CPU and all CPUs differ ({inject:?})"
        );
        let v: serde_json::Value = serde_json::from_slice(&first).unwrap();
        assert_eq!(
            v["valid"],
            serde_json::json!(inject.is_none()),
            "{inject:?}"
        );
    }
}
