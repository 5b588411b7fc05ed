//! The end-to-end canary (`--canary-interval`): every few seconds the active instance writes
//! a canary into its own stream; the stream produces it to the canary topic and waits for
//! Kafka's acknowledgement, which sets `outbox_relay_canary_age_seconds`. A stall anywhere on
//! the way (the walsender, decoding, the relay, the broker) lets the age grow, and /ready
//! turns red past `--canary-max-age` while PostgreSQL still takes canaries (see
//! `Metrics::readiness`).
//!
//! A canary is a row of the canary table, `<schema>.outbox_relay_canaries` in the outbox
//! table's schema, one row per writer:
//! - CDC mode (`--canary-method table`, the default): the row named after the slot is deleted
//!   and inserted again in one transaction. The table is in the relay's own publication, so
//!   the INSERT reaches the relay's stream and no other: another consumer of the database sees
//!   it only through a publication that carries the table (FOR ALL TABLES), and Debezium
//!   passes over a table outside its `table.include.list`. Where the table cannot be made or
//!   published, the canary is off, with one warning that says what to grant.
//! - Polling mode: the instance's row, written every interval and relayed by the instance's
//!   own polls, in the same transaction as its outbox rows ([`write_rows_every`]).
//!
//! `--canary-method message` writes a transactional logical decoding message instead
//! (`pg_logical_emit_message`, no table needed). PostgreSQL sends every such message to every
//! logical decoding consumer of the database, whatever its publication: another team's
//! Debezium connector receives it, and fails on it when its chain cannot take a message
//! record. It is therefore never the default.

use crate::config::{Canary, CanaryMethod};
use crate::metrics::{now_ms, Metrics};
use crate::source::postgres::Database;
use std::sync::Arc;

/// The messages' prefix.
pub const PREFIX: &str = "outbox-relay.canary";

/// What a canary says: the slot whose relay wrote it, and when (milliseconds since the epoch).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Written {
    pub slot: String,
    pub written_ms: i64,
}

impl Written {
    pub fn parse(content: &[u8]) -> Option<Self> {
        serde_json::from_slice(content).ok()
    }
}

/// Polling mode's canary table, in the outbox table's schema: a row per instance, written
/// every interval and read by the instance's polls in the same transaction as its outbox rows.
pub const TABLE: &str = super::own_tables::CANARIES;

pub fn table(schema: &str) -> String {
    crate::source::sql_rows::qualified(&outbox_router::TableName {
        schema: schema.to_owned(),
        name: TABLE.to_owned(),
    })
}

/// The canary table's DDL.
pub fn table_ddl(schema: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {} (name text PRIMARY KEY, written_ms bigint NOT NULL, relayed boolean NOT NULL DEFAULT false)",
        table(schema)
    )
}

/// Makes the canary table when missing; why not (and what a DBA runs) when the role may
/// not.
async fn make_table(sql: &tokio_postgres::Client, schema: &str) -> Result<(), String> {
    let exists = crate::source::catalog::table_exists(
        sql,
        &outbox_router::TableName {
            schema: schema.to_owned(),
            name: TABLE.to_owned(),
        },
    )
    .await
    .unwrap_or(false);
    if exists {
        return Ok(());
    }
    sql.batch_execute(&table_ddl(schema)).await.map_err(|e| {
        format!(
            "cannot create {} ({}); create it as the schema's owner (`{}; GRANT SELECT, INSERT, UPDATE, DELETE ON {} TO <relay role>;`)",
            table(schema),
            crate::error::server_message(&e),
            table_ddl(schema),
            table(schema)
        )
    })
}

/// Polling mode: makes the canary table when missing; `false` (with a warning that says
/// how) when the role may not.
pub async fn ensure_table(sql: &tokio_postgres::Client, schema: &str) -> bool {
    match make_table(sql, schema).await {
        Ok(()) => true,
        Err(why) => {
            tracing::warn!(
                "no canary in polling mode: {why}, or turn the canary off with --canary-interval 0"
            );
            false
        }
    }
}

/// CDC mode with `--canary-method table`: makes the canary table when missing, and adds it
/// to `publication` when the publication does not carry it and the relay manages the
/// publication's tables (`may_add`). Why the canary cannot run, with what to grant or run,
/// otherwise.
pub async fn publish_table(
    sql: &tokio_postgres::Client,
    schema: &str,
    publication: &str,
    may_add: bool,
) -> Result<(), String> {
    make_table(sql, schema).await?;
    let canary = outbox_router::TableName {
        schema: schema.to_owned(),
        name: TABLE.to_owned(),
    };
    if crate::source::catalog::add_to_publication(sql, publication, &canary, may_add).await? {
        tracing::info!(publication, table = %table(schema), "added the canary table to the publication");
    }
    Ok(())
}

/// A canary row read from the stream: the writer's name and when it wrote it, from an
/// INSERT into the canary table whose relation is `relation`.
pub fn written_row(relation: &pgoutput::Relation, insert: &pgoutput::Insert) -> Option<Written> {
    let text = |name: &str| {
        let index = relation.column_index(name)?;
        let value = insert.new_tuple.columns.get(index)?.bytes()?;
        std::str::from_utf8(value).ok()
    };
    Some(Written {
        slot: text("name")?.to_owned(),
        written_ms: text("written_ms")?.parse().ok()?,
    })
}

/// This instance's name in the canary table: host and process.
pub fn instance_name() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into());
    format!("{host}:{}", std::process::id())
}

/// Polling mode: this instance's canary row is written again every `canary.interval` (not
/// relayed yet); its polls read it, produce it to the canary topic, and mark it relayed in the
/// transaction that commits after Kafka acknowledged it. Rows of instances gone for a day are
/// deleted.
pub async fn write_rows_every(
    database: Database,
    schema: String,
    name: String,
    canary: Canary,
    metrics: Arc<Metrics>,
) {
    let write = Write::Row {
        table: table(&schema),
        name,
    };
    write.every(database, canary, metrics).await
}

/// Writes a canary every `canary.interval` for `slot`, for as long as it runs (the session
/// that streams aborts it when it ends): the slot's row of the canary table in `schema`, or
/// a logical decoding message (`--canary-method message`).
pub async fn write_every(
    database: Database,
    slot: String,
    schema: &str,
    canary: Canary,
    metrics: Arc<Metrics>,
) {
    let write = match canary.method {
        CanaryMethod::Table => Write::SlotRow {
            table: table(schema),
            slot,
        },
        CanaryMethod::Message => Write::Message { slot },
    };
    write.every(database, canary, metrics).await
}

/// How a canary is written.
enum Write {
    /// Polling mode: the instance's row of the canary table.
    Row { table: String, name: String },
    /// CDC mode: the slot's row of the canary table, deleted and inserted again (the
    /// relay's publication may carry INSERTs only).
    SlotRow { table: String, slot: String },
    /// A transactional logical decoding message naming the slot.
    Message { slot: String },
}

impl Write {
    async fn once(&self, sql: &tokio_postgres::Client) -> Result<(), tokio_postgres::Error> {
        let now = now_ms();
        match self {
            Write::Row { table, name } => {
                let upsert = format!(
                    "INSERT INTO {table} (name, written_ms) VALUES ($1, $2) \
                     ON CONFLICT (name) DO UPDATE SET written_ms = EXCLUDED.written_ms, relayed = false"
                );
                sql.execute(&upsert, &[name, &now]).await?;
                let forget = format!("DELETE FROM {table} WHERE written_ms < $1");
                let _ = sql.execute(&forget, &[&(now - 86_400_000)]).await;
            }
            Write::SlotRow { table, slot } => {
                // One simple query, so one transaction: the DELETE and the INSERT commit
                // together. Rows of slots gone for a day go with it.
                let name = postgres_protocol::escape::escape_literal(slot);
                sql.batch_execute(&format!(
                    "DELETE FROM {table} WHERE name = {name} OR written_ms < {}; \
                     INSERT INTO {table} (name, written_ms) VALUES ({name}, {now})",
                    now - 86_400_000
                ))
                .await?;
            }
            Write::Message { slot } => {
                let content = serde_json::to_string(&Written {
                    slot: slot.clone(),
                    written_ms: now,
                })
                .expect("a canary serialises");
                sql.execute(
                    "SELECT pg_logical_emit_message(true, $1, $2::text)",
                    &[&PREFIX, &content],
                )
                .await?;
            }
        }
        Ok(())
    }

    /// Why a write failed, and what to do.
    fn refused(&self, e: &tokio_postgres::Error) -> String {
        let why = crate::error::server_message(e);
        match self {
            Write::Row { table, .. } | Write::SlotRow { table, .. } => format!(
                "cannot write the canary row ({why}): the relay's role needs SELECT, INSERT, UPDATE, DELETE ON {table}, \
                 or turn the canary off with --canary-interval 0"
            ),
            Write::Message { .. } => format!(
                "cannot write the canary ({why}): grant EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, text) \
                 to the relay's role, or turn the canary off with --canary-interval 0"
            ),
        }
    }

    /// Writes every `canary.interval`, connecting (again) as needed; a failure is logged once
    /// until a write succeeds again.
    async fn every(self, database: Database, canary: Canary, metrics: Arc<Metrics>) {
        metrics.canary_on(canary.max_age);
        let mut timer = tokio::time::interval(canary.interval);
        timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut client = None;
        let mut failing = false;
        loop {
            timer.tick().await;
            if client.is_none() {
                client = database.connect().await.ok();
            }
            let Some(sql) = &client else {
                continue;
            };
            match self.once(sql).await {
                Ok(()) => {
                    metrics.canary_written();
                    if failing {
                        tracing::info!("canaries are written again");
                    }
                    failing = false;
                }
                Err(e) => {
                    if !failing {
                        tracing::warn!("{}", self.refused(&e));
                    }
                    failing = true;
                    client = None;
                }
            }
        }
    }
}

/// `--canary-read-back`: reads the canaries named `name` (the slot, or polling's instance)
/// back from `topic`, from its end at start, and reports when each was written. Waits for
/// the topic to exist; a consumer error is logged once and the read goes on (the age grows,
/// which is what /ready reports).
pub async fn read_back(
    kafka: crate::config::KafkaSettings,
    topic: String,
    name: String,
    metrics: Arc<Metrics>,
) {
    use rdkafka::consumer::{Consumer as _, StreamConsumer};
    use rdkafka::{Message as _, Offset, TopicPartitionList};
    metrics.canary_read_back_on();
    let mut config = kafka.client_config(crate::config::ClientRole::Admin);
    config
        .set("group.id", "outbox-relay-canary-reader")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "100");
    let consumer: StreamConsumer = match config.create() {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!("--canary-read-back: cannot create a consumer: {e}");
            return;
        }
    };
    let mut complained = false;
    // Every partition of the topic, from its end (it is made with the first canary).
    loop {
        let partitions = consumer
            .fetch_metadata(Some(&topic), std::time::Duration::from_secs(5))
            .ok()
            .and_then(|m| {
                m.topics()
                    .first()
                    .filter(|t| t.error().is_none())
                    .map(|t| t.partitions().len())
            })
            .filter(|n| *n > 0);
        if let Some(count) = partitions {
            let mut assignment = TopicPartitionList::new();
            for p in 0..count as i32 {
                let _ = assignment.add_partition_offset(&topic, p, Offset::End);
            }
            if consumer.assign(&assignment).is_ok() {
                break;
            }
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
    loop {
        match consumer.recv().await {
            Ok(message) => {
                complained = false;
                if let Some(written) = message.payload().and_then(Written::parse) {
                    if written.slot == name {
                        metrics.canary_read(written.written_ms);
                    }
                }
            }
            Err(e) => {
                if !complained {
                    tracing::warn!(%topic, "--canary-read-back: reading canaries back: {e}");
                }
                complained = true;
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            }
        }
    }
}
