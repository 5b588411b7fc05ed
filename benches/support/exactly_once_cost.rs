//! The measurement behind `cargo bench --bench exactly_once`, also run at the end of
//! `cargo bench --bench end_to_end`: what `--exactly-once` costs on the same WAL.

use super::{confirmed, cpu_seconds, write_outbox};
use outbox_relay_testkit::{Broker, PgCluster, RelayProcess, Storage};
use std::time::{Duration, Instant};

const RELAY: &str = env!("CARGO_BIN_EXE_outbox-relay");

struct Mode {
    name: &'static str,
    slot: &'static str,
    extra: &'static [&'static str],
}

fn spawn(pg: &PgCluster, broker: &Broker, mode: &Mode) -> RelayProcess {
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
        "127.0.0.1:0",
        "--status-interval-ms",
        "100",
        "--slot",
        mode.slot,
        "--max-in-flight",
        "10000",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(mode.extra.iter().map(|s| s.to_string()));
    RelayProcess::spawn(std::path::Path::new(RELAY), &args, &[("RUST_LOG", "info")]).unwrap()
}

/// Waits until `slot` is confirmed at or past `end`; returns (seconds, relay CPU seconds).
async fn catch_up(
    db: &tokio_postgres::Client,
    relay: &RelayProcess,
    slot: &str,
    end: u64,
) -> (f64, f64) {
    let t = Instant::now();
    let mut cpu = 0.0;
    while confirmed(db, slot).await < end {
        cpu = cpu_seconds(relay.pid()).unwrap_or(cpu);
        assert!(
            t.elapsed() < Duration::from_secs(1200),
            "no catch-up; log:\n{}",
            relay.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (t.elapsed().as_secs_f64(), cpu)
}

/// Relays `events` (then a quarter more, killed and restarted in the middle) with and without
/// the flag from two slots at the same position; prints the table. Needs the outbox table and
/// the `outbox_relay` publication in `pg`.
pub async fn measure(pg: &PgCluster, events: u64, per_tx: u64) {
    let db = pg.connect().await.unwrap();
    let modes = [
        Mode {
            name: "at-least-once",
            slot: "plain",
            extra: &["--topic-template", "plain.${routedByValue}"],
        },
        Mode {
            name: "--exactly-once",
            slot: "exactly",
            extra: &["--topic-template", "eo.${routedByValue}", "--exactly-once"],
        },
    ];
    for mode in &modes {
        db.batch_execute(&format!(
            "SELECT pg_create_logical_replication_slot('{}', 'pgoutput')",
            mode.slot
        ))
        .await
        .unwrap();
    }
    let end = write_outbox(&db, events, per_tx).await;
    let restart_events = events / 4;
    let restart_end = write_outbox(&db, restart_events, per_tx).await;
    eprintln!(
        "wrote {} + {restart_events} events in transactions of {per_tx}",
        events
    );

    println!();
    println!("exactly_once: {events} events (transactions of {per_tx}, ~500 B payloads) caught up, then kill -9 in the \
              middle of {restart_events} more and a restart; 3 partitions per topic, Apache Kafka, 2-core machine");
    println!("| mode | catch-up rows/s | relay CPU µs/event | restart → first confirmed | restart → caught up | replayed events skipped |");
    println!("|---|---|---|---|---|---|");
    for mode in &modes {
        // A fresh broker per mode: neither run pays for the other's records.
        let broker =
            Broker::start(Storage::Memory).expect("Apache Kafka (scripts/install-kafka.sh)");
        let mut relay = spawn(pg, &broker, mode);
        let (seconds, cpu) = catch_up(&db, &relay, mode.slot, end).await;
        // Into the restart WAL, then kill -9 mid-stream.
        let before = confirmed(&db, mode.slot).await;
        while confirmed(&db, mode.slot).await < before + (restart_end - end) / 3 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        relay.kill9();
        let killed_at = confirmed(&db, mode.slot).await;
        let t = Instant::now();
        let relay = spawn(pg, &broker, mode);
        while confirmed(&db, mode.slot).await <= killed_at {
            assert!(
                t.elapsed() < Duration::from_secs(120),
                "no progress after restart; log:\n{}",
                relay.log()
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let first = t.elapsed().as_secs_f64();
        catch_up(&db, &relay, mode.slot, restart_end).await;
        let caught_up = t.elapsed().as_secs_f64();
        let skipped = relay.exactly_once_skipped();
        println!(
            "| {} | {:.0} | {:.2} | {:.0} ms | {:.2} s | {} |",
            mode.name,
            events as f64 / seconds,
            cpu / events as f64 * 1e6,
            first * 1e3,
            caught_up,
            if mode.extra.contains(&"--exactly-once") {
                skipped.to_string()
            } else {
                "— (replayed)".into()
            }
        );
    }
}
