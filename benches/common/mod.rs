//! What several benches share: a median, and a figure of a process's `/proc` status.

// Each bench is a crate of its own and uses only some of these.
#![allow(dead_code)]

/// The median of `v` (the upper one of an even count). Panics on an empty `v`.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// A kB figure of `/proc/PID/status` (`field` with its colon: `VmRSS:`, `VmHWM:`), or `None`
/// once the process is gone.
pub fn status_kb(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}
