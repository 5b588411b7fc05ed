//! What `--exactly-once` costs, measured in one run with and without the flag on the same WAL
//! (two slots created at the same position, each relay writing its own topics on a fresh
//! Apache Kafka broker):
//! - catch-up throughput (rows/s until the slot is confirmed past the last commit) and the
//!   relay's CPU per event;
//! - restart-to-streaming: kill -9 of the relay in the middle of a catch-up, then the time from
//!   the new process's start to its first confirmed position (with the flag: the partition
//!   tails it reads first), to caught up, and how many replayed events it skipped.
//!
//! cargo bench --bench exactly_once
//! OUTBOX_RELAY_BENCH_EVENTS=400000 cargo bench --bench exactly_once

#[path = "support/mod.rs"]
mod support;

use outbox_relay_testkit::PgCluster;
use support::{env_u64, exactly_once_cost};

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let events = env_u64("OUTBOX_RELAY_BENCH_EVENTS", 200_000);
    let per_tx = env_u64("OUTBOX_RELAY_BENCH_TX_ROWS", 10).max(1);
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(async move {
            let pg = PgCluster::start().expect("PostgreSQL 15 (scripts/install-deps.sh)");
            let db = pg.connect().await.unwrap();
            db.batch_execute(include_str!("../sql/outbox.sql"))
                .await
                .unwrap();
            db.batch_execute(
                "CREATE PUBLICATION outbox_relay FOR TABLE outbox WITH (publish = 'insert')",
            )
            .await
            .unwrap();
            exactly_once_cost::measure(&pg, events, per_tx).await;
        });
}
