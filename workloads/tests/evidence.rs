//! The evidence sets of this build (history's own and every service's, declared with
//! `history::evidence!` where their writer is) against docs/history.md's table of `value`
//! fields: the page promises what the reader holds a line to.

// The services' sets are registered by their modules: linked in by naming the crate.
use workloads as _;

use history::{FieldType, EVIDENCE_SETS};
use std::collections::BTreeMap;

/// Every evidence field of every set, by name: its type and the sets that declare it.
fn declared() -> BTreeMap<&'static str, (FieldType, Vec<&'static str>)> {
    let mut fields: BTreeMap<&'static str, (FieldType, Vec<&'static str>)> = BTreeMap::new();
    for set in EVIDENCE_SETS.iter() {
        for f in set.fields {
            fields
                .entry(f.name)
                .or_insert((f.ty, Vec::new()))
                .1
                .push(set.name);
        }
    }
    fields
}

/// A field is one writer's: two sets that both declared it could give it two types, and the
/// reader would hold it to whichever it found first.
#[test]
fn every_evidence_field_is_declared_by_one_set() {
    let twice: Vec<String> = declared()
        .into_iter()
        .filter(|(_, (_, sets))| sets.len() > 1)
        .map(|(name, (_, sets))| format!("{name}: {}", sets.join(", ")))
        .collect();
    assert!(twice.is_empty(), "declared by two sets: {twice:?}");
    // The services' sets are linked in, not only history's.
    for set in [
        "redis",
        "redlock",
        "zookeeper",
        "postgres",
        "etcd",
        "redis-sentinel",
    ] {
        assert!(
            EVIDENCE_SETS.iter().any(|s| s.name == set),
            "{set} is not registered"
        );
    }
}

/// The value table of docs/history.md and the registered sets name the same fields with the
/// same types.
#[test]
fn the_docs_table_of_value_fields_is_the_readers() {
    let doc = include_str!("../../docs/history.md");
    let table = doc
        .split("### Fields of `value`")
        .nth(1)
        .and_then(|t| t.split("\n\n").nth(1))
        .expect("docs/history.md has the table of value fields");
    let typed = ["token", "ttl_ms", "value", "seq", "error", "final", "fence"];
    let declared = declared();
    let mut seen = Vec::new();
    for row in table.lines().skip(2) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let names: Vec<&str> = cells[1].split('`').skip(1).step_by(2).collect();
        let types: Vec<&str> = cells[2].split(", ").collect();
        for (i, name) in names.iter().enumerate() {
            if typed.contains(name) {
                continue;
            }
            let ty = types.get(i).or(types.first()).copied().unwrap_or_default();
            let want = match ty {
                "unsigned integer" | "unsigned integers" => FieldType::U64,
                "string" => FieldType::Str,
                "array of strings" => FieldType::Strings,
                "boolean" => FieldType::Bool,
                other => panic!("{name}: the table's type {other:?} has no FieldType"),
            };
            let got = declared.get(name).map(|(ty, _)| match ty {
                // A word from a list is a string on the page; its words are in the row.
                FieldType::OneOf(_) => FieldType::Str,
                ty => *ty,
            });
            assert_eq!(got, Some(want), "`{name}` is {ty} in docs/history.md");
            seen.push(*name);
        }
    }
    let undocumented: Vec<&str> = declared
        .keys()
        .copied()
        .filter(|name| !seen.contains(name))
        .collect();
    assert!(
        undocumented.is_empty(),
        "declared but not in docs/history.md's table: {undocumented:?}"
    );
}
