//! `report.html`: one self-contained file (inline CSS, inline SVG, one small pinned script for
//! hover details and zoom). It reads as a document without JavaScript, makes no request (its
//! Content-Security-Policy forbids any), and every string from the run goes through
//! [`crate::escape::html`].

use crate::escape::{base64, html as esc, secs, sha256};
use crate::model::{Bucket, Hold, Model, Proof, StoreOp};
use crate::svg::{axis, fault_color, fill_for, Scale};
use crate::RunConfigView;
use checkers::checker_of;
use checkers::Grant;
use history::{ActiveFault, KindClass, Outcome, Results, Validity, Violation, ViolationKind};
use std::collections::{HashMap, HashSet};
use std::fmt::Write;

/// Violation cards rendered; the rest are counted (results.json has them all).
pub const CARDS_MAX: usize = 1000;
/// Cards (violations first, then warnings) that get a zoomed timeline: each is a few KB.
const ZOOMS_MAX: usize = 100;
/// Warnings listed one by one.
const WARNINGS_MAX: usize = 300;
/// Warnings with their own zoomed timeline.
const WARNING_ZOOMS_MAX: usize = 20;
/// Past this many definite holds the full-run timeline draws per-pixel occupancy instead of bars.
const FULL_BARS_MAX: usize = 4000;
/// Locks drawn in the full-run timeline.
const FULL_LOCKS_MAX: usize = 40;
/// Rows (processes) in one zoomed timeline.
const ZOOM_ROWS_MAX: usize = 12;
/// Processes in the fairness table, faults in the schedule table.
const PROCESS_ROWS_MAX: usize = 200;
const FAULT_ROWS_MAX: usize = 300;

const STYLE: &str = r#"
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0;color:#212529;background:#f8f9fa}
main{max-width:1180px;margin:0 auto;padding:0 16px 48px}
h2{margin:28px 0 8px;font-size:19px;border-bottom:1px solid #dee2e6;padding-bottom:4px}
h3{margin:0 0 6px;font-size:16px}
code,.mono{font-family:"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:12.5px}
table{border-collapse:collapse;background:#fff;margin:6px 0}
th,td{border:1px solid #dee2e6;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f1f3f5;font-weight:600}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.banner{padding:16px 24px;color:#fff}
.banner h1{margin:0;font-size:28px;letter-spacing:.5px}
.banner.invalid{background:#c92a2a}.banner.valid{background:#2b8a3e}.banner.unknown{background:#e67700}
.banner .incomplete,.banner .why-unknown{background:rgba(0,0,0,.3);padding:6px 10px;border-radius:3px;font-weight:700}
.banner p{margin:4px 0}
.banner code{background:rgba(0,0,0,.25);padding:2px 6px;border-radius:3px;color:#fff;word-break:break-all}
.params{display:flex;flex-wrap:wrap;gap:4px 18px;margin:8px 0 0;font-size:13px}
.params span b{font-weight:600;opacity:.85}
nav{background:#fff;border-bottom:1px solid #dee2e6;padding:6px 24px;font-size:13px}
nav a{margin-right:14px}
.badge{display:inline-block;padding:0 7px;border-radius:9px;font-size:12px;font-weight:600;color:#fff}
.b-not-judged{background:#868e96}.b-invalid,.b-safety{background:#c92a2a}.b-valid{background:#2b8a3e}.b-unknown,.b-liveness{background:#e67700}.b-warning{background:#868e96}
.vcard{background:#fff;border:1px solid #dee2e6;border-left:5px solid #c92a2a;border-radius:4px;padding:12px 16px;margin:14px 0}
.vcard.liveness{border-left-color:#e67700}.vcard.warning{border-left-color:#868e96}
.sentence{font-size:15px;margin:6px 0}
table.ops tr.key td{background:#fff3bf}table.ops tr.key td:first-child{font-weight:600}
.why{color:#495057;margin:4px 0}
.evidence{color:#495057;margin:4px 0;font-size:13px;overflow-wrap:anywhere}
.chart{overflow-x:auto;background:#fff;border:1px solid #dee2e6;margin:6px 0}
.chart svg{display:block}
svg text{font-family:"DejaVu Sans",system-ui,sans-serif;font-size:11px;fill:#212529}
svg text.tick{fill:#868e96;font-size:10px}
svg text.lbl{paint-order:stroke;stroke:#fff;stroke-width:3px;font-weight:600}
svg text.flbl{font-size:10px;font-weight:600;paint-order:stroke;stroke:#fff;stroke-width:3px}
.legend{font-size:12px;color:#495057;margin:2px 0 0}
.legend i{display:inline-block;width:14px;height:9px;margin:0 4px 0 10px;vertical-align:middle}
.zoombtn{font-size:12px;margin:2px 2px 0 0}
#tip{position:fixed;background:#212529;color:#fff;padding:4px 8px;border-radius:3px;font-size:12px;max-width:460px;pointer-events:none;z-index:9}
.muted{color:#868e96}
"#;

/// The one script: hover details (the hovered shape's `<title>`, without the native tooltip's
/// delay) and zoom buttons for the timelines, which stay hidden without JavaScript. It reads
/// nothing from the run.
const SCRIPT: &str = r#"(function(){var tip=document.getElementById('tip');
document.querySelectorAll('.zoombtns').forEach(function(e){e.hidden=false;});
document.addEventListener('mouseover',function(e){var t=e.target,s=t&&t.querySelector?t.querySelector(':scope>title'):null;if(!s){tip.hidden=true;return;}tip.textContent=s.textContent;tip.hidden=false;});
document.addEventListener('mousemove',function(e){tip.style.left=Math.min(e.clientX+14,window.innerWidth-470)+'px';tip.style.top=(e.clientY+14)+'px';});
document.addEventListener('click',function(e){var b=e.target.closest?e.target.closest('button[data-zoom]'):null;if(!b)return;var box=document.getElementById(b.getAttribute('data-for'));var svg=box?box.querySelector('svg'):null;if(!svg)return;var w=+svg.getAttribute('data-w'),h=+svg.getAttribute('data-h'),z=+(svg.getAttribute('data-z')||1),a=b.getAttribute('data-zoom');z=a==='in'?Math.min(z*2,16):a==='out'?Math.max(z/2,1):1;svg.setAttribute('data-z',z);svg.setAttribute('width',w*z);svg.setAttribute('height',h*z);});
})();"#;

/// What [`render`] needs: the results, the model (absent when history.jsonl could not be read,
/// with the reason), and the config.
pub struct Input<'a> {
    pub results: &'a Results,
    pub model: Result<&'a Model<'a>, String>,
    pub config: Option<&'a RunConfigView>,
    pub title: &'a str,
}

pub fn render(inp: &Input) -> String {
    let r = inp.results;
    let mut s = String::with_capacity(256 * 1024);
    let script_hash = base64(&sha256(SCRIPT.as_bytes()));
    let verdict = r.valid.as_str();
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{script_hash}'; img-src data:; base-uri 'none'; form-action 'none'\">\
<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
<title>lockpick {}: {}</title><style>{STYLE}</style></head><body>\n",
        verdict.to_uppercase(),
        esc(inp.title)
    );
    // Shared SVG definitions, once per document (ids must be unique).
    s.push_str("<svg width=\"0\" height=\"0\" style=\"position:absolute\" aria-hidden=\"true\"><defs><pattern id=\"hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#fff\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#c92a2a\" stroke-width=\"2.5\"/></pattern></defs></svg>\n");
    banner(&mut s, inp);
    s.push_str("<nav><a href=\"#checkers\">Checkers</a><a href=\"#violations\">Violations</a><a href=\"#timeline\">Timeline</a><a href=\"#latency\">Latency</a><a href=\"#ops\">Ops</a><a href=\"#coverage\">Coverage</a><a href=\"#fairness\">Fairness</a><a href=\"#faults\">Faults</a><a href=\"#warnings\">Warnings</a></nav>\n<main>\n");
    checkers_table(&mut s, r);
    violations(&mut s, inp);
    match &inp.model {
        Ok(m) => {
            full_timeline(&mut s, m, r);
            latency_charts(&mut s, m);
        }
        Err(why) => {
            let _ = write!(
                s,
                "<h2 id=\"timeline\">Timeline</h2><p class=\"muted\">No timeline: {}</p>",
                esc(why)
            );
        }
    }
    ops_tables(&mut s, r);
    crate::coverage::html(&mut s, r);
    if let Ok(m) = &inp.model {
        fairness(&mut s, m);
        fault_schedule(&mut s, m);
    }
    warnings(&mut s, inp);
    if !r.notes.is_empty() {
        s.push_str("<h2>Notes</h2><ul>");
        for n in &r.notes {
            let _ = write!(s, "<li>{}</li>", esc(n));
        }
        s.push_str("</ul>");
    }
    let _ = writeln!(
        s,
        "</main><div id=\"tip\" hidden></div><script>{SCRIPT}</script></body></html>"
    );
    s
}

fn banner(s: &mut String, inp: &Input) {
    let r = inp.results;
    let count = |c: KindClass| r.violations.iter().filter(|v| v.kind.class() == c).count();
    let _ = write!(
        s,
        "<header class=\"banner {v}\"><h1>{V} <span style=\"font-weight:400;font-size:18px\">{}</span></h1>",
        esc(inp.title),
        v = r.valid.as_str(),
        V = r.valid.as_str().to_uppercase()
    );
    match r.incomplete() {
        Some(c) if c.state == history::RunState::Stopped => {
            let _ = write!(
                s,
                "<p class=\"incomplete\" id=\"completeness\">Stopped at the first proven violation: {}. The verdict rests on what was recorded until then.</p>",
                esc(&c.reason)
            );
        }
        Some(c) => {
            let _ = write!(
                s,
                "<p class=\"incomplete\" id=\"completeness\">Incomplete run ({}): {}. The verdict rests on what was recorded before it stopped.</p>",
                c.state,
                esc(&c.reason)
            );
        }
        None => {}
    }
    // Why it is unknown, where the verdict is: the reason summary.txt gives on its verdict line.
    let why_unknown = crate::summary::unknown_reasons(r);
    if !why_unknown.is_empty() {
        let _ = write!(
            s,
            "<p class=\"why-unknown\" id=\"why-unknown\">Unknown because: {}</p>",
            esc(&why_unknown.join("; "))
        );
        if (why_unknown.iter()).any(|w| w.starts_with(history::coverage::NOT_EXERCISED)) {
            let _ = write!(s, "<p>{}</p>", esc(crate::summary::NOT_EXERCISED_HINT));
        }
    }
    let _ = write!(
        s,
        "<p><b>{} violation(s)</b> ({} safety, {} liveness), {} warning(s) · {} events over {} · {} grants · {} nemesis events</p>",
        r.violations.len(),
        count(KindClass::Safety),
        count(KindClass::Liveness),
        r.warnings_found(),
        r.stats.events,
        secs(r.stats.duration_ns),
        r.stats.grants,
        r.stats.nemesis_events
    );
    let _ = write!(
        s,
        "<p class=\"rests-on\">Rests on: {}</p>",
        esc(&crate::summary::rests_on(r))
    );
    if let Some(line) = crate::summary::rounds_line(r) {
        let _ = write!(s, "<p class=\"rounds\">Contention {}</p>", esc(&line));
    }
    match inp.config {
        Some(c) => {
            s.push_str("<div class=\"params\">");
            for (k, v) in c.params() {
                let _ = write!(s, "<span><b>{}</b> {}</span>", esc(&k), esc(&v));
            }
            s.push_str("</div>");
            match &c.rerun {
                Some(cmd) => {
                    let _ = write!(s, "<p>Reproduce: <code>{}</code></p>", esc(cmd));
                }
                None => s.push_str("<p>config.toml names no rerun command.</p>"),
            }
        }
        None => s.push_str("<p>No config.toml in this run directory: parameters unknown.</p>"),
    }
    s.push_str("</header>\n");
}

fn status_badge(status: &str) -> String {
    format!("<span class=\"badge b-{0}\">{0}</span>", status)
}

fn class_name(k: ViolationKind) -> &'static str {
    match k.class() {
        KindClass::Safety => "safety",
        KindClass::Liveness => "liveness",
        KindClass::Warning => "warning",
    }
}

fn checkers_table(s: &mut String, r: &Results) {
    s.push_str("<h2 id=\"checkers\">Checkers</h2><table><tr><th>checker</th><th>verdict</th><th>violations</th><th>warnings</th><th>kinds found</th><th>notes</th></tr>");
    for c in &r.checkers {
        let mut kinds: Vec<&str> = r
            .violations
            .iter()
            .chain(&r.warnings)
            .filter(|v| checker_of(v.kind) == c.name)
            .map(|v| v.kind.as_str())
            .collect();
        kinds.sort();
        kinds.dedup();
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td></tr>",
            esc(&c.name),
            status_badge(c.status()),
            c.violations,
            c.warnings,
            kinds.join(", "),
            esc(&c
                .not_judged
                .iter()
                .map(|w| format!("not judged: {w}"))
                .chain(c.notes.iter().cloned())
                .collect::<Vec<_>>()
                .join("; "))
        );
    }
    s.push_str("</table>\n");
}

/// An acquire waiting for its answer (the legend's violet): neither refused (red) nor granted.
const WAITING: &str = "#7048e8";

/// Violations of one kind on one lock whose windows overlap or touch, shown as one card: a
/// racy service makes dozens of pairwise double-grants out of one moment when six clients held
/// the lock, and a reader wants that moment, with the pairs inside it.
///
/// With the checkers' incidents (`Results::incidents`, one root cause across kinds: a double
/// grant with the token reuses and stale releases that followed) a card is one of those
/// instead, its cause first and its consequences counted under it.
struct Incident<'a> {
    members: Vec<&'a Violation>,
    window_ns: [u64; 2],
    /// The checkers' incident this card shows, if results.json has them.
    of: Option<&'a history::Incident>,
    /// Per member: a `token-regressed` by overlap.
    overlap: Vec<bool>,
}

/// The checkers' incidents as cards, in their order; the same-kind grouping below for a
/// results.json written before incidents were grouped.
fn cards_of(r: &Results) -> Vec<Incident<'_>> {
    if r.incidents.is_empty() {
        return incidents(&r.violations);
    }
    r.incidents
        .iter()
        .map(|inc| {
            let members: Vec<&Violation> = inc
                .violations
                .iter()
                .filter_map(|&i| r.violations.get(i))
                .collect();
            Incident {
                overlap: inc
                    .violations
                    .iter()
                    .map(|i| inc.by_overlap.contains(i))
                    .collect(),
                members,
                window_ns: inc.window_ns,
                of: Some(inc),
            }
        })
        .collect()
}

/// At most this many member sentences are listed in one incident card.
const INCIDENT_MEMBERS_MAX: usize = 50;

/// At most this many members' cycles are drawn in one incident card (each is in results.json).
const INCIDENT_CYCLES_MAX: usize = 2;
/// At most this many ops of an incident go into its table and zoomed timeline.
const INCIDENT_OPS_MAX: usize = 40;

fn incidents(vs: &[Violation]) -> Vec<Incident<'_>> {
    let mut sorted: Vec<&Violation> = vs.iter().collect();
    sorted.sort_by(|a, b| {
        (a.kind, &a.lock, a.window_ns[0], a.window_ns[1]).cmp(&(
            b.kind,
            &b.lock,
            b.window_ns[0],
            b.window_ns[1],
        ))
    });
    let mut out: Vec<Incident> = Vec::new();
    for v in sorted {
        match out.last_mut() {
            Some(i)
                if i.members[0].kind == v.kind
                    && i.members[0].lock == v.lock
                    && v.window_ns[0] <= i.window_ns[1] =>
            {
                i.window_ns[1] = i.window_ns[1].max(v.window_ns[1]);
                i.members.push(v);
            }
            _ => out.push(Incident {
                members: vec![v],
                window_ns: v.window_ns,
                of: None,
                overlap: Vec::new(),
            }),
        }
    }
    out.sort_by_key(|i| (i.window_ns[0], i.members[0].kind));
    out
}

fn violations(s: &mut String, inp: &Input) {
    let r = inp.results;
    let groups = cards_of(r);
    let _ = write!(
        s,
        "<h2 id=\"violations\">Violations ({}, in {} incident(s))</h2>",
        r.violations.len(),
        groups.len()
    );
    if r.violations.is_empty() {
        match r.valid {
            Validity::Unknown => {
                let _ = write!(
                    s,
                    "<p>None proven, but the verdict is unknown: {}.</p>",
                    esc(&crate::summary::unknown_reasons(r).join("; "))
                );
            }
            _ => s.push_str(
                "<p>None: the history proves that mutual exclusion and fencing held.</p>",
            ),
        }
    }
    for (i, g) in groups.iter().enumerate().take(CARDS_MAX) {
        let id = format!("v{}", i + 1);
        if g.members.len() == 1 {
            let overlap = g.overlap.first().copied().unwrap_or(false);
            card(s, inp, g.members[0], &id, i < ZOOMS_MAX, true, overlap);
        } else {
            incident_card(s, inp, g, &id, i < ZOOMS_MAX);
        }
    }
    if groups.len() > CARDS_MAX {
        let _ = write!(
            s,
            "<p>… and {} more incident(s) in results.json.</p>",
            groups.len() - CARDS_MAX
        );
    }
}

/// The clients an incident's ops belong to.
fn incident_clients(m: &Model, ops: &[u64]) -> usize {
    let mut seen = HashSet::new();
    for &i in ops {
        if let Some(p) = m.op(i).and_then(|r| r.invoke.process.client()) {
            seen.insert(p);
        }
    }
    seen.len()
}

fn incident_card(s: &mut String, inp: &Input, g: &Incident, id: &str, zoom: bool) {
    let first = g.members[0];
    let kind = first.kind;
    let cls = class_name(kind);
    let lock = first.lock.as_deref().unwrap_or("?");
    let mut ops: Vec<u64> = g
        .members
        .iter()
        .flat_map(|v| v.ops.iter().copied())
        .collect();
    ops.sort_unstable();
    ops.dedup();
    let headline = incident_headline(inp, g, &ops);
    let counted = match g
        .of
        .and_then(|inc| crate::incidents::consequences(inc, inp.results))
    {
        Some(c) => format!(
            "{} violations in one incident; consequences: {c}.",
            g.members.len()
        ),
        None => format!("{} violations in one incident.", g.members.len()),
    };
    let _ = write!(
        s,
        "<article class=\"vcard {cls}\" id=\"{id}\" data-violation-card data-violations=\"{}\"><h3><span class=\"badge b-{cls}\">{cls}</span> {kind} on <code>{}</code> <span class=\"muted\">{} – {}</span></h3><p class=\"sentence\">{}: {}</p><p class=\"why\">{}</p>",
        g.members.len(),
        esc(lock),
        secs(g.window_ns[0]),
        secs(g.window_ns[1]),
        esc(&headline),
        esc(&counted),
        if g.overlap.first() == Some(&true) {
            WHY_BY_OVERLAP
        } else {
            kind.meaning()
        }
    );
    // A member's cycle (a deadlock's waits, critical sections that no order can give) is
    // drawn as its own card draws it, under its sentence: the headline tells the cause, the
    // drawing what followed from it.
    let cycles = g.members.iter().filter(|v| !v.cycle.is_empty());
    for (k, v) in cycles.take(INCIDENT_CYCLES_MAX).enumerate() {
        let _ = write!(
            s,
            "<div class=\"member-cycle\"><p class=\"cycle-sentence\"><b>{}</b>: {}</p>",
            v.kind,
            esc(&v.explanation)
        );
        let figure_id = format!("{id}-c{k}");
        s.push_str(&crate::cycle::figure(
            &v.cycle,
            &figure_id,
            cycle_caption(v.kind),
        ));
        s.push_str("</div>");
    }
    let mut faults: Vec<&ActiveFault> = g.members.iter().flat_map(|v| &v.nemesis).collect();
    faults.sort_by_key(|f| f.index);
    faults.dedup_by_key(|f| f.index);
    faults_active(s, &faults);
    // The ops of the incident's first violation (the one its headline tells: a double grant's
    // two grants) lead the table, marked; the consequences' ops follow in history order.
    let mut key = first.ops.clone();
    key.sort_unstable();
    key.dedup();
    ops.retain(|i| key.binary_search(i).is_err());
    let rest = ops;
    let mut ops = key.clone();
    ops.extend(rest);
    ops.truncate(INCIDENT_OPS_MAX);
    if let Ok(m) = &inp.model {
        if ops.len() > key.len() {
            s.push_str("<p class=\"muted\">The marked rows are the first violation's ops, which the sentence tells; the rows after them are the ops of the violations that followed from it.</p>");
        }
        ops_table(s, m, &ops, &key);
        if zoom {
            let whole = Violation {
                cycle: Vec::new(),
                kind,
                lock: first.lock.clone(),
                ops: ops.clone(),
                window_ns: g.window_ns,
                nemesis: Vec::new(),
                explanation: headline.clone(),
            };
            zoom_timeline(s, m, &whole, id);
        }
    }
    incident_members(s, inp, g);
    s.push_str("</article>\n");
}

/// An incident's headline: the checkers' explanation when they grouped it (with the clients
/// that held the lock during a double grant), else what its members have in common.
fn incident_headline(inp: &Input, g: &Incident, ops: &[u64]) -> String {
    let first = g.members[0];
    let kind = first.kind;
    let lock = first.lock.as_deref().unwrap_or("?");
    match (&inp.model, kind, g.of) {
        (Ok(m), ViolationKind::DoubleGrant, Some(inc)) => format!(
            "{}; {} clients held {lock} during it",
            inc.explanation,
            incident_clients(m, ops),
        ),
        (_, _, Some(inc)) => inc.explanation.clone(),
        (Ok(m), ViolationKind::DoubleGrant, None) => format!(
            "{} clients held {} at once from {}",
            incident_clients(m, ops),
            lock,
            secs(g.window_ns[0])
        ),
        _ => format!(
            "{} {kind} violations on {lock} between {} and {}",
            g.members.len(),
            secs(g.window_ns[0]),
            secs(g.window_ns[1])
        ),
    }
}

/// The violations an incident groups, each sentence with its ops and evidence, under a
/// `<details>` (at most [`INCIDENT_MEMBERS_MAX`]; the rest are counted).
fn incident_members(s: &mut String, inp: &Input, g: &Incident) {
    let _ = write!(
        s,
        "<details><summary>The {} violations inside</summary><ol>",
        g.members.len()
    );
    for (i, v) in g.members.iter().enumerate().take(INCIDENT_MEMBERS_MAX) {
        let ops: Vec<String> = v.ops.iter().map(u64::to_string).collect();
        // Across kinds (the checkers' incidents), each sentence says its kind.
        let label = match (g.of, g.overlap.get(i).copied().unwrap_or(false)) {
            (Some(_), true) => format!(
                "<b>{}</b> ({}): ",
                v.kind,
                esc(crate::incidents::BY_OVERLAP)
            ),
            (Some(_), false) => format!("<b>{}</b>: ", v.kind),
            (None, _) => String::new(),
        };
        let _ = write!(
            s,
            "<li>{label}{} <span class=\"muted\">(ops {})</span>",
            esc(&v.explanation),
            ops.join(", ")
        );
        evidence(s, v, inp.results);
        s.push_str("</li>");
    }
    s.push_str("</ol>");
    if g.members.len() > INCIDENT_MEMBERS_MAX {
        let _ = write!(
            s,
            "<p>… and {} more in results.json.</p>",
            g.members.len() - INCIDENT_MEMBERS_MAX
        );
    }
    s.push_str("</details>");
}

/// A fault in words: `pause of n1 for 1.500 s (op 12)`, `partition (halves) (op 30)`,
/// `clock (fast) of n2 (op 41)`.
fn fault_words(f: &ActiveFault) -> String {
    let kind = history::FaultOp::of(&f.f).kind().unwrap_or(&f.f);
    let v = &f.value;
    let nodes: Vec<String> = v
        .get("nodes")
        .and_then(|x| x.as_array())
        .map(|a| {
            a.iter()
                .map(|n| n.as_str().map_or_else(|| n.to_string(), str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let mut w = kind.to_string();
    // Its variant (a partition's topology, a clock fault's mode), by the field its family
    // names it in.
    let variant = history::FaultFamily::named(kind)
        .map(|family| family.variant_field)
        .filter(|field| !field.is_empty())
        .and_then(|field| v.get(field)?.as_str());
    if let Some(variant) = variant {
        let _ = write!(w, " ({variant})");
    }
    if !nodes.is_empty() {
        let _ = write!(w, " of {}", nodes.join(", "));
    }
    // A rolling kill: its second wave, killed once the first was back.
    let then: Vec<&str> = v
        .get(history::FaultFamily::THEN_NODES)
        .and_then(|x| x.as_array())
        .map(|a| a.iter().filter_map(|n| n.as_str()).collect())
        .unwrap_or_default();
    if !then.is_empty() {
        let _ = write!(w, ", then of {}, each", then.join(", "));
    }
    if let Some(p) = v.get("process").and_then(|p| p.as_u64()) {
        let _ = write!(w, " of p{p}");
    }
    if let Some(ms) = v.get("length_ms").and_then(|l| l.as_u64()) {
        let _ = write!(w, " for {}", secs(ms.saturating_mul(1_000_000)));
    }
    let _ = write!(w, " (op {})", f.index);
    w
}

/// What the service itself answered on the violation's ops (`Results::evidence`: its node,
/// backend pid, session...), the line summary.txt prints under the same violation.
fn evidence(s: &mut String, v: &Violation, r: &Results) {
    if let Some(e) = crate::summary::evidence_line(v, &r.evidence) {
        let _ = write!(
            s,
            "<p class=\"evidence\">The service's evidence: {}</p>",
            esc(&e)
        );
    }
}

fn faults_active(s: &mut String, faults: &[&ActiveFault]) {
    if faults.is_empty() {
        s.push_str("<p>Faults active: none.</p>");
        return;
    }
    let words: Vec<String> = faults.iter().map(|f| esc(&fault_words(f))).collect();
    let _ = write!(s, "<p>Faults active: {}.</p>", words.join("; "));
}

/// A `token-regressed` by exclusivity, in one sentence: what it says, where the kind's own
/// sentence would send the reader to the token counter.
const WHY_BY_OVERLAP: &str = "The tokens did not go backwards in real time: they rose in the order the grants were answered. But the grant with the higher token came while the other's lease surely lasted, so either two clients held the lock at once or that grant came first with the higher token; either way the service broke mutual exclusion or token order, and the overlap is the likely reading (docs/checkers.md, token-regressed by exclusivity).";

/// What an arrow of a violation's cycle drawing means.
fn cycle_caption(kind: ViolationKind) -> &'static str {
    match kind {
        ViolationKind::Deadlock => "Each arrow points from a client to the client holding the lock it waits for: around the circle, every one of them waits and none can go on.",
        ViolationKind::NonSerializable => "Each arrow points from a critical section to one that must come after it (ww: wrote the next version; wr: read its write; rw: replaced the version it read; rt: began after it ended): around the circle, no order of them is left.",
        _ => "Each arrow points from one member of the cycle to the next: follow them once around.",
    }
}

fn card(
    s: &mut String,
    inp: &Input,
    v: &Violation,
    id: &str,
    zoom: bool,
    is_violation: bool,
    by_overlap: bool,
) {
    let cls = class_name(v.kind);
    let _ = write!(
        s,
        "<article class=\"vcard {cls}\" id=\"{id}\"{}><h3><span class=\"badge b-{cls}\">{cls}</span> {}",
        if is_violation {
            " data-violation-card data-violations=\"1\""
        } else {
            ""
        },
        v.kind
    );
    if let Some(l) = &v.lock {
        let _ = write!(s, " on <code>{}</code>", esc(l));
    }
    let _ = write!(
        s,
        " <span class=\"muted\">{} – {}</span></h3><p class=\"sentence\">{}</p><p class=\"why\">{}</p>",
        secs(v.window_ns[0]),
        secs(v.window_ns[1]),
        esc(&v.explanation),
        if by_overlap { WHY_BY_OVERLAP } else { v.kind.meaning() }
    );
    s.push_str(&crate::cycle::figure(&v.cycle, id, cycle_caption(v.kind)));
    evidence(s, v, inp.results);
    faults_active(s, &v.nemesis.iter().collect::<Vec<_>>());
    if let Ok(m) = &inp.model {
        ops_table(s, m, &v.ops, &[]);
        if zoom {
            zoom_timeline(s, m, v, id);
        }
    } else {
        let ops: Vec<String> = v.ops.iter().map(u64::to_string).collect();
        let _ = write!(s, "<p>Ops: {}</p>", ops.join(", "));
    }
    s.push_str("</article>\n");
}

fn outcome_str(o: Option<Outcome>) -> &'static str {
    o.map(Outcome::as_str).unwrap_or("event")
}

/// The ops `indices` as a table, in that order; the rows of `key` (sorted) are marked as the
/// ones the sentence above is about.
fn ops_table(s: &mut String, m: &Model, indices: &[u64], key: &[u64]) {
    s.push_str("<table class=\"ops\"><tr><th>op</th><th>process</th><th>f</th><th>lock / key</th><th>invoke</th><th>complete</th><th>token</th><th>outcome</th><th>details</th></tr>");
    for &i in indices.iter().take(50) {
        let marked = key.binary_search(&i).is_ok();
        let Some(row) = m.op(i) else {
            let _ = write!(
                s,
                "<tr><td class=\"n\">{i}</td><td colspan=\"8\">not in history.jsonl</td></tr>"
            );
            continue;
        };
        let inv = row.invoke;
        let c = row.complete;
        let token = c
            .and_then(|c| c.value.token)
            .or(inv.value.token)
            .map(|t| t.to_string())
            .unwrap_or_default();
        let details = op_details(inv, c.map(|c| &c.value).unwrap_or(&inv.value));
        let _ = write!(
            s,
            "<tr{}><td class=\"n\">{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td></tr>",
            if marked {
                " class=\"key\" title=\"an op of the first violation, which the sentence tells\""
            } else {
                ""
            },
            // The checkers name the completion (or the invoke); show where the op began too.
            if inv.index == i {
                i.to_string()
            } else {
                format!("{i} <span class=\"muted\">(invoked {})</span>", inv.index)
            },
            inv.process,
            esc(inv.f.as_str()),
            esc(inv.lock.as_deref().or(inv.key.as_deref()).unwrap_or("")),
            secs(inv.time_ns),
            c.map(|c| secs(c.time_ns)).unwrap_or_else(|| "—".into()),
            token,
            outcome_str(row.outcome),
            esc(&details)
        );
    }
    if indices.len() > 50 {
        let _ = write!(
            s,
            "<tr><td colspan=\"9\">… {} more ops</td></tr>",
            indices.len() - 50
        );
    }
    s.push_str("</table>");
}

/// An op's details column: from `val` (its completion's value, or its invoke's when it has no
/// completion), the value, sequence number, TTL, error, final read and any other field.
fn op_details(inv: &history::Op, val: &history::OpValue) -> String {
    let mut details = Vec::new();
    if let Some(x) = val.value.or(inv.value.value) {
        details.push(format!("value {x}"));
    }
    if let Some(x) = val.seq {
        details.push(format!("seq {x}"));
    }
    if let Some(x) = val.ttl_ms.or(inv.value.ttl_ms) {
        details.push(format!("ttl {x} ms"));
    }
    if let Some(e) = &val.error {
        details.push(format!("error: {e}"));
    }
    if val.is_final {
        details.push("final read".into());
    }
    for (k, x) in &val.extra {
        details.push(format!("{k}: {x}"));
    }
    details.join(", ")
}

const ZOOM_W: f64 = 1100.0;
const GUTTER: f64 = 70.0;
const ROW_H: f64 = 34.0;
const AXIS_H: f64 = 34.0;

/// Past this many faults in view, bands would cover the whole chart: faults are drawn as a
/// strip of per-column coverage along the top instead.
const FAULT_BANDS_MAX: usize = 150;
/// Columns of that strip.
const FAULT_STRIP_COLS: usize = 400;

fn fault_bands(s: &mut String, m: &Model, sc: &Scale, top: f64, bottom: f64, labels: bool) {
    let in_view: Vec<&crate::model::Fault> = m
        .faults
        .iter()
        .filter(|f| f.end_ns >= sc.t0_ns && f.start_ns <= sc.t1_ns)
        .collect();
    if in_view.len() > FAULT_BANDS_MAX {
        fault_strip(s, &in_view, sc, top);
        return;
    }
    // Two label lines: a label that would overlap the previous one on the first line goes
    // to the second; if both are taken it is left to the band's tooltip.
    let mut label_x_end = [f64::MIN; 2];
    for f in in_view {
        let x0 = sc.x(f.start_ns);
        let x1 = sc.x(f.end_ns).max(x0 + 2.0);
        let color = fault_color(&f.kind);
        let _ = write!(
            s,
            "<rect x=\"{x0:.1}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{color}\" fill-opacity=\"0.16\" stroke=\"{color}\" stroke-opacity=\"0.5\"><title>{}: {} – {} (op {})</title></rect>",
            x1 - x0,
            bottom - top,
            esc(&f.label),
            secs(f.start_ns),
            secs(f.end_ns),
            f.index
        );
        let width = 6.5 * f.label.chars().count() as f64;
        let line = (0..2).find(|&l| x0 > label_x_end[l] && x0 + width < sc.x1 + 10.0);
        if let (true, Some(line)) = (labels, line) {
            let _ = write!(
                s,
                "<text x=\"{:.1}\" y=\"{:.1}\" class=\"flbl\" style=\"fill:{color}\">{}</text>",
                x0 + 2.0,
                top + 10.0 + 11.0 * line as f64,
                esc(&f.label)
            );
            label_x_end[line] = x0 + width;
        }
    }
}

/// Faults as a 9 px strip: each column coloured by the kind active longest in it, its opacity
/// the share of the column some fault was active.
fn fault_strip(s: &mut String, faults: &[&crate::model::Fault], sc: &Scale, top: f64) {
    let span = sc.t1_ns.saturating_sub(sc.t0_ns).max(1);
    let col_ns = span.div_ceil(FAULT_STRIP_COLS as u64).max(1);
    // Per column: (covered ns, longest kind's ns, kind).
    let mut cols: Vec<(u64, u64, &str)> = vec![(0, 0, ""); FAULT_STRIP_COLS];
    for f in faults {
        let a = f.start_ns.max(sc.t0_ns) - sc.t0_ns;
        let b = f.end_ns.min(sc.t1_ns).saturating_sub(sc.t0_ns).max(a + 1);
        let (c0, c1) = ((a / col_ns) as usize, ((b - 1) / col_ns) as usize);
        for (c, col) in cols
            .iter_mut()
            .enumerate()
            .take(c1.min(FAULT_STRIP_COLS - 1) + 1)
            .skip(c0)
        {
            let lo = (c as u64 * col_ns).max(a);
            let hi = ((c as u64 + 1) * col_ns).min(b);
            let d = hi.saturating_sub(lo);
            col.0 += d;
            if d > col.1 {
                *col = (col.0, d, f.kind.as_str());
            }
        }
    }
    let _ = write!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" class=\"tick\" text-anchor=\"end\">faults</text>",
        sc.x0 - 4.0,
        top + 8.0
    );
    for (c, (covered, _, kind)) in cols.iter().enumerate() {
        if *covered == 0 {
            continue;
        }
        let x0 = sc.x(sc.t0_ns + c as u64 * col_ns);
        let x1 = sc.x(sc.t0_ns + (c as u64 + 1) * col_ns);
        let _ = write!(
            s,
            "<rect x=\"{x0:.1}\" y=\"{top:.1}\" width=\"{:.2}\" height=\"9\" fill=\"{}\" fill-opacity=\"{:.2}\"/>",
            (x1 - x0).max(0.5),
            fault_color(kind),
            0.25 + 0.75 * (*covered as f64 / col_ns as f64).min(1.0)
        );
    }
}

/// Definite holds listed one by one in a hold's tooltip; the rest are counted.
const SEGMENTS_LISTED: usize = 6;

fn hold_title(m: &Model, h: &Hold) -> String {
    let lock = m
        .locks()
        .get(h.lock as usize)
        .map(String::as_str)
        .unwrap_or("?");
    let Some(g) = m.grant(h) else {
        let dead = match h.proof {
            Proof::Maybe { dead_ns: Some(d) } => {
                format!("if it was granted, its lease is surely dead after {}", secs(d))
            }
            _ => "no bound on its lease, if it was granted (the acquire never completed or named no ttl)".to_string(),
        };
        return format!(
            "p{} may hold {} (indeterminate acquire, op {}): invoked {}; not proven, {dead}",
            h.process,
            lock,
            h.acquire_index,
            secs(h.start_ns),
        );
    };
    let token = h.token.map(|t| t.to_string()).unwrap_or_else(|| "?".into());
    let held = if g.holds.is_empty() {
        "the checkers prove no definite hold".to_string()
    } else {
        let mut spans: Vec<String> = g
            .holds
            .iter()
            .take(SEGMENTS_LISTED)
            .map(|x| format!("{} – {}", secs(x.start_ns), secs(x.end_ns)))
            .collect();
        if g.holds.len() > SEGMENTS_LISTED {
            spans.push(format!("{} more", g.holds.len() - SEGMENTS_LISTED));
        }
        format!("definitely held {}", spans.join(", "))
    };
    let dead = match g.surely_dead_ns {
        Some(d) => format!("surely dead after {}", secs(d)),
        None => "no surely-dead bound (an op that never completed may set the lease, or its ttl is unknown)".to_string(),
    };
    format!(
        "p{} holds {} with token {}: granted {} (op {}); {held}; lease lower bound {}, {dead}; client believed it held until {}",
        h.process,
        lock,
        token,
        secs(h.start_ns),
        h.acquire_index,
        secs(g.lease_lb_ns),
        secs(h.end_ns)
    )
}

/// The data attributes of a drawn definite hold: the acquire that the checkers' grant names,
/// and the segment's bounds in ns, exactly as `checkers::Grant::holds` has them.
fn hold_data(h: &Hold, start_ns: u64, end_ns: u64) -> String {
    format!(
        "data-hold=\"{}\" data-start-ns=\"{start_ns}\" data-end-ns=\"{end_ns}\"",
        h.acquire_index
    )
}

/// What a zoomed timeline shows: the time it spans and one row per process.
struct ZoomView {
    t0_ns: u64,
    t1_ns: u64,
    /// The context around the violation window (store ops are looked up this far before t0).
    pad_ns: u64,
    /// Processes, one row each: the proving ops' processes first.
    rows: Vec<u64>,
    /// How many of `rows` are the proving ops' processes (their labels are drawn in red).
    proving_rows: usize,
}

/// The span and rows of a violation's zoomed timeline: the window with some context, widened
/// to the proving processes' holds, and the lock's other holders and store clients as rows.
fn zoom_view(m: &Model, v: &Violation, lock_id: Option<u32>) -> ZoomView {
    let w0 = v.window_ns[0];
    let w1 = v.window_ns[1].max(w0);
    // Context around the window: a quarter of it, at least 50 ms, so the grants that lead to
    // the violation and the releases after it are in view.
    let pad = ((w1 - w0) / 4).max(50_000_000);
    let mut t0 = w0.saturating_sub(pad);
    let mut t1 = (w1 + pad).min(m.end_ns.max(w1));
    // Rows: the processes of the proving ops first, then the other holders of the lock.
    let mut rows: Vec<u64> = Vec::new();
    let mut seen = HashSet::new();
    for &i in &v.ops {
        if let Some(p) = m.op(i).and_then(|r| r.invoke.process.client()) {
            if seen.insert(p) {
                rows.push(p);
            }
        }
    }
    // Their row labels are drawn in red: the rows that prove the violation.
    let proving_rows = rows.len();
    // Widen the view to the whole holds of those processes around the window (a lost update
    // starts at the read made under the lock, long before the second write), within bounds so
    // one long hold does not squash the window to a sliver.
    let reach = (2 * (w1 - w0)).max(2_000_000_000);
    for h in m.holds_in(w0, w1) {
        if rows.contains(&h.process) && lock_id.is_none_or(|l| l == h.lock) {
            t0 = t0.min(
                h.start_ns
                    .saturating_sub(pad / 2)
                    .max(w0.saturating_sub(reach)),
            );
            t1 = t1.max((h.end_ns + pad / 2).min(w1 + reach).min(m.end_ns.max(w1)));
        }
    }
    for h in m.holds_in(t0, t1) {
        if rows.len() >= ZOOM_ROWS_MAX {
            break;
        }
        if (lock_id == Some(h.lock)) && seen.insert(h.process) {
            rows.push(h.process);
        }
    }
    if let Some(key) = v.lock.as_deref() {
        for so in m.store_ops_in(t0, t1) {
            if rows.len() >= ZOOM_ROWS_MAX {
                break;
            }
            if so.key == key && seen.insert(so.process) {
                rows.push(so.process);
            }
        }
    }
    rows.truncate(ZOOM_ROWS_MAX);
    debug_assert!(t0 <= t1, "a zoomed timeline spans forward in time");
    ZoomView {
        t0_ns: t0,
        t1_ns: t1,
        pad_ns: pad,
        rows,
        proving_rows,
    }
}

const ZOOM_LEGEND: &str = "<p class=\"legend\"><i style=\"background:hsl(200,62%,42%)\"></i>definite hold, as the checkers proved it (colour and label: token)<i style=\"background:repeating-linear-gradient(45deg,#c92a2a 0 2px,#fff 2px 5px)\"></i>client believed it held, but no hold is proven (past its lease's lower bound, or before a late renew took effect)<i style=\"border:1px dashed #495057\"></i>indeterminate acquire, not proven ┊ grant that proves no hold │ lease's lower bound ✕ lease surely dead <i style=\"background:#c92a2a;height:3px\"></i>op the violation names (#index), invoke to answer <i style=\"border-top:3px dashed #7048e8;height:0\"></i>acquire waiting for its answer (to the end of the history when none came) <i style=\"border:1px dashed #7048e8\"></i>acquire still waiting when the history ends <i style=\"background:#2b8a3e\"></i>write accepted <i style=\"background:#c92a2a\"></i>refused <i style=\"background:#fff;border:1px solid #2b8a3e\"></i>read <i style=\"background:#ffe3e3\"></i>violation window <i style=\"background:#f08c00;opacity:.4\"></i>fault</p>";

fn zoom_timeline(s: &mut String, m: &Model, v: &Violation, id: &str) {
    let lock_id = v.lock.as_deref().and_then(|l| m.lock_id(l));
    let view = zoom_view(m, v, lock_id);
    let height = AXIS_H + view.rows.len().max(1) as f64 * ROW_H + 8.0;
    let sc = Scale {
        t0_ns: view.t0_ns,
        t1_ns: view.t1_ns,
        x0: GUTTER,
        x1: ZOOM_W - 12.0,
    };
    zoom_frame(s, v, &sc, id, height);
    axis(s, &sc, AXIS_H - 14.0, height);
    fault_bands(s, m, &sc, AXIS_H - 12.0, height, true);
    // In the violation's order: the output must not depend on hashing.
    let mut proving: Vec<u64> = v.ops.clone();
    proving.dedup();
    for (r, &p) in view.rows.iter().enumerate() {
        let y = AXIS_H + r as f64 * ROW_H;
        let _ = write!(
            s,
            "<line x1=\"{GUTTER}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#f1f3f5\"/><text x=\"6\" y=\"{:.1}\" style=\"font-weight:700{}\">p{p}</text>",
            y + ROW_H,
            ZOOM_W - 12.0,
            y + ROW_H,
            y + 19.0,
            if r < view.proving_rows { ";fill:#c92a2a" } else { "" }
        );
        for h in m
            .holds_in(view.t0_ns, view.t1_ns)
            .filter(|h| h.process == p)
            .take(50)
        {
            hold_bar(s, m, &sc, h, y, lock_id.is_none_or(|l| l == h.lock));
        }
        for so in m
            .store_ops_in(view.t0_ns.saturating_sub(view.pad_ns), view.t1_ns)
            .iter()
            .filter(|so| so.process == p && so.complete_ns >= view.t0_ns)
            .take(100)
        {
            store_op_mark(s, &sc, so, y);
        }
        proving_spans(s, m, &sc, &proving, p, y);
    }
    s.push_str("</svg></div>");
    s.push_str(ZOOM_LEGEND);
}

/// The zoom buttons, the opening of the zoomed timeline's svg (box `z-{id}`) and the
/// violation window, shaded behind everything drawn after it.
fn zoom_frame(s: &mut String, v: &Violation, sc: &Scale, id: &str, height: f64) {
    let w0 = v.window_ns[0];
    let w1 = v.window_ns[1].max(w0);
    let box_id = format!("z-{id}");
    let _ = write!(
        s,
        "<div class=\"zoomctl\"><span class=\"zoombtns\" hidden><button class=\"zoombtn\" data-zoom=\"in\" data-for=\"{box_id}\">zoom +</button><button class=\"zoombtn\" data-zoom=\"out\" data-for=\"{box_id}\">zoom −</button><button class=\"zoombtn\" data-zoom=\"reset\" data-for=\"{box_id}\">reset</button></span> <span class=\"muted\">timeline of {} around the window, one row per client</span></div>",
        v.lock
            .as_deref()
            .map(|l| format!("<code>{}</code>", esc(l)))
            .unwrap_or_else(|| "the ops".into())
    );
    let _ = write!(
        s,
        "<div class=\"chart\" id=\"{box_id}\"><svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {ZOOM_W} {height:.0}\" width=\"{ZOOM_W}\" height=\"{height:.0}\" data-w=\"{ZOOM_W}\" data-h=\"{height:.0}\" role=\"img\" aria-label=\"zoomed timeline\">"
    );
    // The violation window, shaded behind everything.
    let _ = write!(
        s,
        "<rect x=\"{:.1}\" y=\"{AXIS_H}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#ffe3e3\"><title>violation window {} – {}</title></rect>",
        sc.x(w0),
        (sc.x(w1) - sc.x(w0)).max(2.0),
        height - AXIS_H,
        secs(w0),
        secs(w1)
    );
}

/// One store op on its process's row: filled for a write, hollow for a read, coloured by its
/// outcome, with a ✓/✗ after a write wide enough to carry one.
fn store_op_mark(s: &mut String, sc: &Scale, so: &StoreOp, y: f64) {
    let x0 = sc.x(so.invoke_ns);
    let x1 = sc.x(so.complete_ns).max(x0 + 3.0);
    let color = match so.outcome {
        Outcome::Ok => "#2b8a3e",
        Outcome::Fail => "#c92a2a",
        _ => "#868e96",
    };
    let fill = if so.write { color } else { "#fff" };
    let title = format!(
        "{} {} by p{} with token {}{}: {}{}{} (op {})",
        if so.write { "write" } else { "read" },
        so.key,
        so.process,
        so.token
            .map(|t| t.to_string())
            .unwrap_or_else(|| "none".into()),
        so.value.map(|v| format!(", value {v}")).unwrap_or_default(),
        if so.outcome == Outcome::Ok && so.write {
            "accepted"
        } else {
            so.outcome.as_str()
        },
        so.seq.map(|x| format!(" as seq {x}")).unwrap_or_default(),
        so.error
            .as_deref()
            .map(|e| format!(" ({e})"))
            .unwrap_or_default(),
        so.index
    );
    let _ = write!(
        s,
        "<rect x=\"{x0:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"7\" fill=\"{fill}\" stroke=\"{color}\" stroke-width=\"1.5\"><title>{}</title></rect>",
        y + 24.0,
        x1 - x0,
        esc(&title)
    );
    if so.write && x1 - x0 >= 3.0 {
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" style=\"font-size:9px;fill:{color}\">{}</text>",
            x1 + 2.0,
            y + 31.0,
            if so.outcome == Outcome::Ok {
                "w✓"
            } else {
                "w✗"
            }
        );
    }
}

/// The proving ops of process `p`, on top of its row: a red span from invoke to completion
/// with the op number (a number that would overprint the previous one is left to the tooltip).
fn proving_spans(s: &mut String, m: &Model, sc: &Scale, proving: &[u64], p: u64, y: f64) {
    let mut label_end = f64::MIN;
    for &i in proving {
        let Some(row) = m.op(i) else { continue };
        if row.invoke.process.client() != Some(p) {
            continue;
        }
        let a = row.invoke.time_ns;
        let b = row.complete.map(|c| c.time_ns).unwrap_or(m.end_ns);
        if b < sc.t0_ns || a > sc.t1_ns {
            continue;
        }
        let (x0, x1) = (sc.x(a), sc.x(b).max(sc.x(a) + 2.0));
        // An acquire's span is its wait for the lock: drawn as waiting, not as a refusal,
        // unless it was refused.
        let waiting = row.invoke.f == history::F::Acquire && row.outcome != Some(Outcome::Fail);
        let (color, style) = if waiting {
            (WAITING, " stroke-dasharray=\"3 2\" data-waiting-op=\"1\"")
        } else {
            ("#c92a2a", "")
        };
        let _ = write!(
            s,
            "<line x1=\"{x0:.1}\" y1=\"{:.1}\" x2=\"{x1:.1}\" y2=\"{:.1}\" stroke=\"{color}\" stroke-width=\"3\"{style}><title>op {i}: {} {} {}</title></line>",
            y + 3.0,
            y + 3.0,
            esc(row.invoke.f.as_str()),
            if row.complete.is_none() { "still waiting" } else { outcome_str(row.outcome) },
            row.complete.map(|c| secs(c.time_ns)).unwrap_or_default(),
        );
        if x0 > label_end {
            let _ = write!(
                s,
                "<text x=\"{x0:.1}\" y=\"{:.1}\" style=\"font-size:9px;fill:{color};font-weight:600\">#{i}</text>",
                y + 1.0
            );
            label_end = x0 + 6.0 * (1.0 + i.max(1).ilog10() as f64 + 1.0);
        }
    }
}

/// Height of a hold bar on its row; its top is 7 px below the row's.
const BAR_H: f64 = 15.0;

fn hold_bar(s: &mut String, m: &Model, sc: &Scale, h: &Hold, y: f64, main_lock: bool) {
    let title = esc(&hold_title(m, h));
    let by = y + 7.0;
    let bh = BAR_H;
    let Some(g) = m.grant(h) else {
        maybe_bar(s, m, sc, h, by, &title);
        return;
    };
    let color = if main_lock {
        fill_for(h.token.unwrap_or(0))
    } else {
        "#ced4da".to_string()
    };
    // Solid: exactly the definite holds the checkers proved.
    for seg in &g.holds {
        let x0 = sc.x(seg.start_ns);
        let x1 = sc.x(seg.end_ns).max(x0 + 2.0);
        let _ = write!(
            s,
            "<rect x=\"{x0:.1}\" y=\"{by:.1}\" width=\"{:.1}\" height=\"{bh}\" rx=\"2\" fill=\"{color}\" {}><title>{title}</title></rect>",
            x1 - x0,
            hold_data(h, seg.start_ns, seg.end_ns)
        );
    }
    if g.holds.is_empty() && (sc.t0_ns..=sc.t1_ns).contains(&h.start_ns) {
        // A grant that proves no hold: a dotted tick where it returned, for its tooltip.
        let x = sc.x(h.start_ns);
        let _ = write!(
            s,
            "<line x1=\"{x:.1}\" y1=\"{by:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#868e96\" stroke-width=\"2\" stroke-dasharray=\"2 2\" data-no-hold=\"{}\"><title>{title}</title></line>",
            by + bh,
            h.acquire_index
        );
    }
    // Hatched: where the client believed it held but nothing is proven.
    for (a, b) in m.unproven_belief(h) {
        if a > sc.t1_ns || b < sc.t0_ns {
            continue;
        }
        let b0 = sc.x(a);
        let b1 = sc.x(b).max(b0 + 2.0);
        let _ = write!(
            s,
            "<rect x=\"{b0:.1}\" y=\"{by:.1}\" width=\"{:.1}\" height=\"{bh}\" fill=\"url(#hatch)\" stroke=\"#c92a2a\" data-unproven=\"{}\"><title>{title}</title></rect>",
            b1 - b0,
            h.acquire_index
        );
    }
    lease_marks(s, sc, h, g, by);
    hold_label(s, m, sc, h, by, main_lock);
}

/// An indeterminate acquire: dashed, never solid, from its invoke to where its lease would
/// surely be dead (the end of the history when nothing bounds it).
fn maybe_bar(s: &mut String, m: &Model, sc: &Scale, h: &Hold, by: f64, title: &str) {
    debug_assert!(m.grant(h).is_none(), "a granted hold is drawn solid");
    let bh = BAR_H;
    let end = match h.proof {
        Proof::Maybe { dead_ns: Some(d) } => d,
        _ => m.end_ns,
    };
    let x0 = sc.x(h.start_ns);
    let x1 = sc.x(end).max(x0 + 2.0);
    // An acquire the history ends inside is still waiting for its answer: not refused,
    // not granted, its own style.
    let waiting = m.op(h.acquire_index).is_some_and(|r| r.complete.is_none());
    let (stroke, dash, attr) = if waiting {
        (WAITING, "2 2", "data-waiting")
    } else {
        ("#495057", "4 3", "data-maybe")
    };
    let _ = write!(
        s,
        "<rect x=\"{x0:.1}\" y=\"{by:.1}\" width=\"{:.1}\" height=\"{bh}\" fill=\"none\" stroke=\"{stroke}\" stroke-dasharray=\"{dash}\" {attr}=\"{}\"><title>{title}</title></rect>",
        x1 - x0,
        h.acquire_index
    );
}

/// Lease marks, as the checkers have them: lower bound (tick) and surely dead (cross), each
/// where it falls inside the view.
fn lease_marks(s: &mut String, sc: &Scale, h: &Hold, g: &Grant, by: f64) {
    let bh = BAR_H;
    // A grant without a token is named by its op, never as a token 0 it was not given.
    let lease = match h.token {
        Some(t) => format!("lease of token {t}"),
        None => format!("lease of the grant of op {} (no token)", h.acquire_index),
    };
    if (sc.t0_ns..=sc.t1_ns).contains(&g.lease_lb_ns) {
        let x = sc.x(g.lease_lb_ns);
        let _ = write!(
            s,
            "<line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#212529\" stroke-width=\"2\" data-lease-lb=\"{}\"><title>{} surely alive until {}, unless released</title></line>",
            by - 3.0,
            by + bh + 3.0,
            h.acquire_index,
            esc(&lease),
            secs(g.lease_lb_ns)
        );
    }
    if let Some(dead) = g
        .surely_dead_ns
        .filter(|d| (sc.t0_ns..=sc.t1_ns).contains(d))
    {
        let x = sc.x(dead);
        let _ = write!(
            s,
            "<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\" style=\"fill:#c92a2a;font-size:13px;font-weight:700\" data-surely-dead=\"{}\">✕<title>{} surely dead after {}</title></text>",
            by + 12.0,
            h.acquire_index,
            esc(&lease),
            secs(dead)
        );
    }
}

/// A hold's label at its start: its token on the violation's lock, lock and token on another.
fn hold_label(s: &mut String, m: &Model, sc: &Scale, h: &Hold, by: f64, main_lock: bool) {
    let lock = m
        .locks()
        .get(h.lock as usize)
        .map(String::as_str)
        .unwrap_or("");
    let label = match (main_lock, h.token) {
        (true, Some(t)) => format!("token {t}"),
        (true, None) => "token ?".to_string(),
        (false, t) => format!("{lock} t{}", t.map(|t| t.to_string()).unwrap_or_default()),
    };
    let lx = sc.x(h.start_ns).max(sc.x0) + 3.0;
    let _ = write!(
        s,
        "<text x=\"{lx:.1}\" y=\"{:.1}\" class=\"lbl\">{}</text>",
        by + 11.5,
        esc(&label)
    );
}

const FULL_W: f64 = 1100.0;
/// A lock's row in the full-run timeline, and the strip of violation marks above the rows.
const FULL_ROW_H: f64 = 22.0;
const FULL_MARKS_H: f64 = 16.0;

fn full_timeline(s: &mut String, m: &Model, r: &Results) {
    let locks_shown = m.locks().len().min(FULL_LOCKS_MAX);
    let height = AXIS_H + FULL_MARKS_H + locks_shown.max(1) as f64 * FULL_ROW_H + 6.0;
    let sc = Scale {
        t0_ns: 0,
        t1_ns: m.end_ns,
        x0: GUTTER,
        x1: FULL_W - 12.0,
    };
    let segments: usize = m.checks.grants.iter().map(|g| g.holds.len()).sum();
    let downsampled = segments > FULL_BARS_MAX;
    let _ = write!(
        s,
        "<h2 id=\"timeline\">Timeline of the whole run</h2><p class=\"muted\">{} grants on {} lock(s), {segments} definite hold(s) as the checkers proved them{}; red marks are violations (click to jump), grey marks warnings.</p>",
        m.checks.grants.len(),
        m.locks().len(),
        if downsampled {
            format!(
                ", more than {FULL_BARS_MAX}: drawn as the share of each pixel column some client held the lock"
            )
        } else {
            ", coloured by process".to_string()
        }
    );
    let _ = write!(
        s,
        "<div class=\"zoomctl\"><span class=\"zoombtns\" hidden><button class=\"zoombtn\" data-zoom=\"in\" data-for=\"full\">zoom +</button><button class=\"zoombtn\" data-zoom=\"out\" data-for=\"full\">zoom −</button><button class=\"zoombtn\" data-zoom=\"reset\" data-for=\"full\">reset</button></span></div><div class=\"chart\" id=\"full\"><svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {FULL_W} {height:.0}\" width=\"{FULL_W}\" height=\"{height:.0}\" data-w=\"{FULL_W}\" data-h=\"{height:.0}\" role=\"img\" aria-label=\"timeline\">"
    );
    axis(s, &sc, AXIS_H - 14.0, height);
    fault_bands(s, m, &sc, AXIS_H - 12.0, height, true);
    let top = AXIS_H + FULL_MARKS_H;
    for (i, name) in m.locks().iter().take(locks_shown).enumerate() {
        let _ = write!(
            s,
            "<text x=\"6\" y=\"{:.1}\" style=\"font-weight:600\">{}</text>",
            top + i as f64 * FULL_ROW_H + 15.0,
            esc(&truncate(name, 9))
        );
    }
    if downsampled {
        full_occupancy(s, m, &sc, top, locks_shown);
    } else {
        full_bars(s, m, &sc, top, locks_shown);
    }
    if m.locks().len() > locks_shown {
        let _ = write!(
            s,
            "<text x=\"{GUTTER}\" y=\"{:.1}\" class=\"tick\">… {} more lock(s) not drawn</text>",
            height - 2.0,
            m.locks().len() - locks_shown
        );
    }
    finding_marks(s, r, &sc, AXIS_H + FULL_MARKS_H);
    s.push_str("</svg></div>");
}

/// Past [`FULL_BARS_MAX`] holds: per lock, the share of each pixel column some client held it.
fn full_occupancy(s: &mut String, m: &Model, sc: &Scale, top: f64, locks_shown: usize) {
    let cols = 800usize;
    let col_ns = m.end_ns.div_ceil(cols as u64).max(1);
    let mut held = vec![0u64; locks_shown * cols];
    for g in m
        .checks
        .grants
        .iter()
        .filter(|g| (g.lock as usize) < locks_shown)
    {
        for seg in &g.holds {
            let end = seg.end_ns;
            let mut t = seg.start_ns;
            // Bounded by the columns one hold spans.
            for _ in 0..=cols {
                if t >= end {
                    break;
                }
                let c = ((t / col_ns) as usize).min(cols - 1);
                let col_end = ((c as u64 + 1) * col_ns).min(end);
                held[g.lock as usize * cols + c] += col_end.saturating_sub(t);
                t = col_end.max(t + 1);
            }
        }
    }
    for l in 0..locks_shown {
        let y = top + l as f64 * FULL_ROW_H + 3.0;
        for c in 0..cols {
            let frac = (held[l * cols + c] as f64 / col_ns as f64).min(1.0);
            if frac <= 0.0 {
                continue;
            }
            let x0 = sc.x(c as u64 * col_ns);
            let x1 = sc.x((c as u64 + 1) * col_ns);
            let _ = write!(
                s,
                "<rect x=\"{x0:.1}\" y=\"{y:.1}\" width=\"{:.2}\" height=\"15\" fill=\"#1c7ed6\" fill-opacity=\"{:.2}\"/>",
                (x1 - x0).max(0.5),
                0.15 + 0.85 * frac
            );
        }
    }
}

/// The definite holds the checkers proved, one bar per segment, coloured by process: never an
/// indeterminate acquire.
fn full_bars(s: &mut String, m: &Model, sc: &Scale, top: f64, locks_shown: usize) {
    for h in m.holds.iter().filter(|h| (h.lock as usize) < locks_shown) {
        let y = top + h.lock as f64 * FULL_ROW_H + 3.0;
        let segs = m.segments(h);
        if segs.is_empty() {
            continue;
        }
        let title = esc(&hold_title(m, h));
        for seg in segs {
            let x0 = sc.x(seg.start_ns);
            let x1 = sc.x(seg.end_ns).max(x0 + 1.0);
            let _ = write!(
                s,
                "<rect x=\"{x0:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"15\" fill=\"{}\" stroke=\"#fff\" stroke-width=\"0.5\" {}><title>{title}</title></rect>",
                x1 - x0,
                fill_for(h.process),
                hold_data(h, seg.start_ns, seg.end_ns)
            );
        }
    }
}

/// The violations (red, linking to their cards) and warnings (grey) above the lock rows, at
/// the start of their windows; `marks_y` is the bottom of the marks' strip.
fn finding_marks(s: &mut String, r: &Results, sc: &Scale, marks_y: f64) {
    // A card is an incident (`v1`, `v2`, ...): each mark links to the card its violation is
    // shown in; a violation of no card shown (past `CARDS_MAX`) is not marked.
    let mut card_of: HashMap<*const Violation, usize> = HashMap::new();
    for (i, g) in cards_of(r).iter().enumerate().take(CARDS_MAX) {
        for m in &g.members {
            card_of.entry(*m as *const Violation).or_insert(i);
        }
    }
    for v in &r.violations {
        let Some(&card) = card_of.get(&(v as *const Violation)) else {
            continue;
        };
        let x = sc.x(v.window_ns[0]);
        let _ = write!(
            s,
            "<a href=\"#v{}\"><path d=\"M{:.1} {:.1} l5 -9 l-10 0 z\" fill=\"#c92a2a\"><title>{}: {}</title></path></a>",
            card + 1,
            x,
            marks_y - 2.0,
            v.kind,
            esc(&v.explanation)
        );
    }
    for (i, v) in r.warnings.iter().enumerate().take(WARNINGS_MAX) {
        let x = sc.x(v.window_ns[0]);
        let _ = write!(
            s,
            "<a href=\"#w{}\"><path d=\"M{:.1} {:.1} l3 -6 l-6 0 z\" fill=\"#868e96\"><title>{}</title></path></a>",
            i + 1,
            x,
            marks_y - 4.0,
            v.kind
        );
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n - 1).collect();
        t.push('…');
        t
    }
}

/// Both charts' height, and the top and bottom of their plots: room above the plot for the
/// axis labels and the fault strip.
const CHART_H: f64 = 230.0;
const CHART_TOP: f64 = 36.0;
const CHART_BOTTOM: f64 = CHART_H - 4.0;

fn latency_charts(s: &mut String, m: &Model) {
    let sc = Scale {
        t0_ns: 0,
        t1_ns: m.end_ns,
        x0: GUTTER,
        x1: FULL_W - 12.0,
    };
    s.push_str("<h2 id=\"latency\">Latency and throughput over time</h2>");
    latency_chart(s, m, &sc);
    throughput_chart(s, m, &sc);
}

/// p50, p95, p99 and max latency per time bucket, on a log scale.
fn latency_chart(s: &mut String, m: &Model, sc: &Scale) {
    let (h, top, bottom) = (CHART_H, CHART_TOP, CHART_BOTTOM);
    // Latency on a log scale: timeouts and sub-millisecond ops must both stay readable.
    let max_ms = m
        .buckets
        .iter()
        .map(|b| b.max_ms)
        .fold(0.0f64, f64::max)
        .max(1.0);
    let lo = 0.01f64.log10();
    let hi = (max_ms * 1.5).log10().ceil();
    let y = |ms: f64| bottom - (ms.max(0.01).log10() - lo) / (hi - lo) * (bottom - top);
    let _ = write!(
        s,
        "<div class=\"chart\"><svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {FULL_W} {h}\" width=\"{FULL_W}\" height=\"{h}\" role=\"img\" aria-label=\"latency\">"
    );
    axis(s, sc, top - 10.0, bottom);
    fault_bands(s, m, sc, top - 8.0, bottom, false);
    let mut e = lo as i32;
    while e <= hi as i32 {
        let ms = 10f64.powi(e);
        let yy = y(ms);
        let _ = write!(
            s,
            "<line x1=\"{GUTTER}\" y1=\"{yy:.1}\" x2=\"{:.1}\" y2=\"{yy:.1}\" stroke=\"#f1f3f5\"/><text x=\"{:.1}\" y=\"{:.1}\" class=\"tick\" text-anchor=\"end\">{} ms</text>",
            FULL_W - 12.0,
            GUTTER - 4.0,
            yy + 3.0,
            ms
        );
        e += 1;
    }
    type Series = (&'static str, &'static str, fn(&Bucket) -> f64);
    let series: [Series; 4] = [
        ("p50", "#1c7ed6", |b| b.p50_ms),
        ("p95", "#2b8a3e", |b| b.p95_ms),
        ("p99", "#f08c00", |b| b.p99_ms),
        ("max", "#c92a2a", |b| b.max_ms),
    ];
    for (_, color, get) in &series {
        let mut d = String::new();
        let mut pen_down = false;
        for b in &m.buckets {
            if b.ok + b.failed == 0 {
                pen_down = false;
                continue;
            }
            let x = sc.x(b.start_ns + m.bucket_ns / 2);
            let _ = write!(
                d,
                "{}{x:.1} {:.1} ",
                if pen_down { "L" } else { "M" },
                y(get(b))
            );
            pen_down = true;
        }
        let _ = write!(
            s,
            "<path d=\"{d}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"1.6\"/>"
        );
    }
    s.push_str("</svg></div><p class=\"legend\">latency of completed lock and store ops per time bucket (log scale):");
    for (name, color, _) in &series {
        let _ = write!(s, "<i style=\"background:{color}\"></i>{name}");
    }
    s.push_str(" · bands are faults</p>");
}

/// Completed ops per second per time bucket, ok and not.
fn throughput_chart(s: &mut String, m: &Model, sc: &Scale) {
    let (h, top, bottom) = (CHART_H, CHART_TOP, CHART_BOTTOM);
    // Throughput: completed ops per second per bucket.
    let per_s = 1e9 / m.bucket_ns as f64;
    let max_rate = m
        .buckets
        .iter()
        .map(|b| (b.ok.max(b.failed)) as f64 * per_s)
        .fold(0.0f64, f64::max)
        .max(1.0);
    let yr = |r: f64| bottom - r / (max_rate * 1.1) * (bottom - top);
    let _ = write!(
        s,
        "<div class=\"chart\"><svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {FULL_W} {h}\" width=\"{FULL_W}\" height=\"{h}\" role=\"img\" aria-label=\"throughput\">"
    );
    axis(s, sc, top - 10.0, bottom);
    fault_bands(s, m, sc, top - 8.0, bottom, false);
    for frac in [0.0, 0.5, 1.0] {
        let r = max_rate * frac;
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" class=\"tick\" text-anchor=\"end\">{:.0}/s</text>",
            GUTTER - 4.0,
            yr(r) + 3.0,
            r
        );
    }
    for (color, get) in [
        ("#2b8a3e", (|b: &Bucket| b.ok) as fn(&Bucket) -> u64),
        ("#c92a2a", |b: &Bucket| b.failed),
    ] {
        let mut d = String::new();
        for (i, b) in m.buckets.iter().enumerate() {
            let x = sc.x(b.start_ns + m.bucket_ns / 2);
            let _ = write!(
                d,
                "{}{x:.1} {:.1} ",
                if i == 0 { "M" } else { "L" },
                yr(get(b) as f64 * per_s)
            );
        }
        let _ = write!(
            s,
            "<path d=\"{d}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"1.6\"/>"
        );
    }
    s.push_str("</svg></div><p class=\"legend\">completed ops per second:<i style=\"background:#2b8a3e\"></i>ok<i style=\"background:#c92a2a\"></i>fail or indeterminate · bands are faults</p>");
}

fn ops_tables(s: &mut String, r: &Results) {
    s.push_str("<h2 id=\"ops\">Outcomes per op</h2><table><tr><th>f</th><th>ok</th><th>fail</th><th>info</th><th>pending</th><th>p50 ms</th><th>p95 ms</th><th>p99 ms</th><th>max ms</th></tr>");
    for (f, by) in &r.stats.ops {
        let g = |k: &str| by.get(k).copied().unwrap_or(0);
        // A refusal is the protocol's answer to a held lock, not a failure.
        let fail = match crate::reasons::refused(r, f) {
            0 => g("fail").to_string(),
            n => format!("{} ({n} refused)", g("fail")),
        };
        let _ = write!(
            s,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>",
            esc(f),
            g("ok"),
            fail,
            g("info"),
            g("pending")
        );
        match r.stats.latency.get(f) {
            Some(p) => {
                let _ = write!(
                    s,
                    "<td class=\"n\">{:.2}</td><td class=\"n\">{:.2}</td><td class=\"n\">{:.2}</td><td class=\"n\">{:.2}</td></tr>",
                    p.p50_ms, p.p95_ms, p.p99_ms, p.max_ms
                );
            }
            None => s.push_str("<td colspan=\"4\"></td></tr>"),
        }
    }
    s.push_str("</table>");
    crate::reasons::html(s, r);
}

fn fairness(s: &mut String, m: &Model) {
    let active: Vec<_> = m.processes.iter().filter(|(_, p)| p.acquires > 0).collect();
    // Jain's index over grants per process: 1 when every process got the same share.
    let (sum, sq) = active.iter().fold((0.0, 0.0), |(a, b), (_, p)| {
        (a + p.granted as f64, b + (p.granted as f64).powi(2))
    });
    let jain = if sq > 0.0 {
        sum * sum / (active.len() as f64 * sq)
    } else {
        0.0
    };
    let _ = write!(
        s,
        "<h2 id=\"fairness\">Per-client fairness</h2><p>{} process(es) tried to acquire; Jain's fairness index over their grants: <b>{jain:.2}</b> (1.00 = equal shares). A client that crashed (indeterminate op) continues under a new process number.</p>",
        active.len()
    );
    s.push_str("<table><tr><th>process</th><th>acquires</th><th>granted</th><th title=\"answered fail: refused by the service, or surely not done (its connection refused, say)\">fail</th><th>indeterminate</th><th>grant rate</th><th>definitely held</th><th>writes ok</th></tr>");
    for (p, st) in active.iter().take(PROCESS_ROWS_MAX) {
        let _ = write!(
            s,
            "<tr><td>p{p}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{:.0}%</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            st.acquires,
            st.granted,
            st.failed,
            st.indeterminate,
            100.0 * st.granted as f64 / st.acquires.max(1) as f64,
            secs(st.hold_ns),
            st.writes_ok
        );
    }
    if active.len() > PROCESS_ROWS_MAX {
        let _ = write!(
            s,
            "<tr><td colspan=\"8\">… {} more process(es)</td></tr>",
            active.len() - PROCESS_ROWS_MAX
        );
    }
    s.push_str("</table>");
}

fn fault_schedule(s: &mut String, m: &Model) {
    let _ = write!(
        s,
        "<h2 id=\"faults\">Fault schedule ({})</h2>",
        m.faults.len()
    );
    if m.faults.is_empty() {
        s.push_str("<p>No fault was injected.</p>");
        return;
    }
    s.push_str(
        "<table><tr><th>op</th><th>fault</th><th>start</th><th>end</th><th>length</th></tr>",
    );
    for f in m.faults.iter().take(FAULT_ROWS_MAX) {
        let _ = write!(
            s,
            "<tr><td class=\"n\">{}</td><td><i style=\"display:inline-block;width:10px;height:10px;background:{}\"></i> {}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{:.0} ms</td></tr>",
            f.index,
            fault_color(&f.kind),
            esc(&f.label),
            secs(f.start_ns),
            secs(f.end_ns),
            (f.end_ns - f.start_ns) as f64 / 1e6
        );
    }
    if m.faults.len() > FAULT_ROWS_MAX {
        let _ = write!(
            s,
            "<tr><td colspan=\"5\">… {} more</td></tr>",
            m.faults.len() - FAULT_ROWS_MAX
        );
    }
    s.push_str("</table>");
}

fn warnings(s: &mut String, inp: &Input) {
    let r = inp.results;
    let _ = write!(
        s,
        "<h2 id=\"warnings\">Warnings ({})</h2>",
        r.warnings_found()
    );
    if r.warnings.is_empty() {
        s.push_str("<p>None.</p>");
        return;
    }
    for (i, w) in r.warnings.iter().enumerate().take(WARNINGS_MAX) {
        let id = format!("w{}", i + 1);
        if i < WARNING_ZOOMS_MAX {
            card(s, inp, w, &id, true, false, false);
        } else {
            let ops: Vec<String> = w.ops.iter().map(u64::to_string).collect();
            let _ = write!(
                s,
                "<p id=\"{id}\"><span class=\"badge b-warning\">{}</span> {} <span class=\"muted\">(ops {}; {} – {})</span></p>",
                w.kind,
                esc(&w.explanation),
                ops.join(", "),
                secs(w.window_ns[0]),
                secs(w.window_ns[1])
            );
        }
    }
    let mut more = Vec::new();
    let more_listed = r.warnings.len().saturating_sub(WARNINGS_MAX);
    if more_listed > 0 {
        more.push(format!("{more_listed} more warning(s) in results.json"));
    }
    if r.warnings_unlisted > 0 {
        more.push(format!(
            "{} more counted and not listed (a check lists the first {})",
            r.warnings_unlisted,
            r.warnings.len()
        ));
    }
    if !more.is_empty() {
        let _ = write!(s, "<p>… and {}.</p>", more.join("; "));
    }
}
