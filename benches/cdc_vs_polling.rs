//! CDC mode against polling mode at the same load, on the same PostgreSQL and broker:
//! commit → consumer latency per event (p50/p99/p99.9/max, exact, measured by a Kafka
//! consumer reading the topic live) and the database CPU each mode costs (all PostgreSQL
//! processes, minus the backend doing the inserts; CDC mode with a cleanup job deleting
//! relayed rows every 500 ms, as polling mode deletes them itself). Writes benches/results/cdc_vs_polling.svg.
//!
//! cargo bench --bench cdc_vs_polling
//! OUTBOX_RELAY_BENCH_RATE=1000 OUTBOX_RELAY_BENCH_STEADY_SECONDS=20 cargo bench --bench cdc_vs_polling

#[path = "support/live.rs"]
mod live;

use outbox_relay_testkit::{Broker, PgCluster, RelayProcess, Storage};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const RELAY: &str = env!("CARGO_BIN_EXE_outbox-relay");
const CLOCK_TICKS_PER_SEC: f64 = 100.0;
const TOPIC: &str = "Order.events";

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// utime + stime of a process, in seconds, and its parent pid.
fn stat(pid: u32) -> Option<(f64, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ppid = fields.get(1)?.parse().ok()?;
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some((ticks as f64 / CLOCK_TICKS_PER_SEC, ppid))
}

/// CPU seconds of the postmaster and every process it started, by pid.
fn cluster_cpu(postmaster: u32) -> HashMap<u32, f64> {
    let mut out = HashMap::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Some((cpu, ppid)) = stat(pid) {
            if pid == postmaster || ppid == postmaster {
                out.insert(pid, cpu);
            }
        }
    }
    out
}

/// CPU used between two samples (processes that started in between count from zero).
fn cpu_between(before: &HashMap<u32, f64>, after: &HashMap<u32, f64>, except: u32) -> f64 {
    after
        .iter()
        .filter(|(pid, _)| **pid != except)
        .map(|(pid, cpu)| cpu - before.get(pid).copied().unwrap_or(0.0))
        .sum()
}

struct ModeResult {
    name: String,
    latencies_ms: Vec<f64>,
    db_cpu_seconds: f64,
    events: u64,
    seconds: f64,
}

impl ModeResult {
    fn quantile(&self, q: f64) -> f64 {
        live::quantile(&self.latencies_ms, q)
    }
}

#[allow(clippy::too_many_arguments)]
async fn run_mode(
    name: &str,
    extra: &[&str],
    pg: &PgCluster,
    broker: &Broker,
    db: &tokio_postgres::Client,
    first: u64,
    rate: u64,
    seconds: u64,
) -> ModeResult {
    let args: Vec<String> = [
        "run",
        "--postgres-url",
        &pg.url(),
        "--bootstrap-servers",
        &broker.bootstrap_servers(),
        "--topic-replication-factor",
        "1",
        "--topic-partitions",
        "1",
        "--metrics-address",
        "127.0.0.1:0",
        "--status-interval-ms",
        "100",
        "--additional-placement",
        "",
    ]
    .iter()
    .chain(extra)
    .map(|s| s.to_string())
    .collect();
    // Each mode starts from an empty outbox (CDC leaves its rows to a cleanup job).
    db.batch_execute("TRUNCATE outbox").await.unwrap();
    let mut relay =
        RelayProcess::spawn(std::path::Path::new(RELAY), &args, &[("RUST_LOG", "warn")]).unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let received = Arc::new(Mutex::new(HashMap::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let consumer = live::spawn_consumer(
        broker.bootstrap_servers(),
        TOPIC,
        1,
        5,
        received.clone(),
        stop.clone(),
    );
    tokio::time::sleep(Duration::from_secs(1)).await;

    // CDC deployments delete relayed rows with a cleanup job (polling mode deletes them
    // itself): run one every 500 ms so that both modes pay for the DELETEs.
    let cleanup = if extra.is_empty() {
        let cleaner = pg.connect().await.unwrap();
        Some(tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(500)).await;
                let _ = cleaner
                    .batch_execute(
                        "DELETE FROM outbox WHERE created_at < now() - interval '1 second'",
                    )
                    .await;
            }
        }))
    } else {
        None
    };
    let postmaster = pg.postmaster_pid().expect("postmaster.pid");
    let inserter: i32 = db
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    let cpu_before = cluster_cpu(postmaster);
    let mut committed: HashMap<u64, (Instant, f64)> = HashMap::new();
    let rows_per_tick = (rate / 100).max(1); // a transaction every 10 ms
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    let started = Instant::now();
    let mut n = first;
    while started.elapsed() < Duration::from_secs(seconds) {
        tick.tick().await;
        live::insert_events(db, n, rows_per_tick, 100).await;
        let at = (Instant::now(), live::unix_ms());
        for i in n..n + rows_per_tick {
            committed.insert(i, at);
        }
        n += rows_per_tick;
    }
    let elapsed = started.elapsed().as_secs_f64();
    // Wait for the stragglers, then account CPU over the same window for both modes.
    let deadline = Instant::now() + Duration::from_secs(30);
    let arrived = |received: &HashMap<u64, live::Arrival>| {
        committed
            .keys()
            .filter(|k| received.contains_key(k))
            .count()
    };
    while arrived(&received.lock().unwrap()) < committed.len() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cpu_after = cluster_cpu(postmaster);
    if let Some(c) = cleanup {
        c.abort();
    }
    stop.store(true, Ordering::Relaxed);
    consumer.join().unwrap();
    relay.terminate(Duration::from_secs(20)).unwrap();
    let received = received.lock().unwrap();
    let missing = committed
        .keys()
        .filter(|k| !received.contains_key(k))
        .count();
    assert_eq!(
        missing,
        0,
        "{name}: {missing} events never arrived; relay log:\n{}",
        relay.log()
    );
    let latencies_ms = live::totals(&live::delays(&committed, &received));
    ModeResult {
        name: name.to_owned(),
        latencies_ms,
        db_cpu_seconds: cpu_between(&cpu_before, &cpu_after, inserter as u32),
        events: n - first,
        seconds: elapsed,
    }
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let rate = env_u64("OUTBOX_RELAY_BENCH_RATE", 1000);
    let seconds = env_u64("OUTBOX_RELAY_BENCH_STEADY_SECONDS", 20);
    tokio::runtime::Runtime::new().unwrap().block_on(async move {
        let pg = PgCluster::start().expect("PostgreSQL 15 (scripts/install-deps.sh)");
        let broker = Broker::start(Storage::Memory).expect("Apache Kafka (scripts/install-kafka.sh)");
        outbox_relay_testkit::kafka::create_topic(&broker.bootstrap_servers(), TOPIC, 1)
            .await
            .unwrap();
        let db = pg.connect().await.unwrap();
        db.batch_execute(include_str!("../sql/outbox.sql")).await.unwrap();
        let total = rate * seconds * 2;
        let mut results = Vec::new();
        for (i, (name, extra)) in [
            ("CDC (logical replication)", vec![]),
            ("polling, 500 ms (default)", vec!["--mode", "polling"]),
            ("polling, 50 ms", vec!["--mode", "polling", "--poll-interval-ms", "50"]),
        ]
        .into_iter()
        .enumerate()
        {
            let r = run_mode(name, &extra, &pg, &broker, &db, i as u64 * total, rate, seconds).await;
            eprintln!("{name}: {} events in {:.1} s", r.events, r.seconds);
            results.push(r);
        }
        println!();
        println!("cdc_vs_polling: {rate} events/s for {seconds} s per mode (a transaction of {} rows every 10 ms), 2-core machine", rate / 100);
        println!("| mode | commit→consumer p50 | p99 | p99.9 | max | database CPU (s) | DB CPU µs/event |");
        println!("|---|---|---|---|---|---|---|");
        for r in &results {
            println!(
                "| {} | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms | {:.2} | {:.1} |",
                r.name,
                r.quantile(0.5),
                r.quantile(0.99),
                r.quantile(0.999),
                r.quantile(1.0),
                r.db_cpu_seconds,
                r.db_cpu_seconds / r.events as f64 * 1e6
            );
        }
        let cdc = &results[0];
        for r in &results[1..] {
            println!(
                "{}: p99 {:.1}× CDC's (target ≥ 10×), database CPU {:.2}× CDC's",
                r.name,
                r.quantile(0.99) / cdc.quantile(0.99),
                r.db_cpu_seconds / cdc.db_cpu_seconds.max(1e-9)
            );
        }
        write_svg(&results, rate);
    });
}

fn write_svg(results: &[ModeResult], rate: u64) {
    let max_p99 = results.iter().map(|r| r.quantile(0.99)).fold(1.0, f64::max);
    let max_cpu = results
        .iter()
        .map(|r| r.db_cpu_seconds)
        .fold(1e-9, f64::max);
    let mut body = String::new();
    for (i, r) in results.iter().enumerate() {
        let y = 60 + i as u32 * 60;
        let p99 = r.quantile(0.99);
        let w1 = p99 / max_p99 * 300.0;
        let w2 = r.db_cpu_seconds / max_cpu * 200.0;
        body.push_str(&format!(
            "<text x=\"10\" y=\"{ty}\" font-size=\"13\">{name}</text>\
             <rect x=\"220\" y=\"{y}\" width=\"{w1:.0}\" height=\"22\" fill=\"#4c78a8\"/>\
             <text x=\"{x1:.0}\" y=\"{ty}\" font-size=\"12\">{p99:.1} ms</text>\
             <rect x=\"640\" y=\"{y}\" width=\"{w2:.0}\" height=\"22\" fill=\"#f58518\"/>\
             <text x=\"{x2:.0}\" y=\"{ty}\" font-size=\"12\">{cpu:.2} s</text>",
            ty = y + 16,
            name = r.name,
            x1 = 225.0 + w1,
            x2 = 645.0 + w2,
            cpu = r.db_cpu_seconds,
        ));
    }
    let svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"960\" height=\"{h}\" font-family=\"sans-serif\">\
         <text x=\"10\" y=\"20\" font-size=\"15\">CDC vs polling at {rate} events/s: commit→consumer p99 (blue), database CPU (orange)</text>\
         <text x=\"220\" y=\"45\" font-size=\"12\">p99 latency</text><text x=\"640\" y=\"45\" font-size=\"12\">database CPU seconds</text>\
         {body}</svg>\n",
        h = 80 + results.len() * 60
    );
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/results");
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(format!("{dir}/cdc_vs_polling.svg"), svg).unwrap();
}
