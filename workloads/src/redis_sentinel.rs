//! `--adapter redis-sentinel`: the lock of `--adapter redis` (redis-py's `Lock`: `SET key value
//! NX PX ttl`, renew and release by compare scripts, `fence=counter` an `INCR` in the same
//! script) on a master that Redis Sentinel watches and replaces, as a team runs it for high
//! availability: the standard three boxes, each a `redis-server` and a sentinel
//! (`redis-server --sentinel`, the program Debian's `redis-sentinel` package links to, so the
//! redis-server package is all it needs).
//!
//! The deployment. Node `n1` starts as the master, every other node `replicaof` it; each node
//! also runs a sentinel on its `{peer_port}` that monitors the master under the name
//! [`MASTER`] with a quorum of a majority of the nodes. A node is one box: its start script
//! writes `redis.conf` and `sentinel.conf` into `{data_dir}` only when they are not there (so
//! what the sentinels rewrite, a `replicaof` after a failover, the sentinel's epoch, survives a
//! kill and restart, as on a host), starts the sentinel in the background and `exec`s the
//! server, so both are in the node's process group: a pause freezes both, a kill kills both.
//! The sentinel is started under `setpriv --pdeathsig KILL` so it dies with its server (the
//! harness's PDEATHSIG reaches only the process it forked). `sentinel.conf` already lists the
//! replicas and the other sentinels (`known-replica`, `known-sentinel`, fixed `myid`s), as a
//! settled deployment's file reads after its first rewrite: left to discover them, sentinels
//! take 2-10 s (replicas from the master's INFO every 10 s, sentinels from hellos every 2 s).
//! Before the probe and the first fault the harness still waits, on every sentinel, until it
//! names `n1`, knows every replica with its link to `n1` up and every other sentinel, and
//! sees nothing down ([`Service::settled`]); lockpick.log says when that held.
//!
//! Failure detection is short, as for a lock service with leases of seconds:
//! `down-after-milliseconds` [`DOWN_AFTER_MS`], `failover-timeout` [`FAILOVER_TIMEOUT_MS`]
//! (measured here with 1 s: a paused master was replaced 2.4-3.5 s after it stopped).
//!
//! The client, as redis-py's `Sentinel` and `SentinelConnectionPool`: before each acquire, and
//! before any op after one that failed (`READONLY` from a demoted master, a refused or lost
//! connection, a timeout), it asks the sentinels `SENTINEL get-master-addr-by-name` in turn,
//! each bounded by [`SENTINEL_TIMEOUT_MS_MAX`], takes the first answer and sends the lock's
//! commands to that server. Client slot `i` drives node `i mod N`'s adapter, which asks that
//! node's sentinel first, as clients spread over the boxes' zones would ask the nearest. No
//! retries: an op that fails is answered as it failed (a retry hides the fault it answers).
//!
//! What it finds (the publicly known behaviour): replication is asynchronous, and a master that
//! is cut off keeps granting while the sentinels promote a replica that grants the same lock;
//! a master paused past `down-after-milliseconds` is replaced, and resumed it is still a
//! master, granting the clients that were polling it, until the sentinels demote it; a master
//! restarted without persistence comes back empty (and, if the sentinels did not notice it
//! gone, its replicas resync to its empty data set). Each makes two holders (`double-grant`);
//! with `fence=counter` the counter repeats (the promoted replica's lags). The counter
//! workload's register is lockpick's fenced store, as for `--adapter redis`.
//!
//! Evidence on each grant: the node that granted (`redis_node`, `n1`...), its role and
//! replication offset right after the grant (`redis_role`, `redis_offset`) and the node
//! whose sentinel named it (`sentinel`).

use crate::api::{Failure, Grant, Kept, LockClient, Reply, Tokens, Wire};
use crate::pause::PauseBoard;
use crate::redis::{Redis, RedisEvidence, RedisLock};
use crate::service::{
    Connect, ConnectError, Launch, Service, ServiceOption, ServiceOptions, Settings,
};
use crate::Adapter;
use history::reason::with_detail;
use history::Evidence;
use nemesis::Readiness;
use rand::Rng;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// The name the sentinels monitor the master by.
const MASTER: &str = "lockpick";
/// How long a sentinel may take to answer before the next is asked (redis-py's documented
/// example sets 0.1 s; twice that here, on a machine the tests share with builds); less when
/// `--op-timeout` is shorter.
const SENTINEL_TIMEOUT_MS_MAX: u64 = 200;
/// How long a sentinel waits for an instance to answer before it counts it down: the scale of
/// the leases a lock service hands out (Sentinel's example says 5 s). Not a second: that is
/// also a sentinel's reconnect and ping period, and a sentinel whose first connection found
/// its master not yet listening counts it down at the instant it reconnects; two did at
/// start-up here, and failed over a healthy master before any fault.
const DOWN_AFTER_MS: u64 = 1500;
/// How long a failover may take before another sentinel may try again.
const FAILOVER_TIMEOUT_MS: u64 = 3000;
/// Between tries of a waiting acquire (redis-py's `Lock` sleeps 0.1 s).
const POLL_MS: u64 = 100;
/// Clients whose master is remembered; past this every one is forgotten (they ask again).
const CLIENTS_MAX: usize = 1024;

/// Which server a client sends to, and which node's sentinel named it.
#[derive(Debug, Clone)]
struct Named {
    node: usize,
    by: usize,
}

/// One client slot's view of the deployment: every node's server and sentinel.
pub struct SentinelLock {
    /// Node `i`'s server, as the harness reaches it; its evidence names it `n{i+1}`.
    servers: Vec<RedisLock>,
    /// Node `i`'s sentinel, each call bounded by the sentinel timeout.
    sentinels: Vec<RedisLock>,
    /// Node `i`'s server as its peers (and so the sentinels) know it, `host:port`.
    known_as: Vec<String>,
    /// The sentinel asked first.
    first: usize,
    /// Each client's current master, until an op of its fails.
    current: Kept<String, Named>,
}

fn node_name(i: usize) -> String {
    format!("n{}", i + 1)
}

/// A bulk string of an answer, as text.
fn text_of(v: &redis::Value) -> Option<String> {
    match v {
        redis::Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        redis::Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

impl SentinelLock {
    /// Asks the sentinels in turn, from this slot's own, which server is the master; the
    /// first that answers decides. Nothing was sent to a server when this fails.
    async fn discover(&self, client: &str) -> Result<Named, Failure> {
        let n = self.sentinels.len();
        let mut why = Vec::with_capacity(n);
        for k in 0..n {
            let s = (self.first + k) % n;
            let mut pipe = redis::pipe();
            pipe.cmd("SENTINEL")
                .arg("get-master-addr-by-name")
                .arg(MASTER);
            let answer = match self.sentinels[s].send(client, &pipe).await {
                Ok(a) => a,
                Err(Failure::Definite(e) | Failure::Indefinite(e)) => {
                    why.push(format!("{}: {e}", node_name(s)));
                    continue;
                }
            };
            let addr = match answer.as_slice() {
                [redis::Value::Array(a)] if a.len() == 2 => {
                    match (text_of(&a[0]), text_of(&a[1])) {
                        (Some(h), Some(p)) if h.contains(':') => format!("[{h}]:{p}"),
                        (Some(h), Some(p)) => format!("{h}:{p}"),
                        _ => {
                            why.push(format!("{}: answered {a:?}", node_name(s)));
                            continue;
                        }
                    }
                }
                other => {
                    why.push(format!("{}: answered {other:?}", node_name(s)));
                    continue;
                }
            };
            let Some(node) = self.known_as.iter().position(|k| *k == addr) else {
                return Err(Failure::Definite(with_detail(
                    "unavailable",
                    &format!("the sentinel of {} named {addr}, no node of this run", node_name(s)),
                )));
            };
            let named = Named { node, by: s };
            self.current.keep(client.to_string(), named.clone());
            return Ok(named);
        }
        Err(Failure::Definite(with_detail(
            "unavailable: no sentinel named a master",
            &why.join(", "),
        )))
    }

    /// The client's current master, asked of the sentinels if it has none.
    async fn master(&self, client: &str) -> Result<Named, Failure> {
        if let Some(n) = self.current.get(client) {
            return Ok(n);
        }
        self.discover(client).await
    }

    async fn acquire_waiting(
        &self,
        client: &str,
        lock: &str,
        ttl_ms: u64,
        wait_ms: u64,
        pauses: Option<&PauseBoard>,
    ) -> Reply {
        // A stalled client asks nothing, the sentinels included.
        if let Some(until) = pauses.and_then(|p| p.stalled_until(client)) {
            tokio::time::sleep_until(until.into()).await;
        }
        let named = match self.discover(client).await {
            Ok(n) => n,
            Err(f) => return f.into(),
        };
        let server = &self.servers[named.node];
        let by = node_name(named.by);
        let value = format!("{:032x}", rand::rng().random::<u128>());
        crate::pause::poll_for_grant(client, wait_ms, POLL_MS, pauses, || async {
            let tried = server.try_acquire(client, lock, &value, ttl_ms).await;
            let granted = self.current.forget_if_failed(client, tried)?;
            Ok::<_, Failure>(granted.map(|mut body| {
                if let Value::Object(m) = &mut body {
                    let sentinel = Some(by.clone());
                    SentinelEvidence { sentinel }.write_into(m);
                }
                body
            }))
        })
        .await
    }

    /// A compare script on the client's current master: 1 took effect.
    async fn compare(
        &self,
        client: &str,
        lock: &str,
        grant: &Grant,
        script: &str,
        extra: Option<u64>,
    ) -> Result<bool, Failure> {
        let named = self.master(client).await?;
        let r = self.servers[named.node]
            .compare(client, lock, grant, script, extra)
            .await;
        self.current.forget_if_failed(client, r)
    }
}

impl LockClient for SentinelLock {
    crate::api::waiting_acquire_ops!();
    crate::redis::compare_lock_ops!();
    fn lock_wire(&self, op: &str, lock: &str) -> Wire {
        let w = self.servers[0].lock_wire(op, lock);
        Wire {
            request: format!("{} on the master the sentinels name", w.request),
            ..w
        }
    }
}

/// The start script of one node (`sh -c`): both configuration files written once into the
/// data dir, the sentinel in the background, the server in the foreground. `nodes` sets the
/// quorum; `persistence` is redis.conf's lines for the option's value.
fn start_script(nodes: usize, persistence: &str) -> String {
    let script = r#"set -e
D="{data_dir}"
mkdir -p "$D"
cd "$D"
M1=$(echo "{peers}" | cut -d, -f1)
if [ "{id}" = n1 ]; then M1="{host}:{port}"; fi
M=$(echo "$M1" | sed 's/:\([0-9]*\)$/ \1/')
if [ ! -f redis.conf ]; then
  {{
    echo "port {port}"
    echo "bind {host}"
    echo "protected-mode no"
    echo "dir \"$D\""
    echo "repl-diskless-sync-delay 0"
PERSISTENCE
    if [ "{id}" != n1 ]; then echo "replicaof $M"; fi
  }} > redis.conf.new
  mv redis.conf.new redis.conf
fi
if [ ! -f sentinel.conf ]; then
  {{
    echo "port {peer_port}"
    echo "bind {host}"
    echo "protected-mode no"
    echo "dir \"$D\""
    echo "sentinel myid $(printf '%040d' "$(echo {id} | tr -d n)")"
    echo "sentinel monitor MASTER $M QUORUM"
    echo "sentinel down-after-milliseconds MASTER DOWN_AFTER"
    echo "sentinel failover-timeout MASTER FAILOVER"
    echo "sentinel parallel-syncs MASTER 1"
    for r in $(echo "{peers}" | tr , ' ') {host}:{port}; do
      if [ "$r" != "$M1" ]; then echo "sentinel known-replica MASTER $(echo "$r" | sed 's/:\([0-9]*\)$/ \1/')"; fi
    done
    for s in $(echo "{initial_cluster}" | tr , ' '); do
      i=$(echo "$s" | cut -d= -f1)
      if [ "$i" != "{id}" ]; then
        echo "sentinel known-sentinel MASTER $(echo "$s" | sed 's|.*//||; s/:\([0-9]*\)$/ \1/') $(printf '%040d' "$(echo "$i" | tr -d n)")"
      fi
    done
  }} > sentinel.conf.new
  mv sentinel.conf.new sentinel.conf
fi
setpriv --pdeathsig KILL redis-server "$D/sentinel.conf" --sentinel &
exec redis-server "$D/redis.conf""#;
    let persistence_lines = match persistence {
        "rdb" => "    echo 'save 1 1'\n    echo 'appendonly no'",
        "aof-everysec" => {
            "    echo 'save \"\"'\n    echo 'appendonly yes'\n    echo 'appendfsync everysec'"
        }
        "aof-always" => {
            "    echo 'save \"\"'\n    echo 'appendonly yes'\n    echo 'appendfsync always'"
        }
        _ => "    echo 'save \"\"'\n    echo 'appendonly no'",
    };
    script
        .replace("PERSISTENCE", persistence_lines)
        .replace("MASTER", MASTER)
        .replace("QUORUM", &(nodes / 2 + 1).to_string())
        .replace("DOWN_AFTER", &DOWN_AFTER_MS.to_string())
        .replace("FAILOVER", &FAILOVER_TIMEOUT_MS.to_string())
}

/// A RESP bulk string as the sentinel writes one.
fn bulk(s: &str) -> String {
    format!("${}\r\n{s}\r\n", s.len())
}

/// What every sentinel answers once the deployment is whole: the master is `n1`, every
/// other node is its replica with the link up, every other sentinel is known, nothing is
/// down or failing over.
fn settled_check(known_as: &[String]) -> Option<Readiness> {
    let first = known_as.first()?;
    let (host, port) = first.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let others = (known_as.len() - 1).to_string();
    let send = [
        "SENTINEL get-master-addr-by-name MASTER",
        "SENTINEL master MASTER",
        "SENTINEL replicas MASTER",
        "SENTINEL sentinels MASTER",
        "PING",
    ]
    .map(|c| format!("{}\r\n", c.replace("MASTER", MASTER)))
    .concat();
    let contains = [
        format!("*2\r\n{}{}", bulk(host), bulk(port)),
        format!("{}{}", bulk("num-slaves"), bulk(&others)),
        format!("{}{}", bulk("num-other-sentinels"), bulk(&others)),
    ];
    let lacks = [
        "s_down".to_string(),
        "o_down".into(),
        "disconnected".into(),
        "master_down".into(),
        "failover_in_progress".into(),
        format!("{}{}", bulk("master-link-status"), bulk("err")),
    ];
    Some(Readiness::Answer {
        name: "SENTINEL get-master-addr-by-name, master, replicas, sentinels",
        send: send.into_bytes(),
        until: b"+PONG\r\n".to_vec(),
        contains: contains.map(String::into_bytes).to_vec(),
        lacks: lacks.map(String::into_bytes).to_vec(),
    })
}

history::evidence! {
    /// What a grant carries beyond a Redis server's evidence (docs/history.md). Kept.
    pub(crate) struct SentinelEvidence for "redis-sentinel" {
        /// The node whose sentinel named the master the grant came from (`n2`).
        sentinel: String,
    }
}

/// The evidence each grant carries: the granting server's, and the sentinel that named it.
const EVIDENCE: &[&[history::Field]] = &[RedisEvidence::FIELDS, SentinelEvidence::FIELDS];

const OPTIONS: &[ServiceOption] = &[
    ServiceOption {
        name: "persistence",
        values: &["none", "rdb", "aof-everysec", "aof-always"],
        help: "how each server keeps keys across a restart (as --adapter redis)",
    },
    ServiceOption {
        name: "fence",
        values: &["none", "counter"],
        help: "none: the lock value alone (redis-py's Lock); counter: each grant also INCRs a \
               counter on the master, its fencing token (replicated as asynchronously)",
    },
];

/// Redis under Sentinel: `--nodes` boxes (3 by default), each a `redis-server` and a sentinel
/// (`redis-server --sentinel`, both from Debian's redis-server package), `n1` the first master.
pub struct RedisSentinel;

impl Service for RedisSentinel {
    fn name(&self) -> &'static str {
        "redis-sentinel"
    }
    fn about(&self) -> &'static str {
        "the redis lock on a master Redis Sentinel watches and fails over (each node a server and a sentinel; the client asks the sentinels for the master); lockpick starts Debian's `redis-server` for both"
    }
    fn launch(&self, l: &Launch) -> Option<Vec<String>> {
        let script = start_script(l.nodes, l.options.get("persistence"));
        Some(vec!["sh".into(), "-c".into(), script])
    }
    fn url_schemes(&self) -> &'static [&'static str] {
        Redis.url_schemes()
    }
    fn readiness(&self) -> Readiness {
        Redis.readiness()
    }
    fn peer_port(&self) -> bool {
        true
    }
    fn nodes_default(&self) -> usize {
        3
    }
    fn settled(&self, known_as: &[String]) -> Option<Readiness> {
        settled_check(known_as)
    }
    fn clock_faults(&self) -> Result<(), &'static str> {
        Redis.clock_faults()
    }
    fn tokens(&self, options: &ServiceOptions) -> Tokens {
        Redis.tokens(options)
    }
    fn options(&self) -> &'static [ServiceOption] {
        OPTIONS
    }
    fn holds_several_locks(&self, _options: &ServiceOptions) -> bool {
        // Each grant is its own key and value on every server it was taken on.
        true
    }
    fn fencing_hint(&self) -> Option<&'static str> {
        Some("--adapter-opt fence=counter")
    }
    fn program(&self) -> Option<(&'static str, &'static str)> {
        Redis.program()
    }
    fn check(&self, s: &Settings) -> Result<(), String> {
        if s.url {
            return Err("--url: --adapter redis-sentinel finds the master through the sentinels \
                        of the nodes lockpick starts (or --node-cmd starts); a URL names one \
                        server"
                .into());
        }
        if s.nodes < 3 {
            return Err(format!(
                "--nodes {}: --adapter redis-sentinel needs 3 or more nodes, each a server and \
                 a sentinel (the sentinels' quorum is a majority of them)",
                s.nodes
            ));
        }
        Ok(())
    }
    fn connect(&self, c: &Connect) -> Result<Adapter, ConnectError> {
        let refused = ConnectError::refused_by(self.name());
        let n = c.peers.len();
        if c.peer_urls.len() != n || c.known_as.len() != n {
            return Err(refused(format!(
                "{} sentinel(s) and {} address(es) for {n} node(s): the sentinels are the \
                 nodes' peer ports",
                c.peer_urls.len(),
                c.known_as.len()
            )));
        }
        let fenced = c.options.own.get("fence") == "counter";
        let servers = c
            .peers
            .iter()
            .enumerate()
            .map(|(i, url)| {
                RedisLock::at(url, c.op_timeout, fenced).map(|r| r.named(&node_name(i)))
            })
            .collect::<Result<Vec<_>, String>>()
            .map_err(refused)?;
        let sentinel_timeout = c
            .op_timeout
            .min(Duration::from_millis(SENTINEL_TIMEOUT_MS_MAX));
        let sentinels = c
            .peer_urls
            .iter()
            .map(|url| RedisLock::at(url, sentinel_timeout, false))
            .collect::<Result<Vec<_>, String>>()
            .map_err(refused)?;
        let first = c.peers.iter().position(|p| p == c.url).unwrap_or(0);
        let lock = Arc::new(SentinelLock {
            servers,
            sentinels,
            known_as: c.known_as.to_vec(),
            first,
            current: Kept::new(CLIENTS_MAX),
        });
        // The counter's register (fence=counter) is lockpick's fenced store, as for redis.
        c.beside_store(lock, EVIDENCE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_script_fills_only_lockpicks_placeholders() {
        let ph = nemesis::Placeholders {
            id: "n2".into(),
            host: "127.0.0.1".into(),
            port: 40002,
            data_dir: "/tmp/x/n2/data".into(),
            peers: "127.0.0.1:40001,127.0.0.1:40003".into(),
            extra: vec![
                ("peer_port".into(), "41002".into()),
                (
                    "initial_cluster".into(),
                    "n1=http://127.0.0.1:41001,n2=http://127.0.0.1:41002,n3=http://127.0.0.1:41003"
                        .into(),
                ),
            ],
        };
        let line = nemesis::substitute(&start_script(3, "none"), &ph).unwrap();
        for want in [
            "sentinel monitor lockpick $M 2",
            "sentinel down-after-milliseconds lockpick 1500",
            "for r in $(echo \"127.0.0.1:40001,127.0.0.1:40003\" | tr , ' ') 127.0.0.1:40002; do",
            "echo 'save \"\"'",
            "exec redis-server \"$D/redis.conf\"",
        ] {
            assert!(line.contains(want), "{want:?} in\n{line}");
        }
        assert!(start_script(5, "aof-always").contains("lockpick $M 3"));
    }

    #[test]
    fn the_settled_check_asks_for_n1_every_replica_and_every_sentinel() {
        let known: Vec<String> = ["127.0.0.1:40001", "127.0.0.1:40002", "127.0.0.1:40003"]
            .map(String::from)
            .to_vec();
        let Some(Readiness::Answer { contains, lacks, until, .. }) = settled_check(&known) else {
            panic!("an answer check");
        };
        let contains: Vec<String> = contains
            .iter()
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .collect();
        assert_eq!(contains[0], "*2\r\n$9\r\n127.0.0.1\r\n$5\r\n40001\r\n");
        assert_eq!(contains[1], "$10\r\nnum-slaves\r\n$1\r\n2\r\n");
        assert_eq!(until, b"+PONG\r\n");
        assert!(lacks.iter().any(|l| l == b"s_down"));
    }
}
