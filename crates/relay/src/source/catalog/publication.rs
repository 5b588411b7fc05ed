//! The publication: created as `publication.autocreate.mode` says when missing, checked when
//! present (it must carry every INSERT of each outbox table, and the columns the routing reads).

use super::columns::{generated_column_problem, generated_columns, GeneratedColumn};
use super::{
    catalog_error, created_meanwhile, is_partitioned, missing_table, server_version_num,
    table_exists, wal_level_problem,
};
use crate::config::PublicationMode;
use crate::error::{Problem, RelayError};
use crate::source::sql_rows;
use outbox_router::TableName;
use postgres_protocol::escape::escape_identifier;

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

/// Adds `table` to `publication` when the publication does not carry it and the relay
/// manages the publication's tables (`may_add`). Returns whether it added it; why it cannot,
/// with what its owner can run, otherwise.
pub async fn add_to_publication(
    sql: &tokio_postgres::Client,
    publication: &str,
    table: &TableName,
    may_add: bool,
) -> Result<bool, String> {
    let carried: bool = sql
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_publication_tables WHERE pubname = $1 AND schemaname = $2 AND tablename = $3)",
            &[&publication, &table.schema, &table.name],
        )
        .await
        .map_err(|e| {
            format!(
                "cannot read publication {publication}'s tables ({})",
                crate::error::server_message(&e)
            )
        })?
        .get(0);
    if carried {
        return Ok(false);
    }
    let qualified = sql_rows::qualified(table);
    let add = format!(
        "ALTER PUBLICATION {} ADD TABLE {qualified}",
        escape_identifier(publication),
    );
    if !may_add {
        return Err(format!(
            "publication {publication} does not carry {qualified} and the relay does not change its tables \
             (publication.autocreate.mode); its owner can run `{add};`"
        ));
    }
    sql.batch_execute(&add).await.map_err(|e| {
        format!(
            "cannot add {qualified} to publication {publication} ({}); its owner can run `{add};`",
            crate::error::server_message(&e)
        )
    })?;
    Ok(true)
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

#[cfg(test)]
mod tests {
    use super::*;

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
