//! `--runtime ssh` end to end against real sshd: three "hosts" made of network namespaces
//! (tests/common/sshbed.rs), each running its own sshd with a test key. lockpick drives them
//! through the system's ssh client; the verdicts must be those of the namespace runtime on the
//! same seeds, and nothing of a run may be left on any host afterwards.

mod common;
#[path = "common/sshbed.rs"]
mod sshbed;

use common::Run;
use sshbed::{require_sshbed, SshBed};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(150);

fn short_run<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec![
        "--runtime",
        "ssh",
        "--nodes",
        "3",
        "--ttl",
        "1s",
        "--hold",
        "50ms..600ms",
        "--duration",
        "10s",
        "--op-timeout",
        "1s",
        "--nemesis-interval",
        "1s",
    ];
    a.extend_from_slice(extra);
    a
}

/// Nothing of any run on any host of the bed.
fn assert_clean(bed: &SshBed, run: &Run) {
    for i in 0..3 {
        let left = bed.leftovers(i, &sshbed::run_id_of(&run.run_dir()));
        assert!(
            left.is_empty(),
            "host {i} keeps {left:?}\n{}",
            run.describe()
        );
    }
}

#[test]
fn correct_lockd_over_ssh_is_valid_on_three_seeds() {
    if !require_sshbed() {
        return;
    }
    let bed = SshBed::start(3);
    // A rule lockpick did not make: still there after every run.
    bed.ssh(0, "iptables -w 5 -A INPUT -s 192.0.2.1 -j ACCEPT");
    for seed in ["1", "2", "3"] {
        let tmp = tempfile::tempdir().unwrap();
        let r = bed.run(
            tmp.path(),
            &short_run(&["--seed", seed, "--nemesis", "partition,pause,kill"]),
            LIMIT,
        );
        assert_eq!(r.code, 0, "seed {seed}: {}", r.describe());
        assert_eq!(r.results()["valid"], true, "seed {seed}: {}", r.describe());
        assert_clean(&bed, &r);
        // Every node's log is fetched, with a marker line per start.
        for n in ["n1", "n2", "n3"] {
            let log = r.run_dir().join("nodes").join(n).join("stdout.log");
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            assert!(text.contains("--- start"), "{}: {text:?}", log.display());
        }
    }
    let rules = bed.ssh(0, "iptables -w 5 -S INPUT");
    assert!(rules.contains("-s 192.0.2.1/32 -j ACCEPT"), "{rules}");
}
