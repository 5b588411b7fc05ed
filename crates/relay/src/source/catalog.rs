//! The catalog side of the replication source: the outbox table, the publication and the
//! slot the relay needs, created when missing, checked when present, and the slot's state.
//! Names are validated in config and quoted here.

use super::sql_rows;
use crate::config::PublicationMode;
use crate::error::{Problem, RelayError};
use outbox_router::TableName;
use pgoutput::Lsn;
use postgres_protocol::escape::{escape_identifier, escape_literal};

/// A failed catalog statement: retried unless it is a missing privilege or object.
fn catalog_error(context: &'static str) -> impl FnOnce(tokio_postgres::Error) -> RelayError {
    move |e| {
        RelayError::postgres(context, e, || {
            "the relay's role needs SELECT on the outbox table and the REPLICATION attribute (see `outbox-relay setup-sql`)".into()
        })
    }
}

/// State of the replication slot, as `pg_replication_slots` reports it.
#[derive(Debug, Clone)]
pub struct SlotState {
    pub plugin: Option<String>,
    pub database: Option<String>,
    pub active_pid: Option<i32>,
    pub confirmed_flush_lsn: Option<Lsn>,
    /// `reserved`, `extended`, `unreserved` or `lost` (invalidated by max_slot_wal_keep_size).
    pub wal_status: Option<String>,
    /// Why PostgreSQL invalidated the slot (17+: `wal_removed`, `rows_removed`,
    /// `wal_level_insufficient`, 18's `idle_timeout`; 16: `wal_removed` from `wal_status`, or
    /// `conflicting` on a standby, which covers the two standby reasons).
    pub invalidation_reason: Option<String>,
    /// A failover slot, synchronized to standbys (17+; `None` before).
    pub failover: Option<bool>,
}

impl SlotState {
    /// Why the slot can no longer stream, if PostgreSQL invalidated it: its
    /// `invalidation_reason` (17+), else what older servers show (`wal_status` lost: WAL
    /// removed; 16's `conflicting`: rows removed on a standby).
    pub fn invalidation(&self) -> Option<&str> {
        self.invalidation_reason
            .as_deref()
            .or((self.wal_status.as_deref() == Some("lost")).then_some("wal_removed"))
    }
}

pub async fn slot_state(
    client: &tokio_postgres::Client,
    slot: &str,
) -> Result<Option<SlotState>, tokio_postgres::Error> {
    let row = client
        .query_opt(
            // invalidation_reason (17+) and conflicting (16) read through jsonb: NULL where the
            // server has no such column.
            "SELECT plugin::text, database::text, active_pid, confirmed_flush_lsn::text, wal_status, \
                    COALESCE(to_jsonb(s) ->> 'invalidation_reason', \
                             CASE WHEN wal_status = 'lost' THEN 'wal_removed' \
                                  WHEN to_jsonb(s) ->> 'conflicting' = 'true' THEN 'conflicting' END), \
                    (to_jsonb(s) ->> 'failover')::boolean \
             FROM pg_replication_slots s WHERE slot_name = $1",
            &[&slot],
        )
        .await?;
    Ok(row.map(|r| SlotState {
        plugin: r.get(0),
        database: r.get(1),
        active_pid: r.get(2),
        confirmed_flush_lsn: r.get::<_, Option<String>>(3).and_then(|l| Lsn::parse(&l)),
        wal_status: r.get(4),
        invalidation_reason: r.get(5),
        failover: r.get(6),
    }))
}

/// Checks that logical replication is on and the outbox table exists; creates the
/// publication when missing (as `mode` says) and checks an existing one.
pub async fn ensure_publication(
    client: &tokio_postgres::Client,
    tables: &[TableName],
    publication: &str,
    mode: PublicationMode,
    read: &[(&str, &str)],
) -> Result<(), RelayError> {
    let wal_level: String = client
        .query_one("SHOW wal_level", &[])
        .await
        .map_err(catalog_error("reading wal_level"))?
        .get(0);
    if let Some(problem) = wal_level_problem(&wal_level) {
        return Err(problem.into());
    }
    for table in tables {
        if !table_exists(client, table).await? {
            return Err(missing_table(table).into());
        }
    }
    // A generated column the routing reads: refused before PostgreSQL 18 (or when virtual);
    // on 18 a publication made here publishes it.
    let version = server_version_num(client).await?;
    let mut publish_generated = false;
    for table in tables {
        let generated = generated_columns(client, table, read).await?;
        if let Some(problem) = generated_column_problem(table, &generated, version) {
            return Err(problem.into());
        }
        publish_generated |= !generated.is_empty();
    }
    ensure_publication_exists(client, publication, mode, tables, read, publish_generated).await
}

/// The server's `server_version_num` (180000 for 18.0).
pub async fn server_version_num(client: &tokio_postgres::Client) -> Result<i32, RelayError> {
    Ok(client
        .query_one("SELECT current_setting('server_version_num')::int", &[])
        .await
        .map_err(catalog_error("reading the server's version"))?
        .get(0))
}

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

/// The relay's own tables, never outbox tables whatever a pattern matches.
const OWN_TABLES: [&str; 5] = [
    super::snapshot::MARKER_TABLE,
    super::slot_history::TABLE,
    super::canary::TABLE,
    super::dead_letter_table::TABLE,
    super::cleanup::LEDGER,
];

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
                &[&OWN_TABLES.as_slice()],
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

async fn publication_exists(
    client: &tokio_postgres::Client,
    publication: &str,
) -> Result<bool, RelayError> {
    Ok(client
        .query_opt(
            "SELECT 1 FROM pg_publication WHERE pubname = $1",
            &[&publication],
        )
        .await
        .map_err(catalog_error("reading the catalog"))?
        .is_some())
}

async fn ensure_publication_exists(
    client: &tokio_postgres::Client,
    publication: &str,
    mode: PublicationMode,
    tables: &[TableName],
    read: &[(&str, &str)],
    publish_generated: bool,
) -> Result<(), RelayError> {
    let mut any_partitioned = false;
    for table in tables {
        any_partitioned |= is_partitioned(client, table).await?;
    }
    let mut exists = publication_exists(client, publication).await?;
    if !exists && mode != PublicationMode::OutboxInsertsOnly {
        create_debezium_publication(
            client,
            publication,
            mode,
            tables,
            any_partitioned,
            publish_generated,
        )
        .await?;
        exists = true;
    }
    if exists {
        for table in tables {
            if let Some(problem) = publication_gap(client, publication, table, read).await? {
                return Err(problem.into());
            }
        }
        return Ok(());
    }
    // Only INSERTs are events: UPDATE/DELETE/TRUNCATE of the outbox (cleanup jobs) are not
    // even sent, which saves the walsender the work.
    let sql = format!(
        "CREATE PUBLICATION {}{} WITH (publish = 'insert'{}{})",
        escape_identifier(publication),
        for_tables(tables),
        if any_partitioned {
            ", publish_via_partition_root = true"
        } else {
            ""
        },
        if publish_generated {
            PUBLISH_GENERATED
        } else {
            ""
        }
    );
    match client.batch_execute(&sql).await {
        Ok(()) => {
            tracing::info!(
                publication,
                tables = qualified_list(tables),
                "created publication"
            );
            Ok(())
        }
        // Another instance created it at the same moment.
        Err(e) if created_meanwhile(&e) => Ok(()),
        Err(e) => Err(Problem::new(
            format!(
                "could not create publication {publication}: {}",
                crate::error::server_message(&e)
            ),
            format!("a DBA can run `{sql};` (the table's owner or a superuser may)"),
        )
        .into()),
    }
}

/// ` FOR TABLE a, b`, or nothing for the table-less outbox (a publication without
/// tables still carries logical decoding messages).
pub fn for_tables(tables: &[TableName]) -> String {
    if tables.is_empty() {
        String::new()
    } else {
        format!(" FOR TABLE {}", qualified_list(tables))
    }
}

/// `schema.table, schema.table` quoted for SQL.
fn qualified_list(tables: &[TableName]) -> String {
    tables
        .iter()
        .map(sql_rows::qualified)
        .collect::<Vec<_>>()
        .join(", ")
}

/// What keeps the existing publication `publication` from carrying every INSERT of `table`
/// under the table's own name, if anything: `run` stops on it, `check` reports it.
pub async fn publication_gap(
    client: &tokio_postgres::Client,
    publication: &str,
    table: &TableName,
    read: &[(&str, &str)],
) -> Result<Option<Problem>, RelayError> {
    let partitioned = is_partitioned(client, table).await?;
    let published = client
            .query_opt(
                "SELECT 1 FROM pg_publication_tables WHERE pubname = $1 AND schemaname = $2 AND tablename = $3",
                &[&publication, &table.schema, &table.name],
            )
            .await
            .map_err(catalog_error("reading the catalog"))?
            .is_some();
    let via_root: bool = client
        .query_one(
            "SELECT pubviaroot FROM pg_publication WHERE pubname = $1",
            &[&publication],
        )
        .await
        .map_err(catalog_error("reading the catalog"))?
        .get(0);
    if partitioned && !via_root {
        return Ok(Some(Problem::new(
            format!(
                "{table} is partitioned but publication {publication} publishes its partitions under their own \
                 names, which the relay would not recognise"
            ),
            format!(
                "run `ALTER PUBLICATION {} SET (publish_via_partition_root = true);`",
                escape_identifier(publication)
            ),
        )));
    }
    if !published {
        return Ok(Some(Problem::new(
            format!("publication {publication} exists but does not include {table}"),
            format!(
                "run `ALTER PUBLICATION {} ADD TABLE {};`",
                escape_identifier(publication),
                sql_rows::qualified(table)
            ),
        )));
    }
    if let Some(problem) = publication_problem(client, publication, table).await? {
        return Ok(Some(problem));
    }
    let generated = generated_columns(client, table, read).await?;
    if let Some(problem) =
        generated_column_problem(table, &generated, server_version_num(client).await?)
    {
        return Ok(Some(problem));
    }
    unpublished_column(client, publication, table, read, &generated).await
}

/// ` publish_generated_columns = stored` in a WITH list (PostgreSQL 18).
const PUBLISH_GENERATED: &str = ", publish_generated_columns = stored";

/// A column the routing reads that the existing publication does not send for `table`: a
/// stored generated column without `publish_generated_columns = stored` (PostgreSQL 18), or
/// a column its column list leaves out. `pg_publication_tables.attnames` lists exactly
/// what is sent on 18; before 18 it also lists generated columns, which
/// [`generated_column_problem`] refuses first.
async fn unpublished_column(
    client: &tokio_postgres::Client,
    publication: &str,
    table: &TableName,
    read: &[(&str, &str)],
    generated: &[GeneratedColumn],
) -> Result<Option<Problem>, RelayError> {
    let row = client
        .query_opt(
            "SELECT pt.attnames::text[], \
                    EXISTS (SELECT 1 FROM pg_publication_rel r JOIN pg_publication p ON p.oid = r.prpubid \
                            WHERE p.pubname = $1 AND r.prrelid = $4::text::regclass AND r.prattrs IS NOT NULL), \
                    ARRAY(SELECT attname::text FROM pg_attribute \
                          WHERE attrelid = $4::text::regclass AND attnum > 0 AND NOT attisdropped) \
             FROM pg_publication_tables pt WHERE pt.pubname = $1 AND pt.schemaname = $2 AND pt.tablename = $3",
            &[&publication, &table.schema, &table.name, &sql_rows::qualified(table)],
        )
        .await
        .map_err(catalog_error("reading the publication"))?;
    let Some(row) = row else { return Ok(None) };
    let Some(published) = row.get::<_, Option<Vec<String>>>(0) else {
        return Ok(None);
    };
    let column_list: bool = row.get(1);
    let columns: Vec<String> = row.get(2);
    // A column the table does not have is the router's to report (a dead letter).
    let Some((column, read_for)) = read.iter().find(|(column, _)| {
        columns.iter().any(|c| c == column) && !published.iter().any(|c| c == column)
    }) else {
        return Ok(None);
    };
    let name = escape_identifier(publication);
    let qualified = sql_rows::qualified(table);
    let is_generated = generated.iter().any(|g| g.name == *column);
    Ok(Some(if column_list {
        Problem::new(
            format!(
                "publication {publication} publishes only the columns ({}) of {table}, not {column}, which the \
                 relay reads for {read_for}: every event would lack it",
                published.join(", ")
            ),
            format!(
                "publish every column: `ALTER PUBLICATION {name} DROP TABLE {qualified}; ALTER PUBLICATION {name} \
                 ADD TABLE {qualified};`{}",
                if is_generated {
                    format!(" and `ALTER PUBLICATION {name} SET (publish_generated_columns = stored);`")
                } else {
                    String::new()
                }
            ),
        )
    } else {
        Problem::new(
            format!(
                "column {column} of {table} is a generated column and the relay reads it for {read_for}, but \
                 publication {publication} does not publish generated columns (publish_generated_columns = none): \
                 every event would lack it"
            ),
            format!(
                "run `ALTER PUBLICATION {name} SET (publish_generated_columns = stored);` (the relay does not alter \
                 a publication it did not create: other subscribers of it would receive the generated columns too)"
            ),
        )
    }))
}

/// What makes an existing publication relay less than every INSERT into `table` — it does
/// not publish inserts, or it filters rows — while keepalives still move the slot past
/// them: the events would be lost silently. `None` when it publishes every insert.
async fn publication_problem(
    client: &tokio_postgres::Client,
    publication: &str,
    table: &TableName,
) -> Result<Option<Problem>, RelayError> {
    let row = client
        .query_opt(
            "SELECT p.pubinsert, p.pubupdate, p.pubdelete, p.pubtruncate, pt.rowfilter \
             FROM pg_publication p LEFT JOIN pg_publication_tables pt \
               ON pt.pubname = p.pubname AND pt.schemaname = $2 AND pt.tablename = $3 \
             WHERE p.pubname = $1",
            &[&publication, &table.schema, &table.name],
        )
        .await
        .map_err(catalog_error("reading the publication"))?;
    let Some(row) = row else { return Ok(None) };
    let name = escape_identifier(publication);
    if !row.get::<_, bool>(0) {
        let mut publish = vec!["insert"];
        for (i, op) in [(1, "update"), (2, "delete"), (3, "truncate")] {
            if row.get::<_, bool>(i) {
                publish.push(op);
            }
        }
        return Ok(Some(Problem::new(
            format!(
                "publication {publication} does not publish INSERTs, so no outbox event would be relayed while the \
                 slot moves past them"
            ),
            format!(
                "run `ALTER PUBLICATION {name} SET (publish = '{}');`",
                publish.join(", ")
            ),
        )));
    }
    if let Some(filter) = row.get::<_, Option<String>>(4) {
        let qualified = sql_rows::qualified(table);
        return Ok(Some(Problem::new(
            format!(
                "publication {publication} publishes only the rows of {table} WHERE {filter}: the other events \
                 would be lost while the slot moves past them"
            ),
            format!(
                "remove the filter: `ALTER PUBLICATION {name} DROP TABLE {qualified}; ALTER PUBLICATION {name} \
                 ADD TABLE {qualified};`"
            ),
        )));
    }
    Ok(None)
}

/// Creates the publication as Debezium's `publication.autocreate.mode` would.
async fn create_debezium_publication(
    client: &tokio_postgres::Client,
    publication: &str,
    mode: PublicationMode,
    tables: &[TableName],
    any_partitioned: bool,
    publish_generated: bool,
) -> Result<(), RelayError> {
    let name = escape_identifier(publication);
    let for_tables = for_tables(tables);
    let generated = if publish_generated {
        PUBLISH_GENERATED
    } else {
        ""
    };
    let sql = match mode {
        PublicationMode::Disabled => {
            return Err(Problem::new(
                format!(
                "publication {publication} does not exist and publication.autocreate.mode=disabled"
            ),
                format!(
                    "a DBA can run `CREATE PUBLICATION {name}{for_tables}{};`",
                    with_options(&[], generated)
                ),
            )
            .into())
        }
        PublicationMode::AllTables => format!(
            "CREATE PUBLICATION {name} FOR ALL TABLES{}",
            with_options(&[], generated)
        ),
        PublicationMode::NoTables => {
            format!("CREATE PUBLICATION {name}{}", with_options(&[], generated))
        }
        PublicationMode::Filtered | PublicationMode::OutboxInsertsOnly => {
            format!(
                "CREATE PUBLICATION {name}{for_tables}{}",
                with_options(
                    if any_partitioned {
                        &[", publish_via_partition_root = true"]
                    } else {
                        &[]
                    },
                    generated
                )
            )
        }
    };
    match client.batch_execute(&sql).await {
        Ok(()) => {
            tracing::info!(publication, ?mode, "created publication");
            Ok(())
        }
        Err(e) if created_meanwhile(&e) => Ok(()),
        Err(e) => Err(Problem::new(
            format!(
                "could not create publication {publication} (publication.autocreate.mode={mode:?}): {}",
                crate::error::server_message(&e)
            ),
            format!(
                "a DBA can run `{sql};`, or use publication.autocreate.mode=filtered (FOR ALL TABLES needs a \
                 superuser)"
            ),
        )
        .into()),
    }
}

/// ` WITH (a, b)` from `, a` options (nothing when there are none).
fn with_options(options: &[&str], generated: &str) -> String {
    let all: String = options.iter().copied().chain([generated]).collect();
    match all.strip_prefix(", ") {
        Some(list) => format!(" WITH ({list})"),
        None => String::new(),
    }
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

/// Creates the slot when missing (no snapshot) and checks an existing one. Returns its
/// confirmed position, where streaming resumes.
pub async fn ensure_slot(
    client: &tokio_postgres::Client,
    slot: &str,
    database: &str,
    failover: bool,
) -> Result<Lsn, RelayError> {
    let state = slot_state(client, slot)
        .await
        .map_err(catalog_error("reading the catalog"))?;
    let state = match state {
        Some(state) => state,
        None => {
            // PostgreSQL 17: (name, plugin, temporary, twophase, failover).
            let sql = format!(
                "SELECT pg_create_logical_replication_slot({}, 'pgoutput'{})",
                escape_literal(slot),
                if failover { ", false, false, true" } else { "" }
            );
            match client.batch_execute(&sql).await {
                Ok(()) => {
                    tracing::info!(slot, "created replication slot")
                }
                Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::DUPLICATE_OBJECT) => {}
                Err(e)
                    if e.code()
                        == Some(&tokio_postgres::error::SqlState::CONFIGURATION_LIMIT_EXCEEDED) =>
                {
                    return Err(no_free_slot().into())
                }
                Err(e) => {
                    return Err(RelayError::postgres(
                        &format!("could not create replication slot {slot}"),
                        e,
                        || {
                            "the user needs the REPLICATION attribute: ALTER ROLE <user> REPLICATION;".into()
                        },
                    ))
                }
            }
            slot_state(client, slot)
                .await
                .map_err(catalog_error("reading the catalog"))?
                .ok_or_else(|| {
                    RelayError::ConnectionLost(anyhow::anyhow!(
                        "slot {slot} vanished right after creation"
                    ))
                })?
        }
    };
    if let Some(problem) = slot_problem(&state, slot, database) {
        return Err(problem.into());
    }
    Ok(state.confirmed_flush_lsn.unwrap_or(Lsn::ZERO))
}

/// What keeps the existing slot `slot` (in `state`) from serving the relay on `database`.
pub fn slot_problem(state: &SlotState, slot: &str, database: &str) -> Option<Problem> {
    if state.plugin.as_deref() != Some("pgoutput") {
        return Some(Problem::new(
            format!(
                "replication slot {slot} uses plugin {:?}, outbox-relay needs pgoutput",
                state.plugin.as_deref().unwrap_or_default()
            ),
            format!(
                "drop it (`SELECT pg_drop_replication_slot({});`) or choose another --slot",
                escape_literal(slot)
            ),
        ));
    }
    if state.database.as_deref() != Some(database) {
        return Some(Problem::new(
            format!(
                "replication slot {slot} belongs to database {:?}, not {database:?}",
                state.database.as_deref().unwrap_or_default()
            ),
            "choose another --slot",
        ));
    }
    state
        .invalidation()
        .map(|reason| invalidated_slot_problem(slot, reason))
}

/// Every replication slot is in use.
pub fn no_free_slot() -> Problem {
    Problem::new(
        "no free replication slot: every slot is in use (max_replication_slots)",
        "drop an unused slot or raise max_replication_slots (needs a restart)",
    )
}

/// Moves the slot's confirmed position to `lsn` after streaming stopped. The replication
/// protocol has no "final status" on close, so a graceful shutdown records its last
/// acknowledged position this way. Retries while the walsender is still exiting.
pub async fn advance_slot(
    database: &super::postgres::Database,
    slot: &str,
    lsn: Lsn,
) -> Result<(), RelayError> {
    let client = database.connect().await?;
    let mut last_error = None;
    for _ in 0..50 {
        let current = slot_state(&client, slot)
            .await
            .map_err(catalog_error("reading the catalog"))?;
        match current {
            Some(s) if s.confirmed_flush_lsn.unwrap_or(Lsn::ZERO) >= lsn => return Ok(()),
            Some(s) if s.active_pid.is_some() => {}
            Some(_) => {
                let sql = format!(
                    "SELECT pg_replication_slot_advance({}, '{}')",
                    escape_literal(slot),
                    lsn
                );
                match client.batch_execute(&sql).await {
                    Ok(()) => return Ok(()),
                    Err(e) => last_error = Some(e.to_string()),
                }
            }
            None => {
                return Err(RelayError::Misconfiguration(anyhow::anyhow!(
                    "replication slot {slot} was dropped"
                )))
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    Err(RelayError::ConnectionLost(anyhow::anyhow!(
        "could not record the final position {} on slot {slot}: {}",
        lsn,
        last_error.unwrap_or_else(|| "the slot stayed active".into())
    )))
}

/// PostgreSQL invalidated the slot for `reason`: it can never stream again. Retrying cannot
/// help; a person must choose (or `--on-missing-slot` chose). The fix matches the reason.
fn invalidated_slot_problem(slot: &str, reason: &str) -> Problem {
    let (why, prevent) = match reason {
        "wal_removed" => (
            "it exceeded max_slot_wal_keep_size: PostgreSQL removed WAL it had not streamed, so events written \
             while it fell behind cannot be relayed from it",
            "raise max_slot_wal_keep_size (or set it to -1) to keep this from happening again",
        ),
        "rows_removed" => (
            "it lives on a standby whose primary removed catalog rows the slot still needed",
            "turn on hot_standby_feedback on the standby and connect it to the primary through a physical slot \
             (primary_slot_name), so the primary keeps those rows",
        ),
        "wal_level_insufficient" => (
            "the primary's wal_level was lowered below logical",
            "set wal_level = logical on the primary again (a restart), then create the slot anew",
        ),
        "conflicting" => (
            "it lives on a standby and conflicted with recovery: the primary removed catalog rows it needed, or its \
             wal_level was lowered below logical",
            "turn on hot_standby_feedback on the standby with a physical slot to the primary (primary_slot_name), and \
             keep wal_level = logical on the primary",
        ),
        "idle_timeout" => (
            "no client streamed from it for longer than idle_replication_slot_timeout",
            "raise idle_replication_slot_timeout (0 turns it off), or keep a relay (or a standby relay) running on \
             the slot",
        ),
        _ => (
            "PostgreSQL gave this reason",
            "see pg_replication_slots.invalidation_reason in PostgreSQL's documentation",
        ),
    };
    Problem::new(
        format!("replication slot {slot} was invalidated ({reason}): {why}"),
        format!(
            "events still in the outbox table can be re-read: start with --on-missing-slot reread (the relay drops \
             the slot, creates it again and relays every row still in the outbox table; rows relayed before come \
             again), or accept the gap with --on-missing-slot accept-gap; by hand: `SELECT \
             pg_drop_replication_slot({});` and start with snapshot.mode=initial. {prevent}",
            escape_literal(slot)
        ),
    )
}

/// `--slot-failover` needs failover slots: PostgreSQL 17 or later.
pub async fn require_failover_slots(client: &tokio_postgres::Client) -> Result<(), RelayError> {
    let version = server_version_num(client).await?;
    if version < 170_000 {
        return Err(RelayError::misconfigured(format!(
            "slot-failover: PostgreSQL {}.{} has no failover slots (they came with PostgreSQL 17); upgrade the \
             server, or leave --slot-failover (slot.failover) off and plan for a slot that a failover does not carry \
             over (--on-missing-slot)",
            version / 10_000,
            version % 100
        )));
    }
    Ok(())
}

/// Drops `slot` (invalidated; `--on-missing-slot` chose to make it again).
pub async fn drop_slot(client: &tokio_postgres::Client, slot: &str) -> Result<(), RelayError> {
    client
        .execute("SELECT pg_drop_replication_slot($1)", &[&slot])
        .await
        .map_err(catalog_error("dropping the invalidated replication slot"))?;
    Ok(())
}

/// Waits until `publication` exists on this server (a standby that replays the primary's
/// CREATE PUBLICATION).
pub async fn wait_for_publication(
    client: &tokio_postgres::Client,
    publication: &str,
    within: std::time::Duration,
) -> Result<(), RelayError> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let found = client
            .query_opt(
                "SELECT 1 FROM pg_publication WHERE pubname = $1",
                &[&publication],
            )
            .await
            .map_err(catalog_error("reading the publications"))?
            .is_some();
        if found {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            return Err(RelayError::ConnectionLost(anyhow::anyhow!(
                "the publication {publication} made on the primary is not on the standby after {within:?}: is it replaying?"
            )));
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn state(plugin: &str, database: &str, wal_status: &str) -> SlotState {
        SlotState {
            plugin: Some(plugin.into()),
            database: Some(database.into()),
            active_pid: None,
            confirmed_flush_lsn: None,
            wal_status: Some(wal_status.into()),
            invalidation_reason: None,
            failover: None,
        }
    }

    #[test]
    fn a_slot_serves_the_relay_only_with_pgoutput_on_its_database_and_its_wal_kept() {
        assert_eq!(
            slot_problem(&state("pgoutput", "app", "reserved"), "s", "app"),
            None
        );
        let plugin = slot_problem(&state("wal2json", "app", "reserved"), "s", "app").unwrap();
        assert!(plugin.what.contains("wal2json"), "{plugin}");
        assert!(
            plugin.fix.contains("pg_drop_replication_slot('s')"),
            "{plugin}"
        );
        let database = slot_problem(&state("pgoutput", "other", "reserved"), "s", "app").unwrap();
        assert_eq!(database.fix, "choose another --slot");
        let lost = slot_problem(&state("pgoutput", "app", "lost"), "s", "app").unwrap();
        assert!(lost.what.contains("invalidated (wal_removed)"), "{lost}");
        assert!(lost.fix.contains("max_slot_wal_keep_size"), "{lost}");
        assert!(lost.fix.contains("--on-missing-slot reread"), "{lost}");
        // Each reason PostgreSQL 17 and 18 give has its own fix.
        for (reason, fix) in [
            ("rows_removed", "hot_standby_feedback"),
            ("wal_level_insufficient", "wal_level = logical"),
            ("idle_timeout", "idle_replication_slot_timeout"),
        ] {
            let invalidated = SlotState {
                invalidation_reason: Some(reason.into()),
                ..state("pgoutput", "app", "lost")
            };
            let problem = slot_problem(&invalidated, "s", "app").unwrap();
            assert!(problem.what.contains(reason), "{problem}");
            assert!(problem.fix.contains(fix), "{problem}");
            assert!(!problem.fix.contains("max_slot_wal_keep_size"), "{problem}");
        }
        // run stops with the same problem, both parts typed (check and validate read them).
        assert_eq!(RelayError::from(lost.clone()).problem(), Some(lost));
    }

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

    #[test]
    fn the_with_list_of_a_created_publication() {
        assert_eq!(with_options(&[], ""), "");
        assert_eq!(
            with_options(&[], PUBLISH_GENERATED),
            " WITH (publish_generated_columns = stored)"
        );
        assert_eq!(
            with_options(&[", publish_via_partition_root = true"], PUBLISH_GENERATED),
            " WITH (publish_via_partition_root = true, publish_generated_columns = stored)"
        );
    }
}
