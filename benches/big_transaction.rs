//! One transaction of 1,000,000 outbox rows through the real binary to a real broker:
//! the relay's peak RSS stays bounded (rows are produced as they are decoded; only the
//! commit is waited for before confirming).
//!
//! cargo bench --bench big_transaction            # 1,000,000 rows
//! OUTBOX_RELAY_BENCH_ROWS=200000 cargo bench --bench big_transaction

use outbox_relay_testkit::{Broker, PgCluster, RelayProcess, Storage};
use std::time::{Duration, Instant};

const RELAY: &str = env!("CARGO_BIN_EXE_outbox-relay");

use outbox_relay_testkit::status_kib as rss_kib;

fn main() {
    // `cargo test --benches` runs bench binaries with --bench absent: do nothing then.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let rows: u64 = std::env::var("OUTBOX_RELAY_BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async move {
        let pg = PgCluster::start().expect("PostgreSQL 15 (scripts/install-deps.sh)");
        // memory:// so that the broker, not sqlite, keeps up (kafka-broker.md).
        let broker = Broker::start(Storage::Memory).expect("Apache Kafka (scripts/install-kafka.sh)");
        let db = pg.connect().await.unwrap();
        db.batch_execute(include_str!("../sql/outbox.sql")).await.unwrap();
        let args: Vec<String> = [
            "run", "--postgres-url", &pg.url(), "--bootstrap-servers", &broker.bootstrap_servers(),
            "--topic-replication-factor", "1", "--topic-partitions", "3", "--metrics-address", "127.0.0.1:0",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        // OUTBOX_RELAY_BENCH_BINARY: another build (e.g. the previous release) on the same load.
        let binary = std::env::var("OUTBOX_RELAY_BENCH_BINARY").unwrap_or_else(|_| RELAY.into());
        let relay = RelayProcess::spawn(std::path::Path::new(&binary), &args, &[("RUST_LOG", "warn")]).unwrap();
        let confirmed = || async {
            db.query_opt("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = 'outbox_relay'", &[])
                .await
                .unwrap()
                .and_then(|r| r.get::<_, Option<String>>(0))
                .map(|s| lsn(&s))
        };
        while confirmed().await.is_none() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // Warm up: topics created, producer connected.
        db.batch_execute(
            "INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload) \
             SELECT gen_random_uuid(), (ARRAY['Order','Customer','Invoice'])[g % 3 + 1], 'warm-' || g, 'Warm', '{}' FROM generate_series(1, 30) g",
        )
        .await
        .unwrap();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let idle_rss = rss_kib(relay.pid(), "VmRSS:").unwrap();

        let write_started = Instant::now();
        db.batch_execute(&format!(
            "INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload) \
             SELECT gen_random_uuid(), (ARRAY['Order','Customer','Invoice'])[g % 3 + 1], 'agg-' || (g % 1000), 'Created', \
                    jsonb_build_object('n', g, 'note', repeat('x', 150)) \
             FROM generate_series(1, {rows}) g"
        ))
        .await
        .unwrap();
        let committed = Instant::now();
        let target = lsn(db.query_one("SELECT pg_current_wal_lsn()::text", &[]).await.unwrap().get(0));
        let mut peak_sampled = 0;
        while confirmed().await.unwrap_or(0) < target {
            peak_sampled = peak_sampled.max(rss_kib(relay.pid(), "VmRSS:").unwrap_or(0));
            assert!(committed.elapsed() < Duration::from_secs(1800), "not confirmed in 30 min; log:\n{}", relay.log());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let relayed = committed.elapsed();
        let hwm = rss_kib(relay.pid(), "VmHWM:").unwrap_or(peak_sampled);
        println!("big_transaction: {rows} rows in one transaction");
        println!("  insert + commit            {:>10.1?}", committed - write_started);
        println!("  commit -> slot confirmed   {relayed:>10.1?}  ({:.0} rows/s)", rows as f64 / relayed.as_secs_f64());
        println!("  relay RSS idle             {:>8.1} MiB", idle_rss as f64 / 1024.0);
        println!("  relay RSS peak (VmHWM)     {:>8.1} MiB", hwm as f64 / 1024.0);
        println!("  peak / idle                {:>8.1}x", hwm as f64 / idle_rss as f64);
    });
}

/// An LSN as a number, for the byte arithmetic of the figures.
fn lsn(text: &str) -> u64 {
    outbox_relay_testkit::Lsn::parse(text)
        .expect("X/Y")
        .as_u64()
}
