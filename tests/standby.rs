//! Active/standby: a second instance on the same slot waits, and takes over within seconds
//! when the first dies, losing nothing.

mod common;

use common::*;
use outbox_relay_testkit::http::{get as http_get, metric, metrics_address, wait_status};
use outbox_relay_testkit::Storage;
use std::time::{Duration, Instant};

const SLOT: &str = "outbox_relay";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_on_the_same_slot_takes_over_when_the_active_instance_dies() {
    let stack = Stack::start().await;
    let mut active = stack.spawn_relay_and_wait_for_slot(SLOT, &[]).await;
    let standby = stack.spawn_relay(&[]);
    insert_events(&stack.db, 0, 500, 10, 10).await.unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&active))
        .await;
    standby
        .wait_for_log("standing by", Duration::from_secs(10))
        .await;
    // Both are healthy and ready (a rolling update of the pair must not stall on the
    // standby); the gauge says which one streams.
    let (active_at, standby_at) = (metrics_address(&active), metrics_address(&standby));
    wait_status(&standby_at, "/ready", 200, Duration::from_secs(10)).await;
    // And stays ready while it retries the slot about every second.
    for _ in 0..20 {
        for address in [&active_at, &standby_at] {
            let (status, body) = http_get(address, "/ready");
            assert_eq!(status, 200, "{address}: {body}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(http_get(&standby_at, "/ready").1.contains("standing by"));
    let active_gauge =
        |address: &str| metric(&http_get(address, "/metrics").1, "outbox_relay_active");
    assert_eq!(active_gauge(&active_at), 1.0);
    assert_eq!(active_gauge(&standby_at), 0.0);

    active.kill9();
    let killed_at = Instant::now();
    insert_events(&stack.db, 500, 500, 10, 10).await.unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(30), Some(&standby))
        .await;
    let takeover = killed_at.elapsed();
    eprintln!("standby took over and confirmed everything {takeover:?} after the active instance was killed");
    assert_eq!(
        active_gauge(&standby_at),
        1.0,
        "the standby is now the active one"
    );
    assert!(
        takeover < Duration::from_secs(15),
        "takeover took {takeover:?}"
    );
    let (lost, _) = lost_and_duplicated(&stack, 1000).await;
    assert_eq!(lost, 0, "events lost in the takeover");
}

/// The busy slot is recognised by its SQLSTATE, not by English text: against a server that
/// answers in French, the standby still stands by (retrying about every second) instead of
/// backing off exponentially, and takes over within about two seconds. The slot's holder is
/// another client (`pg_recvlogical`), not a relay: a relay claims the slot before it starts
/// streaming, so a second relay stands by before it ever asks the server for the slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_takes_over_as_fast_from_a_server_that_speaks_french() {
    let french = outbox_relay_testkit::locale::ensure("fr_FR")
        .unwrap_or_else(|e| panic!("cannot run PostgreSQL in French for this test: {e:#}"));
    let stack = Stack::start_with_postgres_config(
        Storage::Sqlite,
        OUTBOX_DDL,
        &format!("lc_messages = '{french}'"),
    )
    .await;
    let said: String = stack
        .db
        .query_one("SELECT current_setting('lc_messages')", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(said, french);
    // The relay makes its slot and publication, then another client holds the slot.
    let mut first = stack.spawn_relay_and_wait_for_slot(SLOT, &[]).await;
    first.terminate(Duration::from_secs(20)).unwrap();
    let mut active = stack
        .pg
        .client("pg_recvlogical")
        .args(["--slot", SLOT, "--start", "-o", "proto_version=1"])
        .args(["-o", "publication_names=outbox_relay", "-f", "/dev/null"])
        .spawn()
        .expect("pg_recvlogical");
    let held = Instant::now();
    while stack
        .db
        .query_one(
            "SELECT active_pid IS NULL FROM pg_replication_slots WHERE slot_name = $1",
            &[&SLOT],
        )
        .await
        .unwrap()
        .get::<_, bool>(0)
    {
        assert!(
            held.elapsed() < Duration::from_secs(10),
            "pg_recvlogical did not take the slot"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let standby = stack.spawn_relay(&[]);
    standby
        .wait_for_log("standing by", Duration::from_secs(10))
        .await;
    // Several seconds of standing by: still about one attempt a second, no backoff.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let log = standby.log();
    assert!(
        log.contains("actif pour le PID"),
        "the server's French message is passed on:\n{log}"
    );
    assert!(
        !log.contains("reconnecting"),
        "a busy slot is not a lost connection:\n{log}"
    );

    active.kill().unwrap();
    let _ = active.wait();
    let killed_at = Instant::now();
    insert_events(&stack.db, 0, 200, 10, 10).await.unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(30), Some(&standby))
        .await;
    let takeover = killed_at.elapsed();
    eprintln!("standby took over from a French-speaking server {takeover:?} after the kill");
    assert!(
        takeover < Duration::from_secs(4),
        "takeover took {takeover:?}:\n{}",
        standby.log()
    );
    let (lost, _) = lost_and_duplicated(&stack, 200).await;
    assert_eq!(lost, 0);
}
