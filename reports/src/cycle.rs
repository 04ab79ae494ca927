//! The drawing of a violation's cycle (a deadlock's waits, a non-serializable run of critical
//! sections): its members on a ring, each edge an arrow to the next with its reason beside it,
//! so a reader follows the circle once instead of rebuilding it from the sentence. Only the
//! witness cycle is drawn, never the whole graph: a handful of nodes, not a hairball.

use crate::escape::html as esc;
use history::CycleEdge;
use std::fmt::Write;

/// Past this many members the ring gets crowded: the cycle is listed instead, in order.
pub const RING_NODES_MAX: usize = 12;

const WIDTH: f64 = 640.0;
const NODE_RX: f64 = 78.0;
const NODE_RY: f64 = 17.0;

/// The figure for `edges` (a cycle: each edge's `to` is the next one's `from`) under
/// `caption` (what an arrow means), with `id` making its arrowhead's id unique on the page;
/// empty for no edge.
pub fn figure(edges: &[CycleEdge], id: &str, caption: &str) -> String {
    if edges.is_empty() {
        return String::new();
    }
    let n = edges.len();
    let mut s = String::new();
    let _ = write!(
        s,
        "<figure class=\"cycle\" data-cycle=\"{n}\"><figcaption>{}</figcaption>",
        esc(caption)
    );
    if n > RING_NODES_MAX {
        cycle_list(&mut s, edges);
        return s;
    }
    let ring = Ring::new(n);
    let height = ring.height;
    let marker = format!(
        "cycle-arrow-{}",
        id.replace(|c: char| !c.is_ascii_alphanumeric(), "-")
    );
    let _ = write!(
        s,
        "<svg class=\"cycle-svg\" viewBox=\"0 0 {WIDTH} {height}\" width=\"{WIDTH}\" height=\"{height}\" role=\"img\" aria-label=\"a cycle of {n}\">\
         <defs><marker id=\"{marker}\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"8\" markerHeight=\"8\" orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"#b42318\"/></marker></defs>"
    );
    for (k, e) in edges.iter().enumerate() {
        arrow(&mut s, &ring, k, e, &marker);
    }
    for (k, e) in edges.iter().enumerate() {
        let (x, y) = ring.at(k);
        let _ = write!(
            s,
            "<g class=\"cycle-node\"><ellipse cx=\"{x:.1}\" cy=\"{y:.1}\" rx=\"{NODE_RX}\" ry=\"{NODE_RY}\" fill=\"#fef3f2\" stroke=\"#b42318\"/>\
             <text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"12\">{}</text></g>",
            y + 4.0,
            esc(&e.from)
        );
    }
    s.push_str("</svg></figure>");
    s
}

/// A cycle too long for the ring: its edges listed in order, closing the figure.
fn cycle_list(s: &mut String, edges: &[CycleEdge]) {
    s.push_str("<ol class=\"cycle-list\">");
    for e in edges {
        let _ = write!(
            s,
            "<li><b>{}</b> → <b>{}</b>: {}</li>",
            esc(&e.from),
            esc(&e.to),
            esc(&e.label)
        );
    }
    s.push_str("</ol></figure>");
}

/// Where a cycle's `n` members sit: two side by side, more on a circle.
struct Ring {
    n: usize,
    radius: f64,
    height: f64,
    cx: f64,
    cy: f64,
}

impl Ring {
    fn new(n: usize) -> Ring {
        debug_assert!(n > 0, "a cycle has members");
        let radius = if n == 2 {
            150.0
        } else {
            110.0 + 14.0 * n as f64
        };
        let height = if n == 2 { 200.0 } else { 2.0 * radius + 90.0 };
        Ring {
            n,
            radius,
            height,
            cx: WIDTH / 2.0,
            cy: height / 2.0,
        }
    }

    /// Member `k`'s centre: in cycle order, the first at the left (two) or the top (more).
    fn at(&self, k: usize) -> (f64, f64) {
        let n = self.n;
        let start = if n == 2 {
            std::f64::consts::PI
        } else {
            -std::f64::consts::FRAC_PI_2
        };
        let a = start + 2.0 * std::f64::consts::PI * k as f64 / n as f64;
        (
            self.cx + self.radius * a.cos(),
            self.cy + self.radius * a.sin() * if n == 2 { 0.0 } else { 1.0 },
        )
    }
}

/// Edge `k`, from member `k` to the next, as a curved arrow with its reason beside it.
fn arrow(s: &mut String, ring: &Ring, k: usize, e: &CycleEdge, marker: &str) {
    let n = ring.n;
    let (x0, y0) = ring.at(k);
    let (x1, y1) = ring.at((k + 1) % n);
    let (dx, dy) = (x1 - x0, y1 - y0);
    let len = (dx * dx + dy * dy).sqrt().max(1.0);
    let (ux, uy) = (dx / len, dy / len);
    // Leave each node along the line, clear of its ellipse.
    let clear = |ux: f64, uy: f64| {
        let t = 1.0 / ((ux / NODE_RX).powi(2) + (uy / NODE_RY).powi(2)).sqrt();
        t + 4.0
    };
    let c = clear(ux, uy);
    let (sx, sy) = (x0 + ux * c, y0 + uy * c);
    let (ex, ey) = (x1 - ux * c, y1 - uy * c);
    // Bend outward (to the left of the direction of travel), so a pair of opposite edges
    // between the same two members are two arcs, not one line.
    let bend = if n == 2 { 60.0 } else { 24.0 };
    let (nx, ny) = (uy, -ux);
    let (qx, qy) = ((sx + ex) / 2.0 + nx * bend, (sy + ey) / 2.0 + ny * bend);
    let (lx, ly) = (
        0.25 * sx + 0.5 * qx + 0.25 * ex,
        0.25 * sy + 0.5 * qy + 0.25 * ey,
    );
    let _ = write!(
        s,
        "<path class=\"cycle-edge\" d=\"M{sx:.1},{sy:.1} Q{qx:.1},{qy:.1} {ex:.1},{ey:.1}\" fill=\"none\" stroke=\"#b42318\" stroke-width=\"2\" marker-end=\"url(#{marker})\"/>\
         <text class=\"cycle-label\" x=\"{lx:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"12\" paint-order=\"stroke\" stroke=\"#fff\" stroke-width=\"4\">{}</text>",
        ly + if ny > 0.0 { 12.0 } else { -4.0 },
        esc(&e.label)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge(from: &str, to: &str, label: &str) -> CycleEdge {
        CycleEdge {
            from: from.into(),
            to: to.into(),
            label: label.into(),
        }
    }

    #[test]
    fn a_cycle_of_two_is_two_arcs_between_two_members() {
        let f = figure(
            &[
                edge("transfer 1 (p1)", "transfer 2 (p2)", "rw balance-A0 v0→v1"),
                edge("transfer 2 (p2)", "transfer 1 (p1)", "ww balance-A0 v1→v2"),
            ],
            "v1",
            "c",
        );
        assert_eq!(f.matches("class=\"cycle-edge\"").count(), 2);
        assert_eq!(f.matches("class=\"cycle-node\"").count(), 2);
        assert!(f.contains("rw balance-A0 v0→v1") && f.contains("transfer 2 (p2)"));
        assert!(f.contains("marker-end=\"url(#cycle-arrow-v1)\""));
    }

    #[test]
    fn labels_are_escaped_and_a_long_cycle_is_listed() {
        let e = edge("<p1>", "p2", "waits for \"A&B\"");
        let f = figure(&[e.clone(), edge("p2", "<p1>", "x")], "id", "c");
        assert!(f.contains("&lt;p1&gt;") && !f.contains("<p1>"));
        let long: Vec<CycleEdge> = (0..RING_NODES_MAX + 1)
            .map(|i| edge(&format!("p{i}"), &format!("p{}", i + 1), "waits"))
            .collect();
        let f = figure(&long, "id", "c");
        assert!(f.contains("cycle-list") && !f.contains("<svg"));
        assert_eq!(f.matches("<li>").count(), RING_NODES_MAX + 1);
        assert!(figure(&[], "id", "c").is_empty());
    }
}
