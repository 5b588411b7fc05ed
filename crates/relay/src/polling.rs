//! `run --mode polling`: the seeds' polling relay, for databases where logical replication
//! is not allowed. Same router, same sink, same rule as the CDC path: a row leaves the
//! outbox (DELETE, or `--processed-column` set) only in the transaction that committed
//! *after* Kafka acknowledged it. A crash anywhere rolls that transaction back and the rows
//! are sent again: at-least-once, never lost.
//!
//! One poll, in one transaction:
//! ```sql
//! SELECT ctid, <columns as text> FROM outbox WHERE <not processed>
//!  ORDER BY <order column>, ctid LIMIT <batch> FOR UPDATE SKIP LOCKED;
//! -- per aggregate, keep the batch's rows up to its first pending row not in the batch
//! -- produce those rows, wait for every acknowledgement
//! DELETE FROM outbox WHERE ctid = ANY(...);   -- or UPDATE ... SET <processed> = now()
//! COMMIT;
//! ```
//! Several instances can poll at once: `FOR UPDATE SKIP LOCKED` gives each its own rows,
//! and a poll relays an aggregate's rows only as far as they are the aggregate's next
//! pending rows without a gap, so two instances never publish one aggregate's events out
//! of order (a row another instance holds is still visible, undeleted, until that
//! instance commits after its acknowledgements).

use crate::backoff::{pause, Backoff};
use crate::config::Settings;
use crate::dead_letter::DeadLetter;
use crate::error::RelayError;
use crate::metrics::Metrics;
use crate::postgres;
use crate::sink::{Delivery, DeliveryFailure, KafkaSink, SendOutcome, SinkSettings};
use crate::table_rows;
use anyhow::anyhow;
use futures::stream::{FuturesUnordered, StreamExt};
use outbox_router::{OutboxRecord, RouteOutcome, Router, TableName};
use pgoutput::LogicalMessage;
use postgres_protocol::escape::escape_identifier;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

const RELATION_ID: u32 = 1;

/// How a relayed row is retired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Retire {
    Delete,
    /// `UPDATE ... SET <column> = now()`; pending rows are those where it IS NULL.
    MarkProcessed(String),
}

#[derive(Debug, Clone)]
pub struct PollingSettings {
    pub interval: Duration,
    pub batch_size: i64,
    pub order_by: String,
    pub retire: Retire,
}

pub async fn run(
    settings: Settings,
    polling: PollingSettings,
    metrics: Arc<Metrics>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), RelayError> {
    let mut backoff = Backoff::default();
    loop {
        let started = Instant::now();
        let result = session(&settings, &polling, &metrics, &mut shutdown).await;
        metrics.streaming.set(0);
        match result {
            Ok(()) => return Ok(()),
            Err(e) if e.is_transient() && !*shutdown.borrow() => {
                metrics.reconnects.inc();
                let delay = backoff.after_session(started.elapsed());
                tracing::warn!(
                    retry_in_ms = delay.as_millis() as u64,
                    "{e}; polling again after a pause (unacknowledged rows stay in the outbox)"
                );
                if pause(delay, &mut shutdown).await {
                    return Ok(());
                }
            }
            Err(e) if e.is_transient() => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}

struct Poller<'a> {
    settings: &'a Settings,
    sink: KafkaSink,
    router: Router,
    metrics: &'a Arc<Metrics>,
    select: String,
    /// Each batch aggregate's pending rows in order (see `relayable`).
    pending_by_key: String,
    /// Position of the key column among the selected columns (after the ctid).
    key_position: usize,
    retire: String,
    dead_letter_topic: Arc<str>,
}

async fn session(
    settings: &Settings,
    polling: &PollingSettings,
    metrics: &Arc<Metrics>,
    shutdown: &mut watch::Receiver<bool>,
) -> Result<(), RelayError> {
    let mut client = postgres::connect(settings.postgres_url.expose()).await?;
    let table = settings.table().clone();
    let relation = table_rows::relation(&client, &table, RELATION_ID).await?;
    if relation.columns.is_empty() {
        return Err(RelayError::Fatal(anyhow!(
            "the outbox table {table} does not exist or has no columns; create it (sql/outbox.sql) or pass --table"
        )));
    }
    let mut router = Router::new(settings.router.clone());
    if router.wants_column_facts() {
        router.set_column_facts(&table, postgres::column_facts(&client, &table).await?);
    }
    router.route(&LogicalMessage::Relation(relation.clone()));
    let (select, pending_by_key, retire) = statements(settings, polling, &table, &relation)?;
    let key_position = 1 + relation
        .column_index(&settings.router.key_column)
        .expect("statements() checked the key column");
    let sink = KafkaSink::new(&SinkSettings {
        bootstrap_servers: &settings.bootstrap_servers,
        max_in_flight: settings.max_in_flight,
        topic_partitions: settings.topic_partitions,
        topic_replication_factor: settings.topic_replication_factor,
        producer_properties: &settings.producer_properties,
    })?;
    tracing::info!(%table, interval_ms = polling.interval.as_millis() as u64, batch = polling.batch_size, "polling");
    metrics.streaming.set(1);
    let mut poller = Poller {
        settings,
        sink,
        router,
        metrics,
        select,
        pending_by_key,
        key_position,
        retire,
        dead_letter_topic: settings.dead_letter_topic.as_str().into(),
    };
    loop {
        if *shutdown.borrow() {
            return Ok(());
        }
        let relayed = poller.poll_once(&mut client).await?;
        if relayed < polling.batch_size as usize {
            // A shutdown is seen at the top of the loop.
            pause(polling.interval, shutdown).await;
        }
    }
}

fn statements(
    settings: &Settings,
    polling: &PollingSettings,
    table: &TableName,
    relation: &pgoutput::Relation,
) -> Result<(String, String, String), RelayError> {
    let has = |c: &str| relation.column_index(c).is_some();
    let missing = |what: &str, c: &str| {
        RelayError::Fatal(anyhow!(
            "{what} column {c:?} is not a column of {table}; pass an existing column"
        ))
    };
    if !has(&polling.order_by) {
        return Err(missing("--poll-order-by", &polling.order_by));
    }
    let key = &settings.router.key_column;
    if !has(key) {
        return Err(missing("key", key));
    }
    let qualified = table_rows::qualified(table);
    let pending = match &polling.retire {
        Retire::Delete => "true".to_owned(),
        Retire::MarkProcessed(c) if has(c) => format!("{} IS NULL", escape_identifier(c)),
        Retire::MarkProcessed(c) => return Err(missing("--processed-column", c)),
    };
    let select = format!(
        "SELECT ctid::text, {columns} FROM {qualified} \
         WHERE {pending} ORDER BY {order}, ctid LIMIT {limit} FOR UPDATE SKIP LOCKED",
        columns = table_rows::select_list(relation),
        order = escape_identifier(&polling.order_by),
        limit = polling.batch_size,
    );
    let pending_by_key = format!(
        "SELECT k, array_agg(ctid::text ORDER BY o, ctid) FROM \
           (SELECT {key}::text AS k, ctid, {order} AS o FROM {qualified} WHERE {pending} AND {key}::text = ANY($1)) pending \
         GROUP BY k",
        key = escape_identifier(key),
        order = escape_identifier(&polling.order_by),
    );
    let retire = match &polling.retire {
        Retire::Delete => format!("DELETE FROM {qualified} WHERE ctid = ANY($1::text[]::tid[])"),
        Retire::MarkProcessed(c) => format!(
            "UPDATE {qualified} SET {} = now() WHERE ctid = ANY($1::text[]::tid[])",
            escape_identifier(c)
        ),
    };
    Ok((select, pending_by_key, retire))
}

impl Poller<'_> {
    /// One batch: select and lock, produce, wait for every acknowledgement, retire, commit.
    /// Returns how many rows were relayed.
    async fn poll_once(
        &mut self,
        client: &mut tokio_postgres::Client,
    ) -> Result<usize, RelayError> {
        let tx = client
            .transaction()
            .await
            .map_err(|e| pg_error("starting a poll", e))?;
        let rows = tx
            .query(&self.select, &[])
            .await
            .map_err(|e| pg_error("polling the outbox", e))?;
        if rows.is_empty() {
            return Ok(0);
        }
        // SKIP LOCKED may hand us rows of an aggregate whose earlier rows another instance
        // holds, or with a gap (a row in between held elsewhere): relay an aggregate's
        // rows only up to its first pending row that is not ours. The rest stay for a
        // later poll. (An advisory lock per aggregate is not enough: a scan that skipped
        // an aggregate can get its lock later in the same scan.)
        let keys: Vec<String> = rows
            .iter()
            .filter_map(|r| r.get::<_, Option<String>>(self.key_position))
            .collect();
        let pending: HashMap<String, Vec<String>> = tx
            .query(&self.pending_by_key, &[&keys])
            .await
            .map_err(|e| pg_error("polling the outbox", e))?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        let in_batch: HashSet<&str> = rows.iter().map(|r| r.get::<_, &str>(0)).collect();
        let relayable = relayable(&in_batch, &pending);
        let mut deliveries: FuturesUnordered<Delivery> = FuturesUnordered::new();
        let mut ctids = Vec::with_capacity(rows.len());
        for row in &rows {
            let keyed = row.get::<_, Option<&str>>(self.key_position).is_some();
            if keyed && !relayable.contains(row.get::<_, &str>(0)) {
                continue;
            }
            ctids.push(row.get::<_, String>(0));
            let insert = table_rows::insert(row, 1, RELATION_ID);
            match self.router.route(&LogicalMessage::Insert(insert)) {
                RouteOutcome::Record(record) => {
                    let delivery = self.send(&record).await?;
                    deliveries.push(delivery);
                }
                RouteOutcome::Invalid(invalid) => {
                    let letter = DeadLetter::from_invalid_row(invalid, 0);
                    deliveries.push(self.send_dead_letter(&letter).await?);
                }
                RouteOutcome::Fatal(reason) => return Err(RelayError::Fatal(anyhow!("{reason}"))),
                RouteOutcome::Ignored | RouteOutcome::SkippedUpdate { .. } => {}
            }
        }
        while let Some(result) = deliveries.next().await {
            match result {
                Ok(()) => {}
                Err(DeliveryFailure {
                    error,
                    rejected: Some(r),
                }) => {
                    let letter = DeadLetter::refused_by_broker(
                        &error,
                        r,
                        self.settings.table().to_string(),
                        0,
                    );
                    let delivery = self.send_dead_letter(&letter).await?;
                    delivery.await.map_err(|f| {
                        RelayError::Transient(anyhow!("dead-letter write failed: {}", f.error))
                    })?;
                }
                // The transaction is rolled back (dropped): the rows stay for the next poll.
                Err(DeliveryFailure { error, .. }) => {
                    return Err(RelayError::Transient(anyhow!(
                        "Kafka did not acknowledge an event: {error}; the batch stays in the outbox"
                    )))
                }
            }
        }
        let relayed = ctids.len();
        tx.execute(&self.retire, &[&ctids])
            .await
            .map_err(|e| pg_error("retiring relayed rows", e))?;
        tx.commit().await.map_err(|e| {
            RelayError::Transient(anyhow!(
                "committing a poll (its events may be sent again): {e}"
            ))
        })?;
        Ok(relayed)
    }

    async fn send(&mut self, record: &OutboxRecord) -> Result<Delivery, RelayError> {
        self.sink.ensure_topic(&record.topic).await?;
        let counter = self
            .metrics
            .events
            .get_or_create(&crate::metrics::TopicLabels {
                topic: record.topic.to_string(),
            })
            .clone();
        loop {
            match self.sink.send(record)? {
                SendOutcome::Accepted(delivery) => {
                    return Ok(Box::pin(async move {
                        let r = delivery.await;
                        if r.is_ok() {
                            counter.inc();
                        }
                        r
                    }))
                }
                // librdkafka frees queue space as deliveries complete; their results stay
                // in `deliveries` for the batch's own accounting (a refused one is
                // dead-lettered there, not here).
                SendOutcome::QueueFull => tokio::time::sleep(Duration::from_millis(5)).await,
                SendOutcome::Rejected(reason) => {
                    let letter = DeadLetter::rejected_by_producer(
                        reason,
                        record,
                        self.settings.table().to_string(),
                        0,
                    );
                    return self.send_dead_letter(&letter).await;
                }
            }
        }
    }

    /// A dead letter's delivery; its failure fails the poll (the rows stay).
    async fn send_dead_letter(&mut self, letter: &DeadLetter) -> Result<Delivery, RelayError> {
        tracing::warn!(table = %letter.table, reason = %letter.reason, dead_letter_topic = &*self.dead_letter_topic,
            "sending an outbox event to the dead-letter topic");
        let topic = self.dead_letter_topic.clone();
        self.sink.ensure_topic(&topic).await?;
        self.metrics.dead_letters.inc();
        loop {
            match self.sink.send_raw(
                &topic,
                letter.key.as_ref(),
                letter.value.as_ref(),
                letter.headers(),
            )? {
                SendOutcome::Accepted(delivery) => {
                    return Ok(Box::pin(async move {
                        delivery.await.map_err(|f| DeliveryFailure {
                            error: format!("dead-letter write failed: {}", f.error),
                            rejected: None,
                        })
                    }))
                }
                SendOutcome::QueueFull => tokio::time::sleep(Duration::from_millis(5)).await,
                SendOutcome::Rejected(reason) => {
                    return Err(RelayError::Fatal(anyhow!(
                        "the dead-letter topic refused an event too ({reason}); nothing was retired"
                    )))
                }
            }
        }
    }
}

/// The batch rows (ctids) that may be relayed now: for each aggregate, its pending rows
/// in order as long as they are in this batch, stopping at the first one that is not.
fn relayable<'a>(
    in_batch: &HashSet<&'a str>,
    pending_by_key: &HashMap<String, Vec<String>>,
) -> HashSet<&'a str> {
    let mut out = HashSet::new();
    for ctids in pending_by_key.values() {
        for ctid in ctids {
            match in_batch.get(ctid.as_str()) {
                Some(ours) => {
                    out.insert(*ours);
                }
                None => break,
            }
        }
    }
    out
}

/// A failed poll statement; see [`RelayError::query_failed`].
fn pg_error(context: &str, e: tokio_postgres::Error) -> RelayError {
    RelayError::query_failed(context, e, || {
        "the relay's user needs SELECT, DELETE (or UPDATE of the processed column) on the outbox table".into()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_aggregate_is_relayed_only_up_to_its_first_row_held_elsewhere() {
        let batch: HashSet<&str> = ["(0,1)", "(0,3)", "(0,4)", "(0,9)"].into_iter().collect();
        let pending: HashMap<String, Vec<String>> = [
            // X: rows 1 and 3 are ours, row 2 is another instance's: only row 1 now.
            ("X", vec!["(0,1)", "(0,2)", "(0,3)"]),
            // Y: its first row is elsewhere: nothing now.
            ("Y", vec!["(0,5)", "(0,4)"]),
            // Z: all ours.
            ("Z", vec!["(0,9)"]),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.into_iter().map(str::to_owned).collect()))
        .collect();
        let mut out: Vec<&str> = relayable(&batch, &pending).into_iter().collect();
        out.sort();
        assert_eq!(out, ["(0,1)", "(0,9)"]);
    }
}
