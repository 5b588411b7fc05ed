//! An outbox table's columns as the routing needs them: generated columns (published from
//! PostgreSQL 18 only) and the facts Kafka Connect schemas need (nullability, defaults, types).

use super::catalog_error;
use crate::error::{Problem, RelayError};
use crate::source::sql_rows;
use outbox_router::TableName;
use postgres_protocol::escape::escape_identifier;

/// PostgreSQL 18 publishes stored generated columns (`publish_generated_columns`).
pub const GENERATED_COLUMNS_VERSION: i32 = 180_000;

/// A generated column (`GENERATED ALWAYS AS (…)`) of an outbox table that the routing reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedColumn {
    pub name: String,
    /// What the routing reads it for.
    pub read_for: String,
    /// STORED (PostgreSQL 18 can publish it); false: VIRTUAL (18's default, never published).
    pub stored: bool,
}

/// The columns of `table` among `read` (column, what it is read for) that are generated.
pub async fn generated_columns(
    client: &tokio_postgres::Client,
    table: &TableName,
    read: &[(&str, &str)],
) -> Result<Vec<GeneratedColumn>, RelayError> {
    let names: Vec<&str> = read.iter().map(|(column, _)| *column).collect();
    let rows = client
        .query(
            "SELECT attname::text, attgenerated = 's' FROM pg_attribute \
             WHERE attrelid = $1::text::regclass AND attnum > 0 AND NOT attisdropped \
               AND attgenerated <> '' AND attname::text = ANY($2::text[]) ORDER BY attnum",
            &[&sql_rows::qualified(table), &names],
        )
        .await
        .map_err(catalog_error("reading the outbox table's columns"))?;
    Ok(rows
        .iter()
        .map(|r| {
            let name: String = r.get(0);
            let read_for = read
                .iter()
                .find(|(column, _)| *column == name)
                .map_or("", |(_, what)| *what)
                .to_owned();
            GeneratedColumn {
                name,
                read_for,
                stored: r.get(1),
            }
        })
        .collect())
}

/// What keeps pgoutput from ever sending the generated columns in `generated` whatever the
/// publication says: a server before PostgreSQL 18 (`version` is `server_version_num`), or a
/// VIRTUAL column. Polling mode reads them with SQL and is not concerned.
pub fn generated_column_problem(
    table: &TableName,
    generated: &[GeneratedColumn],
    version: i32,
) -> Option<Problem> {
    let column = generated
        .iter()
        .find(|c| version < GENERATED_COLUMNS_VERSION || !c.stored)?;
    let qualified = sql_rows::qualified(table);
    let plain = format!(
        "`ALTER TABLE {qualified} ALTER COLUMN {} DROP EXPRESSION;` and a BEFORE INSERT trigger that sets it",
        escape_identifier(&column.name)
    );
    Some(if version < GENERATED_COLUMNS_VERSION {
        Problem::new(
            format!(
                "column {} of {table} is a generated column and the relay reads it for {}, but pgoutput sends no \
                 generated column before PostgreSQL 18 (this server is {}.{}): every event would lack it",
                column.name,
                column.read_for,
                version / 10_000,
                version % 100
            ),
            format!(
                "use polling mode (--mode polling reads the column with SQL), make it a plain column filled by a \
                 trigger ({plain}), or upgrade to PostgreSQL 18 (publish_generated_columns = stored)"
            ),
        )
    } else {
        Problem::new(
            format!(
                "column {} of {table} is a VIRTUAL generated column and the relay reads it for {}, but logical \
                 replication never sends virtual generated columns: every event would lack it",
                column.name, column.read_for
            ),
            format!(
                "make it STORED (drop it and add it again with GENERATED ALWAYS AS (…) STORED), make it a plain \
                 column filled by a trigger ({plain}), or use polling mode (--mode polling)"
            ),
        )
    })
}

/// Nullability, defaults and types of `table`'s columns, for Kafka Connect schemas: each
/// type with domains resolved to their base type (and the innermost modifier a domain
/// sets), its name (extension types such as citext and hstore have no fixed OID), enum
/// labels, and an array's element type.
pub async fn column_facts(
    client: &tokio_postgres::Client,
    table: &TableName,
) -> Result<Vec<outbox_router::connect::ColumnFacts>, RelayError> {
    use outbox_router::connect::{ColumnFacts, PgType};
    let qualified = sql_rows::qualified(table);
    let rows = client
        .query(
            "WITH RECURSIVE cols AS ( \
               SELECT a.attnum, a.attname::text AS name, a.attnotnull, pg_get_expr(d.adbin, d.adrelid) AS def, \
                      a.atttypid AS typ, a.atttypmod AS typmod, 0 AS depth \
               FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum \
               WHERE a.attrelid = $1::text::regclass AND a.attnum > 0 AND NOT a.attisdropped \
               UNION ALL \
               SELECT c.attnum, c.name, c.attnotnull, c.def, t.typbasetype, \
                      CASE WHEN c.typmod = -1 THEN t.typtypmod ELSE c.typmod END, c.depth + 1 \
               FROM cols c JOIN pg_type t ON t.oid = c.typ WHERE t.typtype = 'd') \
             SELECT DISTINCT ON (c.attnum) c.name, c.attnotnull, c.def, c.typ, c.typmod, t.typname::text, \
                    (SELECT array_agg(e.enumlabel::text ORDER BY e.enumsortorder) FROM pg_enum e WHERE e.enumtypid = c.typ), \
                    el.oid, el.typname::text, \
                    (SELECT array_agg(e.enumlabel::text ORDER BY e.enumsortorder) FROM pg_enum e WHERE e.enumtypid = el.oid), \
                    (SELECT array_position(k.indkey::int2[], c.attnum) FROM ( \
                       SELECT i.indkey FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid \
                       WHERE i.indrelid = $1::text::regclass AND (i.indisprimary OR i.indisunique) \
                         AND 0 <> ALL (i.indkey::int2[]) \
                       ORDER BY i.indisprimary DESC, i.indisclustered DESC, ic.relname LIMIT 1) k) \
             FROM cols c JOIN pg_type t ON t.oid = c.typ \
             LEFT JOIN pg_type el ON el.oid = t.typelem AND t.typcategory = 'A' \
             ORDER BY c.attnum, c.depth DESC",
            &[&qualified],
        )
        .await
        .map_err(catalog_error("reading the outbox table's columns"))?;
    Ok(rows
        .iter()
        .map(|r| ColumnFacts {
            name: r.get(0),
            not_null: r.get(1),
            default_expression: r.get(2),
            pg_type: Some(PgType {
                oid: r.get(3),
                typmod: r.get(4),
                name: r.get(5),
                enum_labels: r.get(6),
                element: r.get::<_, Option<u32>>(7).map(|oid| {
                    Box::new(PgType {
                        oid,
                        typmod: -1,
                        name: r.get(8),
                        enum_labels: r.get(9),
                        element: None,
                    })
                }),
            }),
            key_position: r.get(10),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_column_the_routing_reads_is_refused_before_postgresql_18_or_when_virtual() {
        let table = TableName::parse("public.outbox").unwrap();
        let stored = GeneratedColumn {
            name: "aggregate_type".into(),
            read_for: "the topic (route-by column)".into(),
            stored: true,
        };
        let old = generated_column_problem(&table, std::slice::from_ref(&stored), 170_004).unwrap();
        assert!(
            old.what.contains("column aggregate_type of public.outbox"),
            "{old}"
        );
        assert!(old.what.contains("the topic (route-by column)"), "{old}");
        assert!(
            old.what
                .contains("before PostgreSQL 18 (this server is 17.4)"),
            "{old}"
        );
        assert!(old.fix.contains("--mode polling"), "{old}");
        assert!(
            old.fix.contains(
                "ALTER TABLE \"public\".\"outbox\" ALTER COLUMN \"aggregate_type\" DROP EXPRESSION"
            ),
            "{old}"
        );
        assert_eq!(
            generated_column_problem(&table, std::slice::from_ref(&stored), 180_000),
            None
        );
        assert_eq!(generated_column_problem(&table, &[], 150_000), None);
        let virtual_column = GeneratedColumn {
            stored: false,
            ..stored
        };
        let problem = generated_column_problem(&table, &[virtual_column], 180_001).unwrap();
        assert!(problem.what.contains("VIRTUAL"), "{problem}");
        assert!(problem.fix.contains("STORED"), "{problem}");
    }
}
