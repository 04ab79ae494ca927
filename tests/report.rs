//! End-to-end tests of the reports: runs and hand-made run directories rendered by the real
//! binary, then loaded in a real headless Chromium driven over the DevTools protocol (through
//! `--remote-debugging-pipe`, so no port and no extra crate), which checks what a reader's
//! browser would do: no console error, no request, one card per violation, a non-blank
//! picture, and no element injected by a hostile string.

mod common;

use common::{run, run_with_limit, BIN};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A headless Chromium driven over the DevTools protocol on fds 3 and 4.
mod browser {
    use serde_json::{json, Value};
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::process::CommandExt;
    use std::path::{Path, PathBuf};
    use std::process::{Child, ChildStdin, Command, Stdio};
    use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
    use std::time::{Duration, Instant};

    pub struct Chromium {
        child: Child,
        input: ChildStdin,
        messages: Receiver<Value>,
        next_id: u64,
        /// Events received while waiting for replies, in order.
        pub events: Vec<Value>,
        _profile: tempfile::TempDir,
    }

    /// A loaded page.
    pub struct Page {
        pub session: String,
        pub load: Duration,
        /// Console errors, uncaught exceptions and browser log errors (CSP violations land here).
        pub errors: Vec<String>,
        /// Every URL the page asked for, the page itself included.
        pub requests: Vec<String>,
    }

    fn find() -> Option<PathBuf> {
        ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
    }

    /// Starts Chromium, or returns None (after a visible SKIPPED line) when it is not
    /// installed; under LOCKPICK_SYSTEM_TESTS=1 a missing Chromium fails the test.
    pub fn launch() -> Option<Chromium> {
        let Some(exe) = find() else {
            if std::env::var("LOCKPICK_SYSTEM_TESTS").as_deref() == Ok("1") {
                panic!(
                    "chromium is required under LOCKPICK_SYSTEM_TESTS=1 (apt-get install chromium)"
                );
            }
            eprintln!("SKIPPED: chromium not found (apt-get install chromium)");
            return None;
        };
        let profile = tempfile::tempdir().unwrap();
        // fd 3 = what we write (our stdin pipe), fd 4 = what we read (our stdout pipe): the
        // shell wires them and execs, so the pid we hold is Chromium's.
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(r#"exec "$0" "$@" 3<&0 4>&1 0</dev/null 1>/dev/null"#)
            .arg(exe)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                "--disable-default-apps",
                "--hide-scrollbars",
                "--remote-debugging-pipe",
                "--window-size=1200,1600",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            // Its own process group, so every helper process it forks can be ended with it.
            .process_group(0)
            .spawn()
            .expect("spawn chromium");
        let input = child.stdin.take().unwrap();
        let output = child.stdout.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(output);
            let mut buf = Vec::new();
            // Ends when Chromium closes the pipe.
            while r.read_until(0, &mut buf).map(|n| n > 0).unwrap_or(false) {
                if buf.last() == Some(&0) {
                    buf.pop();
                }
                if let Ok(v) = serde_json::from_slice::<Value>(&buf) {
                    if tx.send(v).is_err() {
                        break;
                    }
                }
                buf.clear();
            }
        });
        Some(Chromium {
            child,
            input,
            messages: rx,
            next_id: 1,
            events: Vec::new(),
            _profile: profile,
        })
    }

    impl Chromium {
        /// Sends a command and waits for its reply (panics after `limit`).
        pub fn call(
            &mut self,
            session: Option<&str>,
            method: &str,
            params: Value,
            limit: Duration,
        ) -> Value {
            let id = self.next_id;
            self.next_id += 1;
            let mut msg = json!({"id": id, "method": method, "params": params});
            if let Some(s) = session {
                msg["sessionId"] = json!(s);
            }
            let mut bytes = serde_json::to_vec(&msg).unwrap();
            bytes.push(0);
            self.input.write_all(&bytes).expect("write to chromium");
            self.input.flush().unwrap();
            let deadline = Instant::now() + limit;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                match self.messages.recv_timeout(left) {
                    Ok(v) if v["id"] == json!(id) => {
                        if let Some(e) = v.get("error") {
                            panic!("{method}: {e}");
                        }
                        return v["result"].clone();
                    }
                    Ok(v) => self.events.push(v),
                    Err(RecvTimeoutError::Timeout) => panic!("{method}: no reply within {limit:?}"),
                    Err(RecvTimeoutError::Disconnected) => panic!("{method}: chromium exited"),
                }
            }
        }

        /// Waits for an event of `method` on `session`.
        fn wait_event(&mut self, session: &str, method: &str, limit: Duration) -> bool {
            let seen = |e: &Value| e["method"] == json!(method) && e["sessionId"] == json!(session);
            if self.events.iter().any(seen) {
                return true;
            }
            let deadline = Instant::now() + limit;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                match self.messages.recv_timeout(left) {
                    Ok(v) => {
                        let hit = seen(&v);
                        self.events.push(v);
                        if hit {
                            return true;
                        }
                    }
                    Err(_) => return false,
                }
            }
        }

        /// A new tab attached with a flat session.
        fn new_tab(&mut self) -> String {
            let t = self.call(
                None,
                "Target.createTarget",
                json!({"url": "about:blank"}),
                Duration::from_secs(10),
            );
            let a = self.call(
                None,
                "Target.attachToTarget",
                json!({"targetId": t["targetId"], "flatten": true}),
                Duration::from_secs(10),
            );
            a["sessionId"].as_str().unwrap().to_string()
        }

        /// Opens `path` in a new tab, with console, log and network watched from before the
        /// first byte, and waits for the load event.
        pub fn open(&mut self, path: &Path, limit: Duration) -> Page {
            let session = self.new_tab();
            let s = Some(session.as_str());
            let ten = Duration::from_secs(10);
            for m in [
                "Runtime.enable",
                "Log.enable",
                "Network.enable",
                "Page.enable",
            ] {
                self.call(s, m, json!({}), ten);
            }
            let url = format!("file://{}", path.display());
            let first = self.events.len();
            let start = Instant::now();
            self.call(s, "Page.navigate", json!({"url": url}), limit);
            assert!(
                self.wait_event(&session, "Page.loadEventFired", limit),
                "{url} did not load within {limit:?}"
            );
            let load = start.elapsed();
            // Let late console messages and requests arrive.
            self.call(s, "Runtime.evaluate", json!({"expression": "1"}), ten);
            let mut errors = Vec::new();
            let mut requests = Vec::new();
            for e in &self.events[first..] {
                if e["sessionId"] != json!(session) {
                    continue;
                }
                let p = &e["params"];
                match e["method"].as_str().unwrap_or("") {
                    "Runtime.consoleAPICalled"
                        if matches!(p["type"].as_str(), Some("error") | Some("assert")) =>
                    {
                        errors.push(p["args"].to_string())
                    }
                    "Runtime.exceptionThrown" => errors.push(p["exceptionDetails"].to_string()),
                    "Log.entryAdded" if p["entry"]["level"] == json!("error") => {
                        errors.push(p["entry"]["text"].to_string())
                    }
                    "Network.requestWillBeSent" => {
                        requests.push(p["request"]["url"].as_str().unwrap_or("").to_string())
                    }
                    _ => {}
                }
            }
            Page {
                session,
                load,
                errors,
                requests,
            }
        }

        /// Evaluates `expr` in the page and returns its value.
        pub fn eval(&mut self, session: &str, expr: &str) -> Value {
            let r = self.call(
                Some(session),
                "Runtime.evaluate",
                json!({"expression": expr, "returnByValue": true, "awaitPromise": true}),
                Duration::from_secs(20),
            );
            if let Some(e) = r.get("exceptionDetails") {
                panic!("{expr}: {e}");
            }
            r["result"]["value"].clone()
        }

        /// A PNG (base64) of the page, or of the box of the element matching `selector`.
        pub fn screenshot(&mut self, session: &str, selector: Option<&str>) -> String {
            let mut params = json!({"format": "png"});
            if let Some(sel) = selector {
                let rect = self.eval(
                    session,
                    &format!(
                        "(()=>{{const r=document.querySelector({}).getBoundingClientRect();return {{x:r.x+scrollX,y:r.y+scrollY,width:r.width,height:Math.min(r.height,4000)}}}})()",
                        serde_json::to_string(sel).unwrap()
                    ),
                );
                params["clip"] = json!({"x": rect["x"], "y": rect["y"], "width": rect["width"], "height": rect["height"], "scale": 1});
                params["captureBeyondViewport"] = json!(true);
            }
            let r = self.call(
                Some(session),
                "Page.captureScreenshot",
                params,
                Duration::from_secs(30),
            );
            r["data"].as_str().unwrap().to_string()
        }

        /// How many distinct colours a PNG has (sampled), decoded by the browser itself in a
        /// fresh tab: a blank screenshot has one or two.
        pub fn distinct_colors(&mut self, png_base64: &str) -> u64 {
            let session = self.new_tab();
            let expr = format!(
                "(async()=>{{const img=new Image();img.src='data:image/png;base64,{png_base64}';await img.decode();\
                 const c=document.createElement('canvas');c.width=img.width;c.height=img.height;\
                 const g=c.getContext('2d');g.drawImage(img,0,0);const d=g.getImageData(0,0,c.width,c.height).data;\
                 const seen=new Set();for(let i=0;i<d.length;i+=4*7){{seen.add((d[i]<<16)|(d[i+1]<<8)|d[i+2]);}}return seen.size;}})()"
            );
            self.eval(&session, &expr).as_u64().unwrap_or(0)
        }
    }

    impl Drop for Chromium {
        fn drop(&mut self) {
            // Ask politely, then end the process group we created (only ours).
            let id = self.next_id;
            let msg = format!("{{\"id\":{id},\"method\":\"Browser.close\"}}\0");
            let _ = self.input.write_all(msg.as_bytes());
            let _ = self.input.flush();
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = self.child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let pgid = nix::unistd::Pid::from_raw(self.child.id() as i32);
            let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

/// Where screenshots are kept for a human to look at (LOCKPICK_SCREENSHOT_DIR), if anywhere.
fn keep_screenshot(name: &str, png_base64: &str) {
    let Ok(dir) = std::env::var("LOCKPICK_SCREENSHOT_DIR") else {
        return;
    };
    let bytes = decode_base64(png_base64);
    let path = Path::new(&dir).join(name);
    std::fs::write(&path, bytes).unwrap();
    eprintln!("screenshot: {}", path.display());
}

fn decode_base64(s: &str) -> Vec<u8> {
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let mut out = Vec::with_capacity(s.len() / 4 * 3);
    let mut acc = 0u32;
    let mut bits = 0;
    for c in s.bytes().filter_map(val) {
        acc = (acc << 6) | c;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

fn report_path(run_dir: &Path) -> PathBuf {
    run_dir.join("report.html")
}

/// The checks every loaded report must pass: no console error, no request but the page
/// itself, one card per violation, and a screenshot that is not blank.
fn assert_report_sound(
    b: &mut browser::Chromium,
    page: &browser::Page,
    results: &Value,
    path: &Path,
) {
    assert!(
        page.errors.is_empty(),
        "console errors in {}: {:?}",
        path.display(),
        page.errors
    );
    let own = format!("file://{}", path.display());
    let others: Vec<&String> = page.requests.iter().filter(|u| **u != own).collect();
    assert!(others.is_empty(), "the report made requests: {others:?}");
    // Every violation is in exactly one card (an incident card counts its members).
    let in_cards = b.eval(
        &page.session,
        "Array.from(document.querySelectorAll('[data-violation-card]')).reduce((n,c)=>n+(+c.dataset.violations),0)",
    );
    assert_eq!(
        in_cards.as_u64().unwrap(),
        results["violations"].as_array().unwrap().len() as u64,
        "every violation in one card"
    );
    // Every link within the page (the timeline's marks to their cards, the navigation) has
    // its target.
    let dead = b.eval(
        &page.session,
        "Array.from(document.querySelectorAll('a[href^=\"#\"]')).map(a=>a.getAttribute('href')).filter(h=>h.length>1&&!document.getElementById(decodeURIComponent(h.slice(1)))).join(' ')",
    );
    assert_eq!(
        dead.as_str(),
        Some(""),
        "links to nothing in {}",
        path.display()
    );
    let shot = b.screenshot(&page.session, None);
    let colors = b.distinct_colors(&shot);
    assert!(colors > 20, "the screenshot looks blank ({colors} colours)");
}

#[test]
fn racy_run_report_shows_both_holders_in_the_first_card() {
    let tmp = tempfile::tempdir().unwrap();
    let r = run(
        tmp.path(),
        &[
            "--workload",
            "mutex",
            "--nemesis",
            "none",
            "--unsafe",
            "racy",
            "--duration",
            "3s",
            "--ttl",
            "1s",
            "--op-timeout",
            "500ms",
            "--seed",
            "5",
        ],
        Duration::from_secs(90),
    );
    assert_eq!(r.code, 1, "{}", r.describe());
    let dir = r.run_dir();
    for f in ["report.html", "junit.xml", "summary.txt"] {
        assert!(dir.join(f).is_file(), "{f} missing\n{}", r.describe());
    }
    let index = std::fs::read_to_string(tmp.path().join("index.html")).unwrap();
    assert!(
        index.contains("report.html") && index.contains("invalid"),
        "{index}"
    );
    let results = r.results();
    let first = &results["violations"][0];
    assert_eq!(first["kind"], "double-grant", "{first}");

    // The tokens and processes of the first violation's grants, from the history.
    let history = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
    let ops: Vec<Value> = history
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let mut holders = Vec::new();
    for i in first["ops"].as_array().unwrap() {
        let op = ops
            .iter()
            .find(|o| o["index"] == *i)
            .expect("op in history");
        holders.push((
            op["process"].as_u64().unwrap(),
            op["value"]["token"].as_u64().unwrap(),
        ));
    }
    // The violation may also name the renews that prove how long a lease lived: the holders
    // are its distinct (process, token) pairs.
    holders.sort_unstable();
    holders.dedup();
    assert_eq!(holders.len(), 2, "{holders:?}");

    let Some(mut b) = browser::launch() else {
        return;
    };
    let path = report_path(&dir);
    let page = b.open(&path, Duration::from_secs(30));
    assert_report_sound(&mut b, &page, &results, &path);
    // A racy service makes many pairwise double-grants out of a few moments: the report shows
    // those moments (incidents), with the pairs inside, not one card per pair.
    let violations = results["violations"].as_array().unwrap().len() as u64;
    let cards = b
        .eval(
            &page.session,
            "document.querySelectorAll('[data-violation-card]').length",
        )
        .as_u64()
        .unwrap();
    assert!(violations > 1, "a racy run makes several double-grants");
    assert!(
        cards < violations,
        "{cards} cards for {violations} violations: incidents are not grouped"
    );
    let headline = b.eval(
        &page.session,
        "Array.from(document.querySelectorAll('[data-violation-card] .sentence')).map(p=>p.textContent).join('|')",
    );
    assert!(
        headline.as_str().unwrap().contains("clients held"),
        "an incident says how many clients held the lock at once: {headline}"
    );
    // The first card's op table leads with the first violation's ops, marked; the ops of the
    // violations that followed from it come after, unmarked.
    let marked = b.eval(
        &page.session,
        "(()=>{const rows=Array.from(document.querySelectorAll('#v1 table.ops tr')).slice(1);\
         return rows.map(r=>[r.classList.contains('key'),parseInt(r.cells[0].textContent)]);})()",
    );
    let marked: Vec<(bool, u64)> = serde_json::from_value(marked).unwrap();
    let mut first_ops: Vec<u64> = first["ops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o.as_u64().unwrap())
        .collect();
    first_ops.sort_unstable();
    first_ops.dedup();
    let lead: Vec<u64> = marked.iter().take_while(|r| r.0).map(|r| r.1).collect();
    assert_eq!(lead, first_ops, "the marked rows lead: {marked:?}");
    assert!(
        marked[lead.len()..].iter().all(|r| !r.0),
        "only the first violation's ops are marked: {marked:?}"
    );
    // The first card's zoomed timeline has a row per holder and a bar labelled with each token.
    let rows = b.eval(
        &page.session,
        "Array.from(document.querySelectorAll('#v1 svg text')).map(t=>t.textContent)",
    );
    let labels: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for (p, t) in &holders {
        assert!(
            labels.contains(&format!("p{p}").as_str()),
            "row p{p} in {labels:?}"
        );
        assert!(
            labels.contains(&format!("token {t}").as_str()),
            "bar token {t} in {labels:?}"
        );
    }
    // The script ran (the CSP pin matches it): zoom buttons are shown, and zoom doubles the
    // first card's timeline.
    let zoom = b.eval(
        &page.session,
        "(()=>{const svg=document.querySelector('#v1 svg');const w=+svg.getAttribute('width');\
         const shown=!document.querySelector('#v1 .zoombtns').hidden;\
         document.querySelector('#v1 button[data-zoom=in]').click();\
         const z=+svg.getAttribute('width');document.querySelector('#v1 button[data-zoom=reset]').click();\
         return shown && z===2*w && +svg.getAttribute('width')===w;})()",
    );
    assert_eq!(zoom, true, "zoom buttons work");
    let shot = b.screenshot(&page.session, Some("#v1"));
    assert!(b.distinct_colors(&shot) > 20);
    keep_screenshot("racy-first-card.png", &shot);
    let full = b.screenshot(&page.session, None);
    keep_screenshot("racy-page.png", &full);
    // Reports regenerate from the files alone, byte for byte.
    let before = std::fs::read(&path).unwrap();
    // It exits as `check` (and the run) did: invalid, and says so first.
    let o = report_invalid(&dir);
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(said.starts_with("verdict: INVALID\n"), "{said}");
    assert_eq!(
        before,
        std::fs::read(&path).unwrap(),
        "report is deterministic"
    );
}

/// Grants without a token (Redis, etcd as configured): the report's lease marks name each lease
/// by its grant's op, never as a "token 0" the service did not give.
#[test]
fn a_lease_without_a_token_is_named_by_its_grant() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("checkers/tests/fixtures/model-d7-tokenless-slow-reply-double-grant.jsonl");
    std::fs::copy(&fixture, dir.join("history.jsonl")).unwrap();
    judge_invalid(dir);
    report_invalid(dir);
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(!html.contains("token 0"), "a token 0 no grant was given");
    assert!(
        html.contains("(no token) surely alive until"),
        "the lease marks name the tokenless grant"
    );
}

const HOSTILE_SCRIPT: &str = "<script>alert(1)</script>";
/// A newline followed by a workflow command: an unescaped annotation would forge a warning.
const HOSTILE_LOCK: &str = "<script>alert(1)</script>\n::warning::forged";
const HOSTILE_ERROR: &str = "\"'><img src=x onerror=\"window.__pwned=1\"> 🔒 ünïcødé \u{202e}";

/// A run directory with a double grant on a lock whose name is a script tag, errors holding
/// markup and quotes, and a config whose name does the same.
fn hostile_run_dir(dir: &Path) {
    let l = HOSTILE_LOCK;
    let e = HOSTILE_ERROR;
    let lines = [
        json!({"index":0,"time_ns":1_000_000,"process":0,"type":"invoke","f":"acquire","lock":l,"value":{"ttl_ms":1000}}),
        json!({"index":1,"time_ns":2_000_000,"process":0,"type":"ok","f":"acquire","lock":l,"value":{"token":1,"ttl_ms":1000}}),
        json!({"index":2,"time_ns":3_000_000,"process":1,"type":"invoke","f":"acquire","lock":l,"value":{"ttl_ms":1000}}),
        json!({"index":3,"time_ns":4_000_000,"process":1,"type":"ok","f":"acquire","lock":l,"value":{"token":2,"ttl_ms":1000}}),
        json!({"index":4,"time_ns":5_000_000,"process":2,"type":"invoke","f":"acquire","lock":l,"value":{"ttl_ms":1000}}),
        json!({"index":5,"time_ns":6_000_000,"process":2,"type":"fail","f":"acquire","lock":l,"value":{"error":e}}),
        json!({"index":6,"time_ns":7_000_000,"process":"nemesis","type":"info","f":"start-pause","value":{"nodes":[e]}}),
        json!({"index":7,"time_ns":300_000_000,"process":"nemesis","type":"info","f":"stop-pause","value":{"nodes":[e]}}),
        json!({"index":8,"time_ns":400_000_000,"process":0,"type":"invoke","f":"release","lock":l,"value":{"token":1}}),
        json!({"index":9,"time_ns":410_000_000,"process":0,"type":"ok","f":"release","lock":l,"value":{"token":1}}),
        json!({"index":10,"time_ns":500_000_000,"process":1,"type":"invoke","f":"release","lock":l,"value":{"token":2}}),
        json!({"index":11,"time_ns":510_000_000,"process":1,"type":"fail","f":"release","lock":l,"value":{"error":e}}),
    ];
    let text: String = lines.iter().map(|v| format!("{v}\n")).collect();
    std::fs::write(dir.join("history.jsonl"), text).unwrap();
    std::fs::write(
        dir.join("config.toml"),
        format!(
            "# Resolved configuration of this run.\n# Rerun: lockpick run --seed 1 --name '{HOSTILE_SCRIPT}'\n\nname = {}\nseed = 18446744073709551615\nttl_ms = 1000\nnemesis = [{}]\n",
            toml_string(l),
            toml_string(e)
        ),
    )
    .unwrap();
    // The history file, not the directory: a directory without results.json is a run that
    // never finished, and this one is to be judged whole.
    judge_invalid(dir);
}

/// Writes the results.json of `dir`'s history.jsonl, as `check --json` gives it, which must
/// be invalid: a run directory put together around a history.
fn judge_invalid(dir: &Path) {
    let o = run_with_limit(
        &[
            "check",
            "--json",
            dir.join("history.jsonl").to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::write(dir.join("results.json"), &o.stdout).unwrap();
}

/// `lockpick report DIR`, which must exit as an invalid run does (1).
fn report_invalid(dir: &Path) -> std::process::Output {
    let o = run_with_limit(&["report", dir.to_str().unwrap()], Duration::from_secs(60));
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

#[test]
fn hostile_strings_render_as_text() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    hostile_run_dir(dir);
    // Exits as `check` does: a double grant is invalid.
    report_invalid(dir);
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(
        !html.contains(HOSTILE_SCRIPT),
        "raw script tag in the report"
    );
    assert!(!html.contains("<img"), "raw img tag in the report");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    let junit = std::fs::read_to_string(dir.join("junit.xml")).unwrap();
    assert!(!junit.contains(HOSTILE_SCRIPT));
    let results: Value =
        serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();

    let Some(mut b) = browser::launch() else {
        return;
    };
    let path = report_path(dir);
    let page = b.open(&path, Duration::from_secs(30));
    assert_report_sound(&mut b, &page, &results, &path);
    let probe = b.eval(
        &page.session,
        &format!(
            "({{pwned: window.__pwned === undefined ? null : window.__pwned, scripts: document.scripts.length, imgs: document.images.length, \
              text: document.body.textContent.includes({lock}) && document.body.textContent.includes({err}), \
              title: document.title.includes({script})}})",
            lock = serde_json::to_string(HOSTILE_LOCK).unwrap(),
            script = serde_json::to_string(HOSTILE_SCRIPT).unwrap(),
            // Bidi overrides are shown as U+FFFD: they would reverse the report's own text.
            err = serde_json::to_string(&HOSTILE_ERROR.replace('\u{202e}', "\u{fffd}")).unwrap()
        ),
    );
    assert_eq!(
        probe["pwned"],
        Value::Null,
        "an injected handler ran: {probe}"
    );
    assert_eq!(probe["scripts"], 1, "only the report's own script: {probe}");
    assert_eq!(probe["imgs"], 0, "no injected image: {probe}");
    assert_eq!(
        probe["text"], true,
        "the hostile strings show as text: {probe}"
    );
    assert_eq!(probe["title"], true, "{probe}");
    // junit.xml is well-formed XML whatever the strings held (the browser's parser says).
    let junit_ok = b.eval(
        &page.session,
        &format!(
            "(()=>{{const d=new DOMParser().parseFromString({}, 'application/xml');return d.getElementsByTagName('parsererror').length===0 && d.getElementsByTagName('failure').length}})()",
            serde_json::to_string(&junit).unwrap()
        ),
    );
    let failing = results["checkers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["valid"] == false)
        .count();
    // And the coverage case fails when the run left something it asked for unexercised and
    // its gate counts that: this run's config names no --fail-on, so the default (safety and
    // liveness) decides, and the gap is a skip beside an invalid verdict.
    let unexercised = results["notes"]
        .to_string()
        .contains("requested, not exercised");
    assert!(unexercised, "{results}");
    assert!(
        junit.contains("not counted by the run&apos;s --fail-on")
            || junit.contains("not counted by the run's --fail-on"),
        "{junit}"
    );
    assert_eq!(
        junit_ok, failing,
        "junit.xml parses, one failure per failing checker"
    );
    keep_screenshot("hostile.png", &b.screenshot(&page.session, None));
}

#[test]
fn fail_on_decides_the_exit_code_and_annotations_are_escaped() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    hostile_run_dir(dir);
    let d = dir.to_str().unwrap();
    let code = |args: &[&str]| run_with_limit(args, Duration::from_secs(60)).status.code();
    assert_eq!(code(&["check", d]), Some(1), "double-grant is safety");
    assert_eq!(code(&["check", "--fail-on", "liveness", d]), Some(0));
    assert_eq!(code(&["check", "--fail-on", "safety,warnings", d]), Some(1));
    assert_eq!(code(&["check", "--fail-on", "bogus", d]), Some(3));
    // `report` exits as `check` does, the same policy by default.
    assert_eq!(code(&["report", d]), Some(1));
    assert_eq!(code(&["report", "--fail-on", "safety", d]), Some(1));
    assert_eq!(code(&["report", "--fail-on", "liveness", d]), Some(0));
    assert_eq!(code(&["report", "/nonexistent/run"]), Some(3));

    // The policy is given: under GitHub Actions the default would add coverage.
    let out = std::process::Command::new(BIN)
        .args(["check", d, "--fail-on", "safety,liveness"])
        .env("GITHUB_ACTIONS", "true")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let errors: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("::error"))
        .collect();
    let results: Value =
        serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
    // One summary line, then one per violation (there are fewer than ten here).
    assert_eq!(
        errors.len(),
        1 + results["violations"].as_array().unwrap().len(),
        "{stdout}"
    );
    assert!(
        errors[0].starts_with("::error title=lockpick verdict::INVALID"),
        "{}",
        errors[0]
    );
    assert!(
        errors[1].starts_with("::error title=lockpick double-grant::"),
        "{}",
        errors[1]
    );
    assert!(errors[1].contains("%0A::warning::forged"), "{}", errors[1]);
    assert!(
        !stdout.lines().any(|l| l.starts_with("::warning::forged")),
        "no forged workflow command: {stdout}"
    );
    let quiet = std::process::Command::new(BIN)
        .args(["check", d])
        .env_remove("GITHUB_ACTIONS")
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&quiet.stdout).contains("::error"));
}

/// The benchmark of BENCHMARKS.md's "Report" section: a 1,000,000-event history rendered and
/// loaded in Chromium. Ignored by default (it takes a minute); run with
/// `cargo test --release --test report -- --ignored million --nocapture`, or point
/// LOCKPICK_BENCH_RUN_DIR at a run directory whose report.html is already rendered.
#[test]
#[ignore]
fn million_event_report_is_small_and_loads_fast() {
    let tmp = tempfile::tempdir().unwrap();
    let given = std::env::var("LOCKPICK_BENCH_RUN_DIR")
        .ok()
        .map(PathBuf::from);
    let dir = given.as_deref().unwrap_or(tmp.path());
    if given.is_none() {
        render_million(dir);
    }
    let size = std::fs::metadata(dir.join("report.html")).unwrap().len();
    eprintln!("report.html: {size} bytes");
    assert!(size <= 10 * 1024 * 1024, "report.html is {size} bytes");
    let Some(mut b) = browser::launch() else {
        return;
    };
    let path = report_path(dir);
    let results: Value =
        serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
    // Best of three loads: the first includes the browser's own warm-up.
    let mut best = Duration::MAX;
    for _ in 0..3 {
        let page = b.open(&path, Duration::from_secs(30));
        eprintln!("chromium load: {:?}", page.load);
        assert_report_sound(&mut b, &page, &results, &path);
        best = best.min(page.load);
    }
    assert!(best <= Duration::from_secs(5), "load took {best:?}");
}

/// Writes a 1,000,000-event synthetic history into `dir`, checks it and renders its report.
/// Limits are generous for a debug build on a busy machine; the release build takes seconds.
fn render_million(dir: &Path) {
    let hist = dir.join("history.jsonl");
    let o = run_with_limit(
        &[
            "synth",
            "--events",
            "1000000",
            "--out",
            hist.to_str().unwrap(),
        ],
        Duration::from_secs(1200),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = run_with_limit(
        &["check", "--json", hist.to_str().unwrap()],
        Duration::from_secs(1200),
    );
    let checked = o.status.code();
    std::fs::write(dir.join("results.json"), &o.stdout).unwrap();
    let start = Instant::now();
    let o = run_with_limit(
        &["report", dir.to_str().unwrap()],
        Duration::from_secs(1200),
    );
    assert_eq!(
        o.status.code(),
        checked,
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    eprintln!("lockpick report: {:?}", start.elapsed());
}

/// The coverage table of a checked run directory, as a browser shows it: present and visible,
/// one row per condition (zeros written `none`, in muted cells), the stall that ended just past
/// its lease counted, and nothing the page must not do.
#[test]
fn the_coverage_table_shows_every_condition_in_the_browser() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("checkers/tests/coverage/holder-just-past-bound-just-after-next-grant.jsonl"),
        dir.join("history.jsonl"),
    )
    .unwrap();
    let history = dir.join("history.jsonl");
    let o = run_with_limit(
        &["check", "--json", history.to_str().unwrap()],
        Duration::from_secs(60),
    );
    std::fs::write(dir.join("results.json"), &o.stdout).unwrap();
    let code = |args: &[&str]| run_with_limit(args, Duration::from_secs(60)).status.code();
    let d = dir.to_str().unwrap();
    assert_eq!(
        code(&["report", "--fail-on", "safety,liveness,coverage", d]),
        Some(0)
    );
    let results: Value = serde_json::from_slice(&o.stdout).unwrap();
    let Some(mut b) = browser::launch() else {
        return;
    };
    let path = report_path(dir);
    let page = b.open(&path, Duration::from_secs(30));
    assert_report_sound(&mut b, &page, &results, &path);
    let seen = b.eval(
        &page.session,
        "(()=>{const t=document.querySelector('#coverage ~ table.coverage');if(!t)return null;\
         const rows=Array.from(t.querySelectorAll('tr')).slice(1);\
         const cell=l=>{const r=rows.find(r=>r.textContent.includes(l));return r&&r.lastElementChild.textContent};\
         return {height:t.getBoundingClientRect().height,rows:rows.length,\
           none:t.querySelectorAll('td.muted').length,\
           justPast:cell('0-10% ttl after it surely ended'),before:cell('before its lease could end')}})()",
    );
    assert!(seen.is_object(), "no coverage table in {}", path.display());
    assert!(seen["height"].as_f64().unwrap() > 100.0, "{seen}");
    assert!(seen["rows"].as_u64().unwrap() >= 25, "{seen}");
    assert!(seen["none"].as_u64().unwrap() >= 15, "{seen}");
    assert_eq!(seen["justPast"], "1", "{seen}");
    assert_eq!(seen["before"], "none", "{seen}");
}

/// Not a test: saves screenshots of each section of the report in LOCKPICK_REPORT_DIR into
/// LOCKPICK_SCREENSHOT_DIR, for a human to look at. Run with `-- --ignored look`.
#[test]
#[ignore]
fn look_at_report_sections() {
    let (Ok(dir), Ok(_)) = (
        std::env::var("LOCKPICK_REPORT_DIR"),
        std::env::var("LOCKPICK_SCREENSHOT_DIR"),
    ) else {
        eprintln!("set LOCKPICK_REPORT_DIR and LOCKPICK_SCREENSHOT_DIR");
        return;
    };
    let Some(mut b) = browser::launch() else {
        return;
    };
    let path = report_path(Path::new(&dir));
    let page = b.open(&path, Duration::from_secs(30));
    eprintln!("load {:?}, errors {:?}", page.load, page.errors);
    for (name, sel) in [
        ("banner", "header"),
        ("first-card", "#v1"),
        ("timeline", "#full"),
        ("latency", "#latency ~ .chart"),
        ("fairness", "#fairness ~ table"),
        ("faults", "#faults ~ table"),
        ("coverage", "#coverage ~ table"),
        ("first-warning", "#w1"),
    ] {
        let exists = b.eval(
            &page.session,
            &format!(
                "!!document.querySelector({})",
                serde_json::to_string(sel).unwrap()
            ),
        );
        if exists == true {
            let shot = b.screenshot(&page.session, Some(sel));
            keep_screenshot(&format!("look-{name}.png"), &shot);
        }
    }
}

/// The cycle a `deadlock` or a `non-serializable` violation is, drawn in its card: each member
/// once on a ring, one arrow per edge with its reason, every member named as the card's
/// sentence names it, nothing outside the drawing or on top of another member. The two bank
/// runs: random lock order against a lockd whose waits never end, and the racy lockd, whose
/// double grants lose updates in a store that does not fence (a fencing store refuses most of
/// them, and a CI run once had no cycle left).
#[test]
fn the_cycle_of_a_deadlock_and_of_a_lost_update_is_drawn_in_its_card() {
    let cases: [(&[&str], &str); 2] = [
        (
            &[
                "--lock-order-policy",
                "random",
                "--unsafe",
                "no-wait-timeout",
            ],
            "deadlock",
        ),
        (
            &["--unsafe", "racy", "--store-fence", "none"],
            "non-serializable",
        ),
    ];
    let mut runs = Vec::new();
    for (extra, kind) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let mut args = common::BANK_CONTENDED.to_vec();
        args.extend_from_slice(&["--seed", "1"]);
        args.extend_from_slice(extra);
        let r = run(tmp.path(), &args, Duration::from_secs(90));
        assert_eq!(r.code, 1, "{kind}: {}", r.describe());
        let results = r.results();
        let v = results["violations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind}: {}", r.describe()))
            .clone();
        let cycle = v["cycle"].as_array().unwrap().clone();
        assert!(cycle.len() >= 2, "{kind}: {v}");
        // A cycle: each edge leaves where the one before it arrived.
        for (k, e) in cycle.iter().enumerate() {
            assert_eq!(e["to"], cycle[(k + 1) % cycle.len()]["from"], "{kind}: {v}");
        }
        runs.push((tmp, r, results, kind, cycle.len()));
    }
    let Some(mut b) = browser::launch() else {
        return;
    };
    for (_tmp, r, results, kind, n) in &runs {
        let path = report_path(&r.run_dir());
        let page = b.open(&path, Duration::from_secs(30));
        assert_report_sound(&mut b, &page, results, &path);
        let probe = format!(
            r#"(() => {{
              // Its own card, or an incident's that draws it under its member's sentence.
              const drawn = c => [...c.querySelectorAll('figure.cycle')].find(f => {{
                const m = f.closest('.member-cycle');
                return m ? m.querySelector('.cycle-sentence b').textContent === '{kind}'
                         : c.querySelector('h3').textContent.includes('{kind}');
              }});
              const card = [...document.querySelectorAll('article.vcard')].find(drawn);
              if (!card) return null;
              const f = drawn(card);
              const svg = f.querySelector('svg').getBoundingClientRect();
              const boxes = [...f.querySelectorAll('.cycle-node')].map(g => g.getBoundingClientRect());
              const inside = boxes.every(n => n.width > 0 && n.left >= svg.left - 1 && n.right <= svg.right + 1
                && n.top >= svg.top - 1 && n.bottom <= svg.bottom + 1);
              const overlap = boxes.some((a, i) => boxes.some((o, j) => i < j && a.left < o.right
                && o.left < a.right && a.top < o.bottom && o.top < a.bottom));
              const m = f.closest('.member-cycle');
              const sentence = (m ? m.querySelector('.cycle-sentence') : card.querySelector('.sentence')).textContent;
              const names = [...f.querySelectorAll('.cycle-node text')].map(t => t.textContent);
              return {{
                n: +f.dataset.cycle,
                edges: f.querySelectorAll('.cycle-edge').length,
                labels: [...f.querySelectorAll('.cycle-label')].filter(t => t.textContent.trim()).length,
                nodes: boxes.length, inside, overlap,
                named: names.every(x => sentence.includes(x)),
                caption: f.querySelector('figcaption').textContent,
              }};
            }})()"#
        );
        let got = b.eval(&page.session, &probe);
        assert!(!got.is_null(), "{kind}: no card with a cycle drawing");
        let n = *n as u64;
        assert_eq!(got["n"], n, "{kind}: {got}");
        assert_eq!(got["edges"], n, "{kind}: {got}");
        assert_eq!(got["labels"], n, "{kind}: {got}");
        assert_eq!(got["nodes"], n, "{kind}: {got}");
        assert_eq!(
            got["inside"], true,
            "{kind}: a member outside the drawing: {got}"
        );
        assert_eq!(
            got["overlap"], false,
            "{kind}: members on top of each other: {got}"
        );
        assert_eq!(
            got["named"], true,
            "{kind}: a member the sentence does not name: {got}"
        );
        assert!(got["caption"].as_str().unwrap().contains("arrow"), "{got}");
        let shot = b.screenshot(&page.session, Some("figure.cycle"));
        keep_screenshot(&format!("cycle-{kind}"), &shot);
        assert!(
            b.distinct_colors(&shot) > 8,
            "{kind}: the drawing looks blank"
        );
    }
}
