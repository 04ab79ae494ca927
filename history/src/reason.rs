//! Why an op failed or was indeterminate, in a short code a reader can count.
//!
//! Adapters record a fail's or info's `error` as `<reason>` or `<reason>; <detail>`: the reason
//! a short code (`held`, `http-423`, `bad-body`, `connect: refused`, `timeout`, `lock:
//! http-500` for a step of a multi-request op), the detail what the service said (an abridged
//! body, the transport's own words). The summary and report count ops by reason; the runner
//! counts the [`ReasonKind::Unexpected`] ones to stop a run against a service it does not
//! understand. Histories written before this format (`http-500: body`, `bad-response: body`)
//! are read with the same codes.

/// What a reason says about the service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ReasonKind {
    /// The service said no in its own words (a 409 `held`, `stale-token`): a definite refusal.
    Refused,
    /// The service answered something the adapter does not understand: a status it does not
    /// expect (`http-423`, `http-201`) or a body it cannot read (`bad-body`).
    Unexpected,
    /// Nothing answered: the connection was refused or could not be made (`connect: ...`).
    Unreachable,
    /// The request may have arrived but its answer did not (`timeout`, `transport`).
    Lost,
    /// The service said it cannot decide now (`unavailable: primary-unreachable`): a 503 it
    /// documents, expected while faults are on.
    Unavailable,
}

impl ReasonKind {
    /// How a reader is told the kind: `refused`, `unexpected`, `unreachable`, `no answer`,
    /// `unavailable`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReasonKind::Refused => "refused",
            ReasonKind::Unexpected => "unexpected",
            ReasonKind::Unreachable => "unreachable",
            ReasonKind::Lost => "no answer",
            ReasonKind::Unavailable => "unavailable",
        }
    }
}

/// The separator between a reason and its detail.
pub const DETAIL_SEP: &str = "; ";

/// `reason; detail`, or the reason alone when the detail is empty.
pub fn with_detail(reason: &str, detail: &str) -> String {
    if detail.is_empty() {
        reason.to_string()
    } else {
        format!("{reason}{DETAIL_SEP}{detail}")
    }
}

/// The reason code of a recorded error: the text before `; `, or for the older form, the text
/// up to and including its first status code (`lock: http-500: busy` -> `lock: http-500`).
pub fn reason_of(error: &str) -> &str {
    // Most errors are a bare code (`held`): with neither separator there is nothing to split,
    // and the checkers ask this of every refused op.
    if !error.bytes().any(|b| b == b';' || b == b':') {
        return error;
    }
    if let Some((reason, _)) = error.split_once(DETAIL_SEP) {
        return reason;
    }
    // The older form: `<code>: <detail>` where the code is a status or bad-response.
    let mut end = 0;
    for part in error.split(": ") {
        end += part.len();
        if is_status_code(part) || part == "bad-response" {
            return &error[..end];
        }
        end += 2;
    }
    error
}

/// The detail of a recorded error (what follows the reason), if any.
pub fn detail_of(error: &str) -> &str {
    let reason = reason_of(error);
    error[reason.len()..]
        .trim_start_matches(DETAIL_SEP)
        .trim_start_matches(": ")
}

/// `http-NNN`.
fn is_status_code(part: &str) -> bool {
    part.strip_prefix("http-")
        .is_some_and(|n| n.len() == 3 && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The status a reason names (`http-423` -> 423), if it names one.
pub fn status_of(reason: &str) -> Option<u16> {
    reason
        .split(": ")
        .find(|p| is_status_code(p))
        .and_then(|p| p[5..].parse().ok())
}

/// What a reason code says about the service. A code made of the service's own words
/// (anything not listed below) is a refusal.
pub fn kind_of(reason: &str) -> ReasonKind {
    // A step prefix (`lock: `, `lease-grant: `) is skipped: the first part that is a known
    // code decides.
    for part in reason.split(": ") {
        let part = part.trim();
        if is_status_code(part) || part == "bad-body" || part == "bad-response" {
            return ReasonKind::Unexpected;
        }
        match part {
            "connect" => return ReasonKind::Unreachable,
            "timeout" | "transport" => return ReasonKind::Lost,
            "unavailable" => return ReasonKind::Unavailable,
            _ => {}
        }
    }
    ReasonKind::Refused
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (recorded error, reason, kind, detail)
    const CASES: &[(&str, &str, ReasonKind, &str)] = &[
        ("held", "held", ReasonKind::Refused, ""),
        ("stale-token", "stale-token", ReasonKind::Refused, ""),
        (
            "http-423; {\"error\":\"held\"}",
            "http-423",
            ReasonKind::Unexpected,
            "{\"error\":\"held\"}",
        ),
        (
            "http-201; {\"token\":5}",
            "http-201",
            ReasonKind::Unexpected,
            "{\"token\":5}",
        ),
        (
            "bad-body; <html>",
            "bad-body",
            ReasonKind::Unexpected,
            "<html>",
        ),
        (
            "connect: refused; tcp connect error",
            "connect: refused",
            ReasonKind::Unreachable,
            "tcp connect error",
        ),
        ("timeout", "timeout", ReasonKind::Lost, ""),
        ("transport; reset", "transport", ReasonKind::Lost, "reset"),
        (
            "unavailable: primary-unreachable",
            "unavailable: primary-unreachable",
            ReasonKind::Unavailable,
            "",
        ),
        ("lock: timeout", "lock: timeout", ReasonKind::Lost, ""),
        (
            "lease-grant: connect: refused; os error 111",
            "lease-grant: connect: refused",
            ReasonKind::Unreachable,
            "os error 111",
        ),
        // The older form.
        (
            "http-500: <html>oops</html>",
            "http-500",
            ReasonKind::Unexpected,
            "<html>oops</html>",
        ),
        (
            "lock: http-500: busy",
            "lock: http-500",
            ReasonKind::Unexpected,
            "busy",
        ),
        (
            "bad-response: {",
            "bad-response",
            ReasonKind::Unexpected,
            "{",
        ),
    ];

    #[test]
    fn every_recorded_form_has_its_reason_and_kind() {
        for (error, reason, kind, detail) in CASES {
            assert_eq!(reason_of(error), *reason, "{error}");
            assert_eq!(kind_of(reason_of(error)), *kind, "{error}");
            assert_eq!(detail_of(error), *detail, "{error}");
        }
    }

    #[test]
    fn statuses_are_read_from_the_reason() {
        assert_eq!(status_of("http-423"), Some(423));
        assert_eq!(status_of("lock: http-500"), Some(500));
        assert_eq!(status_of("held"), None);
        assert_eq!(status_of("http-42"), None);
        assert_eq!(with_detail("held", ""), "held");
        assert_eq!(with_detail("http-500", "x"), "http-500; x");
    }
}
