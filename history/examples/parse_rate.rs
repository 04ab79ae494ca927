//! One thread's parse rate over a history file: `cargo run --release -p history --example
//! parse_rate -- FILE`. Reads the file whole, then times `parse_event` on every line, five times.
use std::time::Instant;

fn main() {
    let path = std::env::args().nth(1).expect("usage: parse_rate FILE");
    let text = std::fs::read(&path).expect("reading the file");
    // Five passes, the median quoted: the machines are shared and noisy.
    let mut secs = Vec::new();
    let (mut lines, mut extra) = (0u64, 0u64);
    for _ in 0..5 {
        let t = Instant::now();
        (lines, extra) = (0, 0);
        let mut from = 0;
        for to in memchr::memchr_iter(b'\n', &text) {
            let line = &text[from..to];
            from = to + 1;
            let e = history::parse_event(line).expect("a line the reader accepts");
            lines += 1;
            extra += u64::from(!e.value.extra.is_empty());
        }
        secs.push(t.elapsed().as_secs_f64());
    }
    secs.sort_by(f64::total_cmp);
    let s = secs[2];
    println!(
        "{lines} lines ({extra} with evidence) in {s:.3} s: {:.0} ns a line, {:.0} MB/s",
        s * 1e9 / lines as f64,
        text.len() as f64 / s / 1e6
    );
}
