//! Which columns identify and order an outbox table's rows: its primary key, and the identity
//! or serial column that gives the insertion order.

use super::catalog_error;
use crate::error::{Problem, RelayError};
use crate::source::sql_rows;
use outbox_router::TableName;

/// `table`'s primary key columns and their types (as `format_type` spells them), in key
/// order; empty when it has none.
pub async fn primary_key(
    client: &impl tokio_postgres::GenericClient,
    table: &TableName,
) -> Result<Vec<(String, String)>, RelayError> {
    let rows = client
        .query(
            "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod) FROM pg_index i \
             JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) \
             WHERE i.indrelid = $1::text::regclass AND i.indisprimary \
             ORDER BY array_position(i.indkey::int2[], a.attnum)",
            &[&sql_rows::qualified(table)],
        )
        .await
        .map_err(catalog_error("reading the outbox table's primary key"))?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

/// The columns of `table` whose values follow insertion: identity columns and columns whose
/// default draws from a sequence (serial). Polling orders by one of them: timestamps tie
/// within a transaction (`now()`) and can invert across concurrent ones, and `ctid` follows
/// free space, not insertion.
pub async fn insertion_order_columns(
    client: &impl tokio_postgres::GenericClient,
    table: &TableName,
) -> Result<Vec<String>, RelayError> {
    let rows = client
        .query(
            "SELECT attname::text FROM pg_attribute \
             WHERE attrelid = $1::text::regclass AND attnum > 0 AND NOT attisdropped \
               AND (attidentity IN ('a', 'd') OR pg_get_serial_sequence($1, attname) IS NOT NULL) \
             ORDER BY attnum",
            &[&sql_rows::qualified(table)],
        )
        .await
        .map_err(catalog_error("reading the outbox table's columns"))?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// The column polling orders by: `wanted` if it follows insertion, else the table's own;
/// refused with the DDL that adds one.
pub async fn insertion_order_column(
    client: &impl tokio_postgres::GenericClient,
    table: &TableName,
    wanted: Option<&str>,
) -> Result<String, RelayError> {
    let columns = insertion_order_columns(client, table).await?;
    let add = format!(
        "ALTER TABLE {} ADD COLUMN seq bigint GENERATED ALWAYS AS IDENTITY; CREATE INDEX ON {} (seq);",
        sql_rows::qualified(table),
        sql_rows::qualified(table)
    );
    match wanted {
        Some(column) if columns.iter().any(|c| c == column) => Ok(column.to_owned()),
        Some(column) => Err(Problem::new(
            format!(
                "--poll-order-by {column} is not an identity or serial column of {table}: polling must order rows \
                 by something that follows insertion (timestamps tie within a transaction and invert across \
                 concurrent ones; ctid follows free space)"
            ),
            format!("pass one of [{}], or add one: `{add}`", columns.join(", ")),
        )
        .into()),
        None => columns.into_iter().next().ok_or_else(|| {
            Problem::new(
                format!(
                    "{table} has no identity or serial column to order polled rows by insertion (timestamps tie \
                     within a transaction and invert across concurrent ones; ctid follows free space)"
                ),
                format!("add one: `{add}` (sql/outbox.sql has it), or pass --poll-order-by"),
            )
            .into()
        }),
    }
}
