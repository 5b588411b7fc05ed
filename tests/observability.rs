//! What an operator scrapes and probes: /metrics, /health, /ready.

mod common;

use common::*;
use outbox_relay_testkit::http::{get as http_get, metric, metrics_address};
use std::time::Duration;

const SLOT: &str = "outbox_relay";

async fn wait_status(address: &str, path: &str, want: u16) {
    outbox_relay_testkit::http::wait_status(address, path, want, Duration::from_secs(30)).await;
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
    // Per-slot series carry the slot; dead letters their reason; caught up = 0 s behind.
    assert_eq!(
        metric(&body, "outbox_relay_streaming{slot=\"outbox_relay\"}"),
        1.0
    );
    assert_eq!(
        metric(
            &body,
            "outbox_relay_dead_letters_total{reason=\"unroutable\"}"
        ),
        0.0
    );
    assert_eq!(
        metric(
            &body,
            "outbox_relay_replication_lag_seconds{slot=\"outbox_relay\"}"
        ),
        0.0,
        "caught up"
    );

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

    // The broker goes away: not ready (alive all the same), and the relay falls behind in
    // seconds as well as bytes; back: ready again.
    stack.broker.stop();
    wait_status(&address, "/ready", 503).await;
    insert_events(&stack.db, 400, 10, 10, 10).await.unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let behind = metric(
        &http_get(&address, "/metrics").1,
        "outbox_relay_replication_lag_seconds",
    );
    assert!(behind >= 2.0, "{behind} s behind while the broker is away");
    assert_eq!(http_get(&address, "/health").0, 200);
    assert_eq!(health(&["--ready"]), Some(1), "not ready without a broker");
    assert_eq!(health(&[]), Some(0), "alive all the same");
    stack.broker.restart().unwrap();
    wait_status(&address, "/ready", 200).await;
}

/// `--log-format json`: every line the relay writes on stderr is one JSON object with the
/// message at the top level, from start-up to a fatal error — nothing a log shipper has to
/// special-case.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_are_one_object_per_line_with_the_message_at_the_top_level() {
    let stack = Stack::start().await;
    let mut relay = stack
        .spawn_relay_and_wait_for_slot(SLOT, &["--log-format", "json"])
        .await;
    insert_events(&stack.db, 0, 20, 10, 10).await.unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;
    relay.terminate(Duration::from_secs(10)).unwrap();
    let streaming_log = relay.log();
    // A fatal error (a bad option) too.
    let out = std::process::Command::new(RELAY)
        .args(stack.relay_args(&["--log-format", "json", "--slot", "Not-Valid"]))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let fatal_log = String::from_utf8_lossy(&out.stderr).into_owned();
    for log in [&streaming_log, &fatal_log] {
        let mut messages = Vec::new();
        for line in log.lines().filter(|l| !l.trim().is_empty()) {
            let object: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
            assert!(object["level"].is_string(), "{line}");
            let message = object["message"]
                .as_str()
                .unwrap_or_else(|| panic!("no top-level message: {line}"));
            messages.push(message.to_owned());
        }
        assert!(!messages.is_empty());
    }
    assert!(
        streaming_log.contains("serving /metrics"),
        "{streaming_log}"
    );
    assert!(streaming_log.contains("signal received"), "{streaming_log}");
    assert!(fatal_log.contains("Not-Valid"), "{fatal_log}");
}
