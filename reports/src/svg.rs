//! Small SVG building blocks: a time scale with readable ticks, colours, and the time axis.

use std::fmt::Write;

/// Maps history time to x pixels.
#[derive(Debug, Clone, Copy)]
pub struct Scale {
    pub t0_ns: u64,
    pub t1_ns: u64,
    pub x0: f64,
    pub x1: f64,
}

impl Scale {
    pub fn x(&self, t_ns: u64) -> f64 {
        let span = (self.t1_ns.saturating_sub(self.t0_ns)).max(1) as f64;
        let t = t_ns.clamp(self.t0_ns, self.t1_ns);
        self.x0 + (t - self.t0_ns) as f64 / span * (self.x1 - self.x0)
    }

    /// Tick positions (ns) and the number of decimals their labels (in seconds) need.
    pub fn ticks(&self) -> (Vec<u64>, usize) {
        let span = self.t1_ns.saturating_sub(self.t0_ns).max(1);
        // The step from 1-2-5 × 10^k ns that gives at most ~10 ticks.
        let mut step: u64 = 1;
        let mut k = 0usize;
        // A limit on the loop: 10^19 ns exceeds any u64 span.
        while k < 60 && span / step > 10 {
            step = match k % 3 {
                0 => step * 2,
                1 => step / 2 * 5,
                _ => step * 2,
            };
            k += 1;
        }
        let decimals = if step >= 1_000_000_000 {
            0
        } else {
            (9 - (step as f64).log10().floor() as i64).clamp(0, 9) as usize
        };
        let first = self.t0_ns.div_ceil(step) * step;
        let ticks = (0..12)
            .map(|i| first + i * step)
            .take_while(|t| *t <= self.t1_ns)
            .collect();
        (ticks, decimals)
    }
}

/// A stable, distinct colour for a token or process number (golden-angle hues).
pub fn hue(n: u64) -> u32 {
    ((n.wrapping_mul(137_508) / 1000) % 360) as u32
}

pub fn fill_for(n: u64) -> String {
    format!("hsl({},62%,42%)", hue(n))
}

/// Fault band colour by kind: its family's (`history::FaultFamily`), grey for a kind this
/// build does not know or an instant event's name.
pub fn fault_color(kind: &str) -> &'static str {
    history::FaultFamily::colour_of(kind)
}

/// Draws the time axis along `y` (labels above, grid lines down to `y_bottom`).
pub fn axis(s: &mut String, sc: &Scale, y: f64, y_bottom: f64) {
    let (ticks, decimals) = sc.ticks();
    let _ = write!(
        s,
        r##"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#adb5bd"/>"##,
        sc.x0, sc.x1
    );
    for t in ticks {
        let x = sc.x(t);
        let _ = write!(
            s,
            r##"<line x1="{x:.1}" y1="{y:.1}" x2="{x:.1}" y2="{y_bottom:.1}" stroke="#e9ecef"/><text x="{x:.1}" y="{:.1}" class="tick" text-anchor="middle">{:.*}s</text>"##,
            y - 4.0,
            decimals,
            t as f64 / 1e9
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_bounded() {
        let sc = Scale {
            t0_ns: 1_230_000_000,
            t1_ns: 3_400_000_000,
            x0: 0.0,
            x1: 100.0,
        };
        let (t, d) = sc.ticks();
        assert!(t.len() >= 4 && t.len() <= 11, "{t:?}");
        assert_eq!(t[0] % 200_000_000, 0);
        assert_eq!(d, 1);
        assert_eq!(sc.x(sc.t0_ns), 0.0);
        assert_eq!(sc.x(sc.t1_ns), 100.0);
    }
}
