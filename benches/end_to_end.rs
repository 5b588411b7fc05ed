//! End-to-end catch-up on the same WAL: PostgreSQL's own limit (`pg_recvlogical` streaming
//! the pgoutput stream of the outbox publication to /dev/null) against outbox-relay
//! streaming it to a real broker (a fresh one per run), all from slots created at the same
//! position. Reports rows/s, the throughput ratio, CPU per event of each client and of its
//! walsender (min/median/max over the rounds), what the walsender saves when asked for less
//! (pgoutput `binary`, a publication column list), the relay's RSS idle and at its peak, and
//! commit → consumer latency at 1,000 and 10,000 events/s (exact quantiles, a live Kafka
//! consumer). With `OUTBOX_RELAY_BENCH_BASELINE=<another outbox-relay binary>` every
//! figure is measured for both in the same run ("before" and "after"). Writes
//! benches/results/end_to_end.svg, then measures what `--exactly-once` costs
//! (benches/support/exactly_once_cost.rs, also `cargo bench --bench exactly_once`).
//!
//! cargo bench --bench end_to_end
//! OUTBOX_RELAY_BENCH_BASELINE=/tmp/outbox-relay-before cargo bench --bench end_to_end
//! OUTBOX_RELAY_BENCH_EVENTS=500000 OUTBOX_RELAY_BENCH_TX_ROWS=1 OUTBOX_RELAY_BENCH_ROUNDS=5 cargo bench --bench end_to_end
//! OUTBOX_RELAY_BENCH_RELAY_ARGS="--producer-property linger.ms=5" cargo bench --bench end_to_end
//! OUTBOX_RELAY_BENCH_TX_ROWS= OUTBOX_RELAY_BENCH_EXACTLY_ONCE=0 …: the steady state alone.
//! OUTBOX_RELAY_BENCH_PERF=1 …: round 0's relay runs under `perf record -g`; where its CPU
//! goes is written to benches/results/perf-<build>-tx<rows>.txt.

use outbox_relay_testkit::{Broker, PgCluster, RelayProcess, Storage};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[path = "support/mod.rs"]
mod support;

#[path = "support/live.rs"]
mod live;

use support::{
    confirmed, cpu_seconds, current_wal_lsn, env_u64, exactly_once_cost, write_outbox,
    CLOCK_TICKS_PER_SEC,
};

const RELAY: &str = env!("CARGO_BIN_EXE_outbox-relay");

/// The bench consumer's `fetch.wait.max.ms` (`OUTBOX_RELAY_BENCH_FETCH_WAIT_MS`, default 1):
/// tansu holds a fetch that found nothing for all of it even when records arrive meanwhile
/// (Kafka answers at once), so a longer wait measures the broker's fetch, not the relay.
fn fetch_wait_ms() -> u32 {
    env_u64("OUTBOX_RELAY_BENCH_FETCH_WAIT_MS", 1) as u32
}

/// The columns the relay reads (a publication column list of them, PostgreSQL 15+).
const ROUTED_COLUMNS: &str = "id, aggregate_type, aggregate_id, event_type, payload";

use outbox_relay_testkit::status_kib as kib;

#[derive(Clone, Copy)]
struct Run {
    seconds: f64,
    client_cpu: f64,
    walsender_cpu: f64,
    /// Instructions the relay executed in user space (`OUTBOX_RELAY_BENCH_CALLGRIND=1`), 0 otherwise.
    instructions: f64,
    /// Seconds from the client's start to the first record in the broker (NaN: not measured).
    first_record: f64,
    /// The client's peak RSS, MiB (NaN: not measured).
    peak_rss: f64,
}

/// An outbox-relay build under measurement.
struct Binary {
    name: &'static str,
    path: PathBuf,
    /// Arguments of `run` beyond the bench's own (the Debezium mode's connector).
    args: Vec<String>,
}

async fn slot_pid(db: &tokio_postgres::Client, slot: &str) -> Option<u32> {
    db.query_one(
        "SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1",
        &[&slot],
    )
    .await
    .ok()?
    .get::<_, Option<i32>>(0)
    .map(|p| p as u32)
}

async fn create_slot(db: &tokio_postgres::Client, slot: &str) {
    db.batch_execute(&format!(
        "SELECT pg_create_logical_replication_slot('{slot}', 'pgoutput')"
    ))
    .await
    .unwrap();
}

async fn drop_slot(db: &tokio_postgres::Client, slot: &str) {
    db.batch_execute(&format!("SELECT pg_drop_replication_slot('{slot}')"))
        .await
        .unwrap();
}

/// `pg_recvlogical` of this cluster's `postgres` database, started on `slot`.
fn recvlogical_command(pg: &PgCluster, slot: &str) -> Command {
    let mut command = pg.client("pg_recvlogical");
    command.args(["--slot", slot, "--start"]);
    command
}

/// `pg_recvlogical` streaming `slot` to /dev/null up to `end`, with pgoutput `options`.
async fn recvlogical(
    pg: &PgCluster,
    db: &tokio_postgres::Client,
    slot: &str,
    end: u64,
    options: &[&str],
) -> Run {
    let t = Instant::now();
    let mut command = recvlogical_command(pg, slot);
    command.args(["-o", "proto_version=1"]).args([
        "-E",
        &format!("{:X}/{:X}", end >> 32, end & 0xFFFF_FFFF),
        "-f",
        "/dev/null",
    ]);
    for option in options {
        command.args(["-o", option]);
    }
    let mut child = command.spawn().unwrap();
    let (mut walsender_cpu, mut client_cpu) = (0.0, 0.0);
    loop {
        if let Some(pid) = slot_pid(db, slot).await {
            walsender_cpu = cpu_seconds(pid).unwrap_or(walsender_cpu);
        }
        client_cpu = cpu_seconds(child.id()).unwrap_or(client_cpu);
        if child.try_wait().unwrap().is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Run {
        seconds: t.elapsed().as_secs_f64(),
        client_cpu,
        walsender_cpu,
        instructions: 0.0,
        first_record: f64::NAN,
        peak_rss: f64::NAN,
    }
}

fn relay_args(pg: &PgCluster, broker: &Broker, slot: &str, metrics_address: &str) -> Vec<String> {
    let mut args: Vec<String> = [
        "run",
        "--postgres-url",
        &pg.url(),
        "--bootstrap-servers",
        &broker.bootstrap_servers(),
        "--topic-replication-factor",
        "1",
        "--topic-partitions",
        "3",
        "--metrics-address",
        metrics_address,
        "--status-interval-ms",
        "100",
        // No canary: Debezium, beside it on the same database, would capture its messages.
        "--canary-interval",
        "0",
        "--slot",
        slot,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let Ok(extra) = std::env::var("OUTBOX_RELAY_BENCH_RELAY_ARGS") {
        args.extend(extra.split_whitespace().map(str::to_owned));
    }
    args
}

/// `binary` streaming `slot` to `broker` with the bench's arguments and its own, and the
/// address of its metrics.
fn spawn_relay(
    pg: &PgCluster,
    broker: &Broker,
    binary: &Binary,
    slot: &str,
) -> (RelayProcess, String) {
    let metrics_address = format!("127.0.0.1:{}", outbox_relay_testkit::net::free_port());
    let mut args = relay_args(pg, broker, slot, &metrics_address);
    args.extend(binary.args.iter().cloned());
    let relay = RelayProcess::spawn(&binary.path, &args, &[("RUST_LOG", "warn")]).unwrap();
    (relay, metrics_address)
}

/// What `binary` holds idle: started on a fresh slot with nothing to stream, connected to a
/// broker of its own, its RSS once the slot is held and a few seconds passed. The catch-up's
/// peak is reported against it (target: at most twice).
async fn idle_rss(pg: &PgCluster, db: &tokio_postgres::Client, binary: &Binary) -> f64 {
    let broker = Broker::start(Storage::Memory).expect("Apache Kafka (scripts/install-kafka.sh)");
    let slot = format!("idle_{}", binary.name);
    create_slot(db, &slot).await;
    let (mut relay, _) = spawn_relay(pg, &broker, binary, &slot);
    let t = Instant::now();
    while slot_pid(db, &slot).await.is_none() {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "relay did not start; log:\n{}",
            relay.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let rss = kib(relay.pid(), "VmRSS:").unwrap_or(0) as f64 / 1024.0;
    relay.terminate(Duration::from_secs(30)).unwrap();
    drop_slot(db, &slot).await;
    rss
}

/// A relay streaming `slot` up to `end` to a broker of its own (fresh, in memory: no round
/// pays for the records of the ones before it).
async fn relay_catch_up(
    pg: &PgCluster,
    db: &tokio_postgres::Client,
    binary: &Binary,
    slot: &str,
    end: u64,
    perf: Option<String>,
) -> Run {
    let broker = Broker::start(Storage::Memory).expect("Apache Kafka (scripts/install-kafka.sh)");
    let metrics_address = format!("127.0.0.1:{}", outbox_relay_testkit::net::free_port());
    let mut args = relay_args(pg, &broker, slot, &metrics_address);
    args.extend(binary.args.iter().cloned());
    let t = Instant::now();
    // OUTBOX_RELAY_BENCH_CALLGRIND=1: the relay runs under callgrind, whose instruction counts
    // repeat from run to run where CPU times on a shared machine do not (user space only: no
    // kernel time, no waiting; start-up included).
    // (=keep leaves the callgrind output for callgrind_annotate.)
    let callgrind_mode = std::env::var("OUTBOX_RELAY_BENCH_CALLGRIND").unwrap_or_default();
    let callgrind = (callgrind_mode == "1" || callgrind_mode == "keep").then(|| {
        std::env::temp_dir().join(format!(
            "callgrind-{}-{slot}-{}.out",
            binary.name,
            std::process::id()
        ))
    });
    let mut relay = match &callgrind {
        Some(out) => {
            let mut wrapped = vec![
                "--tool=callgrind".to_owned(),
                format!("--callgrind-out-file={}", out.display()),
                binary.path.display().to_string(),
            ];
            wrapped.extend(args.iter().cloned());
            RelayProcess::spawn(Path::new("valgrind"), &wrapped, &[("RUST_LOG", "warn")]).unwrap()
        }
        None => RelayProcess::spawn(&binary.path, &args, &[("RUST_LOG", "warn")]).unwrap(),
    };
    // perf follows the threads that exist when it attaches: it attaches once the relay streams
    // (its producer's threads started before that).
    let mut recording = None;
    let (mut walsender_cpu, mut client_cpu) = (0.0, 0.0);
    let mut threads = Vec::new();
    let mut first_record = f64::NAN;
    let mut peak_rss = f64::NAN;
    let counter = RecordCounter::new(&broker);
    while confirmed(db, slot).await < end {
        if first_record.is_nan() && counter.records() > 0 {
            first_record = t.elapsed().as_secs_f64();
        }
        peak_rss = kib(relay.pid(), "VmHWM:").map_or(peak_rss, |k| k as f64 / 1024.0);
        if let Some(pid) = slot_pid(db, slot).await {
            walsender_cpu = cpu_seconds(pid).unwrap_or(walsender_cpu);
            if let (Some(name), None) = (&perf, &recording) {
                let data = std::env::temp_dir().join(format!("{name}.data"));
                let child = Command::new("perf")
                    .args(["record", "-F", "999", "-g", "-q", "-o"])
                    .arg(&data)
                    .args(["-p", &relay.pid().to_string()])
                    .spawn()
                    .expect("perf (apt-get install linux-perf)");
                recording = Some((name.clone(), data, child));
            }
        }
        client_cpu = cpu_seconds(relay.pid()).unwrap_or(client_cpu);
        let split = thread_cpu_seconds(relay.pid());
        if !split.is_empty() {
            threads = split;
        }
        assert!(
            t.elapsed() < Duration::from_secs(1800),
            "relay did not catch up; log:\n{}",
            relay.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let shares: Vec<String> = threads
        .iter()
        .filter(|(_, cpu, _)| *cpu > 0.0)
        .map(|(name, cpu, switches)| {
            format!(
                "{name} {:.0} % ({switches} context switches)",
                cpu / client_cpu.max(1e-9) * 100.0
            )
        })
        .collect();
    eprintln!(
        "{} ({slot}): its CPU by thread: {}",
        binary.name,
        shares.join(", ")
    );
    let mut run = Run {
        seconds: t.elapsed().as_secs_f64(),
        client_cpu,
        walsender_cpu,
        instructions: 0.0,
        first_record,
        peak_rss,
    };
    if let Some((name, data, child)) = recording {
        // SIGINT: perf writes what it recorded and exits.
        let _ = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status();
        let _ = child.wait_with_output();
        let report = Command::new("perf")
            .args([
                "report",
                "--stdio",
                "--no-children",
                "--percent-limit",
                "0.7",
                "--sort",
                "dso,symbol",
                "-g",
                "none",
                "-i",
            ])
            .arg(&data)
            .output()
            .expect("perf report");
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/results");
        let header = format!(
            "# perf record -F 999 -g -p <relay> (all its threads) during a catch-up of {end_label}, then\n# perf report --stdio --no-children --percent-limit 0.7 --sort dso,symbol -g none\n# (OUTBOX_RELAY_BENCH_PERF=1 cargo bench --bench end_to_end)\n",
            end_label = name
        );
        std::fs::write(
            format!("{dir}/perf-{name}.txt"),
            header + &String::from_utf8_lossy(&report.stdout),
        )
        .unwrap();
        // OUTBOX_RELAY_BENCH_PERF=keep leaves perf.data for `perf report -i` (call graphs).
        if std::env::var("OUTBOX_RELAY_BENCH_PERF").as_deref() == Ok("keep") {
            eprintln!("perf data kept: {}", data.display());
        } else {
            let _ = std::fs::remove_file(&data);
        }
    }
    let _ = relay.terminate(Duration::from_secs(if callgrind.is_some() {
        120
    } else {
        20
    }));
    if let Some(out) = callgrind {
        // callgrind writes "summary: <instructions>" once the relay has exited.
        let text =
            std::fs::read_to_string(&out).expect("callgrind output (apt-get install valgrind)");
        run.instructions = text
            .lines()
            .find_map(|l| l.strip_prefix("summary: "))
            .and_then(|n| n.trim().parse().ok())
            .expect("callgrind's summary line");
        if callgrind_mode == "keep" {
            eprintln!("callgrind output kept: {}", out.display());
        } else {
            let _ = std::fs::remove_file(&out);
        }
    }
    run
}

/// The records in the outbox topics (`<type>.events`, high minus low watermarks), read
/// through one consumer's metadata requests.
struct RecordCounter {
    consumer: rdkafka::consumer::BaseConsumer,
}

impl RecordCounter {
    fn new(broker: &Broker) -> Self {
        let consumer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", broker.bootstrap_servers())
            .set("log_level", "3")
            .create()
            .unwrap();
        Self { consumer }
    }

    fn records(&self) -> i64 {
        use rdkafka::consumer::Consumer;
        let timeout = Duration::from_secs(2);
        let Ok(md) = self.consumer.fetch_metadata(None, timeout) else {
            return 0;
        };
        md.topics()
            .iter()
            .filter(|t| t.name().ends_with(".events"))
            .flat_map(|t| t.partitions().iter().map(move |p| (t.name(), p.id())))
            .filter_map(|(topic, p)| self.consumer.fetch_watermarks(topic, p, timeout).ok())
            .map(|(low, high)| high - low)
            .sum()
    }
}

/// The connector configuration that routes as the relay's defaults do: Debezium's
/// PostgreSQL connector and EventRouter, `<aggregate_type>.events`, key `aggregate_id`, the
/// payload's text as value (StringConverter), streaming the pre-made `slot` of publication
/// `outbox_relay`.
fn debezium_connector(pg: &PgCluster, slot: &str) -> serde_json::Value {
    serde_json::json!({
        "name": "bench",
        "config": {
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "tasks.max": "1",
            "database.hostname": "127.0.0.1",
            "database.port": pg.port().to_string(),
            "database.user": "postgres",
            "database.password": "postgres",
            "database.dbname": "postgres",
            "topic.prefix": "bench",
            "table.include.list": "public.outbox",
            "plugin.name": "pgoutput",
            "slot.name": slot,
            "publication.name": "outbox_relay",
            "publication.autocreate.mode": "disabled",
            "snapshot.mode": "no_data",
            "topic.creation.default.partitions": "3",
            "topic.creation.default.replication.factor": "1",
            "transforms": "outbox",
            "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
            "transforms.outbox.route.topic.replacement": "${routedByValue}.events",
            "transforms.outbox.route.by.field": "aggregate_type",
            "transforms.outbox.table.field.event.key": "aggregate_id",
            "transforms.outbox.table.fields.additional.placement": "event_type:header:eventType"
        }
    })
}

/// Kafka Connect + Debezium (Connect's own JVM settings) streaming `slot` to a broker of
/// its own until all `events` records are in it. Its CPU is the whole JVM's (JIT and GC
/// threads included); the end is the records' arrival, not the slot's confirmation
/// (Debezium confirms at its offset flush, every second here).
async fn debezium_catch_up(
    pg: &PgCluster,
    db: &tokio_postgres::Client,
    slot: &str,
    events: u64,
) -> Run {
    use outbox_relay_testkit::debezium::ConnectStandalone;
    let broker = Broker::start(Storage::Memory).expect("Apache Kafka (scripts/install-kafka.sh)");
    let worker = format!(
        "bootstrap.servers={}\n\
         key.converter=org.apache.kafka.connect.storage.StringConverter\n\
         value.converter=org.apache.kafka.connect.storage.StringConverter\n",
        broker.bootstrap_servers()
    );
    let counter = RecordCounter::new(&broker);
    let t = Instant::now();
    let connect = ConnectStandalone::start_with_jvm(
        &worker,
        &[debezium_connector(pg, slot)],
        ConnectStandalone::DEPLOYED_JVM,
    )
    .expect("Debezium (scripts/install-debezium.sh)");
    let (mut walsender_cpu, mut client_cpu) = (0.0, 0.0);
    let mut first_record = f64::NAN;
    let mut peak_rss = f64::NAN;
    let mut polls = 0u64;
    loop {
        let records = counter.records();
        if first_record.is_nan() && records > 0 {
            first_record = t.elapsed().as_secs_f64();
        }
        if let Some(pid) = slot_pid(db, slot).await {
            walsender_cpu = cpu_seconds(pid).unwrap_or(walsender_cpu);
        }
        client_cpu = cpu_seconds(connect.pid()).unwrap_or(client_cpu);
        peak_rss = kib(connect.pid(), "VmHWM:").map_or(peak_rss, |k| k as f64 / 1024.0);
        if records >= events as i64 {
            break;
        }
        polls += 1;
        if polls.is_multiple_of(20) {
            if let Some((_, trace)) = connect.task_state("bench").filter(|(s, _)| s == "FAILED") {
                panic!("Debezium's task failed: {}", trace.unwrap_or_default());
            }
        }
        assert!(
            t.elapsed() < Duration::from_secs(1800),
            "Debezium did not catch up ({records} of {events} records); its log:\n{}",
            connect.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let seconds = t.elapsed().as_secs_f64();
    drop(connect);
    // Its walsender ends once the JVM is gone; then the slot can be dropped.
    while slot_pid(db, slot).await.is_some() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Run {
        seconds,
        client_cpu,
        walsender_cpu,
        instructions: 0.0,
        first_record,
        peak_rss,
    }
}

/// CPU seconds and context switches (voluntary + involuntary) per thread of `pid`, by thread
/// name, busiest first (threads of one name summed).
pub fn thread_cpu_seconds(pid: u32) -> Vec<(String, f64, u64)> {
    let mut by_name: Vec<(String, f64, u64)> = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return by_name;
    };
    for task in tasks.flatten() {
        let tid: u32 = match task.file_name().to_string_lossy().parse() {
            Ok(tid) => tid,
            Err(_) => continue,
        };
        let (Ok(comm), Some(cpu)) = (
            std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")),
            std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat"))
                .ok()
                .and_then(|stat| {
                    let fields: Vec<&str> =
                        stat[stat.rfind(')')? + 2..].split_whitespace().collect();
                    let ticks = fields.get(11)?.parse::<u64>().ok()?
                        + fields.get(12)?.parse::<u64>().ok()?;
                    Some(ticks as f64 / CLOCK_TICKS_PER_SEC)
                }),
        ) else {
            continue;
        };
        let switches: u64 = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("ctxt_switches:"))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum();
        // librdkafka names its broker threads after the broker ("rdk:broker1"): one name each.
        let name = comm
            .trim()
            .trim_end_matches(|c: char| c.is_ascii_digit())
            .to_owned();
        match by_name.iter_mut().find(|(n, _, _)| *n == name) {
            Some((_, total, n)) => {
                *total += cpu;
                *n += switches;
            }
            None => by_name.push((name, cpu, switches)),
        }
    }
    by_name.sort_by(|a, b| b.1.total_cmp(&a.1));
    by_name
}

/// min / median / max.
fn spread(values: &[f64]) -> (f64, f64, f64) {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    (v[0], v[v.len() / 2], v[v.len() - 1])
}

struct Steady {
    rate: u64,
    achieved: f64,
    /// Each event's (commit → consumer, commit → produced, produced → consumer), ms.
    parts: Vec<(f64, f64, f64)>,
    /// Commit → acknowledged, from the relay's histogram: bucket bounds of p50, p99, p99.9.
    relay_bounds: (f64, f64, f64),
}

struct SteadyRun {
    idle_rss: f64,
    peak_rss: f64,
    rates: Vec<Steady>,
}

/// What the earlier phases left PostgreSQL to do in the background (autovacuum of the rows
/// they inserted, a checkpoint), done before a steady state's clock runs: on 2 cores it would
/// otherwise land inside one measurement and not the other's.
async fn settle_postgres(db: &tokio_postgres::Client) {
    db.batch_execute("VACUUM (ANALYZE) outbox").await.unwrap();
    db.batch_execute("CHECKPOINT").await.unwrap();
    settle_machine().await;
}

/// The machine's CPU time spent busy, and in all, from `/proc/stat` (jiffies).
fn cpu_jiffies() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let fields: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    let total: u64 = fields.iter().sum();
    // idle and iowait
    let idle = fields.get(3)? + fields.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

/// Waits (up to 60 s) until the machine is quiet: less than a tenth of its CPU busy over half a
/// second. What an earlier phase left running (a killed JVM exiting, a broker's files going
/// away) would otherwise land inside the next measurement and not in the one after it.
async fn settle_machine() {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(60) {
        let Some((busy0, total0)) = cpu_jiffies() else {
            return;
        };
        tokio::time::sleep(Duration::from_millis(500)).await;
        let Some((busy1, total1)) = cpu_jiffies() else {
            return;
        };
        let busy = (busy1 - busy0) as f64 / (total1 - total0).max(1) as f64;
        if busy < 0.1 {
            if t.elapsed() > Duration::from_secs(2) {
                eprintln!(
                    "the machine was busy for {:.1?} before this measurement",
                    t.elapsed()
                );
            }
            return;
        }
    }
    eprintln!("the machine stayed busy for 60 s: measuring anyway");
}

/// A relay on a fresh slot and broker: its RSS once started and idle, then commit → consumer
/// latency at each insert rate (a transaction every 10 ms), and its peak RSS.
async fn steady_state(
    pg: &PgCluster,
    db: &tokio_postgres::Client,
    binary: &Binary,
    seconds: u64,
    first: u64,
) -> SteadyRun {
    const TOPIC: &str = "Order.events";
    let broker = Broker::start(Storage::Memory).expect("Apache Kafka (scripts/install-kafka.sh)");
    outbox_relay_testkit::kafka::create_topic(&broker.bootstrap_servers(), TOPIC, 3)
        .await
        .unwrap();
    settle_postgres(db).await;
    let slot = format!("steady_{}", binary.name);
    create_slot(db, &slot).await;
    let (mut relay, metrics_address) = spawn_relay(pg, &broker, binary, &slot);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let idle_rss = kib(relay.pid(), "VmRSS:").unwrap_or(0) as f64 / 1024.0;
    let mib = |field| kib(relay.pid(), field).unwrap_or(0) as f64 / 1024.0;
    eprintln!(
        "{}: idle RSS {idle_rss:.1} MiB = {:.1} anonymous + {:.1} file-backed (code) + {:.1} shared memory; {} threads",
        binary.name,
        mib("RssAnon:"),
        mib("RssFile:"),
        mib("RssShmem:"),
        kib(relay.pid(), "Threads:").unwrap_or(0)
    );
    // One event first: the relay learns the topic (metadata, its limits) before the clock runs.
    db.batch_execute(
        "INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload)
         VALUES (gen_random_uuid(), 'Order', 'warm-up', 'Steady', '{}')",
    )
    .await
    .unwrap();
    let warm = current_wal_lsn(db).await;
    while confirmed(db, &slot).await < warm {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let received: live::Arrivals = Arc::new(Mutex::new(HashMap::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let consumer = live::spawn_consumer(
        broker.bootstrap_servers(),
        TOPIC,
        3,
        fetch_wait_ms(),
        received.clone(),
        stop.clone(),
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut rates = Vec::new();
    let mut n = first;
    for rate in [1_000u64, 10_000] {
        let before = histogram(&metrics_address);
        let rows_per_tick = rate / 100;
        let mut committed: HashMap<u64, (Instant, f64)> = HashMap::new();
        let mut tick = tokio::time::interval(Duration::from_millis(10));
        let phase = Instant::now();
        let start = n;
        while phase.elapsed() < Duration::from_secs(seconds) {
            tick.tick().await;
            live::insert_events(db, n, rows_per_tick, 150).await;
            let at = (Instant::now(), live::unix_ms());
            for i in n..n + rows_per_tick {
                committed.insert(i, at);
            }
            n += rows_per_tick;
        }
        let achieved = (n - start) as f64 / phase.elapsed().as_secs_f64();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let arrived = {
                let received = received.lock().unwrap();
                committed
                    .keys()
                    .filter(|k| received.contains_key(k))
                    .count()
            };
            if arrived == committed.len() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{} of {} events arrived; relay log:\n{}",
                arrived,
                committed.len(),
                relay.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let after = histogram(&metrics_address);
        let delta: Vec<(f64, f64)> = after
            .iter()
            .zip(&before)
            .map(|((le, a), (_, b))| (*le, a - b))
            .collect();
        let parts = live::delays(&committed, &received.lock().unwrap());
        rates.push(Steady {
            rate,
            achieved,
            parts,
            relay_bounds: (
                bucket_bound(&delta, 0.5),
                bucket_bound(&delta, 0.99),
                bucket_bound(&delta, 0.999),
            ),
        });
    }
    let peak_rss = kib(relay.pid(), "VmHWM:").unwrap_or(0) as f64 / 1024.0;
    stop.store(true, Ordering::Relaxed);
    consumer.join().unwrap();
    let _ = relay.terminate(Duration::from_secs(20));
    drop_slot(db, &slot).await;
    SteadyRun {
        idle_rss,
        peak_rss,
        rates,
    }
}

/// The broker's share of the latency: at each tick the same transaction is committed as in
/// the steady state (so PostgreSQL takes the same CPU from the broker and the consumer, with no
/// walsender and no relay), then its records are produced straight to a fresh broker with the
/// relay's producer settings (idempotent, acks=all, `linger.ms` as the relay's, TCP_NODELAY), read by the
/// same live consumer: commit → consumer, exact, ms per rate.
async fn broker_alone(
    db: &tokio_postgres::Client,
    seconds: u64,
    first: u64,
) -> Vec<(u64, Vec<(f64, f64, f64)>)> {
    use rdkafka::producer::{FutureProducer, FutureRecord};
    const TOPIC: &str = "Probe.events";
    let broker = Broker::start(Storage::Memory).expect("Apache Kafka (scripts/install-kafka.sh)");
    outbox_relay_testkit::kafka::create_topic(&broker.bootstrap_servers(), TOPIC, 3)
        .await
        .unwrap();
    settle_postgres(db).await;
    let linger = std::env::var("OUTBOX_RELAY_BENCH_RELAY_ARGS")
        .ok()
        .and_then(|a| {
            a.split_whitespace()
                .find_map(|w| w.strip_prefix("linger.ms=").map(str::to_owned))
        })
        .unwrap_or_else(|| "1".into());
    let producer: FutureProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap_servers())
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", &linger)
        .set("socket.nagle.disable", "true")
        .set("partitioner", "murmur2_random")
        .create()
        .unwrap();
    let received: live::Arrivals = Arc::new(Mutex::new(HashMap::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let consumer = live::spawn_consumer(
        broker.bootstrap_servers(),
        TOPIC,
        3,
        fetch_wait_ms(),
        received.clone(),
        stop.clone(),
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let payload = format!("{{\"n\": 0, \"note\": \"{}\"}}", "x".repeat(150));
    let mut out = Vec::new();
    let mut n = first;
    for rate in [1_000u64, 10_000] {
        let mut sent: HashMap<u64, (Instant, f64)> = HashMap::new();
        let mut tick = tokio::time::interval(Duration::from_millis(10));
        let phase = Instant::now();
        while phase.elapsed() < Duration::from_secs(seconds) {
            tick.tick().await;
            live::insert_events(db, n, rate / 100, 150).await;
            let at = (Instant::now(), live::unix_ms());
            for i in n..n + rate / 100 {
                let key = format!("e-{i}");
                producer
                    .send_result(FutureRecord::to(TOPIC).key(&key).payload(&payload))
                    .map_err(|(e, _)| e)
                    .unwrap();
                sent.insert(i, at);
            }
            n += rate / 100;
        }
        all_arrived(sent.keys(), &received, "the probe's records").await;
        out.push((rate, live::delays(&sent, &received.lock().unwrap())));
    }
    stop.store(true, Ordering::Relaxed);
    consumer.join().unwrap();
    out
}

/// The walsender alone, the other term of the steady state's floor: at each tick the same
/// outbox transaction committed, read from a slot of its own by `pg_recvlogical` through
/// test_decoding (a line per change, written unbuffered as it arrives; no relay, no broker):
/// commit → the change's line read from its output, exact, ms per rate.
async fn walsender_alone(
    pg: &PgCluster,
    db: &tokio_postgres::Client,
    seconds: u64,
    first: u64,
) -> Vec<(u64, Vec<f64>)> {
    use std::io::BufRead;
    const SLOT: &str = "steady_walsender_alone";
    settle_postgres(db).await;
    db.batch_execute(&format!(
        "SELECT pg_create_logical_replication_slot('{SLOT}', 'test_decoding')"
    ))
    .await
    .unwrap();
    let mut child = recvlogical_command(pg, SLOT)
        .args(["-f", "-", "-o", "skip-empty-xacts=1"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let arrived: Arc<Mutex<HashMap<u64, Instant>>> = Arc::new(Mutex::new(HashMap::new()));
    let reader = {
        let arrived = arrived.clone();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            let key = event_number_of_line();
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(n) = key(&line) {
                    arrived.lock().unwrap().insert(n, Instant::now());
                }
            }
        })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut out = Vec::new();
    let mut n = first;
    for rate in [1_000u64, 10_000] {
        let mut sent: HashMap<u64, Instant> = HashMap::new();
        let mut tick = tokio::time::interval(Duration::from_millis(10));
        let phase = Instant::now();
        while phase.elapsed() < Duration::from_secs(seconds) {
            tick.tick().await;
            live::insert_events(db, n, rate / 100, 150).await;
            let at = Instant::now();
            for i in n..n + rate / 100 {
                sent.insert(i, at);
            }
            n += rate / 100;
        }
        all_arrived(sent.keys(), &arrived, "the walsender's changes").await;
        let arrived = arrived.lock().unwrap();
        out.push((
            rate,
            sent.iter()
                .map(|(k, at)| arrived[k].saturating_duration_since(*at).as_secs_f64() * 1e3)
                .collect(),
        ));
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = reader.join();
    db.batch_execute(&format!("SELECT pg_drop_replication_slot('{SLOT}')"))
        .await
        .unwrap();
    out
}

/// Waits (a minute at most) until every one of `keys` arrived in `arrived`.
async fn all_arrived<'k, V>(
    keys: impl Iterator<Item = &'k u64> + Clone,
    arrived: &Mutex<HashMap<u64, V>>,
    what: &str,
) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while keys
        .clone()
        .any(|k| !arrived.lock().unwrap().contains_key(k))
    {
        assert!(Instant::now() < deadline, "{what} did not all arrive");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The event number of a test_decoding line of an outbox insert (`aggregate_id[…]:'e-<n>'`).
fn event_number_of_line() -> impl Fn(&str) -> Option<u64> {
    |line: &str| {
        let at = line.find("aggregate_id[")?;
        let rest = &line[at..];
        let start = rest.find(":'e-")? + 4;
        let digits: String = rest[start..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    }
}

struct Round {
    text: Run,
    binary: Run,
    columns: Run,
    relays: Vec<Run>,
    /// Kafka Connect + Debezium (`OUTBOX_RELAY_BENCH_DEBEZIUM=0` leaves it out).
    debezium: Option<Run>,
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let events = env_u64("OUTBOX_RELAY_BENCH_EVENTS", 200_000);
    let shapes: Vec<u64> = std::env::var("OUTBOX_RELAY_BENCH_TX_ROWS")
        .unwrap_or_else(|_| "10,1".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .map(|n: u64| n.max(1))
        .collect();
    let rounds = env_u64("OUTBOX_RELAY_BENCH_ROUNDS", 3).max(1);
    let steady_seconds = env_u64("OUTBOX_RELAY_BENCH_STEADY_SECONDS", 10);
    let with_debezium = env_u64("OUTBOX_RELAY_BENCH_DEBEZIUM", 1) == 1;
    let mut binaries = Vec::new();
    if let Ok(path) = std::env::var("OUTBOX_RELAY_BENCH_BASELINE") {
        binaries.push(Binary {
            name: "before",
            path: path.into(),
            args: Vec::new(),
        });
    }
    // The Debezium mode of this build on the seeds' connector configuration as it is
    // (JsonConverter with schemas, the EventRouter), on the bench's publication
    // (`OUTBOX_RELAY_BENCH_DEBEZIUM_MODE=0` leaves it out). Before "after": the tables that
    // compare contenders with outbox-relay take the last build, the native one.
    let connector_dir = tempfile::tempdir().unwrap();
    if env_u64("OUTBOX_RELAY_BENCH_DEBEZIUM_MODE", 1) == 1 {
        let connector = connector_dir.path().join("seed-000-outbox-connector.json");
        std::fs::write(
            &connector,
            include_str!("../tests/fixtures/debezium/seed-000-outbox-connector.json"),
        )
        .unwrap();
        binaries.push(Binary {
            name: "debezium_mode",
            path: RELAY.into(),
            args: [
                "--debezium-config",
                &connector.display().to_string(),
                "--publication",
                "outbox_relay",
                "--publication-mode",
                "disabled",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        });
    }
    binaries.push(Binary {
        name: "after",
        path: RELAY.into(),
        args: Vec::new(),
    });
    tokio::runtime::Runtime::new().unwrap().block_on(async move {
        let pg = PgCluster::start().expect("PostgreSQL 15 (scripts/install-deps.sh)");
        let db = pg.connect().await.unwrap();
        db.batch_execute(include_str!("../sql/outbox.sql")).await.unwrap();
        db.batch_execute(&format!(
            "CREATE PUBLICATION outbox_relay FOR TABLE outbox WITH (publish = 'insert');
             CREATE PUBLICATION outbox_relay_columns FOR TABLE outbox ({ROUTED_COLUMNS}) WITH (publish = 'insert');"
        ))
        .await
        .unwrap();
        let mut idle = Vec::new();
        for b in &binaries {
            idle.push(idle_rss(&pg, &db, b).await);
        }
        let mut results: Vec<(u64, Vec<Round>, f64)> = Vec::new();
        for &per_tx in &shapes {
            let mut done = Vec::new();
            let mut wal_mb = 0.0;
            for round in 0..rounds {
                // Every stream reads the same WAL: slots created at the same position.
                let streams = ["rl_text", "rl_binary", "rl_columns"];
                for slot in streams {
                    create_slot(&db, slot).await;
                }
                for b in &binaries {
                    create_slot(&db, &format!("relay_{}", b.name)).await;
                }
                if with_debezium {
                    create_slot(&db, "debezium").await;
                }
                let start = current_wal_lsn(&db).await;
                let write = Instant::now();
                let end = write_outbox(&db, events, per_tx).await;
                wal_mb = (end - start) as f64 / 1e6;
                eprintln!(
                    "transactions of {per_tx}, round {round}: wrote {} events ({wal_mb:.1} MB of WAL) in {:.1?}",
                    (events / per_tx) * per_tx,
                    write.elapsed()
                );
                let text = recvlogical(&pg, &db, "rl_text", end, &["publication_names=outbox_relay"]).await;
                let binary =
                    recvlogical(&pg, &db, "rl_binary", end, &["publication_names=outbox_relay", "binary=true"]).await;
                let columns = recvlogical(&pg, &db, "rl_columns", end, &["publication_names=outbox_relay_columns"]).await;
                // Alternate which build goes first, so that neither always meets a warmer cache.
                let mut relays = vec![None; binaries.len()];
                let order: Vec<usize> =
                    if round % 2 == 0 { (0..binaries.len()).collect() } else { (0..binaries.len()).rev().collect() };
                for i in order {
                    let b = &binaries[i];
                    let perf = (round == 0 && std::env::var("OUTBOX_RELAY_BENCH_PERF").is_ok())
                        .then(|| format!("{}-tx{per_tx}", b.name));
                    relays[i] = Some(relay_catch_up(&pg, &db, b, &format!("relay_{}", b.name), end, perf).await);
                }
                for slot in streams {
                    drop_slot(&db, slot).await;
                }
                for b in &binaries {
                    drop_slot(&db, &format!("relay_{}", b.name)).await;
                }
                let debezium = if with_debezium {
                    let run = debezium_catch_up(&pg, &db, "debezium", (events / per_tx) * per_tx).await;
                    // Its JVM is gone (killed on drop) before the slot is dropped.
                    drop_slot(&db, "debezium").await;
                    Some(run)
                } else {
                    None
                };
                done.push(Round { text, binary, columns, relays: relays.into_iter().map(Option::unwrap).collect(), debezium });
            }
            results.push((per_tx, done, wal_mb));
        }
        let mut steady = Vec::new();
        // The steady state's consumer reads the native records (the Debezium mode's catch-up
        // is measured above; its latency is the native path's plus its routing).
        let steady_builds = || binaries.iter().filter(|b| b.args.is_empty());
        for (i, b) in steady_builds().enumerate().filter(|_| steady_seconds > 0) {
            steady.push(steady_state(&pg, &db, b, steady_seconds, 100_000_000 * (i as u64 + 1)).await);
        }
        let alone = if steady_seconds > 0 { broker_alone(&db, steady_seconds, 900_000_000).await } else { Vec::new() };
        let walsender = if steady_seconds > 0 { walsender_alone(&pg, &db, steady_seconds, 950_000_000).await } else { Vec::new() };

        println!();
        println!("end_to_end: {events} events per round, {rounds} rounds, a fresh broker per relay run, 2-core machine");
        let mut svg_after = (f64::NAN, f64::NAN);
        for (per_tx, rounds, wal_mb) in &results {
            let events = (events / per_tx) * per_tx;
            let per_event = |cpu: f64| cpu / events as f64 * 1e6;
            let rate = |r: &Run| events as f64 / r.seconds;
            println!();
            println!("transactions of {per_tx} rows ({wal_mb:.1} MB of WAL per round):");
            println!("| round | stream | rows/s | client CPU µs/event | walsender CPU µs/event | throughput ÷ pg_recvlogical | client CPU ÷ its walsender |");
            println!("|---|---|---|---|---|---|---|");
            for (i, r) in rounds.iter().enumerate() {
                let mut rows = vec![
                    ("pg_recvlogical, text".to_owned(), r.text),
                    ("pg_recvlogical, binary=true".to_owned(), r.binary),
                    ("pg_recvlogical, column list".to_owned(), r.columns),
                ];
                for (b, run) in binaries.iter().zip(&r.relays) {
                    rows.push((format!("outbox-relay ({}) → broker, acked", b.name), *run));
                }
                if let Some(run) = r.debezium {
                    rows.push(("Kafka Connect + Debezium → broker, in the topics".to_owned(), run));
                }
                for (name, run) in rows {
                    println!(
                        "| {i} | {name} | {:.0} | {:.2} | {:.2} | {:.2} | {:.2} |",
                        rate(&run),
                        per_event(run.client_cpu),
                        per_event(run.walsender_cpu),
                        rate(&run) / rate(&r.text),
                        run.client_cpu / run.walsender_cpu.max(1e-9)
                    );
                }
            }
            let walsender = |f: &dyn Fn(&Round) -> Run| {
                spread(&rounds.iter().map(|r| per_event(f(r).walsender_cpu)).collect::<Vec<_>>())
            };
            let (_, text_ws, _) = walsender(&|r| r.text);
            let (_, binary_ws, _) = walsender(&|r| r.binary);
            let (_, columns_ws, _) = walsender(&|r| r.columns);
            println!(
                "walsender CPU µs/event, median: text {text_ws:.2}, binary=true {binary_ws:.2} ({:.2}×), column list {columns_ws:.2} ({:.2}×)",
                binary_ws / text_ws,
                columns_ws / text_ws
            );
            for (i, b) in binaries.iter().enumerate() {
                let throughput: Vec<f64> = rounds.iter().map(|r| rate(&r.relays[i]) / rate(&r.text)).collect();
                let cpu: Vec<f64> = rounds.iter().map(|r| r.relays[i].client_cpu / r.relays[i].walsender_cpu.max(1e-9)).collect();
                let micros: Vec<f64> = rounds.iter().map(|r| per_event(r.relays[i].client_cpu)).collect();
                let (t0, t1, t2) = spread(&throughput);
                let (c0, c1, c2) = spread(&cpu);
                let (m0, m1, m2) = spread(&micros);
                println!(
                    "{}: throughput ratio min {t0:.2} / median {t1:.2} / max {t2:.2} (target ≥ 0.95 every round); CPU ratio {c0:.2} / {c1:.2} / {c2:.2} (target ≤ 0.5); relay µs/event {m0:.2} / {m1:.2} / {m2:.2}",
                    b.name
                );
                let (r0, r1, r2) = spread(&rounds.iter().map(|r| r.relays[i].peak_rss).collect::<Vec<_>>());
                println!(
                    "{}: catch-up peak RSS min {r0:.1} / median {r1:.1} / max {r2:.1} MiB; idle {:.1} MiB; peak ÷ idle {:.2} / {:.2} / {:.2} (target ≤ 2.0)",
                    b.name,
                    idle[i],
                    r0 / idle[i],
                    r1 / idle[i],
                    r2 / idle[i]
                );
                if rounds[0].relays[i].instructions > 0.0 {
                    let per: Vec<f64> =
                        rounds.iter().map(|r| r.relays[i].instructions / events as f64).collect();
                    let (i0, i1, i2) = spread(&per);
                    println!(
                        "{}: instructions per event (callgrind, user space, start-up included) {i0:.0} / {i1:.0} / {i2:.0}",
                        b.name
                    );
                }
                if b.name == "after" && Some(per_tx) == shapes.first() {
                    svg_after = (t0, c1);
                }
            }
            // The Debezium mode against the native mode of the same build, round by round.
            let index = |name: &str| binaries.iter().position(|b| b.name == name);
            if let (Some(d), Some(n)) = (index("debezium_mode"), index("after")) {
                let ratio = |f: &dyn Fn(&Run) -> f64| {
                    spread(&rounds.iter().map(|r| f(&r.relays[d]) / f(&r.relays[n])).collect::<Vec<_>>())
                };
                let (c0, c1, c2) = ratio(&|r| r.client_cpu);
                let (w0, w1, w2) = ratio(&|r| r.seconds);
                let (p0, p1, p2) = ratio(&|r| r.peak_rss);
                println!(
                    "debezium_mode ÷ native: CPU min {c0:.2} / median {c1:.2} / max {c2:.2} (target ≤ 1.25); wall {w0:.2} / {w1:.2} / {w2:.2} (target ≤ 1.0); peak RSS {p0:.2} / {p1:.2} / {p2:.2}"
                );
            }
        }
        if with_debezium {
            println!();
            println!("the same catch-up, contender by contender (medians over the rounds; start → first record and peak RSS of the client process, CPU of the whole process: a JVM's JIT and GC included):");
            println!("| transactions of | contender | throughput ÷ pg_recvlogical (from start) | rows/s from the first record | CPU µs/event | CPU ÷ outbox-relay's | peak RSS | ÷ outbox-relay's | start → first record | ÷ outbox-relay's |");
            println!("|---|---|---|---|---|---|---|---|---|---|");
            for (per_tx, rounds, _) in &results {
                let events = (events / per_tx) * per_tx;
                let median = |f: &dyn Fn(&Round) -> f64| spread(&rounds.iter().map(f).collect::<Vec<_>>()).1;
                let rate = |r: &Run| events as f64 / r.seconds;
                let relay = |r: &Round| *r.relays.last().unwrap();
                let debezium = |r: &Round| r.debezium.unwrap();
                let relay_cpu = median(&|r| relay(r).client_cpu);
                let relay_rss = median(&|r| relay(r).peak_rss);
                let relay_first = median(&|r| relay(r).first_record);
                for (name, run) in [("outbox-relay", &relay as &dyn Fn(&Round) -> Run), ("Kafka Connect + Debezium", &debezium)] {
                    let cpu = median(&|r| run(r).client_cpu);
                    let rss = median(&|r| run(r).peak_rss);
                    let first = median(&|r| run(r).first_record);
                    println!(
                        "| {per_tx} | {name} | {:.2} | {:.0} | {:.2} | {:.2} | {rss:.0} MiB | {:.1} | {first:.2} s | {:.1} |",
                        median(&|r| rate(&run(r)) / rate(&r.text)),
                        median(&|r| events as f64 / (run(r).seconds - run(r).first_record)),
                        cpu / events as f64 * 1e6,
                        cpu / relay_cpu,
                        rss / relay_rss,
                        first / relay_first
                    );
                }
            }
        }
        println!();
        println!("steady state ({steady_seconds} s per rate, a transaction every 10 ms), commit → consumer (exact, a live consumer) and the relay's commit → ack histogram (bucket bounds):");
        println!("| build | insert rate (target / achieved) | consumer p50 | p99 | p99.9 | max | relay p50 | p99 | p99.9 |");
        println!("|---|---|---|---|---|---|---|---|---|");
        for (b, s) in steady_builds().zip(&steady) {
            for r in &s.rates {
                let consumer_ms = live::totals(&r.parts);
                let q = |x| live::quantile(&consumer_ms, x);
                println!(
                    "| {} | {} / {:.0} | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms | ≤ {:.0} ms | ≤ {:.0} ms | ≤ {:.0} ms |",
                    b.name,
                    r.rate,
                    r.achieved,
                    q(0.5),
                    q(0.99),
                    q(0.999),
                    q(1.0),
                    r.relay_bounds.0 * 1e3,
                    r.relay_bounds.1 * 1e3,
                    r.relay_bounds.2 * 1e3
                );
            }
        }
        // A row of the floor's parts: p50, p99, p99.9 and max of `ms`.
        let floor_row = |what: &str, rate: u64, ms: &[f64]| {
            let q = |x| live::quantile(ms, x);
            println!(
                "| {what} | {rate} | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms | | | |",
                q(0.5),
                q(0.99),
                q(0.999),
                q(1.0)
            );
        };
        for (rate, parts) in &alone {
            floor_row("the broker alone (commit → produced at once → consumer)", *rate, &live::totals(parts));
        }
        for (rate, ms) in &walsender {
            floor_row("the walsender alone (commit → pg_recvlogical's line)", *rate, ms);
        }
        println!("(target p99 ≤ 10 ms and p99.9 ≤ 20 ms at the consumer)");
        // The floor: the broker alone plus the walsender alone, quantile by quantile.
        if !walsender.is_empty() {
            println!();
            println!("the relay against the floor (the broker alone + the walsender alone, the same quantile; target p99 ≤ 1.1× the floor):");
            println!("| build | rate | p99 | floor p99 | ÷ floor | p99.9 | floor p99.9 | ÷ floor |");
            println!("|---|---|---|---|---|---|---|---|");
            for (b, st) in steady_builds().zip(&steady) {
                for r in &st.rates {
                    let relay = live::totals(&r.parts);
                    let broker = alone.iter().find(|(rate, _)| *rate == r.rate).map(|(_, p)| live::totals(p));
                    let wal = walsender.iter().find(|(rate, _)| *rate == r.rate).map(|(_, ms)| ms.clone());
                    let (Some(broker), Some(wal)) = (broker, wal) else { continue };
                    let floor = |x| live::quantile(&broker, x) + live::quantile(&wal, x);
                    let mine = |x| live::quantile(&relay, x);
                    println!(
                        "| {} | {} | {:.1} ms | {:.1} ms | {:.2} | {:.1} ms | {:.1} ms | {:.2} |",
                        b.name,
                        r.rate,
                        mine(0.99),
                        floor(0.99),
                        mine(0.99) / floor(0.99),
                        mine(0.999),
                        floor(0.999),
                        mine(0.999) / floor(0.999)
                    );
                }
            }
        }
        println!();
        println!("where the slowest 1 % of events spent their time (medians over them; the produce stamp is the record's CreateTime, whole ms):");
        println!("| build | rate | commit → consumer | commit → produced (PostgreSQL, walsender, relay) | produced → consumer (librdkafka, broker, consumer) |");
        println!("|---|---|---|---|---|");
        let tails = steady_builds()
            .zip(&steady)
            .flat_map(|(b, s)| s.rates.iter().map(move |r| (b.name, r.rate, &r.parts)))
            .chain(alone.iter().map(|(rate, parts)| ("the broker alone", *rate, parts)));
        for (name, rate, parts) in tails {
            let (total, before, after) = live::tail_split(parts, 0.01);
            println!("| {name} | {rate} | {total:.1} ms | {before:.1} ms | {after:.1} ms |");
        }
        for (b, s) in steady_builds().zip(&steady) {
            println!("{}: relay RSS {:.1} MiB idle, {:.1} MiB peak (targets ≤ 16 / ≤ 32 MiB)", b.name, s.idle_rss, s.peak_rss);
        }
        // A partial run (no steady state, `OUTBOX_RELAY_BENCH_STEADY_SECONDS=0`) leaves the plot as it is.
        if let (Some(after), Some(first)) = (steady.last(), shapes.first()) {
            let p99 = after.rates.iter().map(|r| live::quantile(&live::totals(&r.parts), 0.99)).fold(0.0, f64::max);
            write_svg(svg_after.0, svg_after.1, p99, events, *first);
        }

        // What --exactly-once costs (also `cargo bench --bench exactly_once` alone;
        // `OUTBOX_RELAY_BENCH_EXACTLY_ONCE=0` leaves it out).
        if std::env::var("OUTBOX_RELAY_BENCH_EXACTLY_ONCE").as_deref() != Ok("0") {
            exactly_once_cost::measure(&pg, events / 2, shapes.first().copied().unwrap_or(10)).await;
        }
    });
}

/// Cumulative bucket counts of outbox_relay_commit_to_ack_seconds: (upper bound, count).
fn histogram(address: &str) -> Vec<(f64, f64)> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    write!(stream, "GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut body = String::new();
    stream.read_to_string(&mut body).unwrap();
    body.lines()
        .filter(|l| l.starts_with("outbox_relay_commit_to_ack_seconds_bucket{"))
        // The bucket's bound, whatever labels (slot) come before it.
        .filter_map(|l| l.split_once("le=\"").map(|(_, rest)| rest))
        .map(|l| {
            let (le, rest) = l.split_once('"').unwrap();
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().unwrap()
            };
            (le, rest.rsplit(' ').next().unwrap().parse().unwrap())
        })
        .collect()
}

/// The upper bound of the bucket that holds quantile `q` of cumulative counts.
fn bucket_bound(cumulative: &[(f64, f64)], q: f64) -> f64 {
    let total = cumulative.last().map_or(0.0, |(_, c)| *c);
    cumulative
        .iter()
        .find(|(_, c)| *c >= q * total)
        .map_or(f64::NAN, |(le, _)| *le)
}

/// Three bars against their targets, for the README.
fn write_svg(min_throughput_ratio: f64, cpu_ratio: f64, p99_ms: f64, events: u64, per_tx: u64) {
    let bar = |y: u32, label: &str, value: f64, target: f64, scale: f64, unit: &str| {
        let width = (value * scale).min(560.0);
        let target_x = 230.0 + target * scale;
        format!(
            "<text x=\"10\" y=\"{ty}\" font-size=\"14\">{label}</text>\
             <rect x=\"230\" y=\"{y}\" width=\"{width:.0}\" height=\"24\" fill=\"#4c78a8\"/>\
             <text x=\"{vx:.0}\" y=\"{ty}\" font-size=\"13\">{value:.2}{unit}</text>\
             <line x1=\"{target_x:.0}\" y1=\"{y1}\" x2=\"{target_x:.0}\" y2=\"{y2}\" stroke=\"#e45756\" stroke-width=\"2\"/>\
             <text x=\"{target_x:.0}\" y=\"{y3}\" font-size=\"11\" fill=\"#e45756\">target {target}{unit}</text>",
            ty = y + 17,
            vx = 235.0 + width,
            y1 = y - 4,
            y2 = y + 28,
            y3 = y - 6
        )
    };
    let svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"820\" height=\"205\" font-family=\"sans-serif\">\
         <text x=\"10\" y=\"20\" font-size=\"15\">outbox-relay vs pg_recvlogical on the same WAL ({events} events, {per_tx} per transaction)</text>\
         {}{}{}</svg>\n",
        bar(50, "throughput ratio, worst round", min_throughput_ratio, 0.95, 400.0, ""),
        bar(105, "CPU/event ÷ walsender's", cpu_ratio, 0.5, 400.0, ""),
        bar(160, "commit→consumer p99", p99_ms, 10.0, 20.0, " ms"),
    );
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/results");
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(format!("{dir}/end_to_end.svg"), svg).unwrap();
}
