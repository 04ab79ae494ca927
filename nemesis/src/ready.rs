//! [`Readiness`]: how lockpick knows a node serves, after a start or a restart. A service
//! speaking HTTP is ready when a path answers 200; one that does not (Redis, ZooKeeper,
//! PostgreSQL) is ready when a few bytes sent on a fresh TCP connection are answered with the
//! bytes its protocol promises (`PING` → `+PONG`). Each service's descriptor says which; every
//! runtime waits through [`Readiness::check`], so no runtime knows a protocol. A longer
//! exchange ([`Readiness::Answer`]) reads what a few pipelined requests answer and looks for
//! words in it: how a deployment shows its members found each other (Sentinel's view of the
//! master, its replicas and the other sentinels), checked once all nodes serve.

use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What answers once a node serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    /// `GET path` answers 200.
    Http { path: String },
    /// `send` on a new TCP connection is answered with bytes that start with `expect`.
    Exchange {
        /// How the exchange is named in messages (`PING`).
        name: &'static str,
        send: Vec<u8>,
        expect: Vec<u8>,
    },
    /// `send` on a new TCP connection is answered, up to bytes that end with `until` (or, with
    /// `until` empty, up to the server's close), with an answer holding every one of
    /// `contains` and none of `lacks`.
    Answer {
        /// How the exchange is named in messages (`SENTINEL master`).
        name: &'static str,
        send: Vec<u8>,
        /// The answer's last bytes: the reply to a last request sent only to mark the end
        /// (`PING` → `+PONG\r\n`), so what came before it is whole.
        until: Vec<u8>,
        contains: Vec<Vec<u8>>,
        lacks: Vec<Vec<u8>>,
    },
}

/// The most an exchange's answer is read: enough for any greeting a readiness check compares.
const ANSWER_MAX: usize = 256;
/// The most a long answer ([`Readiness::Answer`]) is read: a few replies describing a handful
/// of members (a sentinel's three listings of a 5-node deployment take about 4 KiB).
const LONG_ANSWER_MAX: usize = 64 * 1024;

impl Readiness {
    /// `GET path` answering 200.
    pub fn http(path: &str) -> Readiness {
        Readiness::Http {
            path: path.to_string(),
        }
    }

    /// How the check is named in messages: `GET /v1/health`, `PING`.
    pub fn name(&self) -> String {
        match self {
            Readiness::Http { path } => format!("GET {path}"),
            Readiness::Exchange { name, .. } | Readiness::Answer { name, .. } => name.to_string(),
        }
    }

    /// What is checked on `host:port`, as messages name it: `http://127.0.0.1:7000/v1/health`
    /// or `PING on 127.0.0.1:6379`.
    pub fn target(&self, host: &str, port: u16) -> String {
        let addr = addr_text(host, port);
        match self {
            Readiness::Http { path } => format!("http://{addr}{path}"),
            Readiness::Exchange { name, .. } | Readiness::Answer { name, .. } => {
                format!("{name} on {addr}")
            }
        }
    }

    /// The check in words, for errors: the request for HTTP (`GET http://...`), else
    /// [`Readiness::target`].
    pub fn described(&self, host: &str, port: u16) -> String {
        match self {
            Readiness::Http { .. } => format!("GET {}", self.target(host, port)),
            _ => self.target(host, port),
        }
    }

    /// One check of `host:port` bounded by `timeout`: `Ok` once the node serves, else why not.
    pub async fn check(&self, host: &str, port: u16, timeout: Duration) -> Result<(), NotReady> {
        // An answer that was read, whatever it said, shows the node listens where it was told.
        let answered = |reason: String| NotReady {
            reason,
            answered: true,
        };
        let silent = |reason: String| NotReady {
            reason,
            answered: false,
        };
        match self {
            Readiness::Http { .. } => {
                // One client for every check: building one loads the TLS roots each time.
                static CLIENT: std::sync::OnceLock<Result<reqwest::Client, String>> =
                    std::sync::OnceLock::new();
                let client = CLIENT.get_or_init(crate::local::http_client).clone();
                let client = client.map_err(silent)?;
                crate::local::probe(&client, &self.target(host, port), timeout).await
            }
            Readiness::Exchange { send, expect, .. } => {
                let addr = addr_text(host, port);
                match tokio::time::timeout(timeout, exchange(&addr, send, expect.len())).await {
                    Err(_) => Err(silent(format!(
                        "no answer within {} ms",
                        timeout.as_millis()
                    ))),
                    Ok(Err(e)) => Err(silent(e.to_string())),
                    Ok(Ok(answer)) if answer.starts_with(expect) => Ok(()),
                    Ok(Ok(answer)) => Err(answered(format!(
                        "answered {:?}; expected {:?}",
                        String::from_utf8_lossy(&answer),
                        String::from_utf8_lossy(expect)
                    ))),
                }
            }
            Readiness::Answer {
                send,
                until,
                contains,
                lacks,
                ..
            } => {
                let addr = addr_text(host, port);
                let answer = match tokio::time::timeout(timeout, answer(&addr, send, until)).await {
                    Err(_) => {
                        return Err(silent(format!(
                            "no whole answer within {} ms",
                            timeout.as_millis()
                        )))
                    }
                    Ok(Err(e)) => return Err(silent(e.to_string())),
                    Ok(Ok(a)) => a,
                };
                let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
                if let Some(missing) = contains.iter().find(|c| !has(&answer, c)) {
                    return Err(answered(format!("the answer lacks {:?}", text(missing))));
                }
                if let Some(found) = lacks.iter().find(|l| has(&answer, l)) {
                    return Err(answered(format!("the answer has {:?}", text(found))));
                }
                Ok(())
            }
        }
    }
}

/// Why one readiness check failed.
#[derive(Debug, Clone)]
pub struct NotReady {
    /// What came back and what was expected, or that nothing did.
    pub reason: String,
    /// Something answered: the node listens where it was told, but not yet (or never) as the
    /// check wants. A start-up that times out so is not a service listening elsewhere.
    pub answered: bool,
}

impl std::fmt::Display for NotReady {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

impl NotReady {
    /// The more telling of this failure and the one before it: an answer, once one came, is
    /// replaced only by a later answer. The last attempt of a start-up is often cut short by
    /// its deadline (a probe given the few ms left times out), which says nothing.
    pub(crate) fn after(self, before: Option<NotReady>) -> NotReady {
        match before {
            Some(b) if b.answered && !self.answered => b,
            _ => self,
        }
    }
}

/// `last answer: HTTP 404 Not Found` when the node answered, else `last attempt: ...` (or
/// that none was made), for the error of a start-up that timed out.
pub(crate) fn last_said(last: Option<&NotReady>) -> String {
    match last {
        Some(n) if n.answered => format!("last answer: {}", n.reason),
        Some(n) => format!("last attempt: {}", n.reason),
        None => "no attempt made".to_string(),
    }
}

/// What a start-up that never passed its readiness check most likely needs, from the last
/// check: a node that answered listens, and its answer is the thing to fix; one that never
/// did may be listening elsewhere.
pub(crate) fn not_ready_hint(last: Option<&NotReady>) -> &'static str {
    match last {
        Some(NotReady { answered: true, .. }) => {
            "It listens where it was told, but its answer is not the one the readiness check \
             waits for: an HTTP service answers GET /v1/health with 200 once it serves \
             (docs/protocol.md)."
        }
        _ => {
            "Does the command make the service listen on the {host} and {port} it was given? \
             (In network namespaces {host} is the node's own address, not 127.0.0.1.)"
        }
    }
}

/// Whether `needle` occurs in `hay`.
fn has(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

/// Sends `send` and reads until the answer ends with `until` (an error if the peer closes
/// first or the answer outgrows [`LONG_ANSWER_MAX`]); with `until` empty, until the peer
/// closes (ZooKeeper's four-letter words answer, then close).
async fn answer(addr: &str, send: &[u8], until: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream.write_all(send).await?;
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    // Bounded: each pass reads at least a byte or ends, and the answer is capped.
    while until.is_empty() || !answer.ends_with(until) {
        if answer.len() > LONG_ANSWER_MAX {
            return Err(std::io::Error::other(format!(
                "an answer longer than {LONG_ANSWER_MAX} bytes"
            )));
        }
        let n = stream.read(&mut buf).await?;
        if n == 0 && until.is_empty() {
            break;
        }
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!(
                    "closed after {} bytes, before {:?}",
                    answer.len(),
                    String::from_utf8_lossy(until)
                ),
            ));
        }
        answer.extend_from_slice(&buf[..n]);
    }
    Ok(answer)
}

/// `host:port`, an IPv6 host in brackets.
fn addr_text(host: &str, port: u16) -> String {
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) => SocketAddr::new(ip, port).to_string(),
        Err(_) => format!("{host}:{port}"),
    }
}

/// Sends `send` and reads until `want` bytes came (or the peer closed, or [`ANSWER_MAX`]).
async fn exchange(addr: &str, send: &[u8], want: usize) -> std::io::Result<Vec<u8>> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream.write_all(send).await?;
    let mut answer = Vec::new();
    let mut buf = [0u8; ANSWER_MAX];
    // Bounded: each pass reads at least a byte or ends, and the answer is capped.
    while answer.len() < want.clamp(1, ANSWER_MAX) {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&buf[..n]);
    }
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    fn ping() -> Readiness {
        Readiness::Exchange {
            name: "PING",
            send: b"PING\r\n".to_vec(),
            expect: b"+PONG".to_vec(),
        }
    }

    /// A one-connection server answering `answer` to whatever comes.
    async fn serve(answer: &'static [u8]) -> u16 {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let mut buf = [0u8; 64];
            let _ = s.read(&mut buf).await;
            let _ = s.write_all(answer).await;
        });
        port
    }

    #[tokio::test]
    async fn an_exchange_is_ready_on_the_promised_answer_only() {
        let r = ping();
        let port = serve(b"+PONG\r\n").await;
        r.check("127.0.0.1", port, Duration::from_secs(2))
            .await
            .unwrap();
        let port = serve(b"-LOADING Redis is loading\r\n").await;
        let e = r
            .check("127.0.0.1", port, Duration::from_secs(2))
            .await
            .unwrap_err();
        assert!(e.answered, "an answer was read: {e}");
        let e = e.reason;
        assert!(e.contains("LOADING") && e.contains("+PONG"), "{e}");
        assert_eq!(r.target("::1", 6379), "PING on [::1]:6379");
        assert_eq!(
            Readiness::http("/health").target("127.0.0.1", 1),
            "http://127.0.0.1:1/health"
        );
    }

    #[tokio::test]
    async fn a_long_answer_is_ready_when_it_holds_every_word_and_none_it_must_lack() {
        let r = |contains: &[&str], lacks: &[&str]| Readiness::Answer {
            name: "SENTINEL master",
            send: b"SENTINEL master x\r\nPING\r\n".to_vec(),
            until: b"+PONG\r\n".to_vec(),
            contains: contains.iter().map(|c| c.as_bytes().to_vec()).collect(),
            lacks: lacks.iter().map(|l| l.as_bytes().to_vec()).collect(),
        };
        let said =
            b"*4\r\n$5\r\nflags\r\n$6\r\nmaster\r\n$10\r\nnum-slaves\r\n$1\r\n2\r\n+PONG\r\n";
        let port = serve(said).await;
        r(&["num-slaves\r\n$1\r\n2\r\n"], &["s_down"])
            .check("127.0.0.1", port, Duration::from_secs(2))
            .await
            .unwrap();
        let port = serve(said).await;
        let e = r(&["num-slaves\r\n$1\r\n3\r\n"], &[])
            .check("127.0.0.1", port, Duration::from_secs(2))
            .await
            .unwrap_err()
            .reason;
        assert!(e.starts_with("the answer lacks \"num-slaves"), "{e}");
        let port = serve(said).await;
        let e = r(&[], &["master"])
            .check("127.0.0.1", port, Duration::from_secs(2))
            .await
            .unwrap_err()
            .reason;
        assert_eq!(e, "the answer has \"master\"");
        // Closed before the end mark: not ready, whatever came.
        let port = serve(b"*4\r\n$5\r\nflags").await;
        let e = r(&[], &[])
            .check("127.0.0.1", port, Duration::from_secs(2))
            .await
            .unwrap_err();
        assert!(!e.answered, "no whole answer: {e}");
        let e = e.reason;
        assert!(e.contains("closed after"), "{e}");
    }

    #[tokio::test]
    async fn an_answer_without_an_end_mark_is_read_to_the_close() {
        let r = |contains: &str| Readiness::Answer {
            name: "srvr",
            send: b"srvr".to_vec(),
            until: Vec::new(),
            contains: vec![contains.as_bytes().to_vec()],
            lacks: Vec::new(),
        };
        // The word comes in the answer's last line, after lines that end like any other.
        let said = b"Zookeeper version: 3.8.0\nLatency min/avg/max: 0/0.0/0\nMode: leader\n";
        let port = serve(said).await;
        r("Mode: leader")
            .check("127.0.0.1", port, Duration::from_secs(2))
            .await
            .unwrap();
        let port = serve(b"Zookeeper version: 3.8.0\nMode: follower\n").await;
        let e = r("Mode: leader")
            .check("127.0.0.1", port, Duration::from_secs(2))
            .await
            .unwrap_err();
        assert!(e.answered, "{e}");
        assert_eq!(e.reason, "the answer lacks \"Mode: leader\"");
    }

    /// What a start-up that timed out says: an answer, once one came, outweighs the probes
    /// that followed it without one (the last one is often cut short by the deadline).
    #[test]
    fn a_timed_out_start_up_says_the_last_answer_it_had() {
        let said = |r: &str| NotReady {
            reason: r.to_string(),
            answered: true,
        };
        let silent = |r: &str| NotReady {
            reason: r.to_string(),
            answered: false,
        };
        // (the failures in order, what the error says, whether the hint is that it listens)
        let cases = [
            (vec![], "no attempt made", false),
            (vec![silent("refused")], "last attempt: refused", false),
            (
                vec![silent("refused"), said("HTTP 404"), silent("timed out")],
                "last answer: HTTP 404",
                true,
            ),
            (
                vec![said("HTTP 404"), said("HTTP 503")],
                "last answer: HTTP 503",
                true,
            ),
            (
                vec![said("HTTP 404"), silent("timed out"), silent("refused")],
                "last answer: HTTP 404",
                true,
            ),
        ];
        for (failures, says, listens) in cases {
            let mut last: Option<NotReady> = None;
            for f in failures.iter().cloned() {
                last = Some(f.after(last.take()));
            }
            assert_eq!(last_said(last.as_ref()), says, "{failures:?}");
            let hint = not_ready_hint(last.as_ref());
            assert_eq!(
                hint.starts_with("It listens"),
                listens,
                "{failures:?}: {hint}"
            );
        }
    }

    #[tokio::test]
    async fn a_closed_port_is_not_ready() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        drop(l);
        let e = ping()
            .check("127.0.0.1", port, Duration::from_secs(2))
            .await
            .unwrap_err();
        assert!(!e.answered, "nothing listens: {e}");
        assert!(e.reason.to_lowercase().contains("refused"), "{e}");
    }
}
