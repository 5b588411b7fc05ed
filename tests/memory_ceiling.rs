//! The memory ceiling: the relay's peak resident memory (VmHWM) while it catches up a fixed
//! backlog (20,000 events of 500 B in transactions of 10), natively and in the Debezium mode
//! (the seeds' shape: the EventRouter with the payload expanded, JsonConverter), held under
//! the ceilings committed in `crates/cost/memory-ceiling.txt`, and to at most twice what the
//! same process holds idle, with the default in-flight window. A change that makes the relay
//! hold more fails here, as a change that makes it cost more instructions fails
//! `scripts/cost-check.sh`.

mod common;

use common::*;
use outbox_relay_testkit::status_kib;
use std::time::Duration;

const EVENTS: u64 = 20_000;

fn ceilings() -> Vec<(String, f64)> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/crates/cost/memory-ceiling.txt"
    );
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (mode, mib) = l.split_once(' ').expect("MODE MIB");
            (mode.to_owned(), mib.trim().parse().expect("MiB"))
        })
        .collect()
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_catch_up_stays_under_the_committed_memory_ceiling() {
    let stack = Stack::start().await;
    let dir = tempfile::tempdir().unwrap();
    let connector = outbox_connector(
        dir.path(),
        "debezium_ceiling",
        &[
            ("transforms.outbox.table.expand.json.payload", "true"),
            (
                "transforms.outbox.table.fields.additional.placement",
                "event_type:header:eventType",
            ),
            (
                "key.converter",
                "org.apache.kafka.connect.storage.StringConverter",
            ),
            (
                "value.converter",
                "org.apache.kafka.connect.json.JsonConverter",
            ),
            ("value.converter.schemas.enable", "false"),
        ],
    );
    // The default in-flight window (4,096 events, 4 MiB): what the relay holds then depends
    // on what it does with each event, not on how fast this machine's broker acknowledges them.
    let modes: [(&str, &str, Vec<&str>); 2] = [
        ("native", "native_ceiling", vec!["--slot", "native_ceiling"]),
        (
            "debezium",
            "debezium_ceiling",
            vec!["--debezium-config", connector.as_str()],
        ),
    ];
    // Both slots first, and what each mode holds idle (started, connected, a second
    // streaming nothing); then the backlog: each mode catches up the same WAL.
    let mut idle = Vec::new();
    for (_, slot, args) in &modes {
        let mut relay = stack.spawn_relay_and_wait_for_slot(slot, args).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        idle.push(status_kib(relay.pid(), "VmRSS:").expect("the relay's /proc status"));
        relay.terminate(Duration::from_secs(30)).unwrap();
    }
    insert_padded_events(&stack.db, 0, EVENTS, 10, 100, 480)
        .await
        .unwrap();
    let last = stack.current_wal_lsn().await;

    let ceilings = ceilings();
    let mut report = Vec::new();
    for ((mode, slot, args), idle) in modes.iter().zip(idle) {
        let relay = stack.spawn_relay(args);
        stack
            .wait_confirmed(slot, last, Duration::from_secs(120), Some(&relay))
            .await;
        let peak = status_kib(relay.pid(), "VmHWM:").expect("the relay's /proc status");
        drop(relay);
        let ceiling = ceilings
            .iter()
            .find(|(m, _)| m == mode)
            .unwrap_or_else(|| panic!("crates/cost/memory-ceiling.txt has no line for {mode}"))
            .1;
        report.push(format!(
            "{mode}: idle {:.1} MiB, peak {:.1} MiB ({:.2}× idle), ceiling {ceiling} MiB",
            mib(idle),
            mib(peak),
            peak as f64 / idle as f64
        ));
        assert!(
            mib(peak) <= ceiling,
            "{mode}: the catch-up peaked at {:.1} MiB, over the committed ceiling of {ceiling} MiB \
             (crates/cost/memory-ceiling.txt)\n{}",
            mib(peak),
            report.join("\n")
        );
        assert!(
            peak <= 2 * idle,
            "{mode}: the catch-up peaked at more than twice the idle memory\n{}",
            report.join("\n")
        );
    }
    println!("{}", report.join("\n"));
    // Both modes write the same topics: every event twice, once by each.
    assert_eq!(
        lost_and_duplicated(&stack, EVENTS).await,
        (0, EVENTS as u32)
    );
}
