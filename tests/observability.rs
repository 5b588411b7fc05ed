//! What an operator scrapes and probes: /metrics, /health, /ready.

mod common;

use common::*;
use outbox_relay_testkit::http::{get as http_get, metric, metrics_address};
use std::time::{Duration, Instant};

const SLOT: &str = "outbox_relay";

async fn wait_status(address: &str, path: &str, want: u16) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while http_get(address, path).0 != want {
        assert!(Instant::now() < deadline, "{path} never answered {want}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_health_and_readiness_tell_an_operator_what_the_relay_does() {
    let mut stack = Stack::start().await;
    let relay = stack.spawn_relay_and_wait_for_slot(SLOT, &[]).await;
    let address = metrics_address(&relay);
    assert_eq!(http_get(&address, "/health").0, 200);
    wait_status(&address, "/ready", 200).await;

    insert_events(&stack.db, 0, 400, 20, 10).await.unwrap();
    let last = stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;

    let (status, body) = http_get(&address, "/metrics");
    assert_eq!(status, 200);
    assert_eq!(
        metric(&body, "outbox_relay_events_total{topic=\"Order.events\"}"),
        100.0
    );
    assert_eq!(
        metric(
            &body,
            "outbox_relay_events_total{topic=\"Shipment.events\"}"
        ),
        100.0
    );
    assert_eq!(metric(&body, "outbox_relay_dead_letters_total"), 0.0);
    assert_eq!(metric(&body, "outbox_relay_streaming"), 1.0);
    assert_eq!(metric(&body, "outbox_relay_in_flight"), 0.0);
    assert!(metric(&body, "outbox_relay_confirmed_lsn") >= last.as_u64() as f64);
    assert!(metric(&body, "outbox_relay_replication_lag_bytes") >= 0.0);
    assert!(
        metric(&body, "outbox_relay_commit_to_ack_seconds_count") >= 20.0,
        "one observation per transaction"
    );
    assert_eq!(metric(&body, "outbox_relay_reconnects_total"), 0.0);

    let build = body
        .lines()
        .find(|l| l.starts_with("outbox_relay_build_info{"))
        .unwrap_or_else(|| panic!("no build_info in:\n{body}"));
    assert!(
        build.contains("librdkafka=\"2.") && build.contains("git_sha=") && build.ends_with(" 1"),
        "{build}"
    );

    // `outbox-relay health` is what a container HEALTHCHECK runs (no curl needed).
    let health = |extra: &[&str]| {
        std::process::Command::new(RELAY)
            .args(["health", "--address", &address])
            .args(extra)
            .status()
            .unwrap()
            .code()
    };
    assert_eq!(health(&[]), Some(0));
    assert_eq!(health(&["--ready"]), Some(0));

    // The broker goes away: not ready (alive all the same); back: ready again.
    stack.broker.stop();
    wait_status(&address, "/ready", 503).await;
    assert_eq!(http_get(&address, "/health").0, 200);
    assert_eq!(health(&["--ready"]), Some(1), "not ready without a broker");
    assert_eq!(health(&[]), Some(0), "alive all the same");
    stack.broker.restart().unwrap();
    wait_status(&address, "/ready", 200).await;
}
