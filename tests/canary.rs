//! The end-to-end canary: a transactional logical decoding message the relay writes every
//! `--canary-interval`, relays through its own slot to its canary topic and waits for Kafka to
//! acknowledge. `/ready` turns red when the newest acknowledged canary is older than
//! `--canary-max-age` while PostgreSQL takes canaries (a stalled walsender), does not answer
//! while the relay itself is stopped, and is green again once canaries flow. Polling mode's
//! canary is a row of a canary table its polls relay.

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
