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
        // Only the stream has a source LSN; only polling keeps refused rows in a table.
        .filter(|(k, _)| k != "outbox-relay.source.lsn" && k != "outbox-relay.row.kept")
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

/// How a relay runs in [`an_event_kafka_cannot_take_whole_survives_and_replays_whole`].
#[derive(Clone, Copy, Debug, PartialEq)]
enum Shape {
    Cdc,
    CdcCleanup,
    ExactlyOnce,
    Polling,
    PollingProcessedCleanup,
}

impl Shape {
    fn args(self) -> Vec<&'static str> {
        match self {
            Shape::Cdc => vec![],
            Shape::CdcCleanup => vec!["--cleanup", "--cleanup-interval", "1"],
            Shape::ExactlyOnce => vec!["--exactly-once"],
            Shape::Polling => vec!["--mode", "polling", "--poll-interval-ms", "50"],
            Shape::PollingProcessedCleanup => vec![
                "--mode",
                "polling",
                "--poll-interval-ms",
                "50",
                "--processed-column",
                "processed_at",
                "--cleanup",
                "--cleanup-interval",
                "1",
            ],
        }
    }

    fn polls(self) -> bool {
        matches!(self, Shape::Polling | Shape::PollingProcessedCleanup)
    }
}

const TOO_BIG_FOR_THE_CLIENT: &str = "00000000-0000-0000-0000-0000000000a1";
const TOO_BIG_FOR_THE_TOPIC: &str = "00000000-0000-0000-0000-0000000000b2";

/// `outbox-relay dead-letters <command> --json` with `run`'s settings: exit code, stdout, stderr.
fn dead_letters_json(
    stack: &Stack,
    command: &str,
    extra: &[&str],
) -> (Option<i32>, String, String) {
    let mut extra = extra.to_vec();
    extra.push("--json");
    stack.command(&["dead-letters", command], &extra)
}

/// Runs the relay shaped `shape` until `ids` left the outbox's pending rows (polling) or the
/// slot passed them (CDC).
async fn relay_until_handled(
    stack: &Stack,
    shape: Shape,
    extra: &[&str],
    insert: &str,
) -> RelayProcess {
    let mut args = shape.args();
    args.extend(extra);
    let relay = if shape.polls() {
        stack.spawn_relay(&args)
    } else {
        stack.spawn_relay_and_wait_for_slot(SLOT, &args).await
    };
    stack.db.batch_execute(insert).await.unwrap();
    if shape.polls() {
        let pending = if shape == Shape::Polling {
            "SELECT count(*) FROM outbox"
        } else {
            "SELECT count(*) FROM outbox WHERE processed_at IS NULL"
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left: i64 = stack.db.query_one(pending, &[]).await.unwrap().get(0);
            if left == 0 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{shape:?}: not relayed:\n{}",
                relay.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    } else {
        stack
            .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
            .await;
    }
    relay
}

/// An event Kafka refuses for good for its size, once for the client's `message.max.bytes`
/// and once for its topic's `max.message.bytes`: its dead letter keeps only its size, and its
/// whole row survives where a person gets it back (the outbox row in CDC, which `--cleanup`
/// leaves; polling's dead-letter table, written in the transaction that retires the row).
/// `dead-letters list` says where, and `replay`, once the limits allow it, sends each event
/// whole to its topic, once.
async fn an_event_kafka_cannot_take_whole_survives_and_replays_whole(shape: Shape) {
    let stack = Stack::start().await;
    if shape == Shape::PollingProcessedCleanup {
        stack
            .db
            .batch_execute("ALTER TABLE outbox ADD COLUMN processed_at timestamptz")
            .await
            .unwrap();
    }
    let bootstrap = stack.broker.bootstrap_servers();
    outbox_relay_testkit::kafka::create_topic_with_configs(
        &bootstrap,
        "Capped.events",
        1,
        &[("max.message.bytes", "16384")],
    )
    .await
    .unwrap();
    let row = |id: &str, kind: &str, blob: usize| {
        format!(
            "INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload) VALUES \
             ('{id}', '{kind}', '{kind}-1', 'Big', jsonb_build_object('blob', repeat('x', {blob})));"
        )
    };
    let small = |n: u32, kind: &str| {
        format!(
            "INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload) VALUES \
             ('00000000-0000-0000-0000-00000000000{n}', '{kind}', '{kind}-1', 'Small', '{{}}');"
        )
    };
    // The client's limit, then the topic's.
    drop(
        relay_until_handled(
            &stack,
            shape,
            &["--producer-property", "message.max.bytes=4096"],
            &format!(
                "{}{}",
                row(TOO_BIG_FOR_THE_CLIENT, "Order", 20_000),
                small(1, "Order")
            ),
        )
        .await,
    );
    // Runs on while the cleaner, if any, deletes what it may.
    let relay = relay_until_handled(
        &stack,
        shape,
        &[],
        &format!(
            "{}{}",
            row(TOO_BIG_FOR_THE_TOPIC, "Capped", 30_000),
            small(2, "Capped")
        ),
    )
    .await;
    let dead = stack.read_topic(DLQ).await;
    assert_eq!(dead.len(), 2, "{shape:?}: {dead:?}");
    for (letter, id) in dead
        .iter()
        .zip([TOO_BIG_FOR_THE_CLIENT, TOO_BIG_FOR_THE_TOPIC])
    {
        assert_eq!(letter.header_str("id"), id, "{shape:?}");
        assert!(
            letter.header("outbox-relay.original.size").is_some(),
            "{shape:?}"
        );
        assert_eq!(
            letter.value, None,
            "{shape:?}: the refused payload is not in the letter"
        );
    }

    // Where the whole events are.
    let in_outbox = |ids: &[&str]| {
        format!(
            "SELECT count(*) FROM outbox WHERE id::text IN ({})",
            ids.iter()
                .map(|i| format!("'{i}'"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let big = [TOO_BIG_FOR_THE_CLIENT, TOO_BIG_FOR_THE_TOPIC];
    let count = |sql: String| {
        let db = &stack.db;
        async move { db.query_one(&sql, &[]).await.unwrap().get::<_, i64>(0) }
    };
    if matches!(shape, Shape::CdcCleanup | Shape::PollingProcessedCleanup) {
        // The cleaner deleted the small events' rows: it had its chance at the big ones.
        let deadline = Instant::now() + Duration::from_secs(30);
        while count(in_outbox(&[
            "00000000-0000-0000-0000-000000000001",
            "00000000-0000-0000-0000-000000000002",
        ]))
        .await
            > 0
        {
            assert!(
                Instant::now() < deadline,
                "{shape:?}: --cleanup deleted nothing"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    if shape.polls() {
        assert_eq!(
            count(in_outbox(&big)).await,
            0,
            "{shape:?}: polling retired the rows"
        );
        let kept = stack
            .db
            .query(
                "SELECT event_id, source_row->>'payload' FROM outbox_relay_dead_letters ORDER BY kept_at",
                &[],
            )
            .await
            .unwrap();
        let kept: Vec<(String, usize)> = kept
            .iter()
            .map(|r| (r.get::<_, String>(0), r.get::<_, String>(1).len()))
            .collect();
        assert_eq!(
            kept,
            [
                (TOO_BIG_FOR_THE_CLIENT.to_owned(), 20_012),
                (TOO_BIG_FOR_THE_TOPIC.to_owned(), 30_012)
            ],
            "{shape:?}: the whole rows are kept"
        );
        for letter in &dead {
            assert!(
                letter
                    .header_str("outbox-relay.row.kept")
                    .starts_with("public.outbox_relay_dead_letters/"),
                "{shape:?}"
            );
        }
    } else {
        assert_eq!(
            count(in_outbox(&big)).await,
            2,
            "{shape:?}: the rows stay in the outbox"
        );
    }
    drop(relay);

    // `list` says where each whole event is.
    let mode: Vec<&str> = shape
        .args()
        .into_iter()
        .take_while(|a| *a != "--cleanup")
        .collect();
    let (code, out, err) = dead_letters_json(&stack, "list", &mode);
    assert_eq!(code, Some(0), "{err}");
    for line in out.lines() {
        let letter: serde_json::Value = serde_json::from_str(line).unwrap();
        let whole = letter["whole_event"].as_str().unwrap();
        let expected = if shape.polls() {
            "public.outbox_relay_dead_letters/"
        } else {
            "public.outbox"
        };
        assert!(whole.starts_with(expected), "{shape:?}: {line}");
    }

    // Once the limits allow it (no client limit now; the topic's raised), each event goes to
    // its topic whole, once.
    outbox_relay_testkit::kafka::alter_topic_configs(
        &bootstrap,
        "Capped.events",
        &[("max.message.bytes", "1048576")],
    )
    .await
    .unwrap();
    let (code, out, err) = dead_letters_json(&stack, "replay", &mode);
    assert_eq!(code, Some(0), "{shape:?}: {out}\n{err}");
    let summary: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(summary["summary"]["replayed"], 2, "{shape:?}: {out}\n{err}");
    for (topic, id, blob) in [
        ("Order.events", TOO_BIG_FOR_THE_CLIENT, 20_000),
        ("Capped.events", TOO_BIG_FOR_THE_TOPIC, 30_000),
    ] {
        let deadline = Instant::now() + Duration::from_secs(15);
        let event = loop {
            let records = stack.read_topic(topic).await;
            if let Some(r) = records.into_iter().find(|r| r.header_str("id") == id) {
                break r;
            }
            assert!(
                Instant::now() < deadline,
                "{shape:?}: {id} not replayed to {topic}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let value: serde_json::Value =
            serde_json::from_slice(event.value.as_deref().unwrap()).unwrap();
        assert_eq!(
            value["blob"].as_str().map(str::len),
            Some(blob),
            "{shape:?}: whole"
        );
        assert_eq!(
            event.header_str("eventType"),
            "Big",
            "{shape:?}: its headers too"
        );
    }
    let (code, out, _) = dead_letters_json(&stack, "replay", &mode);
    assert_eq!(code, Some(0));
    let summary: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(summary["summary"]["replayed"], 0, "{shape:?}: once: {out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_kafka_cannot_take_whole_survives_in_cdc() {
    an_event_kafka_cannot_take_whole_survives_and_replays_whole(Shape::Cdc).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_kafka_cannot_take_whole_survives_in_cdc_with_cleanup() {
    an_event_kafka_cannot_take_whole_survives_and_replays_whole(Shape::CdcCleanup).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_kafka_cannot_take_whole_survives_with_exactly_once() {
    an_event_kafka_cannot_take_whole_survives_and_replays_whole(Shape::ExactlyOnce).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_kafka_cannot_take_whole_survives_in_polling() {
    an_event_kafka_cannot_take_whole_survives_and_replays_whole(Shape::Polling).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_kafka_cannot_take_whole_survives_in_polling_with_a_processed_column_and_cleanup()
{
    an_event_kafka_cannot_take_whole_survives_and_replays_whole(Shape::PollingProcessedCleanup)
        .await;
}

/// Polling as a role that can neither make nor write `outbox_relay_dead_letters`: the relay
/// does not start (an event Kafka refuses for good would have nowhere to survive), says what
/// to create, and the outbox is left as it is. Once the table exists, a refused event's row
/// is kept there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_without_a_dead_letter_table_does_not_start_and_says_what_to_create() {
    let stack = Stack::start().await;
    stack
        .db
        .batch_execute(
            "CREATE ROLE poller LOGIN PASSWORD 'poller-secret'; \
             REVOKE CREATE ON SCHEMA public FROM PUBLIC; \
             GRANT USAGE ON SCHEMA public TO poller; GRANT SELECT, UPDATE, DELETE ON outbox TO poller;",
        )
        .await
        .unwrap();
    let url = stack.pg.url_for("poller", "poller-secret", "postgres");
    let args = [
        "--mode",
        "polling",
        "--poll-interval-ms",
        "50",
        "--canary-interval",
        "0",
        "--producer-property",
        "message.max.bytes=4096",
    ];
    stack
        .db
        .batch_execute(&format!(
            "INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload) VALUES \
             ('{TOO_BIG_FOR_THE_CLIENT}', 'Order', 'o-1', 'Big', jsonb_build_object('blob', repeat('x', 20000)));"
        ))
        .await
        .unwrap();
    let mut relay = stack.spawn_relay_as(&url, &args, &[]);
    let status = relay
        .wait_timeout(Duration::from_secs(60))
        .unwrap()
        .unwrap_or_else(|| panic!("the relay kept running:\n{}", relay.log()));
    let log = relay.log();
    assert!(!status.success(), "{log}");
    assert!(
        log.contains("polling mode keeps the whole row")
            && log.contains("CREATE TABLE IF NOT EXISTS \"public\".\"outbox_relay_dead_letters\""),
        "{log}"
    );
    let left: i64 = stack
        .db
        .query_one("SELECT count(*) FROM outbox", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 1, "the outbox is left as it is");
    assert!(
        !stack.topics().await.iter().any(|t| t == DLQ),
        "nothing was dead-lettered"
    );

    // The DBA makes the table; the next relay keeps the row there and retires it.
    stack
        .db
        .batch_execute(
            "CREATE TABLE public.outbox_relay_dead_letters (id uuid PRIMARY KEY, source_table text NOT NULL, \
             event_id text, reason text NOT NULL, original_topic text, original_size bigint, source_row json NOT NULL, \
             kept_at timestamptz NOT NULL DEFAULT now()); \
             GRANT SELECT, INSERT, UPDATE ON public.outbox_relay_dead_letters TO poller;",
        )
        .await
        .unwrap();
    let relay = stack.spawn_relay_as(&url, &args, &[]);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let kept: i64 = stack
            .db
            .query_one(
                "SELECT count(*) FROM outbox_relay_dead_letters WHERE event_id = $1",
                &[&TOO_BIG_FOR_THE_CLIENT],
            )
            .await
            .unwrap()
            .get(0);
        if kept == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "not kept:\n{}", relay.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let left: i64 = stack
        .db
        .query_one("SELECT count(*) FROM outbox", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0);
}
