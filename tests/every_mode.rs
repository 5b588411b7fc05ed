//! One delivery path: the CDC stream and polling mode dead-letter, count and report
//! readiness the same way, because they go through the same delivery stage.

mod common;

use common::*;
use outbox_relay_testkit::http::{get as http_get, metric, metric_opt, metrics_address};
use outbox_relay_testkit::{ConsumedRecord, RelayProcess};
use std::time::{Duration, Instant};

const SLOT: &str = "outbox_relay";
const DLQ: &str = "outbox-relay.dlq";

#[derive(Clone, Copy, Debug)]
enum Mode {
    Cdc,
    Polling,
}

/// Starts the relay in `mode` with a producer that refuses records over 4 KiB.
async fn start(stack: &Stack, mode: Mode) -> RelayProcess {
    let small = ["--producer-property", "message.max.bytes=4096"];
    match mode {
        Mode::Cdc => stack.spawn_relay_and_wait_for_slot(SLOT, &small).await,
        Mode::Polling => {
            let mut args = vec!["--mode", "polling", "--poll-interval-ms", "50"];
            args.extend(small);
            stack.spawn_relay(&args)
        }
    }
}

async fn wait_relayed(stack: &Stack, mode: Mode, relay: &RelayProcess) {
    match mode {
        Mode::Cdc => {
            stack
                .wait_delivered(SLOT, Duration::from_secs(60), Some(relay))
                .await;
        }
        Mode::Polling => {
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                let left: i64 = stack
                    .db
                    .query_one("SELECT count(*) FROM outbox", &[])
                    .await
                    .unwrap()
                    .get(0);
                if left == 0 {
                    break;
                }
                assert!(Instant::now() < deadline, "not relayed:\n{}", relay.log());
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// The dead letters' headers, without the source LSN (only the stream has one), and the
/// row's created_at (each run inserts at its own time).
fn shape(r: &ConsumedRecord) -> Vec<(String, String)> {
    r.headers
        .iter()
        .filter(|(k, _)| k != "outbox-relay.source.lsn")
        .map(|(k, v)| {
            let text = String::from_utf8_lossy(v.as_deref().unwrap_or_default()).into_owned();
            if k != "outbox-relay.source.row" {
                return (k.clone(), text);
            }
            let mut row: serde_json::Map<String, serde_json::Value> =
                serde_json::from_str(&text).unwrap();
            row.shift_remove("created_at")
                .expect("the row's created_at");
            (k.clone(), serde_json::Value::Object(row).to_string())
        })
        .collect()
}

async fn refusals_in(mode: Mode) -> (Vec<ConsumedRecord>, f64, f64) {
    let stack = Stack::start().await;
    stack
        .db
        .batch_execute("ALTER TABLE outbox ALTER COLUMN aggregate_type DROP NOT NULL")
        .await
        .unwrap();
    let relay = start(&stack, mode).await;
    stack
        .db
        .batch_execute(
            "INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, created_at) VALUES
               ('00000000-0000-0000-0000-000000000001', 'Order', 'o-1', 'Big', jsonb_build_object('blob', repeat('x', 20000)), now()),
               ('00000000-0000-0000-0000-000000000002', NULL, 'o-2', 'Unroutable', '{}', now() + interval '1 ms'),
               ('00000000-0000-0000-0000-000000000003', 'Order', 'o-1', 'Small', '{}', now() + interval '2 ms');",
        )
        .await
        .unwrap();
    wait_relayed(&stack, mode, &relay).await;
    let orders = stack.read_topic("Order.events").await;
    assert_eq!(orders.len(), 1, "{mode:?}: the small event arrives");
    let dead = stack.read_topic(DLQ).await;
    let address = metrics_address(&relay);
    // Counts are taken on acknowledgement: poll until the scrape shows them.
    let deadline = Instant::now() + Duration::from_secs(10);
    let (dead_letters, events) = loop {
        let body = http_get(&address, "/metrics").1;
        let counted = (
            metric(&body, "outbox_relay_dead_letters_total"),
            metric_opt(&body, "outbox_relay_events_total{topic=\"Order.events\"}").unwrap_or(0.0),
        );
        if counted == (2.0, 1.0) || Instant::now() > deadline {
            // One of each reason: the oversized event (refused), the NULL routing value (unroutable).
            for reason in ["refused", "unroutable"] {
                let query = format!("outbox_relay_dead_letters_total{{reason=\"{reason}\"}}");
                assert_eq!(metric(&body, &query), 1.0, "{mode:?}: {query}");
            }
            break counted;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    (dead, dead_letters, events)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_and_polling_dead_letter_and_count_refusals_alike() {
    let (cdc, cdc_dead, cdc_events) = refusals_in(Mode::Cdc).await;
    let (polling, polling_dead, polling_events) = refusals_in(Mode::Polling).await;
    for (mode, dead) in [("cdc", &cdc), ("polling", &polling)] {
        assert_eq!(dead.len(), 2, "{mode}: {dead:?}");
        assert_eq!(
            dead[0].header_str("id"),
            "00000000-0000-0000-0000-000000000001"
        );
        assert!(dead[0]
            .header_str("outbox-relay.error.reason")
            .contains("message.max.bytes"));
        assert_eq!(dead[0].header_str("outbox-relay.original.size"), "20012");
        assert_eq!(
            dead[0].value, None,
            "{mode}: the refused payload is left out"
        );
        assert_eq!(
            dead[1].header_str("id"),
            "00000000-0000-0000-0000-000000000002"
        );
        assert!(dead[1]
            .header_str("outbox-relay.error.reason")
            .contains("NULL"));
    }
    assert!(cdc[0].header("outbox-relay.source.lsn").is_some());
    assert!(
        polling[0].header("outbox-relay.source.lsn").is_none(),
        "rows read with SQL have no WAL position"
    );
    assert_eq!(
        cdc.iter().map(shape).collect::<Vec<_>>(),
        polling.iter().map(shape).collect::<Vec<_>>(),
        "the same dead letters in both modes"
    );
    assert_eq!((cdc_dead, cdc_events), (2.0, 1.0), "cdc counts");
    assert_eq!((polling_dead, polling_events), (2.0, 1.0), "polling counts");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_mode_is_ready_once_it_polls_and_the_broker_answers() {
    let stack = Stack::start().await;
    let relay = start(&stack, Mode::Polling).await;
    let address = metrics_address(&relay);
    let deadline = Instant::now() + Duration::from_secs(30);
    while http_get(&address, "/ready").0 != 200 {
        assert!(
            Instant::now() < deadline,
            "/ready never answered 200 in polling mode:\n{}",
            relay.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let body = http_get(&address, "/metrics").1;
    assert_eq!(metric(&body, "outbox_relay_active"), 1.0);
    assert_eq!(metric(&body, "outbox_relay_streaming"), 1.0);
    // The broker goes away: not ready any more.
    let mut broker = stack.broker;
    broker.stop();
    let deadline = Instant::now() + Duration::from_secs(30);
    while http_get(&address, "/ready").0 != 503 {
        assert!(
            Instant::now() < deadline,
            "/ready stayed 200 without a broker"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
