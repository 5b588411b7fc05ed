//! Source: polling (`run --mode polling`), the seeds' polling relay, for databases where logical replication
//! is not allowed. Same router, same delivery stage, same rule as the CDC path: a row leaves the
//! outbox (DELETE, or `--processed-column` set) only in the transaction that committed
//! *after* Kafka acknowledged it. A crash anywhere rolls that transaction back and the rows
//! are sent again: at-least-once, never lost.
//!
//! One poll, in one transaction:
//! ```sql
//! SELECT ctid, <columns as text> FROM outbox WHERE <not processed>
//!  ORDER BY <identity or serial column> LIMIT <batch> FOR UPDATE SKIP LOCKED;
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

use super::session::{pause, stop_requested, Source};
use super::{catalog, sql_rows};
use crate::config::{PollingSettings, Retire, Settings};
use crate::deliver::{AckTracker, Deliver, KafkaProducer, Origin, Producer};
use crate::error::RelayError;
use crate::metrics::Metrics;
use crate::route;
use anyhow::anyhow;
use outbox_router::{Router, TableName};
use pgoutput::LogicalMessage;
use postgres_protocol::escape::escape_identifier;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use tokio::sync::watch;

const RELATION_ID: u32 = 1;

/// Polling mode, session after session.
pub struct Polling<'a> {
    pub settings: &'a Settings,
    pub polling: &'a PollingSettings,
    pub metrics: Arc<Metrics>,
    pub written: Arc<crate::deliver::WrittenTopics>,
}

impl Source for Polling<'_> {
    async fn session(&mut self, shutdown: &mut watch::Receiver<bool>) -> Result<(), RelayError> {
        let (settings, polling) = (self.settings, self.polling);
        let mut client = crate::source::postgres::Database::of(settings)
            .connect()
            .await?;
        let table = settings.table().clone();
        if !catalog::table_exists(&client, &table).await? {
            return Err(RelayError::misconfigured(format!(
                "the outbox table {table} does not exist; create it (sql/outbox.sql) or pass --table"
            )));
        }
        let relation = sql_rows::relation(&client, &table, RELATION_ID).await?;
        let mut router = Router::new(settings.router.clone());
        if router.wants_column_facts() {
            router.set_column_facts(&table, catalog::column_facts(&client, &table).await?);
        }
        router.route(&LogicalMessage::Relation(relation.clone()));
        let order_by =
            catalog::insertion_order_column(&client, &table, polling.order_by.as_deref()).await?;
        let (select, pending_by_key, retire) = statements(
            &settings.router.key_column,
            &order_by,
            polling,
            &table,
            &relation,
        )?;
        let key_position = 1 + relation
            .column_index(&settings.router.key_column)
            .expect("statements() checked the key column");
        let producer = KafkaProducer::new(&settings.kafka)?;
        // The rows of events Kafka cannot take whole are copied before they leave the outbox:
        // without the table, such an event would be destroyed (or retried for ever), so
        // polling does not start.
        match super::dead_letter_table::ensure(&client, &table.schema).await {
            Ok(()) => {}
            Err(why) => {
                return Err(RelayError::misconfigured(format!(
                    "polling mode keeps the whole row of each event Kafka refuses for good (too large, refused) in {} \
                     before the row leaves the outbox: {why}",
                    super::dead_letter_table::table(&table.schema)
                )))
            }
        }
        let mut deliver = Deliver::new(
            producer,
            &settings.kafka.dead_letter_topic,
            self.metrics.clone(),
            self.written.clone(),
        )
        .with_stuck_after(settings.kafka.stuck_partition_after)
        // As dead letters name it: `schema.table`, as `dead-letters replay` reads it.
        .keeping_rows(&super::dead_letter_table::name(&table.schema).to_string());
        tracing::info!(%table, order_by = %order_by, interval_ms = polling.interval.as_millis() as u64, batch = polling.batch_size, "polling");
        // --cleanup (with --processed-column: config refuses it without): marked rows past
        // the grace are deleted by every instance (rows are locked, SKIP LOCKED: never twice).
        let _cleaner = match (&settings.cleanup, &polling.retire) {
            (Some(cleanup), Retire::MarkProcessed(processed)) => {
                super::cleanup::may_delete(&client, &table).await?;
                Some(super::session::AbortOnDrop(tokio::spawn(
                    super::cleanup::clean_every(
                        crate::source::postgres::Database::of(settings),
                        cleanup.clone(),
                        super::cleanup::Cleaning::Processed {
                            table: table.clone(),
                            processed: processed.clone(),
                        },
                        self.metrics.clone(),
                    ),
                )))
            }
            _ => None,
        };
        self.metrics.streaming.set(1);
        self.metrics.set_standing_by(false);
        self.metrics.active.set(1);
        // The canary: this instance's row of the canary table, relayed by its own polls.
        let mut canary = None;
        let mut _canary_reader = None;
        let _canary_writer = match &polling.canary {
            Some(settings_canary) if super::canary::ensure_table(&client, &table.schema).await => {
                let name = super::canary::instance_name();
                let canary_table = super::canary::table(&table.schema);
                canary = Some(PollCanary {
                    select: format!(
                        "SELECT written_ms FROM {canary_table} WHERE name = $1 AND NOT relayed FOR UPDATE SKIP LOCKED"
                    ),
                    mark: format!(
                        "UPDATE {canary_table} SET relayed = true WHERE name = $1 AND written_ms = $2"
                    ),
                    topic: settings_canary.topic.as_str().into(),
                    name: name.clone(),
                });
                if settings_canary.read_back {
                    _canary_reader = Some(super::session::AbortOnDrop(tokio::spawn(
                        super::canary::read_back(
                            settings.kafka.clone(),
                            settings_canary.topic.clone(),
                            name.clone(),
                            self.metrics.clone(),
                        ),
                    )));
                }
                Some(super::session::AbortOnDrop(tokio::spawn(
                    super::canary::write_rows_every(
                        crate::source::postgres::Database::of(settings),
                        table.schema.clone(),
                        name,
                        settings_canary.clone(),
                        self.metrics.clone(),
                    ),
                )))
            }
            _ => None,
        };
        if let Some(canary) = &canary {
            deliver.prepare_topic(&canary.topic);
        }
        let mut poller = Poller {
            deliver,
            router,
            columns: relation.columns.iter().map(|c| c.name.clone()).collect(),
            id_position: relation.column_index(&settings.router.id_column),
            keeps: table.schema.clone(),
            table: table.to_string().into(),
            select,
            pending_by_key,
            key_position,
            retire,
            canary,
        };
        loop {
            if stop_requested(shutdown) {
                return Ok(());
            }
            let relayed = poller.poll_once(&mut client).await?;
            if relayed < polling.batch_size as usize {
                // A shutdown is seen at the top of the loop.
                pause(polling.interval, shutdown).await;
            }
        }
    }

    fn resume_note(&self) -> String {
        "polling again after a pause (unacknowledged rows stay in the outbox)".into()
    }
}

struct Poller<P: Producer> {
    deliver: Deliver<P>,
    router: Router,
    /// The outbox table's columns, and where its event id is among them.
    columns: Vec<String>,
    id_position: Option<usize>,
    /// The schema of the dead-letter table that keeps rows Kafka could not take whole.
    keeps: String,
    table: Arc<str>,
    select: String,
    /// Each batch aggregate's pending rows in order (see `relayable`).
    pending_by_key: String,
    /// Position of the key column among the selected columns (after the ctid).
    key_position: usize,
    retire: String,
    canary: Option<PollCanary>,
}

/// This instance's canary row: read with the outbox rows, produced to the canary topic,
/// marked relayed in the same transaction.
struct PollCanary {
    select: String,
    mark: String,
    topic: Arc<str>,
    name: String,
}

fn statements(
    key: &str,
    order_by: &str,
    polling: &PollingSettings,
    table: &TableName,
    relation: &pgoutput::Relation,
) -> Result<(String, String, String), RelayError> {
    let has = |c: &str| relation.column_index(c).is_some();
    let missing = |what: &str, c: &str| {
        RelayError::Misconfiguration(anyhow!(
            "{what} column {c:?} is not a column of {table}; pass an existing column"
        ))
    };
    if !has(key) {
        return Err(missing("key", key));
    }
    let qualified = sql_rows::qualified(table);
    let pending = match &polling.retire {
        Retire::Delete => "true".to_owned(),
        Retire::MarkProcessed(c) if has(c) => format!("{} IS NULL", escape_identifier(c)),
        Retire::MarkProcessed(c) => return Err(missing("--processed-column", c)),
    };
    let select = format!(
        // `outbox.<column>`: a bare name would sort by the output column of that name,
        // i.e. by its text (1, 10, 2, ...).
        "SELECT ctid::text, {columns} FROM {qualified} AS outbox \
         WHERE {pending} ORDER BY outbox.{order} LIMIT {limit} FOR UPDATE SKIP LOCKED",
        columns = sql_rows::select_list(relation),
        order = escape_identifier(order_by),
        limit = polling.batch_size,
    );
    let pending_by_key = format!(
        "SELECT k, array_agg(ctid::text ORDER BY o) FROM \
           (SELECT {key}::text AS k, ctid, {order} AS o FROM {qualified} WHERE {pending} AND {key}::text = ANY($1)) pending \
         GROUP BY k",
        key = escape_identifier(key),
        order = escape_identifier(order_by),
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

impl<P: Producer> Poller<P> {
    /// One batch: select and lock, deliver, wait until every event (or its dead letter) is
    /// acknowledged, retire, commit. Returns how many rows were relayed.
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
        let canary = match &self.canary {
            Some(canary) => tx
                .query_opt(&canary.select, &[&canary.name])
                .await
                .map_err(|e| pg_error("reading the canary row", e))?
                .map(|row| row.get::<_, i64>(0)),
            None => None,
        };
        if rows.is_empty() && canary.is_none() {
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
        let mut tracker = AckTracker::new(pgoutput::Lsn::ZERO);
        let mut ctids = Vec::with_capacity(rows.len());
        // Each submitted event's row, by its ticket's number.
        let mut row_of = HashMap::with_capacity(rows.len());
        for row in &rows {
            let keyed = row.get::<_, Option<&str>>(self.key_position).is_some();
            if keyed && !relayable.contains(row.get::<_, &str>(0)) {
                continue;
            }
            ctids.push(row.get::<_, String>(0));
            let insert = sql_rows::insert(row, 1, RELATION_ID);
            let outcome = self.router.route(&LogicalMessage::Insert(insert));
            // A row the configuration cannot handle fails the poll: the batch stays.
            if let Some(routed) = route::triage(outcome, None)? {
                let origin = Origin {
                    table: self.table.clone(),
                    position: None,
                    event: None,
                };
                let ticket = tracker.produced();
                row_of.insert(ticket.seq(), row);
                self.deliver.submit(routed, ticket, origin).await?;
            }
        }
        if let (Some(written_ms), Some(c)) = (canary, &self.canary) {
            let content = serde_json::to_vec(&super::canary::Written {
                slot: c.name.clone(),
                written_ms,
            })
            .expect("a canary serialises");
            let record = outbox_router::OutboxRecord {
                topic: c.topic.clone(),
                key: Some(bytes::Bytes::copy_from_slice(c.name.as_bytes())),
                value: Some(content.into()),
                headers: Vec::new(),
                partition: None,
                timestamp_ms: None,
            };
            let origin = Origin {
                table: "canary".into(),
                position: None,
                event: None,
            };
            self.deliver
                .submit(
                    crate::deliver::Routed::Canary { record, written_ms },
                    tracker.produced(),
                    origin,
                )
                .await?;
        }
        // An error here drops the transaction: the rows stay for the next poll.
        self.deliver
            .drain(|ticket| {
                let _ = tracker.delivered(ticket);
            })
            .await?;
        debug_assert!(tracker.all_delivered());
        // A row whose event Kafka could not take whole is copied before it leaves the outbox.
        self.keep_rows(&tx, &row_of).await?;
        let relayed = ctids.len();
        if !ctids.is_empty() {
            tx.execute(&self.retire, &[&ctids])
                .await
                .map_err(|e| pg_error("retiring relayed rows", e))?;
        }
        if let (Some(written_ms), Some(c)) = (canary, &self.canary) {
            tx.execute(&c.mark, &[&c.name, &written_ms])
                .await
                .map_err(|e| pg_error("marking the canary relayed", e))?;
        }
        tx.commit().await.map_err(|e| {
            RelayError::ConnectionLost(anyhow!(
                "committing a poll (its events may be sent again): {}",
                crate::error::server_message(&e)
            ))
        })?;
        Ok(relayed)
    }

    /// Copies the rows of this poll's events whose dead letter cannot give them back whole
    /// into the dead-letter table, in the poll's transaction (a failure rolls the poll back:
    /// the rows stay in the outbox).
    async fn keep_rows(
        &mut self,
        tx: &tokio_postgres::Transaction<'_>,
        row_of: &HashMap<crate::deliver::Seq, &tokio_postgres::Row>,
    ) -> Result<(), RelayError> {
        let kept = self.deliver.take_kept();
        if kept.is_empty() {
            return Ok(());
        }
        let mut texts = Vec::with_capacity(kept.len());
        for event in &kept {
            let Some(row) = row_of.get(&event.seq) else {
                continue;
            };
            let columns: Vec<(String, Option<bytes::Bytes>)> = self
                .columns
                .iter()
                .enumerate()
                .map(|(i, name)| {
                    let text = row.get::<_, Option<String>>(i + 1);
                    (name.clone(), text.map(bytes::Bytes::from))
                })
                .collect();
            let json = crate::deliver::dead_letter::row_json(&columns)
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default();
            let id = self
                .id_position
                .and_then(|i| row.get::<_, Option<String>>(i + 1));
            texts.push((event, json, id));
        }
        let rows: Vec<super::dead_letter_table::Kept> = texts
            .iter()
            .map(|(event, json, id)| super::dead_letter_table::Kept {
                event,
                source_table: &self.table,
                event_id: id.as_deref(),
                row: json,
            })
            .collect();
        super::dead_letter_table::keep(tx, &self.keeps, &rows)
            .await
            .map_err(|e| pg_error("keeping the rows of refused events", e))
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

/// A failed poll statement: missing privileges stop the relay with the grant to run.
fn pg_error(context: &str, e: tokio_postgres::Error) -> RelayError {
    RelayError::postgres(context, e, || {
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
