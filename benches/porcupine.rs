//! Porcupine side by side (issue 22, item 6): the same single-lock histories checked by
//! `lockpick check` and by Porcupine (a linearizability checker in Go) with the lease-lock model
//! in benches/porcupine/main.go, at sizes growing by half until Porcupine no longer finishes
//! within 60 s or passes 10 GiB (it is ended there, so it never takes the machine's memory).
//! Prints a table for BENCHMARKS.md: wall time and peak RSS of each (lockpick's the median of
//! 3), and the ratio of the two times.
//!
//! Porcupine is not vendored: give a checkout of github.com/anishathalye/porcupine (or a bare
//! clone of it: its HEAD is used).
//!
//! Run: `cargo bench --bench porcupine -- PORCUPINE_CHECKOUT [FIRST_EVENTS] [MAX_EVENTS]`
//! (default 25,000 growing by half up to 25.6M events). Needs `go` and `/usr/bin/time`.

use std::path::Path;
use std::process::Command;

mod common;
use common::{median, status_kb};

const BIN: &str = env!("CARGO_BIN_EXE_lockpick");
/// Porcupine's budget per history: past it, the history is too large for it.
const PORCUPINE_TIMEOUT_S: u64 = 60;
/// Porcupine's memory grows faster than its history (4.7 GB at 400k events): past this it is
/// ended, so that it never takes the machine's memory from everything else.
const PORCUPINE_RSS_MAX_KB: u64 = 10 * 1024 * 1024;

/// Runs the Go side on `history`, watching its memory: its stdout (empty if it was ended),
/// wall seconds and peak RSS in MB, and why it was ended, if it was.
fn porcupine_run(exe: &Path, history: &Path) -> (String, f64, f64, Option<&'static str>) {
    let began = std::time::Instant::now();
    let mut child = Command::new(exe)
        .arg(history)
        .arg(PORCUPINE_TIMEOUT_S.to_string())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the Go side runs");
    let pid = child.id();
    let mut peak_kb = 0;
    let mut ended = None;
    // Bounded by the timeout (plus a grace for its own) and the memory cap.
    while child.try_wait().unwrap().is_none() {
        peak_kb = peak_kb.max(status_kb(pid, "VmHWM:").unwrap_or(0));
        if peak_kb > PORCUPINE_RSS_MAX_KB {
            ended = Some("over the memory cap");
        } else if began.elapsed().as_secs() > PORCUPINE_TIMEOUT_S + 5 {
            ended = Some("over the time budget");
        }
        if ended.is_some() {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("the Go side is reaped");
    let wall = began.elapsed().as_secs_f64();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        wall,
        peak_kb as f64 / 1024.0,
        ended,
    )
}

/// Runs `cmd` under `/usr/bin/time`: its stdout, wall seconds and peak RSS in MB.
fn timed(cmd: &mut Command) -> (String, f64, f64) {
    let mut timed = Command::new("/usr/bin/time");
    timed
        .arg("-f")
        .arg("%e %M")
        .arg(cmd.get_program())
        .args(cmd.get_args());
    let out = timed.output().expect("/usr/bin/time runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stderr.lines().last().unwrap_or_default();
    let mut fields = last.split_whitespace();
    let wall: f64 = fields
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(f64::NAN);
    let rss_kb: f64 = fields
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(f64::NAN);
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        wall,
        rss_kb / 1024.0,
    )
}

/// Builds the Go side in `dir` against the checkout: nothing is downloaded.
fn build_porcupine(checkout: &Path, dir: &Path) -> std::path::PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/porcupine");
    for file in ["main.go", "go.mod"] {
        std::fs::copy(src.join(file), dir.join(file)).expect("the Go side copies");
    }
    if checkout.join("go.mod").exists() {
        std::os::unix::fs::symlink(checkout, dir.join("porcupine-src")).expect("symlink");
    } else {
        // A bare repository (a mirror): its HEAD's files.
        let archive = Command::new("git")
            .arg("--git-dir")
            .arg(checkout)
            .args(["archive", "--prefix=porcupine-src/", "HEAD"])
            .output()
            .expect("git runs");
        assert!(
            archive.status.success(),
            "{} is neither a checkout nor a repository",
            checkout.display()
        );
        let mut tar = Command::new("tar")
            .args(["-x", "-C"])
            .arg(dir)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("tar runs");
        std::io::Write::write_all(tar.stdin.as_mut().unwrap(), &archive.stdout).unwrap();
        assert!(tar.wait().unwrap().success(), "the archive unpacks");
    }
    let exe = dir.join("porcupine-side-by-side");
    let status = Command::new("go")
        .args(["build", "-o"])
        .arg(&exe)
        .arg(".")
        .current_dir(dir)
        .env("GOFLAGS", "-mod=mod")
        .env("GOPROXY", "off")
        .status()
        .expect("go runs");
    assert!(status.success(), "the Go side builds");
    exe
}

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let Some(checkout) = args.next() else {
        eprintln!(
            "porcupine bench: give a checkout of github.com/anishathalye/porcupine: \
             cargo bench --bench porcupine -- DIR [FIRST_EVENTS] [MAX_EVENTS]"
        );
        std::process::exit(2);
    };
    let first: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(25_000);
    let max: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(25_600_000);
    let tmp = tempfile::tempdir().unwrap();
    let porcupine = build_porcupine(Path::new(&checkout), tmp.path());
    let history = tmp.path().join("h.jsonl");
    println!(
        "| events | lock ops given to Porcupine | Porcupine | Porcupine peak | lockpick check \
         (median of 3) | lockpick peak | Porcupine / lockpick |"
    );
    println!("|---|---|---|---|---|---|---|");
    let mut events = first;
    // Bounded by MAX_EVENTS and by Porcupine's first timeout.
    while events <= max {
        let synth = Command::new(BIN)
            .args([
                "synth",
                "--events",
                &events.to_string(),
                "--clients",
                "8",
                "--locks",
                "1",
            ])
            .args(["--seed", "5", "--info-rate", "0", "--no-nemesis", "--out"])
            .arg(&history)
            .output()
            .expect("synth runs");
        assert!(synth.status.success(), "synth writes the history");
        let (said, p_wall, p_rss, ended) = porcupine_run(&porcupine, &history);
        let mut words = said.split_whitespace();
        let verdict = words.next().unwrap_or("failed").to_string();
        let lock_ops = words.next().unwrap_or("?").to_string();
        let mut walls = Vec::new();
        let mut rss = Vec::new();
        for _ in 0..3 {
            let (out, wall, peak) = timed(Command::new(BIN).arg("check").arg(&history));
            assert!(
                out.contains("verdict: VALID"),
                "lockpick finds the history valid: {out}"
            );
            walls.push(wall);
            rss.push(peak);
        }
        let l_wall = median(walls);
        let finished = verdict == "ok" && p_wall <= PORCUPINE_TIMEOUT_S as f64;
        let p_time = match ended {
            _ if finished => format!("{p_wall:.2} s"),
            Some(why) => format!("ended {why} after {p_wall:.1} s"),
            None => format!("{verdict} after {p_wall:.1} s"),
        };
        println!(
            "| {events} | {lock_ops} | {p_time} | {p_rss:.0} MB | {l_wall:.2} s | {:.0} MB | {} |",
            median(rss),
            if finished {
                format!("{:.0}x", p_wall / l_wall.max(0.005))
            } else {
                "-".into()
            },
        );
        if !finished {
            break;
        }
        events = events * 3 / 2;
    }
}
