//! `--cleanup`: the relay deletes the outbox rows it relayed, and never one whose event is not
//! in Kafka: not during a kill -9, not a dead-lettered row, not a row inside its grace period,
//! not a row it never relayed. Only the instance that holds the slot cleans, and a standby
//! that takes over deletes what the ledger of the old one still names. Also the snapshot of
//! a Debezium configuration (`outbox.relay.cleanup=true`) and polling mode's marked rows.

mod common;

use common::*;
use outbox_relay_testkit::http::{get, metric, metrics_address};
use outbox_relay_testkit::{RelayProcess, Storage};
use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};

const SLOT: &str = "outbox_relay";

async fn count(stack: &Stack, sql: &str) -> i64 {
    stack.db.query_one(sql, &[]).await.unwrap().get(0)
}

/// Event numbers still in the outbox (ids of `insert_events`).
async fn outbox_events(stack: &Stack) -> HashSet<u64> {
    stack
        .db
        .query("SELECT id::text FROM outbox", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| {
            u64::from_str_radix(r.get::<_, String>(0).rsplit('-').next().unwrap(), 16).unwrap()
        })
        .collect()
}

/// Waits until `sql` counts `want`.
async fn wait_count(stack: &Stack, sql: &str, want: i64, relays: &[&RelayProcess]) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let got = count(stack, sql).await;
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{sql}: {got}, expected {want}\n{}",
            relays
                .iter()
                .map(|r| r.log())
                .collect::<Vec<_>>()
                .join("\n----\n")
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn deleted(relay: &RelayProcess) -> f64 {
    metric(
        &get(&metrics_address(relay), "/metrics").1,
        "outbox_relay_cleanup_deleted_rows_total",
    )
}

/// The relay's count of deleted rows once it reached `want`, or as it is after 10 s: the
/// counter moves when the relay has read the DELETE's commit, which the test can see first.
async fn deleted_reaching(relay: &RelayProcess, want: f64) -> f64 {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let deleted = deleted(relay);
        if deleted >= want || std::time::Instant::now() > deadline {
            return deleted;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_9_during_cleanup_deletes_no_row_kafka_lacks_and_the_next_start_finishes_it() {
    let stack = Stack::start().await;
    // Written before the relay's slot existed: never relayed, so never deleted.
    insert_events(&stack.db, 100_000, 5, 5, 5).await.unwrap();
    let args = [
        "--cleanup",
        "--cleanup-batch",
        "100",
        "--cleanup-interval",
        "1",
    ];
    let mut relay = stack.spawn_relay_and_wait_for_slot(SLOT, &args).await;
    insert_events(&stack.db, 0, 1500, 10, 50).await.unwrap();
    // Kill it while it deletes (100 rows a second).
    let deadline = Instant::now() + Duration::from_secs(60);
    while count(&stack, "SELECT count(*) FROM outbox").await > 1200 {
        assert!(
            Instant::now() < deadline,
            "nothing deleted:\n{}",
            relay.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    relay.kill9();
    let in_kafka: HashSet<u64> = read_all_events(&stack)
        .await
        .unwrap()
        .into_iter()
        .map(|(_, n)| n)
        .collect();
    let left = outbox_events(&stack).await;
    let gone: Vec<u64> = (0..1500).filter(|n| !left.contains(n)).collect();
    assert!(!gone.is_empty());
    let not_in_kafka: Vec<&u64> = gone.iter().filter(|n| !in_kafka.contains(n)).collect();
    assert!(
        not_in_kafka.is_empty(),
        "deleted, yet not in Kafka: {not_in_kafka:?}"
    );

    // The next start finishes the ledger and cleans what it relays from then on.
    let relay = stack.spawn_relay(&args);
    insert_events(&stack.db, 1500, 500, 10, 50).await.unwrap();
    // Only the rows written before the slot stay.
    wait_count(&stack, "SELECT count(*) FROM outbox", 5, &[&relay]).await;
    assert_eq!(
        outbox_events(&stack).await,
        (100_000..100_005).collect::<HashSet<u64>>()
    );
    wait_count(
        &stack,
        "SELECT count(*) FROM outbox_relay_cleanup",
        0,
        &[&relay],
    )
    .await;
    assert_eq!(lost_and_duplicated(&stack, 2000).await.0, 0, "lost events");
    let body = get(&metrics_address(&relay), "/metrics").1;
    assert!(
        metric(&body, "outbox_relay_cleanup_deleted_rows_total") > 0.0,
        "{body}"
    );
    assert!(body.contains("outbox_relay_outbox_bytes "), "{body}");
    assert!(
        body.contains("outbox_relay_outbox_oldest_row_age_seconds "),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_active_standby_pair_cleans_once_and_the_standby_takes_the_ledger_over() {
    let stack = Stack::start().await;
    // A grace period holds rows in the ledger; the test moves the ledger back in time
    // instead of waiting a minute.
    let args = [
        "--cleanup",
        "--cleanup-interval",
        "1",
        "--cleanup-grace",
        "1",
    ];
    let age_ledger =
        "UPDATE outbox_relay_cleanup SET recorded_at = recorded_at - interval '2 minutes'";
    let recorded = "SELECT coalesce(sum(rows), 0)::int8 FROM outbox_relay_cleanup";
    let mut first = stack.spawn_relay_and_wait_for_slot(SLOT, &args).await;
    let second = stack.spawn_relay(&args);
    second
        .wait_for_log("standing by", Duration::from_secs(30))
        .await;
    insert_events(&stack.db, 0, 1000, 20, 50).await.unwrap();
    wait_count(&stack, recorded, 1000, &[&first, &second]).await;
    stack.db.batch_execute(age_ledger).await.unwrap();
    wait_count(&stack, "SELECT count(*) FROM outbox", 0, &[&first, &second]).await;
    assert_eq!(
        deleted_reaching(&first, 1000.0).await,
        1000.0,
        "{}",
        first.log()
    );
    assert_eq!(deleted(&second), 0.0, "the standby deletes nothing");

    // The active one dies with 500 rows in its ledger: the standby takes the slot over and
    // deletes them.
    insert_events(&stack.db, 1000, 500, 20, 50).await.unwrap();
    wait_count(&stack, recorded, 500, &[&first, &second]).await;
    first.kill9();
    stack.db.batch_execute(age_ledger).await.unwrap();
    wait_count(&stack, "SELECT count(*) FROM outbox", 0, &[&second]).await;
    assert_eq!(
        deleted_reaching(&second, 500.0).await,
        500.0,
        "{}",
        second.log()
    );
    assert_eq!(lost_and_duplicated(&stack, 1500).await.0, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_lettered_rows_and_rows_in_their_grace_period_stay_with_exactly_once() {
    let stack = Stack::start_with_schema(
        Storage::Sqlite,
        "CREATE TABLE outbox (
            id UUID PRIMARY KEY,
            aggregate_id VARCHAR(255) NOT NULL,
            aggregate_type VARCHAR(255),
            event_type VARCHAR(255) NOT NULL,
            payload JSONB
        );",
    )
    .await;
    let relay = stack
        .spawn_relay_and_wait_for_slot(
            SLOT,
            &["--cleanup", "--cleanup-grace", "1", "--exactly-once"],
        )
        .await;
    insert_events(&stack.db, 0, 200, 10, 20).await.unwrap();
    stack
        .db
        .batch_execute(
            "INSERT INTO outbox (id, aggregate_id, aggregate_type, event_type, payload)
             VALUES ('00000000-0000-0000-0000-00000000ffff', 'o-1', NULL, 'Broken', '{}')",
        )
        .await
        .unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;
    // Recorded, not deleted: the grace period is a minute.
    wait_count(
        &stack,
        "SELECT coalesce(sum(rows), 0)::int8 FROM outbox_relay_cleanup",
        200,
        &[&relay],
    )
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(count(&stack, "SELECT count(*) FROM outbox").await, 201);
    // A minute later (moved back in time rather than waited for).
    stack
        .db
        .batch_execute(
            "UPDATE outbox_relay_cleanup SET recorded_at = recorded_at - interval '2 minutes'",
        )
        .await
        .unwrap();
    wait_count(&stack, "SELECT count(*) FROM outbox", 1, &[&relay]).await;
    assert_eq!(
        count(
            &stack,
            "SELECT count(*) FROM outbox WHERE aggregate_type IS NULL"
        )
        .await,
        1,
        "the dead-lettered row stays"
    );
    let (lost, duplicated) = lost_and_duplicated(&stack, 200).await;
    assert_eq!((lost, duplicated), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debezium_snapshot_is_cleaned_after_it_is_relayed() {
    let stack = Stack::start().await;
    insert_events(&stack.db, 0, 300, 50, 30).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = outbox_connector(
        dir.path(),
        SLOT,
        &[
            ("snapshot.mode", "initial"),
            ("outbox.relay.cleanup", "true"),
            ("outbox.relay.cleanup.interval.seconds", "1"),
        ],
    );
    let relay = RelayProcess::spawn(
        Path::new(RELAY),
        &stack.relay_args(&["--debezium-config", &path]),
        &[],
    )
    .unwrap();
    wait_count(&stack, "SELECT count(*) FROM outbox", 0, &[&relay]).await;
    let topics = stack.topics().await;
    let relayed: usize = {
        let mut n = 0;
        for t in TYPES {
            if topics.contains(&format!("{t}.events")) {
                n += stack.read_topic(&format!("{t}.events")).await.len();
            }
        }
        n
    };
    assert!(
        relayed >= 300,
        "{relayed} events for 300 rows\n{}",
        relay.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_deletes_the_rows_it_marked_processed() {
    let stack = Stack::start_with_schema(
        Storage::Sqlite,
        "CREATE TABLE outbox (
            id UUID PRIMARY KEY,
            aggregate_id VARCHAR(255) NOT NULL,
            aggregate_type VARCHAR(255) NOT NULL,
            event_type VARCHAR(255) NOT NULL,
            payload JSONB,
            published_at TIMESTAMPTZ,
            seq BIGINT GENERATED ALWAYS AS IDENTITY
        );",
    )
    .await;
    let relay = stack.spawn_relay(&[
        "--mode",
        "polling",
        "--poll-interval-ms",
        "100",
        "--processed-column",
        "published_at",
        "--cleanup",
        "--cleanup-batch",
        "50",
    ]);
    insert_events(&stack.db, 0, 400, 20, 20).await.unwrap();
    wait_count(&stack, "SELECT count(*) FROM outbox", 0, &[&relay]).await;
    assert_eq!(lost_and_duplicated(&stack, 400).await, (0, 0));
    assert_eq!(deleted(&relay), 400.0);
}

#[test]
fn cleanup_options_are_checked_at_start() {
    let run = |args: &[&str]| {
        let out = std::process::Command::new(RELAY)
            .args([
                "run",
                "--postgres-url",
                "postgres://u@127.0.0.1:1/db",
                "--bootstrap-servers",
                "127.0.0.1:1",
            ])
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, said) = run(&["--cleanup-batch", "10"]);
    assert_eq!(code, Some(2), "{said}");
    assert!(
        said.contains("cleanup-batch") && said.contains("--cleanup"),
        "{said}"
    );
    let (code, said) = run(&["--cleanup", "--cleanup-batch", "0"]);
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("cleanup-batch"), "{said}");
    let (code, said) = run(&["--mode", "polling", "--cleanup"]);
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("--processed-column"), "{said}");
}
