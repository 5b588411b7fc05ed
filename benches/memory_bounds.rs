//! Peak memory of the relay where an outbox is large in bytes: an initial snapshot of a
//! 600 MB outbox that was never cleaned (300,000 rows of 2 KB; target: peak RSS at most
//! 256 MiB), and one row of 100 MB (relayed or dead-lettered, never copied without bound).
//! Real PostgreSQL and Apache Kafka, the real binary; VmHWM from /proc.
//!
//! cargo bench --bench memory_bounds
//! OUTBOX_RELAY_BENCH_ROWS=100000 cargo bench --bench memory_bounds

use outbox_relay_testkit::{Broker, PgCluster, RelayProcess, Storage};
use std::time::{Duration, Instant};

const RELAY: &str = env!("CARGO_BIN_EXE_outbox-relay");

use outbox_relay_testkit::status_kib as rss_kib;

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn main() {
    // `cargo test --benches` runs bench binaries with --bench absent: do nothing then.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let rows: u64 = std::env::var("OUTBOX_RELAY_BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300_000);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async move {
        let pg = PgCluster::start_with_config("max_wal_size = 4GB\n")
            .expect("PostgreSQL (scripts/install-deps.sh)");
        let broker = Broker::start(Storage::Memory).expect("Apache Kafka (scripts/install-kafka.sh)");
        let db = pg.connect().await.unwrap();
        db.batch_execute(outbox_relay_testkit::large_outbox::DDL).await.unwrap();
        let dir = tempfile::tempdir().unwrap();

        // 1. The snapshot of an outbox that was never cleaned.
        let started = Instant::now();
        let bytes = outbox_relay_testkit::large_outbox::fill(&db, rows).await;
        println!(
            "memory_bounds: snapshot of {rows} rows, {:.0} MB of payload text (written in {:.1?})",
            bytes as f64 / 1e6,
            started.elapsed()
        );
        let args = outbox_relay_testkit::large_outbox::run_args(
            dir.path(),
            pg.port(),
            "bench",
            &[],
            &broker.bootstrap_servers(),
        );
        let binary = std::env::var("OUTBOX_RELAY_BENCH_BINARY").unwrap_or_else(|_| RELAY.into());
        let mut relay = RelayProcess::spawn(std::path::Path::new(&binary), &args, &[("RUST_LOG", "warn")]).unwrap();
        let snapshot_started = Instant::now();
        let completed = || async {
            db.query_opt(
                "SELECT completed FROM public.outbox_relay_snapshots WHERE slot_name = 'debezium'",
                &[],
            )
            .await
            .ok()
            .flatten()
            .is_some_and(|r| r.get::<_, bool>(0))
        };
        let mut peak_sampled = 0;
        while !completed().await {
            assert!(relay.is_running(), "the relay exited; its log:\n{}", relay.log());
            peak_sampled = peak_sampled.max(rss_kib(relay.pid(), "VmRSS:").unwrap_or(0));
            assert!(
                snapshot_started.elapsed() < Duration::from_secs(1800),
                "snapshot not complete in 30 min; log:\n{}",
                relay.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let took = snapshot_started.elapsed();
        let snapshot_hwm = rss_kib(relay.pid(), "VmHWM:").unwrap_or(peak_sampled);
        println!(
            "  snapshot relayed and acknowledged   {took:>8.1?}  ({:.0} rows/s, {:.0} MB/s)",
            rows as f64 / took.as_secs_f64(),
            bytes as f64 / 1e6 / took.as_secs_f64()
        );
        println!(
            "  relay peak RSS (VmHWM)              {:>8.1} MiB  (target: at most 256 MiB; {:.2}x the payload)",
            mib(snapshot_hwm),
            snapshot_hwm as f64 * 1024.0 / bytes as f64
        );
        assert!(
            mib(snapshot_hwm) <= 256.0,
            "memory_bounds: the snapshot's peak RSS {:.1} MiB is over the 256 MiB target",
            mib(snapshot_hwm)
        );

        // 2. One row of 100 MB, streamed.
        let before = rss_kib(relay.pid(), "VmRSS:").unwrap_or(0);
        let committed = Instant::now();
        db.batch_execute(
            "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) \
             VALUES (gen_random_uuid(), 'Order', 'huge', 'Created', jsonb_build_object('note', repeat('x', 100000000)))",
        )
        .await
        .unwrap();
        let target = outbox_relay_testkit::Lsn::parse(
            &db.query_one("SELECT pg_current_wal_lsn()::text", &[]).await.unwrap().get::<_, String>(0),
        )
        .unwrap();
        outbox_relay_testkit::wait_confirmed(&db, "debezium", target, Duration::from_secs(600), || relay.log())
            .await;
        let huge_hwm = rss_kib(relay.pid(), "VmHWM:").unwrap_or(0);
        let dead = outbox_relay_testkit::read_topic(&broker.bootstrap_servers(), "outbox-relay.dlq").unwrap_or_default();
        let fate = match dead.last() {
            Some(d) => format!(
                "dead-lettered: {}",
                d.header_str("outbox-relay.error.reason").chars().take(100).collect::<String>()
            ),
            None => "relayed".into(),
        };
        println!("memory_bounds: one row of 100 MB, streamed");
        println!("  commit -> slot confirmed            {:>8.1?}  ({fate})", committed.elapsed());
        println!(
            "  relay RSS before                    {:>8.1} MiB; peak (VmHWM) after {:>8.1} MiB",
            mib(before),
            mib(huge_hwm)
        );
    });
}
