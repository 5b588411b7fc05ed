//! Outbox rows read with SQL (the initial snapshot, polling mode), shaped as the pgoutput
//! messages the router already understands: a Relation from the catalog, and Inserts
//! whose columns are the text forms pgoutput would have sent.

use crate::error::RelayError;
use bytes::Bytes;
use outbox_router::TableName;
use pgoutput::{Column, ColumnValue, Insert, Relation, ReplicaIdentity, TupleData};
use postgres_protocol::escape::escape_identifier;

pub fn qualified(table: &TableName) -> String {
    format!(
        "{}.{}",
        escape_identifier(&table.schema),
        escape_identifier(&table.name)
    )
}

/// The table's columns as a Relation message under `relation_id`.
pub async fn relation(
    client: &impl tokio_postgres::GenericClient,
    table: &TableName,
    relation_id: u32,
) -> Result<Relation, RelayError> {
    let columns = client
        .query(
            "SELECT attname::text, atttypid::oid, atttypmod FROM pg_attribute \
             WHERE attrelid = $1::text::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
            &[&qualified(table)],
        )
        .await
        .map_err(|e| {
            RelayError::postgres("reading the outbox table's columns", e, || {
                format!("the relay's role needs SELECT on {table}")
            })
        })?;
    Ok(Relation {
        relation_id,
        namespace: table.schema.clone(),
        name: table.name.clone(),
        replica_identity: ReplicaIdentity::Default,
        columns: columns
            .iter()
            .map(|c| Column {
                flags: 0,
                name: c.get(0),
                type_oid: c.get(1),
                type_modifier: c.get(2),
            })
            .collect(),
    })
}

/// Every column in pgoutput's text form: its type's output function, which `format('%s', …)`
/// calls. A cast to text is not the same where the type has a cast of its own: `inet` keeps
/// its mask (`10.0.0.1/32`, where pgoutput sends `10.0.0.1`), `boolean` spells `true` (`t`),
/// `char(n)` drops its padding. `num_nulls` tells a NULL from a composite value whose fields
/// are all NULL (`IS NULL` is true for both).
pub fn select_list(relation: &Relation) -> String {
    relation
        .columns
        .iter()
        .map(|c| {
            let column = escape_identifier(&c.name);
            format!("CASE WHEN num_nulls({column}) = 0 THEN format('%s', {column}) END")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The Insert message for a row selected with [`select_list`], whose columns start at
/// `first` (earlier columns of the row are the caller's, e.g. its ctid).
pub fn insert(row: &tokio_postgres::Row, first: usize, relation_id: u32) -> Insert {
    Insert {
        relation_id,
        new_tuple: TupleData {
            columns: (first..row.len())
                .map(|i| match row.get::<_, Option<String>>(i) {
                    Some(text) => ColumnValue::Text(Bytes::from(text)),
                    None => ColumnValue::Null,
                })
                .collect(),
        },
    }
}
