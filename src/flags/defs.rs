//! The definitions of `run`'s flags, in `--help`'s order (the order a run's `config.toml`
//! and reproduce line follow too). Adding a flag is adding one here, and its line in [`RUN`];
//! config.rs then resolves its value.

use super::{ms, names, Flag, Init, Kind, Section, Setting::*};
use crate::config::Target;
use workloads::{Arrivals, WorkloadKind};

pub static CONFIG: Flag = Flag {
    name: "config",
    section: Section::CommandLine,
    kind: Kind::Path("FILE"),
    help: "Read the test from a TOML file (see `lockpick init`); flags given here override it",
    ..Flag::NONE
};

pub static WORKLOAD: Flag = Flag {
    name: "workload",
    section: Section::Workload,
    kind: Kind::Text("mutex|counter|bank"),
    help: "What the clients do: `counter` (under the lock, read the store register with the \
        token and write value+1 with it; checks fencing and lost updates), `mutex` (acquire, \
        hold while renewing a third of the way into each lease, release; checks mutual \
        exclusion only) or `bank` (transfers between --accounts accounts, each a store \
        register guarded by a lock of its own, A0, A1, ...: take both accounts' locks in the \
        --lock-order-policy order, read both balances, write both new ones with their \
        tokens, release both; two locks held at once, so it can deadlock, and checks \
        `deadlock`, fencing, the accounts' total and the transfers' serializability; where \
        grants carry no token, each transfer writes only while its leases have a quarter \
        left by its clock, and the data checks alone prove a late write). Default: counter, \
        or mutex for a service whose grants carry no fencing token (a Redis lock value \
        fences nothing)",
    init: Init::Example(
        r#""counter""#,
        "counter (fencing + lost updates), mutex or bank; unset: counter, or mutex\nwhere the service's grants carry no token",
    ),
    write: |c| Some(Text(c.workload.as_str().to_string())),
    ..Flag::NONE
};

pub static CLIENTS: Flag = Flag {
    name: "clients",
    section: Section::Workload,
    kind: Kind::Count("N"),
    default: Some("5"),
    help: "Concurrent client workers",
    init: Init::Default(""),
    write: |c| Some(Count(c.clients as u64)),
    ..Flag::NONE
};

pub static LOCKS: Flag = Flag {
    name: "locks",
    section: Section::Workload,
    kind: Kind::Count("N"),
    default: Some("1"),
    help: "Locks the clients contend for (each counter lock guards its own register)",
    init: Init::Default(""),
    // The bank's locks are its accounts' (`--accounts`): `--locks` shapes nothing there.
    write: |c| (c.kind() != WorkloadKind::Bank).then_some(Count(c.locks as u64)),
    ..Flag::NONE
};

pub static ACCOUNTS: Flag = Flag {
    name: "accounts",
    section: Section::Workload,
    kind: Kind::Count("N"),
    default: Some("4"),
    help: "Accounts of the bank workload (2 or more), each with its lock: fewer accounts than \
        clients make transfers wait for each other's locks",
    write: |c| (c.kind() == WorkloadKind::Bank).then_some(Count(c.accounts as u64)),
    ..Flag::NONE
};

pub static LOCK_ORDER_POLICY: Flag = Flag {
    name: "lock-order-policy",
    section: Section::Workload,
    kind: Kind::Text("sorted|random"),
    default: Some("sorted"),
    help: "The order a bank transfer takes its two locks in: `sorted` (by account number: no \
        cycle of waits can form, the safe discipline) or `random` (the paying account first, \
        so opposite transfers take the same locks in opposite orders and each may hold one \
        while waiting for the other: a deadlock unless the service refuses a wait once its \
        --acquire-wait is over; `--unsafe no-wait-timeout` never does)",
    write: |c| {
        (c.kind() == WorkloadKind::Bank).then(|| Text(c.lock_order_policy.as_str().to_string()))
    },
    ..Flag::NONE
};

pub static TTL: Flag = Flag {
    name: "ttl",
    section: Section::Workload,
    kind: Kind::Text("DURATION"),
    default: Some("2s"),
    help: "Lease length requested with every acquire (and every renew, unless --renew-ttl)",
    init: Init::Default("lease requested on every acquire (and renew)"),
    write: |c| Some(ms(c.ttl_ms)),
    ..Flag::NONE
};

pub static RENEW_TTL: Flag = Flag {
    name: "renew-ttl",
    section: Section::Workload,
    kind: Kind::Text("DURATION"),
    help: "Lease length requested with every renew (default: the same as --ttl), 10ms to 1h. A \
        service must set a renewed lease's expiry to now + the renew's ttl, whether shorter \
        or longer than the acquire's: a shorter one tests that the lease really ends sooner \
        (the next holder may be granted then), a longer one that it really lasts longer. \
        Holders renew a third of the way into the lease in force: ttl/3 after the grant, \
        then renew-ttl/3 after each renew. Not with --adapter etcd (a keepalive renews for \
        the granted ttl)",
    init: Init::Example(r#""600ms""#, "lease on every renew instead (default: ttl)"),
    write: |c| (c.renew_ttl_ms != c.ttl_ms).then(|| ms(c.renew_ttl_ms)),
    ..Flag::NONE
};

pub static HOLD: Flag = Flag {
    name: "hold",
    section: Section::Workload,
    kind: Kind::Text("MIN..MAX"),
    default: Some("50ms..1s"),
    help: "How long a client holds the lock once granted, drawn uniformly from MIN..MAX",
    init: Init::Default("how long a holder keeps the lock"),
    write: |c| Some(Text(format!("{}ms..{}ms", c.hold_min_ms, c.hold_max_ms))),
    ..Flag::NONE
};

pub static ARRIVALS: Flag = Flag {
    name: "arrivals",
    section: Section::Workload,
    kind: Kind::Text("SHAPE"),
    default: Some("steady"),
    help: "When clients ask for the lock: steady (again as soon as the last hold ended), or \
        rounds:WINDOW (contention rounds: every client asks once a round, at a time drawn \
        uniformly from the round's first WINDOW; a round lasts 4 x WINDOW and starts on a \
        multiple of it on the realtime clock). Results then count the contended rounds and \
        those that ended with more than one holder",
    write: |c| (c.arrivals != Arrivals::Steady).then(|| Text(c.arrivals.to_string())),
    ..Flag::NONE
};

pub static DURATION: Flag = Flag {
    name: "duration",
    section: Section::Workload,
    kind: Kind::Text("DURATION"),
    default: Some("30s"),
    help: "How long clients run before the final heal (durations: 500ms, 2s, 1m)",
    // Commented out: `lockpick test --config` warns of a duration set here, as the suite
    // plans each scenario's length itself.
    init: Init::Example(
        r#""30s""#,
        "`lockpick run`'s length (default 30s); `lockpick test` plans each\nscenario's own, and its --budget bounds the whole suite",
    ),
    write: |c| Some(ms(c.duration_ms)),
    ..Flag::NONE
};

pub static OPS_MAX: Flag = Flag {
    name: "ops-max",
    section: Section::Workload,
    kind: Kind::Count("N"),
    help: "Stop after this many lock cycles even if time remains: acquire attempts, each with \
        the renewals, store ops and release that follow a grant",
    init: Init::Example("100000", ""),
    write: |c| c.ops_max.map(Count),
    ..Flag::NONE
};

pub static OP_TIMEOUT: Flag = Flag {
    name: "op-timeout",
    section: Section::Workload,
    kind: Kind::Text("DURATION"),
    default: Some("1s"),
    help: "Past this an operation is recorded as indeterminate (info): the timeout of each \
        request (an acquire's is --acquire-wait plus this)",
    init: Init::Default("past this an op is indeterminate (info)"),
    write: |c| Some(ms(c.op_timeout_ms)),
    ..Flag::NONE
};

pub static ACQUIRE_WAIT: Flag = Flag {
    name: "acquire-wait",
    section: Section::Workload,
    kind: Kind::Text("DURATION"),
    help: "How long an acquire may wait for a held lock, as real clients do (default: 5 x \
        --ttl, several leases). The reference protocol sends it as `wait_ms` (lockd answers \
        `held` once it has waited that long); with --adapter etcd, whose `lock/lock` waits \
        without a bound of its own, the client ends the call once this wait from the acquire's \
        send is over (plus up to 0.5 s for the call itself), keeping its lease alive every \
        ttl/3 meanwhile (not while it is stalled by a client-pause). An acquire's request \
        timeout is otherwise this wait plus --op-timeout; 0 asks without waiting",
    init: Init::Example(
        r#""10s""#,
        "how long an acquire may wait (default: 5 x ttl)",
    ),
    write: |c| Some(ms(c.acquire_wait_ms)),
    ..Flag::NONE
};

pub static SEED: Flag = Flag {
    name: "seed",
    section: Section::Workload,
    kind: Kind::Count("N"),
    help: "Seed for the workload and the fault schedule (default: drawn at random and \
        recorded)",
    init: Init::Example("42", "fixed seed: the same faults at the same times"),
    write: |c| Some(Count(c.seed)),
    ..Flag::NONE
};

pub static NEMESIS: Flag = Flag {
    name: "nemesis",
    section: Section::Nemesis,
    kind: Kind::List("LIST"),
    help: "Faults, comma-separated: {faults}; `none` \
        for a run without faults. Default: every fault the target and this machine allow \
        (with --url, only {faults_client_side}; {faults_clocks} only where a clock backend \
        runs; {faults_networked} only with {networked_runtimes})",
    init: Init::Example(
        "[{faults_anywhere}]",
        "default: every fault this target and\n\
         machine allow; also {faults_networked}; [] for none",
    ),
    write: |c| Some(List(names(&c.faults))),
    ..Flag::NONE
};

pub static SCHEDULE: Flag = Flag {
    name: "schedule",
    section: Section::Nemesis,
    kind: Kind::Path("FILE"),
    help: "Replay this fault schedule (a run directory's schedule.json) instead of drawing one: \
        the same faults on the same nodes at the same offsets from the run's start. The \
        schedule decides the faults; --nemesis, --nemesis-interval, --nemesis-targets, \
        --clock-faults, --clock-bump, --clock-rate and --partition-topologies, which shape a \
        drawn plan, do nothing then. Every other setting comes from the flags and --config",
    write: |c| {
        c.schedule_file
            .as_ref()
            .map(|f| Text(f.display().to_string()))
    },
    ..Flag::NONE
};

pub static CLOCK_FAULTS: Flag = Flag {
    name: "clock-faults",
    section: Section::Nemesis,
    kind: Kind::List("LIST"),
    help: "Clock faults to draw from: {clock_modes} (default: all)",
    init: Init::Example("[{clock_modes}]", ""),
    write: |c| (!c.clock_modes.is_empty()).then(|| List(names(&c.clock_modes))),
    ..Flag::NONE
};

pub static CLIENT_FAULTS: Flag = Flag {
    name: "client-faults",
    section: Section::Nemesis,
    kind: Kind::List("LIST"),
    help: "Client-pause shapes to draw from, comma-separated. What a stall is aimed at: \
        `boundary` (a holder wakes a few ms after its lease surely ended), `next-grant` (a \
        holder wakes a few ms after another client was granted its lock), `long` (a holder \
        stalls 1.5-2.5 leases, several grants), `waiter` (a client stalls while its acquire \
        waits, its keepalives stopped, longer than its lease, then goes on waiting). What a \
        holder wakes into: `renew`, `write`, `release`, `read` (the counter workload; a \
        mutex holder releases instead of reading or writing). Default: all of them",
    init: Init::Example("[{client_shapes}]", ""),
    write: |c| {
        (shapes_a_fault(c, &CLIENT_FAULTS) && !c.client_shapes.names().is_empty())
            .then(|| List(c.client_shapes.names()))
    },
    ..Flag::NONE
};

pub static CLOCK_SCOPE: Flag = Flag {
    name: "clock-scope",
    section: Section::Nemesis,
    kind: Kind::Text("wall|all"),
    default: Some("wall"),
    help: "Which clocks a clock fault moves: `wall` (realtime only) or `all` (monotonic too, \
        which is what lease timers run on)",
    init: Init::Example(r#""wall""#, "wall | all (monotonic too)"),
    write: |c| Some(Text(c.clock_scope.to_string())),
    ..Flag::NONE
};

pub static CLOCK_BUMP: Flag = Flag {
    name: "clock-bump",
    section: Section::Nemesis,
    kind: Kind::Text("DURATION"),
    help: "How far a clock bump or strobe jumps (default: 3 x the longer of ttl and renew ttl)",
    write: |c| Some(ms(c.clock_bump_ms)),
    ..Flag::NONE
};

pub static CLOCK_RATE: Flag = Flag {
    name: "clock-rate",
    section: Section::Nemesis,
    kind: Kind::Fraction("FACTOR"),
    default: Some("4"),
    help: "How much faster (fast) or slower (slow: 1/FACTOR) a clock runs",
    write: |c| Some(Fraction(c.clock_rate)),
    ..Flag::NONE
};

pub static ADAPTER: Flag = Flag {
    name: "adapter",
    section: Section::Target,
    kind: Kind::Text("NAME"),
    default: Some("reference"),
    help: "The lock service and how lockpick drives it (default: reference, lockd's own \
        protocol). `--help` lists every service lockpick knows, with its options and node \
        count",
    init: Init::Example(
        r#""reference""#,
        "the service: {services}\n(options and nodes of each: `lockpick run --help`)",
    ),
    write: |c| Some(Text(c.service.name().to_string())),
    ..Flag::NONE
};

pub static ADAPTER_OPT: Flag = Flag {
    name: "adapter-opt",
    section: Section::Target,
    kind: Kind::Repeated("NAME=VALUE"),
    help: "A setting of the --adapter's own, NAME=VALUE (repeat the flag, or join with commas): \
        each service's options and their values are listed under --adapter in `--help` (the \
        first value is the default), and an unknown one is refused with the list",
    init: Init::Example(
        r#"["fence=counter"]"#,
        "the service's own settings, NAME=VALUE",
    ),
    write: |c| {
        Some(c.adapter_own.pairs())
            .filter(|p| !p.is_empty())
            .map(List)
    },
    ..Flag::NONE
};

pub static TEMPLATE_FILE: Flag = Flag {
    name: "template-file",
    section: Section::Target,
    kind: Kind::Path("FILE"),
    help: "The file whose [template] section describes the API (set by --config)",
    hide: true,
    write: |c| {
        c.template_file
            .as_ref()
            .map(|f| Text(f.display().to_string()))
    },
    rerun_as_config: true,
    ..Flag::NONE
};

pub static HOSTS_FILE: Flag = Flag {
    name: "hosts-file",
    section: Section::Target,
    kind: Kind::Path("FILE"),
    help: "The file whose `[[nodes]]` (and `[ssh]`) list the hosts of --runtime ssh (set by \
        --config)",
    hide: true,
    write: |c| c.hosts_file.as_ref().map(|f| Text(f.display().to_string())),
    ..Flag::NONE
};

pub static NODES: Flag = Flag {
    name: "nodes",
    section: Section::Target,
    kind: Kind::Count("N"),
    help: "Nodes of the lock service (embedded lockd: one primary, the others forward to it). \
        Client i talks to node i mod N. Templates get the other nodes as {peers}. Default 1, \
        or what the --adapter needs to be itself (listed under --adapter in `--help`)",
    init: Init::Set("1", "members; client i talks to node i mod nodes"),
    write: |c| Some(Count(c.nodes as u64)),
    ..Flag::NONE
};

pub static NEMESIS_TARGETS: Flag = Flag {
    name: "nemesis-targets",
    section: Section::Nemesis,
    kind: Kind::Text("TARGET"),
    default: Some("one"),
    help: "Which nodes a pause, kill or clock fault hits: one, minority, majority, all, \
        primary",
    init: Init::Default("one | minority | majority | all | primary"),
    write: |c| Some(Text(c.nemesis_targets.to_string())),
    ..Flag::NONE
};

pub static RUNTIME: Flag = Flag {
    name: "runtime",
    section: Section::Target,
    kind: Kind::Text("NAME"),
    help: "Where nodes run (default: the first listed in `--help`, or the first that makes \
        network faults and needs no hosts when the run asks for partition or netem faults)",
    init: Init::Set(r#""{runtime}""#, "{runtimes|}"),
    write: |c| Some(Text(c.runtime.name().to_string())),
    ..Flag::NONE
};

pub static PARTITION_TOPOLOGIES: Flag = Flag {
    name: "partition-topologies",
    section: Section::Nemesis,
    kind: Kind::List("LIST"),
    help: "Partition topologies to draw from: {topologies} (default: all that cut something \
        with this many nodes)",
    init: Init::Example("[{topologies}]", ""),
    write: |c| {
        (shapes_a_fault(c, &PARTITION_TOPOLOGIES) && c.topologies_given)
            .then(|| List(names(&c.topologies)))
    },
    ..Flag::NONE
};

pub static NEMESIS_INTERVAL: Flag = Flag {
    name: "nemesis-interval",
    section: Section::Nemesis,
    kind: Kind::Text("DURATION"),
    default: Some("3s"),
    help: "Quiet time between faults (jittered ±50%)",
    // Commented out, as `duration` is: the suite plans each scenario's faults.
    init: Init::Example(
        r#""3s""#,
        "quiet time between `lockpick run`'s faults (default 3s);\n`lockpick test` plans each scenario's faults",
    ),
    write: |c| Some(ms(c.nemesis_interval_ms)),
    ..Flag::NONE
};

pub static NODE_CMD: Flag = Flag {
    name: "node-cmd",
    section: Section::Target,
    kind: Kind::Text("TEMPLATE"),
    help: "Start your lock service from a shell command instead of the embedded lockd. \
        Placeholders: {host} {port} {data_dir} {id} {peers}. It must answer GET /v1/health \
        once ready; `kill` restarts the same command with the same data dir",
    conflicts: &["url"],
    init: Init::Example(
        r#""./my-lockd --listen {host}:{port} --data {data_dir} --peers {peers}""#,
        "",
    ),
    write: |c| match &c.target {
        Target::Command { template } => Some(Text(template.clone())),
        _ => None,
    },
    ..Flag::NONE
};

pub static URL: Flag = Flag {
    name: "url",
    section: Section::Target,
    kind: Kind::Text("URL"),
    help: "Use a lock service that is already running (only client-side faults are then \
        possible)",
    init: Init::Example(
        r#""http://127.0.0.1:7000""#,
        "already running: only client-side faults then",
    ),
    write: |c| match &c.target {
        Target::Url { url } => Some(Text(url.clone())),
        _ => None,
    },
    ..Flag::NONE
};

pub static UNSAFE: Flag = Flag {
    name: "unsafe",
    section: Section::Target,
    kind: Kind::Text("MODE"),
    help: "Run the embedded lockd in an unsafe mode, to watch the checkers catch it: \
        reuse-tokens, no-ttl, wall-clock, skip-token-check, racy, split-brain (needs \
        --nodes), renew-grace (a late renew is accepted after another client was granted; \
        the client-pause `boundary,renew` shape exposes it), unchecked-release (a lapsed \
        holder's release frees whoever holds the lock; `long,release` exposes it), volatile \
        (a single lockd that forgets its locks on restart; kill faults expose it), \
        no-tiebreak (with --lock-order timestamp: equal timestamps all enter), \
        no-wait-timeout (a waiting acquire is never refused; `--workload bank \
        --lock-order-policy random` deadlocks on it), ring-regenerate (with --lock-order \
        ring: a member that has not seen the token for 2 s makes a new one; a pause or \
        partition leaves two tokens)",
    conflicts: &["url", "node-cmd"],
    write: |c| c.unsafe_mode.map(|m| Text(m.to_string())),
    ..Flag::NONE
};

pub static LOCK_ORDER: Flag = Flag {
    name: "lock-order",
    section: Section::Target,
    kind: Kind::Text("ORDER"),
    help: "How the embedded lockd's members decide who enters: primary (one member holds all \
        lock state), timestamp[:GRANULARITY] (each member stamps its clients' requests with \
        its own clock in ticks of GRANULARITY, default 10ms, the members exchange them and \
        the smallest (timestamp, member) enters; `--unsafe no-tiebreak` orders by timestamp \
        alone), or ring[:IDLE] (one token goes round the members and only its holder grants, \
        for IDLE, default 5ms, after it arrives; a kill of the holder loses it, `--unsafe \
        ring-regenerate` makes a new one after 2 s without it)",
    conflicts: &["url", "node-cmd"],
    write: |c| c.lock_order.map(|o| Text(o.to_string())),
    ..Flag::NONE
};

pub static STORE_CMD: Flag = Flag {
    name: "store-cmd",
    section: Section::Store,
    kind: Kind::Text("TEMPLATE"),
    help: "Start your fenced store from a shell command (placeholders as --node-cmd)",
    conflicts: &["store-url"],
    init: Init::Example(r#""./my-store --listen {host}:{port}""#, ""),
    write: |c| match &c.store {
        Some(Target::Command { template }) => Some(Text(template.clone())),
        _ => None,
    },
    ..Flag::NONE
};

pub static STORE_URL: Flag = Flag {
    name: "store-url",
    section: Section::Store,
    kind: Kind::Text("URL"),
    help: "Use a fenced store that is already running",
    init: Init::Example(r#""http://127.0.0.1:7001""#, ""),
    write: |c| match &c.store {
        Some(Target::Url { url }) => Some(Text(url.clone())),
        _ => None,
    },
    ..Flag::NONE
};

pub static STORE_FENCE: Flag = Flag {
    name: "store-fence",
    section: Section::Store,
    kind: Kind::Text("MODE"),
    default: Some("all"),
    help: "Fencing mode of the embedded store: all (reads and writes move the fence), write \
        (only writes do), none (no fencing: the anti-pattern), off-by-one (a token one below \
        the fence passes; the client-pause `next-grant,write` shape exposes it), \
        check-then-put (the textbook's write as written: check the last token, then put, not \
        atomically; `next-grant,write` exposes it), one-unfenced (every register fenced as \
        `all` but the one named ...0, balance-A0 or counter-L0, which is not: a bank \
        transfer's stale write lands on one account)",
    conflicts: &["store-url", "store-cmd"],
    init: Init::Default("{fence_modes|} (embedded store)"),
    write: |c| {
        matches!(c.store, Some(Target::Embedded) | None)
            .then(|| Text(c.store_fence.name().to_string()))
    },
    ..Flag::NONE
};

pub static OUT: Flag = Flag {
    name: "out",
    section: Section::Output,
    kind: Kind::Path("DIR"),
    default: Some("runs"),
    help: "Where run directories go",
    init: Init::Default(""),
    write: |c| Some(Text(c.out.display().to_string())),
    ..Flag::NONE
};

pub static NAME: Flag = Flag {
    name: "name",
    section: Section::Output,
    kind: Kind::Text("NAME"),
    help: "Test name: the run directory is <out>/<name>/<UTC timestamp>/",
    init: Init::Example(r#""my-lock-service""#, ""),
    write: |c| Some(Text(c.name.clone())),
    ..Flag::NONE
};

pub static DRIFT: Flag = Flag {
    name: "drift",
    section: Section::Check,
    kind: Kind::Fraction("FRACTION"),
    default: Some("0"),
    help: "Clock-rate error the service claims to tolerate (0.01 = 1%, at most six decimals: \
        the checkers count it in whole ppm); widens lease bounds",
    init: Init::Default("clock-rate error the service claims to tolerate"),
    write: |c| Some(Fraction(c.drift)),
    ..Flag::NONE
};

pub static LIVENESS_GRACE: Flag = Flag {
    name: "liveness-grace",
    section: Section::Check,
    kind: Kind::Text("DURATION"),
    default: Some("2s"),
    help: "Extra time a lock may stay held after every lease surely expired before \
        `lock-stuck`",
    init: Init::Default("slack before a held lock counts as stuck"),
    write: |c| Some(ms(c.liveness_grace_ms)),
    ..Flag::NONE
};

pub static STARTUP_TIMEOUT: Flag = Flag {
    name: "startup-timeout",
    section: Section::Target,
    kind: Kind::Text("DURATION"),
    default: Some("10s"),
    help: "How long a started node may take to answer GET /v1/health",
    init: Init::Default("how long a node may take to answer GET /v1/health"),
    write: |c| Some(ms(c.startup_timeout_ms)),
    ..Flag::NONE
};

pub static NO_PROBE: Flag = Flag {
    name: "no-probe",
    section: Section::Target,
    kind: Kind::Switch,
    help: "Skip the conformance probe `run` makes once the service is up and before its clock \
        starts (see `lockpick probe --help`). For a service that cannot take the probe's \
        extra lock and clients (a shared production-like instance where the lock \
        `lockpick-probe` is not yours to take), or to compare with a run made before the \
        probe existed. The run still stops on answers the adapter does not understand",
    write: |c| c.no_probe.then_some(Switch(true)),
    ..Flag::NONE
};

pub static FAIL_ON: Flag = Flag {
    name: "fail-on",
    section: Section::Check,
    kind: Kind::List("LIST"),
    help: "Which findings make the exit code 1, comma-separated: safety, liveness, warnings, \
        coverage (a fault kind or client-fault shape the run's schedule asked for that the \
        run exercised nowhere: the summary's coverage table marks it). An unknown verdict \
        exits 2 whatever this says. Default: safety,liveness, and coverage too under CI (CI \
        or GITHUB_ACTIONS set)",
    check: Some(|s| {
        s.parse::<reports::FailOn>()
            .map(|_| ())
            .map_err(|e| e.to_string())
    }),
    // Commented out: set, it would also switch off the coverage CI adds by default.
    init: Init::Example(
        r#"["safety", "liveness", "coverage"]"#,
        "unset: safety and liveness, and coverage too under CI (CI or\n\
         GITHUB_ACTIONS set); add \"warnings\" (unsafe-overlap) to fail on those",
    ),
    // Pinned only when given: the default depends on where the run is (coverage under CI),
    // and a rerun of a run's config.toml under CI must get CI's.
    write: |c| c.fail_on_given.then(|| List(names(&c.fail_on.names()))),
    ..Flag::NONE
};

pub static STOP_ON_VIOLATION: Flag = Flag {
    name: "stop-on-violation",
    section: Section::Check,
    kind: Kind::Switch,
    help: "End the clients at the first safety violation the live check proves (the history is \
        checked while it is written, every 250 ms or so), then heal, check and report as \
        usual: the verdict is invalid, and the completeness says `stopped:` with the \
        violation and when it was proven. Liveness findings never stop a run. On by default \
        inside `lockpick test` unless --keep-going (given with --keep-going, each scenario \
        still stops at its first violation while the suite goes on)",
    init: Init::Example(
        "true",
        "end the clients at the first proven safety violation",
    ),
    write: |c| c.stop_on_violation.then_some(Switch(true)),
    ..Flag::NONE
};

pub static RUN: &[&Flag] = &[
    &CONFIG,
    &WORKLOAD,
    &CLIENTS,
    &LOCKS,
    &ACCOUNTS,
    &LOCK_ORDER_POLICY,
    &TTL,
    &RENEW_TTL,
    &HOLD,
    &ARRIVALS,
    &DURATION,
    &OPS_MAX,
    &OP_TIMEOUT,
    &ACQUIRE_WAIT,
    &SEED,
    &NEMESIS,
    &SCHEDULE,
    &CLOCK_FAULTS,
    &CLIENT_FAULTS,
    &CLOCK_SCOPE,
    &CLOCK_BUMP,
    &CLOCK_RATE,
    &ADAPTER,
    &ADAPTER_OPT,
    &TEMPLATE_FILE,
    &HOSTS_FILE,
    &NODES,
    &NEMESIS_TARGETS,
    &RUNTIME,
    &PARTITION_TOPOLOGIES,
    &NEMESIS_INTERVAL,
    &NODE_CMD,
    &URL,
    &UNSAFE,
    &LOCK_ORDER,
    &STORE_CMD,
    &STORE_URL,
    &STORE_FENCE,
    &OUT,
    &NAME,
    &DRIFT,
    &LIVENESS_GRACE,
    &STARTUP_TIMEOUT,
    &NO_PROBE,
    &FAIL_ON,
    &STOP_ON_VIOLATION,
];

/// Whether `flag`'s setting shapes a fault of the run: some family of it names the flag's key
/// among its settings (`FaultKind::settings`). Written only then: a run's config.toml says
/// what it asked to exercise.
fn shapes_a_fault(c: &crate::config::RunConfig, flag: &Flag) -> bool {
    let key = flag.key();
    c.faults
        .iter()
        .any(|f| f.settings().contains(&key.as_str()))
}
