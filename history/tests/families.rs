//! The fault families as a history reads them: the real ones, which the nemesis's modules
//! register (`history::FAULT_FAMILIES`), so these tests live here, where the nemesis can be
//! linked (a dev-dependency: history's unit tests cannot see its registrations).

use history::{nemesis_field_type, FaultFamily, FaultOp, Field, FieldType};
use nemesis::schedule::FaultKind;

#[test]
fn each_op_name_reads_as_what_it_does() {
    for (f, want) in [
        ("start-pause", FaultOp::Opens("pause")),
        ("stop-pause", FaultOp::Closes("pause")),
        ("start-client-pause", FaultOp::Opens("client-pause")),
        ("kill", FaultOp::Opens("kill")),
        ("restart", FaultOp::Closes("kill")),
        ("clock-observed", FaultOp::Instant),
        ("start", FaultOp::Instant),
        ("killed", FaultOp::Instant),
    ] {
        assert_eq!(FaultOp::of(f), want, "{f}");
    }
    assert_eq!(FaultOp::of("restart").kind(), Some("kill"));
    assert_eq!(FaultOp::of("clock-observed").kind(), None);
    // A family this build does not know reads by the convention.
    assert_eq!(FaultOp::of("start-flood"), FaultOp::Opens("flood"));
    assert_eq!(FaultOp::of("stop-flood"), FaultOp::Closes("flood"));
}

/// Every family but kill follows the convention, no op name is another's, and each
/// family has its own colour.
#[test]
fn the_families_names_are_apart() {
    let kill = FaultFamily::named("kill").expect("kill is registered");
    let mut names = std::collections::BTreeSet::new();
    let mut colours = std::collections::BTreeSet::new();
    for &f in FaultFamily::all() {
        if f != kill {
            assert_eq!(f.opens, format!("start-{}", f.kind));
            assert_eq!(f.closes, format!("stop-{}", f.kind));
        }
        assert!(names.insert(f.kind), "{f:?}");
        assert!(names.insert(f.opens) || f.opens == f.kind, "{f:?}");
        assert!(names.insert(f.closes), "{f:?}");
        assert!(colours.insert(f.colour), "{f:?}");
        assert_eq!(FaultFamily::named(f.kind), Some(f));
        assert_eq!(FaultFamily::colour_of(f.kind), f.colour);
    }
    assert!(!colours.contains(FaultFamily::UNKNOWN_COLOUR));
    assert_eq!(FaultFamily::colour_of("flood"), FaultFamily::UNKNOWN_COLOUR);
}

/// The table is in the order of the nemesis's `families!` lines (`--nemesis`'s order), however
/// the linker gathered it, and holds every family once.
#[test]
fn the_families_come_in_the_order_of_their_lines() {
    let kinds: Vec<&str> = FaultFamily::all().iter().map(|f| f.kind).collect();
    let lines: Vec<&str> = FaultKind::ALL.iter().map(|k| k.as_str()).collect();
    assert_eq!(kinds, lines);
    assert_eq!(history::FAULT_FAMILIES.len(), lines.len());
}

/// A family's own fields are typed on every nemesis event, so two families cannot give one
/// field two types, and none retypes a field every fault carries: whichever the reader found
/// first would silently decide.
#[test]
fn no_field_has_two_types() {
    let mut seen: Vec<(&str, FieldType, &str)> = Vec::new();
    for f in FaultFamily::all() {
        for field in f.fields {
            assert_eq!(
                nemesis_field_type(field.name),
                Some(field.ty),
                "{}",
                field.name
            );
            if let Some((_, ty, other)) = seen.iter().find(|(n, _, _)| *n == field.name) {
                assert_eq!(*ty, field.ty, "{} in {} and {other}", field.name, f.kind);
            }
            seen.push((field.name, field.ty, f.kind));
            assert!(
                !["nodes", "roles", "length_ms", "fault", "process"].contains(&field.name),
                "{} retypes {}",
                f.kind,
                field.name
            );
        }
    }
}

/// The nemesis type table of docs/history.md and the reader's types (`nemesis_field_type`: the
/// fields every fault carries, and each registered family's own, netem's object's fields in
/// it) name the same fields with the same types, and every field the table of nemesis events
/// names is typed: the page's promise for nemesis events is the reader's.
#[test]
fn the_docs_table_of_nemesis_fields_is_the_readers() {
    let doc = include_str!("../../docs/history.md");
    let section = doc
        .split("## Nemesis events")
        .nth(1)
        .and_then(|t| t.split("\n## ").next())
        .expect("docs/history.md has its nemesis events");
    let names = |cell: &str| -> Vec<String> {
        cell.split('`')
            .skip(1)
            .step_by(2)
            .map(|n| n.split(':').next().unwrap_or(n).to_string())
            .collect()
    };
    let types = section
        .split("| field | type |")
        .nth(1)
        .and_then(|t| t.split("\n\n").next())
        .expect("the nemesis fields' type table");
    let event_typed = ["token", "ttl_ms", "error", "grant"];
    let mut typed = Vec::new();
    let mut object: &[Field] = &[];
    for row in types.lines().skip(2) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let ty = cells[2];
        for name in names(cells[1]) {
            typed.push(name.clone());
            if event_typed.contains(&name.as_str()) {
                assert!(nemesis_field_type(&name).is_none(), "{name} is the view's");
                continue;
            }
            let want = match ty.split(':').next().unwrap() {
                "unsigned integer" => FieldType::U64,
                "signed integer" => FieldType::I64,
                "string" => FieldType::Str,
                "number" => FieldType::Number,
                "array of strings" => FieldType::Strings,
                "array of pairs of strings" => FieldType::StringPairs,
                "object" => {
                    // An object's fields are read below, against the reader's list of them.
                    let Some(FieldType::Object(fields)) = nemesis_field_type(&name) else {
                        panic!("`{name}` is an object in docs/history.md");
                    };
                    object = fields;
                    continue;
                }
                other => panic!("{name}: the table's type {other:?} has no FieldType"),
            };
            assert_eq!(
                nemesis_field_type(&name),
                Some(want),
                "`{name}` is {ty} in docs/history.md"
            );
        }
        if let Some(fields) = ty.strip_prefix("object: ") {
            for part in fields.split("; ") {
                let (list, ty) = part.rsplit_once(' ').unwrap();
                let want = match ty {
                    "integers" => FieldType::U64,
                    "numbers" => FieldType::Number,
                    other => panic!("an object field's type {other:?}"),
                };
                for name in names(list) {
                    let field = object.iter().find(|f| f.name == name).map(|f| f.ty);
                    assert_eq!(field, Some(want), "{name}");
                    typed.push(name);
                }
            }
        }
    }
    // Every field the events table names (a word in backticks in its `value` column that
    // is a field name, not one of its words such as `primary`) is in the type table.
    let events = section
        .split("\n\n")
        .find(|t| t.starts_with("| `f` |"))
        .unwrap();
    let words = [
        "n1",
        "primary",
        "other",
        "boundary",
        "next-grant",
        "long",
        "waiter",
        "renew",
        "write",
        "release",
        "read",
        "aim",
        "length",
        "bump-forward",
        "bump-back",
        "strobe",
        "fast",
        "slow",
        "wall",
        "all",
        "observed_by: \"vdso\"",
        "f1",
    ];
    for row in events.lines().skip(2) {
        let cell = row.split('|').nth(2).unwrap();
        for part in cell.split('`').skip(1).step_by(2) {
            let name = part.trim_start_matches('[').trim_end_matches(']');
            if words.contains(&part) || name.starts_with('"') || name.starts_with("[\"") {
                continue;
            }
            let name = name.split(':').next().unwrap();
            if ["kill", "restart"].contains(&name) {
                continue;
            }
            assert!(
                typed.iter().any(|t| t == name),
                "`{name}` has no type in the table"
            );
        }
    }
    assert!(nemesis_field_type("nodes").is_some() && !object.is_empty());
    // And the other way: every field a registered family declares is in the type table, so a
    // new family's fields are documented where the reader's promise is.
    for family in FaultFamily::all() {
        let nested = family.fields.iter().flat_map(|f| match f.ty {
            FieldType::Object(sub) => sub,
            _ => &[],
        });
        for field in family.fields.iter().chain(nested) {
            assert!(
                typed.iter().any(|t| t == field.name),
                "{}'s field `{}` is not in docs/history.md's type table",
                family.kind,
                field.name
            );
        }
    }
}
