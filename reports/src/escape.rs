//! Escaping for every output format, and the hash that pins the report's one inline script.
//!
//! Any string that comes from a history or a service (lock names, keys, errors, values) may
//! hold markup, quotes, control characters or any Unicode: it only ever reaches an output
//! through one of these functions.

use std::fmt::Write;

/// Escapes text for HTML element content and quoted attribute values alike. NUL and other C0
/// controls (except tab and newlines) become U+FFFD: browsers would drop or mangle them.
pub fn html(s: &str) -> String {
    escape_markup(s, |c| match c {
        '\'' => Some("&#39;"),
        '\t' | '\n' | '\r' => None,
        c if (c as u32) < 0x20 || c == '\u{7f}' || is_bidi_control(c) => Some("\u{fffd}"),
        _ => None,
    })
}

/// The characters markup gives meaning to, escaped alike in HTML and XML (the apostrophe
/// aside: HTML 4 has no `&apos;`).
fn markup_entity(c: char) -> Option<&'static str> {
    match c {
        '&' => Some("&amp;"),
        '<' => Some("&lt;"),
        '>' => Some("&gt;"),
        '"' => Some("&quot;"),
        _ => None,
    }
}

/// `s` with markup's characters as their entities and each other character as `other` says
/// (`None`: kept as it is).
fn escape_markup(s: &str, other: impl Fn(char) -> Option<&'static str>) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match markup_entity(c).or_else(|| other(c)) {
            Some(e) => out.push_str(e),
            None => out.push(c),
        }
    }
    out
}

/// Bidirectional overrides and isolates: inside a lock name they would reverse how the
/// report's own text after them reads (`(op 6)` shown as `(6 po)`).
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{61c}')
}

/// Escapes text for XML 1.0 content and attributes. XML 1.0 cannot carry most control
/// characters even as references, so they become U+FFFD; newlines in attributes are kept as
/// references so a parser does not normalise them to spaces.
pub fn xml(s: &str) -> String {
    escape_markup(s, |c| match c {
        '\'' => Some("&apos;"),
        '\n' => Some("&#10;"),
        '\r' => Some("&#13;"),
        '\t' => Some("&#9;"),
        c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => Some("\u{fffd}"),
        _ => None,
    })
}

/// Makes a string safe for one line of plain text: line breaks and other control characters
/// become visible escapes. Without it a lock name holding `\n::error::...` would start a forged
/// CI workflow command in the summary printed to stdout.
pub fn plain(s: &str) -> String {
    if !s.chars().any(|c| c.is_control() || is_bidi_control(c)) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() || is_bidi_control(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// Escapes the message of a GitHub Actions workflow command (`::error ...::MESSAGE`): without
/// it a newline in a lock name would end the command and start a forged one.
pub fn gh_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escapes a property value of a workflow command (`title=...`).
pub fn gh_property(s: &str) -> String {
    gh_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// SHA-256 of `data` (FIPS 180-4). Hand-written because the report needs exactly one hash (the
/// CSP pin of its inline script) and the project keeps its dependency list short.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let mut msg = data.to_vec();
    let bit_len = (data.len() as u64).wrapping_mul(8);
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bit_len.to_be_bytes());
    for block in msg.chunks_exact(64) {
        let mut w = [0u32; 64];
        for (i, word) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut hh] = h;
        for i in 0..64 {
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let ch = (e & f) ^ (!e & g);
            let t1 = hh
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
            let maj = (a & b) ^ (a & c) ^ (b & c);
            let t2 = s0.wrapping_add(maj);
            hh = g;
            g = f;
            f = e;
            e = d.wrapping_add(t1);
            d = c;
            c = b;
            b = a;
            a = t1.wrapping_add(t2);
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e, f, g, hh]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 32];
    for (i, x) in h.iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&x.to_be_bytes());
    }
    out
}

/// Standard base64 with padding.
pub fn base64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        out.push(A[(n >> 18) as usize & 63] as char);
        out.push(A[(n >> 12) as usize & 63] as char);
        out.push(if chunk.len() > 1 {
            A[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        out.push(if chunk.len() > 2 {
            A[n as usize & 63] as char
        } else {
            '='
        });
    }
    out
}

/// Hex of a hash, for tests.
#[cfg(test)]
fn hex(b: &[u8]) -> String {
    let mut s = String::new();
    for x in b {
        let _ = write!(s, "{x:02x}");
    }
    s
}

/// Formats a nanosecond time as seconds with millisecond precision: `15.747 s`.
pub fn secs(ns: u64) -> String {
    format!("{} s", secs_value(ns))
}

/// A nanosecond time in seconds, to the millisecond, cut (not rounded) as the checkers' own
/// sentences cut it, so one instant reads the same in a sentence, a window and a timeline
/// (15747792071 ns is `15.747` everywhere, never `15.748` beside it).
pub fn secs_value(ns: u64) -> String {
    let ms = ns / 1_000_000;
    format!("{}.{:03}", ms / 1000, ms % 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instant_reads_the_same_as_the_checkers_write_it() {
        assert_eq!(secs(15_747_792_071), "15.747 s");
        assert_eq!(secs_value(999_999), "0.000");
        assert_eq!(secs_value(u64::MAX), "18446744073.709");
    }

    #[test]
    fn html_escapes_markup_quotes_and_controls() {
        assert_eq!(
            html("<script>alert(\"x\")</script>'&\u{0}🦀\u{202e}"),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&#39;&amp;\u{fffd}🦀\u{fffd}"
        );
    }

    #[test]
    fn xml_escapes_and_replaces_forbidden_characters() {
        assert_eq!(
            xml("a<b>\"'&\u{1}\n"),
            "a&lt;b&gt;&quot;&apos;&amp;\u{fffd}&#10;"
        );
    }

    #[test]
    fn html_keeps_line_breaks_and_xml_writes_them_as_references() {
        assert_eq!(
            html("a\tb\nc\rd\u{7f}\u{fffe}"),
            "a\tb\nc\rd\u{fffd}\u{fffe}"
        );
        assert_eq!(
            xml("a\tb\nc\rd\u{7f}\u{fffe}\u{202e}"),
            "a&#9;b&#10;c&#13;d\u{7f}\u{fffd}\u{202e}"
        );
    }

    #[test]
    fn plain_keeps_one_line() {
        assert_eq!(
            plain("a\n::error::x\r\u{1b}[31m🦀"),
            "a\\n::error::x\\r\\u{1b}[31m🦀"
        );
        assert_eq!(plain("L0"), "L0");
    }

    #[test]
    fn gh_escapes_newlines_so_no_command_can_be_forged() {
        assert_eq!(gh_data("a%\n::error::x"), "a%25%0A::error::x");
        assert_eq!(gh_property("a:b,c"), "a%3Ab%2Cc");
    }

    #[test]
    fn sha256_matches_known_vectors() {
        assert_eq!(
            hex(&sha256(b"")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            hex(&sha256(b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let long = vec![b'a'; 1000];
        assert_eq!(
            hex(&sha256(&long)),
            "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3"
        );
    }

    #[test]
    fn base64_pads() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }
}
