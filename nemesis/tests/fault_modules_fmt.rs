//! The fault families' modules are declared inside `families!` (nemesis/src/fault/mod.rs), so
//! `cargo fmt` never reaches them: this test holds them to rustfmt's layout instead, as
//! `cargo fmt --check` holds every other file.

use std::path::PathBuf;
use std::process::Command;

#[test]
fn the_fault_family_modules_are_formatted() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/fault");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs") && !p.ends_with("mod.rs"))
        .collect();
    files.sort();
    assert!(files.len() >= 6, "the family modules: {files:?}");
    // rustfmt comes with the toolchain that builds this test (as cargo fmt does).
    let out = match Command::new("rustfmt")
        .args(["--check", "--edition", "2021"])
        .args(&files)
        .output()
    {
        Ok(out) => out,
        Err(e) if std::env::var_os("LOCKPICK_SYSTEM_TESTS").is_none() => {
            eprintln!("SKIPPED: rustfmt cannot run here ({e})");
            return;
        }
        Err(e) => panic!("rustfmt cannot run: {e}"),
    };
    assert!(
        out.status.success(),
        "run `rustfmt --edition 2021 nemesis/src/fault/*.rs` (cargo fmt does not reach them):\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
