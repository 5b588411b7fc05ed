//! kill -9 of the relay mid-stream loses nothing; duplicates are counted and reported.

mod common;

use common::*;
use rand::Rng;
use std::time::Duration;

const SLOT: &str = "outbox_relay";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_stream_loses_nothing() {
    let stack = Stack::start().await;
    let mut relay = stack.spawn_relay_and_wait_for_slot(SLOT, &[]).await;

    const EVENTS: u64 = 6000;
    const KILLS: usize = 5;
    let writer_db = stack.pg.connect().await.unwrap();
    let writer = tokio::spawn(async move {
        for chunk in 0..60 {
            insert_events(&writer_db, chunk * 100, 100, 10, 50)
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
    });
    let mut rng = rand::thread_rng();
    for _ in 0..KILLS {
        tokio::time::sleep(Duration::from_millis(rng.gen_range(200..700))).await;
        relay.kill9();
        relay = stack.spawn_relay(&[]);
    }
    writer.await.unwrap();
    let last = stack.current_wal_lsn().await;
    stack
        .wait_confirmed(SLOT, last, Duration::from_secs(120), Some(&relay))
        .await;

    let (lost, duplicated) = lost_and_duplicated(&stack, EVENTS).await;
    eprintln!("kill -9 x{KILLS} during {EVENTS} events: lost {lost}, duplicated {duplicated}");
    assert_eq!(lost, 0, "events lost after kill -9");
}
