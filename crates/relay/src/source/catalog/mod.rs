//! The catalog side of the replication source: the outbox table, the publication and the
//! slot the relay needs, created when missing, checked when present, and the slot's state.
//! Names are validated in config and quoted here. The publication (`publication.rs`), the
//! slot (`slots.rs`), the columns (`columns.rs`) and the keys (`keys.rs`) each have a file;
//! here are the outbox tables themselves.

use super::sql_rows;
use crate::error::{Problem, RelayError};
use outbox_router::TableName;

mod columns;
mod keys;
mod publication;
mod slots;

pub use columns::*;
pub use keys::*;
pub use publication::*;
pub use slots::*;

/// A failed catalog statement: retried unless it is a missing privilege or object.
fn catalog_error(context: &'static str) -> impl FnOnce(tokio_postgres::Error) -> RelayError {
    move |e| {
        RelayError::postgres(context, e, || {
            "the relay's role needs SELECT on the outbox table and the REPLICATION attribute (see `outbox-relay setup-sql`)".into()
        })
    }
}

/// The server's `server_version_num` (180000 for 18.0).
pub async fn server_version_num(client: &tokio_postgres::Client) -> Result<i32, RelayError> {
    Ok(client
        .query_one("SELECT current_setting('server_version_num')::int", &[])
        .await
        .map_err(catalog_error("reading the server's version"))?
        .get(0))
}

/// Logical replication needs `wal_level = logical`.
pub fn wal_level_problem(wal_level: &str) -> Option<Problem> {
    (wal_level != "logical").then(|| {
        Problem::new(
            format!("PostgreSQL has wal_level = {wal_level}"),
            "logical replication needs `ALTER SYSTEM SET wal_level = logical;` and a server restart",
        )
    })
}

/// The outbox table `table` does not exist.
pub fn missing_table(table: &TableName) -> Problem {
    Problem::new(
        format!("table {table} does not exist"),
        "create it (sql/outbox.sql has the DDL, or `outbox-relay setup-sql`) or pass --table SCHEMA.TABLE",
    )
}

/// The outbox tables: those named exactly, then the plain and partitioned tables (not
/// partitions, not the relay's own bookkeeping tables) whose `schema.table` matches one
/// of the patterns, in name order. Fails when nothing is left.
pub async fn outbox_tables(
    client: &tokio_postgres::Client,
    router: &outbox_router::RouterConfig,
) -> Result<Vec<TableName>, RelayError> {
    let mut tables = router.tables.clone();
    if !router.table_patterns.is_empty() {
        let rows = client
            .query(
                "SELECT n.nspname::text, c.relname::text FROM pg_catalog.pg_class c                  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace                  WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition                    AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_%'                    AND NOT (c.relname = ANY($1))                  ORDER BY 1, 2",
                &[&super::own_tables::ALL.as_slice()],
            )
            .await
            .map_err(catalog_error("listing the tables"))?;
        for row in rows {
            let table = TableName {
                schema: row.get(0),
                name: row.get(1),
            };
            if !tables.contains(&table)
                && router
                    .table_patterns
                    .iter()
                    .any(|p| p.matches(&table.schema, &table.name))
            {
                tables.push(table);
            }
        }
        if tables.is_empty() {
            let patterns: Vec<&str> = router.table_patterns.iter().map(|p| p.as_str()).collect();
            return Err(Problem::new(
                format!(
                    "table.include.list: no table matches {}",
                    patterns.join(", ")
                ),
                "create the outbox table (sql/outbox.sql has the DDL)",
            )
            .into());
        }
    }
    Ok(tables)
}

/// Whether `table` exists (a plain or partitioned table): the one copy of this query.
pub async fn table_exists(
    client: &impl tokio_postgres::GenericClient,
    table: &TableName,
) -> Result<bool, RelayError> {
    Ok(client
        .query_opt(
            "SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')",
            &[&table.schema, &table.name],
        )
        .await
        .map_err(catalog_error("reading the catalog"))?
        .is_some())
}

/// Whether `table` is partitioned: its rows then reach the relay only through a
/// publication with `publish_via_partition_root` (otherwise they carry the partitions' names).
async fn is_partitioned(
    client: &tokio_postgres::Client,
    table: &TableName,
) -> Result<bool, RelayError> {
    let qualified = sql_rows::qualified(table);
    let row = client
        .query_one(
            "SELECT relkind = 'p' FROM pg_class WHERE oid = $1::text::regclass",
            &[&qualified],
        )
        .await
        .map_err(catalog_error("reading the catalog"))?;
    Ok(row.get(0))
}

/// CREATE PUBLICATION failed because another session created it first: the one of
/// `duplicate_object`, or, when both created it at the same moment (two connectors of one
/// `connect` worker starting together), the unique index on publication names.
fn created_meanwhile(e: &tokio_postgres::Error) -> bool {
    use tokio_postgres::error::SqlState;
    matches!(
        e.code(),
        Some(c) if *c == SqlState::DUPLICATE_OBJECT || *c == SqlState::UNIQUE_VIOLATION
    )
}
