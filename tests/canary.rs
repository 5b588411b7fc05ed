//! The end-to-end canary: a row of the canary table (or, asked for by name, a logical decoding
//! message) the relay writes every `--canary-interval`, relays through its own slot to its
//! canary topic and waits for Kafka to acknowledge. `/ready` turns red when the newest
//! acknowledged canary is older than `--canary-max-age` while PostgreSQL takes canaries (a
//! stalled walsender), does not answer while the relay itself is stopped, and is green again
//! once canaries flow. Polling mode's canary is a row of the canary table its polls relay.
//!
//! The default canary is invisible to the database's other logical decoding consumers: another
//! team's Debezium connector, whose chain fails on any record but its own table's, runs beside
//! the relay and delivers exactly its own events.

mod common;

use common::*;
use outbox_relay_testkit::http::{metric, metrics_address};
use std::time::{Duration, Instant};

const SLOT: &str = "outbox_relay";

/// `GET path` that gives up after `within` (a stopped process never answers): the status,
/// or `None`.
fn probe(address: &str, path: &str, within: Duration) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect_timeout(&address.parse().ok()?, within).ok()?;
    stream.set_read_timeout(Some(within)).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: relay\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Some((status, body))
}

/// Waits until /ready answers `want` (`None`: does not answer); returns how long it took.
async fn wait_ready(address: &str, want: Option<u16>, timeout: Duration, what: &str) -> Duration {
    let started = Instant::now();
    loop {
        let got = probe(address, "/ready", Duration::from_secs(1));
        if got.as_ref().map(|(s, _)| *s) == want {
            return started.elapsed();
        }
        assert!(started.elapsed() < timeout, "{what}: /ready still {got:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until Kafka acknowledged 3 canaries; the metrics then.
async fn wait_for_canaries(address: &str, relay: &outbox_relay_testkit::RelayProcess) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let body = probe(address, "/metrics", Duration::from_secs(2))
            .unwrap()
            .1;
        if metric(&body, "outbox_relay_canaries_total") >= 3.0 {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "no canary acknowledged:\n{body}\n{}",
            relay.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn signal(pid: u32, name: &str) {
    let status = std::process::Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -{name} {pid}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_canary_turns_ready_red_when_anything_on_its_way_stalls() {
    let stack = Stack::start().await;
    let relay = stack
        .spawn_relay_and_wait_for_slot(
            SLOT,
            &[
                "--canary-interval",
                "1",
                "--canary-max-age",
                "5",
                "--canary-read-back",
                "--canary-method",
                "message",
            ],
        )
        .await;
    let address = metrics_address(&relay);
    wait_ready(&address, Some(200), Duration::from_secs(30), "at start").await;
    // Canaries flow: acknowledged, young, on their own topic, never on a business topic.
    let body = wait_for_canaries(&address, &relay).await;
    assert!(
        metric(&body, "outbox_relay_canary_age_seconds") < 5.0,
        "{body}"
    );
    // --canary-read-back: a consumer reads them back from the canary topic too; the green
    // /ready after the stalls below needs canaries read back within 5 s.
    assert!(
        body.contains("outbox_relay_canary_read_age_seconds"),
        "{body}"
    );
    insert_events(&stack.db, 0, 40, 10, 10).await.unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;
    let canaries = stack.read_topic("outbox-relay.canary").await;
    assert!(canaries.len() >= 3, "{}", canaries.len());
    assert!(canaries.iter().all(|c| c.key_str() == Some(SLOT)));
    let (lost, duplicated) = lost_and_duplicated(&stack, 40).await;
    assert_eq!(
        (lost, duplicated),
        (0, 0),
        "the business topics hold the events only"
    );

    // A stalled walsender: PostgreSQL still takes canaries, none comes back.
    let walsender: i32 = stack
        .db
        .query_one(
            "SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1",
            &[&SLOT],
        )
        .await
        .unwrap()
        .get(0);
    signal(walsender as u32, "STOP");
    let red = wait_ready(
        &address,
        Some(503),
        Duration::from_secs(20),
        "walsender stopped",
    )
    .await;
    let (_, body) = probe(&address, "/ready", Duration::from_secs(1)).unwrap();
    assert!(body.contains("canary"), "{body}");
    eprintln!("walsender stopped: /ready red after {red:?}");
    signal(walsender as u32, "CONT");
    let green = wait_ready(
        &address,
        Some(200),
        Duration::from_secs(30),
        "walsender resumed",
    )
    .await;
    eprintln!("walsender resumed: /ready green after {green:?}");

    // The relay itself stopped: /ready does not answer (a probe fails); resumed, it is green
    // again once a canary has made the whole way.
    signal(relay.pid(), "STOP");
    assert!(probe(&address, "/ready", Duration::from_secs(2)).is_none());
    tokio::time::sleep(Duration::from_secs(6)).await;
    signal(relay.pid(), "CONT");
    let green = wait_ready(
        &address,
        Some(200),
        Duration::from_secs(30),
        "relay resumed",
    )
    .await;
    eprintln!("relay resumed: /ready green after {green:?}");
    assert!(!relay.log().contains("panicked"), "{}", relay.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_mode_relays_a_canary_row_and_a_stalled_poll_turns_ready_red() {
    let stack = Stack::start().await;
    let relay = stack.spawn_relay(&[
        "--mode",
        "polling",
        "--poll-interval-ms",
        "100",
        "--canary-interval",
        "1",
        "--canary-max-age",
        "5",
    ]);
    let address = metrics_address(&relay);
    wait_ready(&address, Some(200), Duration::from_secs(30), "at start").await;
    wait_for_canaries(&address, &relay).await;
    insert_events(&stack.db, 0, 40, 10, 10).await.unwrap();
    let canaries = stack.read_topic("outbox-relay.canary").await;
    assert!(canaries.len() >= 3, "{}", canaries.len());
    let name = canaries[0].key_str().unwrap().to_owned();
    assert!(name.ends_with(&format!(":{}", relay.pid())), "{name}");

    // The polls stall (the outbox locked by another session); PostgreSQL still takes canary rows.
    let locker = stack.pg.connect().await.unwrap();
    locker
        .batch_execute("BEGIN; LOCK TABLE outbox IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    let red = wait_ready(
        &address,
        Some(503),
        Duration::from_secs(20),
        "polls stalled",
    )
    .await;
    let (_, body) = probe(&address, "/ready", Duration::from_secs(1)).unwrap();
    assert!(body.contains("canary"), "{body}");
    eprintln!("polling stalled: /ready red after {red:?}");
    locker.batch_execute("ROLLBACK").await.unwrap();
    wait_ready(
        &address,
        Some(200),
        Duration::from_secs(30),
        "polls resumed",
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while lost_and_duplicated(&stack, 40).await.0 > 0 {
        assert!(Instant::now() < deadline, "{}", relay.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Another team's Debezium connector captures its own table of the same database, with
/// Debezium's default publication (FOR ALL TABLES, so it carries the relay's canary table too)
/// and a chain that fails on any record that is not a change event of a row:
/// `ExtractField$Value` of `after`. Beside a relay with default settings, for longer than three
/// canary intervals, it delivers exactly its own events and its task keeps running. A relay
/// then asked for the logical-message canary stops that same connector at its first canary,
/// which is what the default avoids.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_teams_debezium_connector_runs_beside_the_default_canary() {
    use outbox_relay_testkit::debezium::ConnectStandalone;
    let stack = Stack::start().await;
    stack
        .db
        .batch_execute("CREATE TABLE public.shipments (id int PRIMARY KEY, note text NOT NULL)")
        .await
        .unwrap();
    let relay = stack.spawn_relay_and_wait_for_slot(SLOT, &[]).await;
    let address = metrics_address(&relay);

    let worker = format!(
        "bootstrap.servers={}\n\
         key.converter=org.apache.kafka.connect.json.JsonConverter\n\
         key.converter.schemas.enable=false\n\
         value.converter=org.apache.kafka.connect.json.JsonConverter\n\
         value.converter.schemas.enable=false\n",
        stack.broker.bootstrap_servers()
    );
    let neighbour = serde_json::json!({
        "name": "shipments",
        "config": {
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "tasks.max": "1",
            "database.hostname": "127.0.0.1",
            "database.port": stack.pg.port().to_string(),
            "database.user": "postgres",
            "database.password": "postgres",
            "database.dbname": "postgres",
            "plugin.name": "pgoutput",
            "slot.name": "shipments",
            "snapshot.mode": "no_data",
            "topic.prefix": "logistics",
            "table.include.list": "public.shipments",
            "topic.creation.default.replication.factor": "1",
            "topic.creation.default.partitions": "1",
            "transforms": "after",
            "transforms.after.type": "org.apache.kafka.connect.transforms.ExtractField$Value",
            "transforms.after.field": "after",
        }
    });
    let mut debezium = ConnectStandalone::start(&worker, &[neighbour])
        .unwrap_or_else(|e| panic!("Debezium: {e:#}"));
    let failed = tokio::task::block_in_place(|| {
        debezium.wait_running(&["shipments".to_owned()], Duration::from_secs(180))
    })
    .unwrap_or_else(|e| panic!("{e:#}"));
    assert!(failed.is_empty(), "Debezium failed at start: {failed:?}");
    // Streaming: its slot is held (what commits from now on is its own to deliver).
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let active: Option<bool> = stack
            .db
            .query_opt(
                "SELECT active FROM pg_replication_slots WHERE slot_name = 'shipments'",
                &[],
            )
            .await
            .unwrap()
            .map(|r| r.get(0));
        if active == Some(true) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Debezium never streamed:\n{}",
            debezium.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let canaries_before = metric(
        &probe(&address, "/metrics", Duration::from_secs(2))
            .unwrap()
            .1,
        "outbox_relay_canaries_total",
    );

    // 30 shipments and 30 outbox events in three rounds, 12 s apart: more than three of the
    // relay's canaries (every 10 s by default) are written in between.
    let started = Instant::now();
    for round in 0..3u64 {
        for n in round * 10..round * 10 + 10 {
            stack
                .db
                .execute(
                    "INSERT INTO public.shipments (id, note) VALUES ($1, 'shipped')",
                    &[&(n as i32)],
                )
                .await
                .unwrap();
        }
        insert_events(&stack.db, round * 10, 10, 10, 10)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_secs(12)).await;
    }
    assert!(started.elapsed() >= Duration::from_secs(35));
    let body = probe(&address, "/metrics", Duration::from_secs(2))
        .unwrap()
        .1;
    let canaries = metric(&body, "outbox_relay_canaries_total") - canaries_before;
    assert!(
        canaries >= 3.0,
        "the relay's canaries ran meanwhile: {canaries} acknowledged\n{}",
        relay.log()
    );
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;
    assert_eq!(lost_and_duplicated(&stack, 30).await, (0, 0));

    // The neighbour: running, and exactly its own 30 events.
    let state = tokio::task::block_in_place(|| debezium.task_state("shipments"));
    assert!(
        matches!(&state, Some((s, _)) if s == "RUNNING"),
        "Debezium's task beside the default canary: {state:?}\n{}",
        debezium.log()
    );
    let topic = "logistics.public.shipments";
    let deadline = Instant::now() + Duration::from_secs(60);
    let ids = loop {
        let records = stack.read_topic(topic).await;
        let ids: Vec<i64> = records
            .iter()
            .map(|r| {
                let value: serde_json::Value =
                    serde_json::from_slice(r.value.as_deref().unwrap_or(b"null")).unwrap();
                assert_eq!(
                    value["note"], "shipped",
                    "a foreign record in {topic}: {value}"
                );
                value["id"].as_i64().unwrap()
            })
            .collect();
        if ids.len() >= 30 || Instant::now() > deadline {
            break ids;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(ids, (0..30).collect::<Vec<i64>>(), "{}", debezium.log());
    let foreign: Vec<String> = stack
        .topics()
        .await
        .into_iter()
        .filter(|t| t.starts_with("logistics") && t != topic)
        .collect();
    assert!(foreign.is_empty(), "Debezium wrote {foreign:?}");

    // What the default avoids: the logical-message canary reaches every consumer of the
    // database, and this connector fails on the first one.
    drop(relay);
    let relay = stack.spawn_relay(&["--canary-method", "message", "--canary-interval", "1"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let state = tokio::task::block_in_place(|| debezium.task_state("shipments"));
        if matches!(&state, Some((s, _)) if s == "FAILED") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Debezium's task kept running beside message canaries: {state:?}\nrelay:\n{}",
            relay.log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Where the canary table cannot be published (a DBA's publication, which the relay may not
/// change: `publication.autocreate.mode=disabled`), the canary is off: one warning says why
/// and what to run, /ready stays green and the events flow. Once the DBA runs it, a restarted
/// relay's canaries flow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canary_table_the_publication_does_not_carry_turns_the_canary_off_with_one_warning() {
    let stack = Stack::start().await;
    stack
        .db
        .batch_execute("CREATE PUBLICATION dba_pub FOR TABLE public.outbox")
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let connector = outbox_connector(
        dir.path(),
        SLOT,
        &[
            ("publication.name", "dba_pub"),
            ("publication.autocreate.mode", "disabled"),
        ],
    );
    let args = [
        "--debezium-config",
        connector.as_str(),
        "--canary-interval",
        "1",
        "--canary-max-age",
        "3",
    ];
    let relay = stack.spawn_relay_and_wait_for_slot(SLOT, &args).await;
    let address = metrics_address(&relay);
    insert_events(&stack.db, 0, 20, 10, 5).await.unwrap();
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;
    // Longer than --canary-max-age: an absent canary does not turn /ready red.
    tokio::time::sleep(Duration::from_secs(5)).await;
    wait_ready(&address, Some(200), Duration::from_secs(10), "canary off").await;
    let log = relay.log();
    let warnings: Vec<&str> = log.lines().filter(|l| l.contains("no canary")).collect();
    assert_eq!(warnings.len(), 1, "{log}");
    assert!(
        warnings[0]
            .contains(r#"ALTER PUBLICATION "dba_pub" ADD TABLE "public"."outbox_relay_canaries""#),
        "{log}"
    );
    let body = probe(&address, "/metrics", Duration::from_secs(2))
        .unwrap()
        .1;
    assert_eq!(metric(&body, "outbox_relay_canaries_total"), 0.0, "{body}");
    assert_eq!(lost_and_duplicated(&stack, 20).await, (0, 0));
    // The publication is untouched.
    let tables: i64 = stack
        .db
        .query_one(
            "SELECT count(*) FROM pg_publication_tables WHERE pubname = 'dba_pub'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(tables, 1);

    // The DBA runs what the warning says; the next relay's canaries flow.
    drop(relay);
    stack
        .db
        .batch_execute("ALTER PUBLICATION dba_pub ADD TABLE public.outbox_relay_canaries")
        .await
        .unwrap();
    let relay = stack.spawn_relay_and_wait_for_slot(SLOT, &args).await;
    wait_for_canaries(&metrics_address(&relay), &relay).await;
    assert!(!relay.log().contains("no canary"), "{}", relay.log());
}
