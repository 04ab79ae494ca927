#[test]
fn scratch() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    paths.sort();
    for p in paths {
        let (ops, _) = history::read_ops(&p).unwrap();
        let h = history::History::new(ops).unwrap();
        let r = checkers::check(&h, &checkers::CheckConfig::default());
        println!(
            "== {} -> {}",
            p.file_name().unwrap().to_string_lossy(),
            r.valid
        );
        for v in r.violations.iter().chain(&r.warnings) {
            println!(
                "  {} {:?} {:?} nem={:?}\n    {}",
                v.kind,
                v.ops,
                v.window_ns,
                v.nemesis.iter().map(|f| f.index).collect::<Vec<_>>(),
                v.explanation
            );
        }
        for c in &r.checkers {
            for n in &c.notes {
                println!("  note {}: {}", c.name, n);
            }
        }
    }
}
