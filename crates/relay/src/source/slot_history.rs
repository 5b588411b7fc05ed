//! Which replication slots this relay has streamed from, kept in the database
//! (`<schema>.outbox_relay_slots`) so that a slot that disappears (dropped by a DBA, not
//! carried over by a failover) is noticed: creating a new one at the current position would
//! silently skip every event written since the old one's position. The first start creates
//! the slot as usual; a remembered slot that is gone stops the relay with the choices
//! (`--on-missing-slot reread | accept-gap`).

use super::sql_rows::qualified;
use crate::error::RelayError;
use outbox_router::TableName;

pub const TABLE: &str = super::own_tables::SLOTS;

fn history_table(schema: &str) -> TableName {
    TableName {
        schema: schema.to_owned(),
        name: TABLE.to_owned(),
    }
}

/// The DDL, also printed by `setup-sql` (with a grant for the relay's role).
pub fn ddl(schema: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {} (slot_name text PRIMARY KEY, system_identifier text, first_streamed_at timestamptz NOT NULL DEFAULT now())",
        qualified(&history_table(schema))
    )
}

/// When the remembered slot `slot` was first streamed from, if it is remembered.
pub async fn remembered(
    sql: &tokio_postgres::Client,
    schema: &str,
    slot: &str,
) -> Result<Option<String>, RelayError> {
    let table = history_table(schema);
    if !super::catalog::table_exists(sql, &table).await? {
        return Ok(None);
    }
    let row = sql
        .query_opt(
            &format!(
                "SELECT first_streamed_at::text FROM {} WHERE slot_name = $1",
                qualified(&table)
            ),
            &[&slot],
        )
        .await
        .map_err(|e| {
            RelayError::postgres("reading the slot history", e, || {
                format!(
                    "GRANT SELECT, INSERT, DELETE ON {} TO <relay role>;",
                    qualified(&table)
                )
            })
        })?;
    Ok(row.map(|r| r.get(0)))
}

/// Remembers `slot` (once). A role that may neither create nor write the table streams
/// anyway, with a warning that a vanished slot would go unnoticed.
pub async fn remember(
    sql: &tokio_postgres::Client,
    schema: &str,
    slot: &str,
    system_identifier: &str,
) {
    let table = history_table(schema);
    // CREATE TABLE IF NOT EXISTS needs CREATE on the schema even when the table exists.
    let exists = super::catalog::table_exists(sql, &table)
        .await
        .unwrap_or(false);
    let statement = format!(
        "{}INSERT INTO {} (slot_name, system_identifier) VALUES ({}, {}) ON CONFLICT (slot_name) DO NOTHING",
        if exists { String::new() } else { format!("{}; ", ddl(schema)) },
        qualified(&table),
        postgres_protocol::escape::escape_literal(slot),
        postgres_protocol::escape::escape_literal(system_identifier),
    );
    if let Err(e) = sql.batch_execute(&statement).await {
        tracing::warn!(
            "cannot remember slot {slot} in {} ({}): if the slot is ever dropped, the relay cannot tell its events \
             were skipped. Create the table as its owner: `{}; GRANT SELECT, INSERT, DELETE ON {} TO <relay role>;`",
            qualified(&table),
            crate::error::server_message(&e),
            ddl(schema),
            qualified(&table)
        );
    }
}

/// Forgets `slot` (the user chose to recreate it).
pub async fn forget(
    sql: &tokio_postgres::Client,
    schema: &str,
    slot: &str,
) -> Result<(), RelayError> {
    sql.execute(
        &format!(
            "DELETE FROM {} WHERE slot_name = $1",
            qualified(&history_table(schema))
        ),
        &[&slot],
    )
    .await
    .map_err(|e| {
        RelayError::postgres("updating the slot history", e, || {
            format!(
                "GRANT DELETE ON {} TO <relay role>;",
                qualified(&history_table(schema))
            )
        })
    })?;
    Ok(())
}
