//! Active/standby: a second instance on the same slot waits, and takes over within seconds
//! when the first dies, losing nothing.

mod common;

use common::*;
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
    let deadline = Instant::now() + Duration::from_secs(10);
    while !standby.log().contains("standing by") {
        assert!(
            Instant::now() < deadline,
            "the second instance does not say it waits:\n{}",
            standby.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    active.kill9();
    let killed_at = Instant::now();
    insert_events(&stack.db, 500, 500, 10, 10).await.unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(30), Some(&standby))
        .await;
    let takeover = killed_at.elapsed();
    eprintln!("standby took over and confirmed everything {takeover:?} after the active instance was killed");
    assert!(
        takeover < Duration::from_secs(15),
        "takeover took {takeover:?}"
    );
    let (lost, _) = lost_and_duplicated(&stack, 1000).await;
    assert_eq!(lost, 0, "events lost in the takeover");
}
