//! Shared pieces of the node-control tests: a tiny real HTTP service and process checks.

#![allow(dead_code)] // each test binary uses a different subset

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nemesis::{free_port, substitute, LocalNode, NodeCommand, Placeholders};

pub const LOCALHOST: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
pub const STARTUP: Duration = Duration::from_secs(10);
/// The bound on every test body.
pub const TEST_LIMIT: Duration = Duration::from_secs(20);

/// Answers 200 {"ok":true} on GET /v1/health; argv: host port data_dir.
const SERVER_PY: &str = r#"
import json, os, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

host, port, data_dir = sys.argv[1], int(sys.argv[2]), sys.argv[3]

class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/v1/health":
            body = json.dumps({"ok": True}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_response(404)
            self.end_headers()

    def log_message(self, *args):
        pass

with open(os.path.join(data_dir, "starts"), "a") as f:
    f.write(f"{os.getpid()}\n")
print(f"listening on {host}:{port}", flush=True)
HTTPServer((host, port), Handler).serve_forever()
"#;

/// Writes the server script into `dir` and returns its path.
pub fn write_server(dir: &Path) -> PathBuf {
    let path = dir.join("server.py");
    std::fs::write(&path, SERVER_PY).unwrap();
    path
}

/// A node running the Python server through a Shell template with placeholders.
pub fn python_node(dir: &Path, id: &str) -> LocalNode {
    let script = write_server(dir);
    let port = free_port(LOCALHOST).unwrap();
    let node_dir = dir.join("nodes").join(id);
    let template = format!(
        "python3 {} {{host}} {{port}} {{data_dir}}",
        script.display()
    );
    let line = substitute(&template, &placeholders(id, port, &node_dir)).unwrap();
    LocalNode::new(id, NodeCommand::Shell(line), LOCALHOST, port, node_dir)
}

pub fn placeholders(id: &str, port: u16, node_dir: &Path) -> Placeholders {
    Placeholders {
        id: id.into(),
        host: LOCALHOST.to_string(),
        port,
        data_dir: node_dir.join("data"),
        peers: String::new(),
        extra: Vec::new(),
    }
}

/// Whether the process is gone. A zombie counts as gone: it runs nothing, and an orphan's
/// zombie is reaped by whatever init the machine has, which may be slow to do so.
pub fn gone(pid: u32) -> bool {
    matches!(nemesis::process_state(pid), None | Some('Z'))
}

/// Polls `cond` every 10 ms until it holds or `limit` passes.
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Field `n` (1-based, as in proc(5)) of /proc/<pid>/stat.
pub fn stat_field(pid: u32, n: usize) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(n - 3).map(str::to_string)
}

pub fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

/// Runs a test body under [`TEST_LIMIT`].
pub async fn bounded<F: Future>(body: F) -> F::Output {
    tokio::time::timeout(TEST_LIMIT, body)
        .await
        .expect("test exceeded its time limit")
}
