//! Polling mode's dead-letter table, `<schema>.outbox_relay_dead_letters`: the whole row of
//! each event Kafka could not take whole (refused for its size, or refused at all), copied in
//! the poll transaction that retires the row from the outbox. A refused event's dead letter
//! keeps its key, its id and at most its payload, and names the row kept here
//! ([`crate::deliver::dead_letter::ROW_KEPT`]); `outbox-relay dead-letters replay` routes that
//! row again. The stream (CDC) needs no copy: it never deletes a row, and `--cleanup` leaves a
//! dead-lettered event's row in the outbox.

use crate::deliver::KeptEvent;
use crate::source::sql_rows::qualified;
use outbox_router::TableName;

pub const TABLE: &str = super::own_tables::DEAD_LETTERS;

/// `schema.outbox_relay_dead_letters`, quoted.
pub fn table(schema: &str) -> String {
    qualified(&name(schema))
}

/// The table's name in `schema`.
pub fn name(schema: &str) -> TableName {
    TableName {
        schema: schema.to_owned(),
        name: TABLE.to_owned(),
    }
}

/// The table's DDL. `source_row` is `json`, not `jsonb`: it keeps the columns' order, as the
/// dead letters' `outbox-relay.source.row` has it.
pub fn ddl(schema: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {} (id uuid PRIMARY KEY, source_table text NOT NULL, event_id text, \
         reason text NOT NULL, original_topic text, original_size bigint, source_row json NOT NULL, \
         kept_at timestamptz NOT NULL DEFAULT now())",
        table(schema)
    )
}

/// Makes the table when missing; why the relay cannot keep rows there (and what a DBA runs)
/// otherwise.
pub async fn ensure(sql: &tokio_postgres::Client, schema: &str) -> Result<(), String> {
    let name = TableName {
        schema: schema.to_owned(),
        name: TABLE.to_owned(),
    };
    let grant = format!(
        "`{}; GRANT SELECT, INSERT, UPDATE ON {} TO <relay role>;`",
        ddl(schema),
        table(schema)
    );
    if !crate::source::catalog::table_exists(sql, &name)
        .await
        .unwrap_or(false)
    {
        sql.batch_execute(&ddl(schema)).await.map_err(|e| {
            format!(
                "cannot create {} ({}); create it as the schema's owner: {grant}",
                table(schema),
                crate::error::server_message(&e)
            )
        })?;
    }
    let may_insert: bool = sql
        .query_one(
            "SELECT has_table_privilege($1::text::regclass, 'INSERT')",
            &[&table(schema)],
        )
        .await
        .map_err(|e| crate::error::server_message(&e))?
        .get(0);
    if !may_insert {
        return Err(format!(
            "the relay's role may not insert into {}: {grant}",
            table(schema)
        ));
    }
    Ok(())
}

/// A row to keep: its event, the table it came from, its event id and the row as
/// `outbox-relay.source.row`'s JSON.
pub struct Kept<'a> {
    pub event: &'a KeptEvent,
    pub source_table: &'a str,
    pub event_id: Option<&'a str>,
    pub row: &'a str,
}

/// Copies `rows` into the table in `schema`, in the caller's transaction.
pub async fn keep(
    tx: &tokio_postgres::Transaction<'_>,
    schema: &str,
    rows: &[Kept<'_>],
) -> Result<(), tokio_postgres::Error> {
    let insert = format!(
        "INSERT INTO {} (id, source_table, event_id, reason, original_topic, original_size, source_row) \
         VALUES ($1::text::uuid, $2, $3, $4, $5, $6, $7::text::json)",
        table(schema)
    );
    let statement = tx.prepare(&insert).await?;
    for kept in rows {
        tx.execute(
            &statement,
            &[
                &kept.event.id.to_string(),
                &kept.source_table,
                &kept.event_id,
                &kept.event.reason,
                &kept.event.original_topic,
                &kept.event.original_size.map(|s| s as i64),
                &kept.row,
            ],
        )
        .await?;
    }
    Ok(())
}
