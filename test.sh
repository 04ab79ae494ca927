#!/usr/bin/env bash
# The test command of README.md: the whole workspace, bounded by design (each test limits its
# own duration; the slowest are end-to-end runs of 10-15 s against a real lockd).
set -euo pipefail
cd "$(dirname "$0")"
cargo build --workspace --all-targets
cargo test --workspace --no-fail-fast -- --test-threads="${LOCKPICK_TEST_THREADS:-4}"
