//! Many aggregate types: one transaction whose events go to N distinct topics (default
//! 1,000), through the real binary to Apache Kafka. Two bursts, each on a fresh relay and a
//! fresh outbox WAL: topics that exist already (the relay learns each once: partitions and
//! configs), then topics the relay creates. Reports topics per second from commit to slot
//! confirmed, the size of /metrics (label sets stay bounded: `--metrics-topic-limit`, default
//! 500) and the relay's peak RSS.
//!
//! cargo bench --bench many_topics
//! OUTBOX_RELAY_BENCH_TOPICS=3000 cargo bench --bench many_topics

#[allow(dead_code)]
mod support;

use outbox_relay_testkit::{Broker, PgCluster, RelayProcess, Storage};
use std::time::{Duration, Instant};
use support::{confirmed, current_wal_lsn, env_u64};

const RELAY: &str = env!("CARGO_BIN_EXE_outbox-relay");

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let topics = env_u64("OUTBOX_RELAY_BENCH_TOPICS", 1_000);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async move {
        let pg = PgCluster::start().expect("PostgreSQL (scripts/install-deps.sh)");
        let broker = Broker::start(Storage::Memory).expect("Apache Kafka (scripts/install-kafka.sh)");
        let db = pg.connect().await.unwrap();
        db.batch_execute(include_str!("../sql/outbox.sql")).await.unwrap();
        let bootstrap = broker.bootstrap_servers();
        // The existing topics, created beforehand as an operator would.
        let existing: Vec<String> = (0..topics).map(|i| format!("Existing{i}.events")).collect();
        for chunk in existing.chunks(500) {
            outbox_relay_testkit::kafka::create_topics(&bootstrap, chunk, 1).await.unwrap();
        }
        println!("many_topics: {topics} distinct topics in one transaction, Apache Kafka (one broker)");
        for (prefix, what) in [("Existing", "topics that exist"), ("Created", "topics the relay creates")] {
            let slot = format!("bench_{}", prefix.to_lowercase());
            let args: Vec<String> = [
                "run", "--postgres-url", &pg.url(), "--bootstrap-servers", &bootstrap, "--slot", &slot,
                "--publication", &slot, "--topic-replication-factor", "1", "--topic-partitions", "1",
                "--metrics-address", "127.0.0.1:0",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            let relay = RelayProcess::spawn(std::path::Path::new(RELAY), &args, &[("RUST_LOG", "info,librdkafka=warn")]).unwrap();
            let exists = "SELECT 1 FROM pg_replication_slots WHERE slot_name = $1 AND confirmed_flush_lsn IS NOT NULL";
            while db.query_opt(exists, &[&slot]).await.unwrap().is_none() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            db.batch_execute(&format!(
                "INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload) \
                 SELECT gen_random_uuid(), '{prefix}' || g, 'agg-' || g, 'Created', jsonb_build_object('n', g) \
                 FROM generate_series(0, {topics} - 1) g"
            ))
            .await
            .unwrap();
            let committed = Instant::now();
            let target = current_wal_lsn(&db).await;
            while confirmed(&db, &slot).await < target {
                assert!(committed.elapsed() < Duration::from_secs(1800), "not confirmed in 30 min; log:\n{}", relay.log());
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let took = committed.elapsed();
            println!("  {what}:");
            println!("    commit -> slot confirmed  {took:>10.2?}  ({:.0} topics/s)", topics as f64 / took.as_secs_f64());
            let address = outbox_relay_testkit::http::metrics_address(&relay);
            let (_, body) = outbox_relay_testkit::http::get(&address, "/metrics");
            let series = body.lines().filter(|l| l.starts_with("outbox_relay_events_total")).count();
            let hwm = outbox_relay_testkit::status_kib(relay.pid(), "VmHWM:").unwrap_or(0);
            println!("    /metrics                  {:>7} bytes, {series} events_total series", body.len());
            println!("    relay RSS peak (VmHWM)    {:>8.1} MiB", hwm as f64 / 1024.0);
            drop(relay);
            db.batch_execute(&format!("SELECT pg_drop_replication_slot('{slot}')")).await.unwrap();
        }
    });
}
