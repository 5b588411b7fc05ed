//! The other half of the outbox pattern: a consumer that applies every event exactly once
//! although Kafka delivers at least once (the relay, like Debezium, may repeat events after
//! a crash, and an offset reset replays everything).
//!
//! For each record, in ONE PostgreSQL transaction: insert the event id (header `id`) into
//! `processed_events` — a duplicate hits the primary key and the event is skipped — and
//! apply the business effect; commit; only then commit the Kafka offset (manual commits).
//! A crash between the two commits replays the record, which the first step then skips.
//! A tombstone (null value) deletes the aggregate. A record that keeps failing goes to a
//! dead-letter topic after `max_attempts`, and is marked processed.
//!
//! The business effect here is a small projection (`order_totals`); replace [`apply`].

use anyhow::{bail, Context, Result};
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::message::{BorrowedMessage, Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::ClientConfig;
use std::time::Duration;

pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS processed_events (
    event_id     text PRIMARY KEY,
    processed_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS order_totals (
    order_id text PRIMARY KEY,
    total    numeric NOT NULL,
    events   int NOT NULL
);";

#[derive(Debug, Clone)]
pub struct Config {
    pub bootstrap_servers: String,
    pub group_id: String,
    pub topics: Vec<String>,
    pub postgres_url: String,
    pub dead_letter_topic: String,
    pub max_attempts: u32,
    /// Stop after this long without a record (tests, batch runs); `None`: run forever.
    pub stop_when_idle: Option<Duration>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    pub applied: u64,
    pub duplicates_skipped: u64,
    pub dead_lettered: u64,
}

pub async fn run(config: &Config) -> Result<Stats> {
    let (db, connection) = tokio_postgres::connect(&config.postgres_url, tokio_postgres::NoTls)
        .await
        .context("connecting to PostgreSQL")?;
    tokio::spawn(connection);
    let mut db = db;
    db.batch_execute(SCHEMA).await?;
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", &config.bootstrap_servers)
        .set("group.id", &config.group_id)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("fetch.wait.max.ms", "50")
        .create()?;
    let topics: Vec<&str> = config.topics.iter().map(String::as_str).collect();
    consumer.subscribe(&topics)?;
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &config.bootstrap_servers)
        .set("enable.idempotence", "true")
        .create()?;
    let mut stats = Stats::default();
    loop {
        let next = match config.stop_when_idle {
            Some(idle) => match tokio::time::timeout(idle, consumer.recv()).await {
                Ok(m) => m,
                Err(_) => return Ok(stats),
            },
            None => consumer.recv().await,
        };
        let message = next?;
        handle(&mut db, &producer, config, &message, &mut stats).await?;
        // Only after the database commit: a crash before this line replays the record,
        // and processed_events makes the replay a no-op.
        consumer.commit_message(&message, CommitMode::Sync)?;
    }
}

async fn handle(
    db: &mut tokio_postgres::Client,
    producer: &FutureProducer,
    config: &Config,
    message: &BorrowedMessage<'_>,
    stats: &mut Stats,
) -> Result<()> {
    let Some(event_id) = header(message, "id") else {
        bail!(
            "record at {}[{}]@{} has no id header",
            message.topic(),
            message.partition(),
            message.offset()
        );
    };
    let mut last_error = None;
    for _ in 0..config.max_attempts {
        let tx = db.transaction().await?;
        let inserted = tx
            .execute(
                "INSERT INTO processed_events (event_id) VALUES ($1) ON CONFLICT DO NOTHING",
                &[&event_id],
            )
            .await?;
        if inserted == 0 {
            tx.rollback().await?;
            stats.duplicates_skipped += 1;
            return Ok(());
        }
        match apply(&tx, message).await {
            Ok(()) => {
                tx.commit().await?;
                stats.applied += 1;
                return Ok(());
            }
            Err(e) => {
                tx.rollback().await?;
                last_error = Some(e);
            }
        }
    }
    // Poison record: park it, mark it processed, move on.
    let reason = format!("{:#}", last_error.expect("at least one attempt"));
    let headers = OwnedHeaders::new()
        .insert(Header {
            key: "id",
            value: Some(event_id.as_str()),
        })
        .insert(Header {
            key: "error.reason",
            value: Some(reason.as_str()),
        })
        .insert(Header {
            key: "original.topic",
            value: Some(message.topic()),
        });
    let mut record: FutureRecord<'_, [u8], [u8]> =
        FutureRecord::to(&config.dead_letter_topic).headers(headers);
    if let Some(k) = message.key() {
        record = record.key(k);
    }
    if let Some(v) = message.payload() {
        record = record.payload(v);
    }
    producer
        .send(record, Duration::from_secs(30))
        .await
        .map_err(|(e, _)| anyhow::anyhow!("dead-letter write failed: {e}"))?;
    db.execute(
        "INSERT INTO processed_events (event_id) VALUES ($1) ON CONFLICT DO NOTHING",
        &[&event_id],
    )
    .await?;
    stats.dead_lettered += 1;
    Ok(())
}

fn header(message: &BorrowedMessage<'_>, name: &str) -> Option<String> {
    message
        .headers()?
        .iter()
        .find(|h| h.key == name)
        .and_then(|h| h.value)
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

/// The business effect, inside the same transaction as the processed_events insert.
/// OrderCreated/OrderUpdated set the order's total; a tombstone deletes the order.
async fn apply(tx: &tokio_postgres::Transaction<'_>, message: &BorrowedMessage<'_>) -> Result<()> {
    let order_id =
        String::from_utf8_lossy(message.key().context("no key: not an order event")?).into_owned();
    let Some(payload) = message.payload() else {
        tx.execute("DELETE FROM order_totals WHERE order_id = $1", &[&order_id])
            .await?;
        return Ok(());
    };
    let event: serde_json::Value =
        serde_json::from_slice(payload).context("payload is not JSON")?;
    let total = event["total"]
        .as_f64()
        .context("payload has no numeric total")?;
    tx.execute(
        "INSERT INTO order_totals (order_id, total, events) VALUES ($1, $2::float8::numeric, 1)
         ON CONFLICT (order_id) DO UPDATE SET total = EXCLUDED.total, events = order_totals.events + 1",
        &[&order_id, &total],
    )
    .await?;
    Ok(())
}
