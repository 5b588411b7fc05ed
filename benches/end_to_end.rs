//! End-to-end catch-up on the same WAL: PostgreSQL's own limit (`pg_recvlogical` streaming
//! the pgoutput stream of the outbox publication to /dev/null) against outbox-relay
//! streaming it to a real broker, both from slots created at the same position.
//! Reports rows/s, WAL MB/s, their ratio, CPU per event of the relay and of its walsender,
//! and the relay's RSS; writes benches/results/end_to_end.svg. Ends with what `--exactly-once`
//! costs (benches/support/exactly_once_cost.rs, also `cargo bench --bench exactly_once`).
//!
//! cargo bench --bench end_to_end
//! OUTBOX_RELAY_BENCH_EVENTS=500000 OUTBOX_RELAY_BENCH_TX_ROWS=1 cargo bench --bench end_to_end

use outbox_relay_testkit::{Broker, PgCluster, RelayProcess, Storage};
use std::process::Command;
use std::time::{Duration, Instant};

#[path = "support/mod.rs"]
mod support;

use support::{confirmed, cpu_seconds, current_wal_lsn, env_u64, exactly_once_cost, write_outbox};

const RELAY: &str = env!("CARGO_BIN_EXE_outbox-relay");

fn kib(pid: u32, field: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

struct Run {
    seconds: f64,
    client_cpu: f64,
    walsender_cpu: f64,
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

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let events = env_u64("OUTBOX_RELAY_BENCH_EVENTS", 200_000);
    let per_tx = env_u64("OUTBOX_RELAY_BENCH_TX_ROWS", 10).max(1);
    let steady_seconds = env_u64("OUTBOX_RELAY_BENCH_STEADY_SECONDS", 10);
    tokio::runtime::Runtime::new().unwrap().block_on(async move {
        let pg = PgCluster::start().expect("PostgreSQL 15 (scripts/install-deps.sh)");
        let broker = Broker::start(Storage::Memory).expect("tansu (scripts/install-tansu.sh)");
        let db = pg.connect().await.unwrap();
        db.batch_execute(include_str!("../sql/outbox.sql")).await.unwrap();
        db.batch_execute("CREATE PUBLICATION outbox_relay FOR TABLE outbox WITH (publish = 'insert')").await.unwrap();
        // The catch-up comparison is repeated (fresh slots and WAL each round) and the
        // median ratio reported: one round's ratio swings with the broker's scheduling.
        let rounds = env_u64("OUTBOX_RELAY_BENCH_ROUNDS", 3).max(1);
        let metrics_address = format!("127.0.0.1:{}", outbox_relay_testkit::net::free_port());
        let mut pairs: Vec<(Run, Run)> = Vec::new();
        let mut relays: Vec<RelayProcess> = Vec::new();
        let (mut events_written, mut round_wal_mb) = (0, 0.0);
        let mut relay_slot = String::new();
        for round in 0..rounds {
            relay_slot = format!("relay_{round}");
            // Two slots at the same position: both streams decode exactly the same WAL.
            db.batch_execute(&format!("SELECT pg_create_logical_replication_slot('bench_recvlogical_{round}', 'pgoutput')")).await.unwrap();
            db.batch_execute(&format!("SELECT pg_create_logical_replication_slot('relay_{round}', 'pgoutput')")).await.unwrap();
            let start = current_wal_lsn(&db).await;
            let write = Instant::now();
            let end = write_outbox(&db, events, per_tx).await;
            let events = (events / per_tx) * per_tx;
            let wal_mb = (end - start) as f64 / 1e6;
            eprintln!("wrote {events} events in transactions of {per_tx} ({wal_mb:.1} MB of WAL) in {:.1?}", write.elapsed());

            // 1. PostgreSQL's own limit.
            let t = Instant::now();
            let mut child = Command::new(pg.bin("pg_recvlogical"))
                .args(["-h", "127.0.0.1", "-U", "postgres", "-d", "postgres", "--slot", &format!("bench_recvlogical_{round}"), "--start"])
                .args(["-p", &pg.port().to_string(), "-o", "proto_version=1", "-o", "publication_names=outbox_relay"])
                .args(["-E", &format!("{:X}/{:X}", end >> 32, end & 0xFFFF_FFFF), "-f", "/dev/null"])
                .spawn()
                .unwrap();
            let mut walsender_cpu = 0.0;
            let mut client_cpu = 0.0;
            loop {
                if let Some(pid) = slot_pid(&db, &format!("bench_recvlogical_{round}")).await {
                    walsender_cpu = cpu_seconds(pid).unwrap_or(walsender_cpu);
                }
                client_cpu = cpu_seconds(child.id()).unwrap_or(client_cpu);
                if child.try_wait().unwrap().is_some() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let recvlogical = Run { seconds: t.elapsed().as_secs_f64(), client_cpu, walsender_cpu };

            // 2. outbox-relay on the same WAL, to the broker.
            let args: Vec<String> = [
                "run", "--postgres-url", &pg.url(), "--bootstrap-servers", &broker.bootstrap_servers(),
                "--topic-replication-factor", "1", "--topic-partitions", "3", "--metrics-address", &metrics_address,
                "--status-interval-ms", "100", "--slot", &relay_slot,
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            let t = Instant::now();
            let relay = RelayProcess::spawn(std::path::Path::new(RELAY), &args, &[("RUST_LOG", "warn")]).unwrap();
            let (mut walsender_cpu, mut client_cpu) = (0.0, 0.0);
            while confirmed(&db, &relay_slot).await < end {
                if let Some(pid) = slot_pid(&db, &relay_slot).await {
                    walsender_cpu = cpu_seconds(pid).unwrap_or(walsender_cpu);
                }
                client_cpu = cpu_seconds(relay.pid()).unwrap_or(client_cpu);
                assert!(t.elapsed() < Duration::from_secs(1800), "relay did not catch up; log:\n{}", relay.log());
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let relay_run = Run { seconds: t.elapsed().as_secs_f64(), client_cpu, walsender_cpu };
            pairs.push((recvlogical, relay_run));
            // Only the last round's relay keeps running (on to the steady state); an
            // earlier one would decode the next rounds' WAL too.
            if round + 1 < rounds {
                let mut relay = relay;
                let _ = relay.terminate(Duration::from_secs(20));
                db.batch_execute(&format!("SELECT pg_drop_replication_slot('relay_{round}'), pg_drop_replication_slot('bench_recvlogical_{round}')"))
                    .await
                    .unwrap();
            } else {
                relays.push(relay);
            }
            events_written = events;
            round_wal_mb = wal_mb;
        }
        let events = events_written;
        let wal_mb = round_wal_mb;
        let relay = relays.pop().expect("at least one round");
        let idle_rss = kib(relay.pid(), "VmRSS:").unwrap_or(0) as f64 / 1024.0;

        // 3. Steady state at fixed insert rates: commit -> Kafka-ack latency from the relay's
        // own histogram (PostgreSQL commit time to the acknowledgement of the last event).
        let mut latencies = Vec::new();
        for rate in [1_000u64, 10_000] {
            let before = histogram(&metrics_address);
            let rows_per_tick = rate / 100; // a transaction every 10 ms
            let mut tick = tokio::time::interval(Duration::from_millis(10));
            let phase = Instant::now();
            let mut n = 0u64;
            while phase.elapsed() < Duration::from_secs(steady_seconds) {
                tick.tick().await;
                db.batch_execute(&format!(
                    "INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload)
                     SELECT gen_random_uuid(), 'Order', 'agg-' || (g % 1000), 'Steady', jsonb_build_object('n', g)
                     FROM generate_series({n}, {}) g",
                    n + rows_per_tick - 1
                ))
                .await
                .unwrap();
                n += rows_per_tick;
            }
            let achieved = n as f64 / phase.elapsed().as_secs_f64();
            let last = current_wal_lsn(&db).await;
            while confirmed(&db, &relay_slot).await < last {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            let after = histogram(&metrics_address);
            let delta: Vec<(f64, f64)> = after.iter().zip(&before).map(|((le, a), (_, b))| (*le, a - b)).collect();
            latencies.push((rate, achieved, quantile(&delta, 0.5), quantile(&delta, 0.99), quantile(&delta, 0.999)));
        }
        let peak = kib(relay.pid(), "VmHWM:").unwrap_or(0) as f64 / 1024.0;

        let rate = |r: &Run| events as f64 / r.seconds;
        let per_event = |cpu: f64| cpu / events as f64 * 1e6;
        println!();
        println!("end_to_end: {events} events, transactions of {per_tx} rows, {wal_mb:.1} MB of WAL, 2-core machine");
        println!("| round | stream | seconds | rows/s | WAL MB/s | client CPU µs/event | walsender CPU µs/event |");
        println!("|---|---|---|---|---|---|---|");
        let mut ratios = Vec::new();
        for (round, (recvlogical, relay_run)) in pairs.iter().enumerate() {
            for (name, r) in [("pg_recvlogical → /dev/null", recvlogical), ("outbox-relay → broker (acked)", relay_run)] {
                println!(
                    "| {round} | {name} | {:.2} | {:.0} | {:.1} | {:.2} | {:.2} |",
                    r.seconds,
                    rate(r),
                    wal_mb / r.seconds,
                    per_event(r.client_cpu),
                    per_event(r.walsender_cpu)
                );
            }
            ratios.push((
                rate(relay_run) / rate(recvlogical),
                relay_run.client_cpu / relay_run.walsender_cpu.max(1e-9),
            ));
        }
        let median = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let throughput_ratio = median(ratios.iter().map(|r| r.0).collect());
        let cpu_ratio = median(ratios.iter().map(|r| r.1).collect());
        println!(
            "per round (throughput ratio, CPU ratio): {}",
            ratios.iter().map(|(t, c)| format!("({t:.2}, {c:.2})")).collect::<Vec<_>>().join(" ")
        );
        println!("relay throughput / pg_recvlogical throughput, median: {throughput_ratio:.2} (target ≥ 0.9)");
        println!("relay CPU / its walsender's CPU per event, median: {cpu_ratio:.2} (target ≤ 0.25)");
        println!("relay RSS: {idle_rss:.1} MiB after catch-up, {peak:.1} MiB peak");
        println!();
        println!("| insert rate (target / achieved events/s) | commit→ack p50 | p99 | p99.9 |");
        println!("|---|---|---|---|");
        for (rate, achieved, p50, p99, p999) in &latencies {
            println!("| {rate} / {achieved:.0} | ≤ {:.0} ms | ≤ {:.0} ms | ≤ {:.0} ms |", p50 * 1e3, p99 * 1e3, p999 * 1e3);
        }
        println!("(upper bounds of the histogram bucket holding each quantile; target p99 ≤ 10 ms)");
        write_svg(throughput_ratio, cpu_ratio, events, per_tx);

        // 4. What --exactly-once costs (also `cargo bench --bench exactly_once` alone).
        drop(relay);
        exactly_once_cost::measure(&pg, events / 2, per_tx).await;
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
fn quantile(cumulative: &[(f64, f64)], q: f64) -> f64 {
    let total = cumulative.last().map_or(0.0, |(_, c)| *c);
    cumulative
        .iter()
        .find(|(_, c)| *c >= q * total)
        .map_or(f64::NAN, |(le, _)| *le)
}

/// Two bars against their targets, for the README.
fn write_svg(throughput_ratio: f64, cpu_ratio: f64, events: u64, per_tx: u64) {
    let bar = |y: u32, label: &str, value: f64, target: f64, scale: f64| {
        let width = (value * scale).min(560.0);
        let target_x = 200.0 + target * scale;
        format!(
            "<text x=\"10\" y=\"{ty}\" font-size=\"14\">{label}</text>\
             <rect x=\"200\" y=\"{y}\" width=\"{width:.0}\" height=\"24\" fill=\"#4c78a8\"/>\
             <text x=\"{vx:.0}\" y=\"{ty}\" font-size=\"13\">{value:.2}</text>\
             <line x1=\"{target_x:.0}\" y1=\"{y1}\" x2=\"{target_x:.0}\" y2=\"{y2}\" stroke=\"#e45756\" stroke-width=\"2\"/>\
             <text x=\"{target_x:.0}\" y=\"{y3}\" font-size=\"11\" fill=\"#e45756\">target {target}</text>",
            ty = y + 17,
            vx = 205.0 + width,
            y1 = y - 4,
            y2 = y + 28,
            y3 = y - 6
        )
    };
    let svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"800\" height=\"150\" font-family=\"sans-serif\">\
         <text x=\"10\" y=\"20\" font-size=\"15\">outbox-relay vs pg_recvlogical on the same WAL ({events} events, {per_tx} per transaction)</text>\
         {}{}</svg>\n",
        bar(50, "throughput ratio", throughput_ratio, 0.9, 400.0),
        bar(105, "CPU/event vs walsender", cpu_ratio, 0.25, 400.0),
    );
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/results");
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(format!("{dir}/end_to_end.svg"), svg).unwrap();
}
