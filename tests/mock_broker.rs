//! Produce errors the real broker cannot show on demand, injected with librdkafka's mock
//! cluster (the relay binary talks to it over loopback TCP like to any broker). The same
//! behaviours are proven on the real broker elsewhere: the dead-letter path in
//! tests/bad_rows.rs, retries across an outage in tests/core_path.rs.

mod common;

use common::*;
use outbox_relay_testkit::{Lsn, PgCluster};
use rdkafka::mocking::MockCluster;
use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
use std::sync::mpsc;
use std::time::Duration;

const SLOT: &str = "outbox_relay";

type Command =
    Box<dyn FnOnce(&MockCluster<'static, rdkafka::producer::DefaultProducerContext>) + Send>;

/// The mock cluster is !Send: it lives on its own thread, driven by commands.
struct Mock {
    bootstrap: String,
    commands: mpsc::Sender<Command>,
}

impl Mock {
    fn start() -> Mock {
        let (tx, rx) = mpsc::channel::<Command>();
        let (boot_tx, boot_rx) = mpsc::channel();
        std::thread::spawn(move || {
            let cluster = MockCluster::new(1).expect("librdkafka mock cluster");
            for topic in ["Order.events", "outbox-relay.dlq"] {
                cluster.create_topic(topic, 1, 1).unwrap();
            }
            boot_tx.send(cluster.bootstrap_servers()).unwrap();
            while let Ok(command) = rx.recv() {
                command(&cluster);
            }
        });
        Mock {
            bootstrap: boot_rx.recv().unwrap(),
            commands: tx,
        }
    }

    fn produce_errors(&self, errors: Vec<RDKafkaRespErr>) {
        self.commands
            .send(Box::new(move |c| {
                c.request_errors(RDKafkaApiKey::Produce, &errors)
            }))
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_refusals_are_dead_lettered_transient_errors_retried_and_a_refused_dead_letter_stops_the_relay_confirming_nothing(
) {
    let mock = Mock::start();
    let pg = PgCluster::start()
        .unwrap_or_else(|e| panic!("cannot start PostgreSQL for this test: {e:#}"));
    let db = pg.connect().await.unwrap();
    db.batch_execute(OUTBOX_DDL).await.unwrap();
    let args: Vec<String> = [
        "run",
        "--postgres-url",
        &pg.url(),
        "--bootstrap-servers",
        &mock.bootstrap,
        "--status-interval-ms",
        "100",
        "--metrics-address",
        "127.0.0.1:0",
        // The errors below are injected into the next produce requests, in order: a canary's
        // request in between would take one (and the mock has no canary topic).
        "--canary-interval",
        "0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut relay =
        outbox_relay_testkit::RelayProcess::spawn(std::path::Path::new(RELAY), &args, &[]).unwrap();
    outbox_relay_testkit::wait_confirmed(
        &db,
        SLOT,
        Lsn::from_u64(1),
        Duration::from_secs(60),
        || relay.log(),
    )
    .await;
    let insert = |n: u64| {
        format!(
            "INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload) VALUES ('{}', 'Order', 'o-1', 'E{n}', '{{\"n\": {n}}}')",
            event_uuid(n)
        )
    };
    // The broker refuses the record itself: a data error, dead-lettered, the stream goes on.
    mock.produce_errors(vec![RDKafkaRespErr::RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE]);
    db.batch_execute(&insert(1)).await.unwrap();
    outbox_relay_testkit::wait_delivered(&db, SLOT, Duration::from_secs(60), || relay.log()).await;

    // Transient errors: retried by the idempotent producer, delivered once, not dead-lettered.
    mock.produce_errors(vec![
        RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
        RDKafkaRespErr::RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT,
        RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS,
    ]);
    db.batch_execute(&insert(2)).await.unwrap();
    let before_third =
        outbox_relay_testkit::wait_delivered(&db, SLOT, Duration::from_secs(60), || relay.log())
            .await;

    // The event is refused and so is its (payload-less) dead letter: retrying cannot help,
    // so the relay stops with the cause instead of looping, and confirms nothing past it.
    mock.produce_errors(vec![
        RDKafkaRespErr::RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE,
        RDKafkaRespErr::RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE,
    ]);
    db.batch_execute(&insert(3)).await.unwrap();
    let after_third = outbox_relay_testkit::current_wal_lsn(&db).await;
    let status = relay
        .wait_timeout(Duration::from_secs(60))
        .unwrap()
        .unwrap_or_else(|| panic!("the relay kept running:\n{}", relay.log()));
    assert!(!status.success(), "{}", relay.log());
    assert!(
        relay
            .log()
            .contains("dead-letter topic outbox-relay.dlq refused the dead letter"),
        "{}",
        relay.log()
    );
    let confirmed = outbox_relay_testkit::confirmed_flush_lsn(&db, SLOT)
        .await
        .unwrap();
    assert!(
        confirmed >= before_third && confirmed < after_third,
        "nothing past the refused event is confirmed ({confirmed} vs {after_third})"
    );
    // Restarted (the broker accepts the record now), the relay sends the event again.
    let relay =
        outbox_relay_testkit::RelayProcess::spawn(std::path::Path::new(RELAY), &args, &[]).unwrap();
    outbox_relay_testkit::wait_delivered(&db, SLOT, Duration::from_secs(60), || relay.log()).await;

    let bootstrap = mock.bootstrap.clone();
    let (events, dead) = tokio::task::spawn_blocking(move || {
        (
            outbox_relay_testkit::read_topic(&bootstrap, "Order.events").unwrap(),
            outbox_relay_testkit::read_topic(&bootstrap, "outbox-relay.dlq").unwrap(),
        )
    })
    .await
    .unwrap();
    let names: Vec<&[u8]> = events
        .iter()
        .map(|r| r.header("eventType").unwrap())
        .collect();
    assert_eq!(
        names,
        [&b"E2"[..], &b"E3"[..]],
        "the retried event arrives once, the event whose dead letter was refused is re-sent after the restart; relay log:\n{}",
        relay.log()
    );
    assert_eq!(dead.len(), 1, "relay log:\n{}", relay.log());
    assert_eq!(dead[0].header("id"), Some(event_uuid(1).as_bytes()));
    let reason = String::from_utf8(
        dead[0]
            .header("outbox-relay.error.reason")
            .unwrap()
            .to_vec(),
    )
    .unwrap();
    assert!(
        reason.contains("refused") && reason.contains("too large"),
        "{reason}"
    );
}
