//! The preflight: whether PostgreSQL is ready for the relay with these settings, as typed
//! findings (what holds, or what is wrong and what fixes it, and which concern it is). One
//! set of findings for `check` (prints them all) and Connect's
//! `PUT /connector-plugins/…/config/validate` (each failure under its option). `run` stops on
//! the same [`Problem`]s, built by the same `catalog` functions while it creates what is
//! missing. Nobody reads a finding's text to learn what it means.

use super::catalog;
use super::sql_rows::qualified;
use crate::config::{ConnectionInfo, OnMissingSlot, Retire, Settings, SourceSettings};
use crate::error::{Problem, RelayError};
use outbox_router::TableName;
use postgres_protocol::escape::escape_identifier;

/// What a finding is about: Connect's validate files a failure under the option it concerns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Concern {
    /// Reaching the server: the URL, host, port, credentials.
    Connection,
    /// The role's attributes and privileges.
    Role,
    /// The server's own settings (wal_level, max_replication_slots).
    Server,
    /// The outbox tables and their columns.
    Tables,
    Publication,
    Slot,
    Kafka,
}

/// One finding of the preflight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// What was checked, and holds.
    Holds(String),
    /// What is wrong and what fixes it.
    Fails(Concern, Problem),
}

impl Finding {
    pub fn holds(what: impl Into<String>) -> Self {
        Finding::Holds(what.into())
    }

    pub fn fails(concern: Concern, what: impl Into<String>, fix: impl Into<String>) -> Self {
        Finding::Fails(concern, Problem::new(what, fix))
    }

    /// A failed query or step: its [`Problem`] when the error carries one, else its text
    /// with `fix`.
    fn error(concern: Concern, context: &str, error: &RelayError, fix: &str) -> Self {
        match error.problem() {
            Some(problem) => Finding::Fails(concern, problem),
            None => Finding::fails(concern, format!("{context}: {error}"), fix),
        }
    }

    pub fn is_ok(&self) -> bool {
        matches!(self, Finding::Holds(_))
    }
}

const PRIVILEGES: &str = "check the user's privileges";

/// Every PostgreSQL finding for `s`, in the order a person fixes them.
pub async fn postgres(s: &Settings) -> Vec<Finding> {
    let mut out = Vec::new();
    let conn = match ConnectionInfo::parse(s.postgres_url.expose()) {
        Ok(c) => c,
        Err(e) => {
            return vec![Finding::fails(
                Concern::Connection,
                format!("postgres-url: {e}"),
                "pass --postgres-url postgres://USER:PASSWORD@HOST:PORT/DATABASE",
            )]
        }
    };
    let client = match super::postgres::Database::of(s).connect().await {
        Ok(c) => {
            out.push(Finding::holds(format!("connected to {}", conn.display)));
            c
        }
        Err(e) => {
            out.push(Finding::fails(
                Concern::Connection,
                format!("cannot connect to PostgreSQL: {e}"),
                "check host, port, user, password and pg_hba.conf",
            ));
            return out;
        }
    };
    let tables = match catalog::outbox_tables(&client, &s.router).await {
        Ok(tables) => tables,
        Err(e) => {
            out.push(Finding::error(
                Concern::Tables,
                "cannot list the outbox tables",
                &e,
                PRIVILEGES,
            ));
            return out;
        }
    };
    // Polling mode needs no logical replication: only the table privileges below.
    if s.cdc().is_some() {
        out.push(wal_level(&client).await);
        out.push(replication_role(&client).await);
    }
    let mut existing = Vec::new();
    for table in &tables {
        let exists = catalog::table_exists(&client, table).await.unwrap_or(false);
        if exists {
            existing.push(table.clone());
        }
        if !exists {
            out.push(Finding::Fails(
                Concern::Tables,
                catalog::missing_table(table),
            ));
        } else if readable(&client, table).await {
            out.push(Finding::holds(format!(
                "table {table} exists and is readable"
            )));
            out.extend(column_types(&client, s, table).await);
        } else {
            out.push(Finding::fails(
                Concern::Role,
                format!("no SELECT privilege on {table}"),
                format!(
                    "GRANT SELECT ON {} TO CURRENT_USER;  -- as the owner",
                    qualified(table)
                ),
            ));
        }
    }
    // The first table's schema keeps the relay's bookkeeping (`public` when only logical
    // decoding messages are relayed); polling reads only it.
    let home = tables.first().cloned().unwrap_or_else(|| TableName {
        schema: "public".into(),
        name: "pg_logical_emit_message".into(),
    });
    if s.cleanup.is_some() {
        for table in &existing {
            out.push(cleanup(&client, table, matches!(s.source, SourceSettings::Cdc(_))).await);
        }
    }
    let cdc = match &s.source {
        SourceSettings::Cdc(cdc) => cdc,
        SourceSettings::Polling(polling) => {
            out.push(polling_privilege(&client, &home, &polling.retire).await);
            if existing.len() == tables.len() {
                out.push(
                    match catalog::insertion_order_column(
                        &client,
                        &home,
                        polling.order_by.as_deref(),
                    )
                    .await
                    {
                        Ok(column) => Finding::holds(format!(
                            "polling mode orders {home} by {column} (insertion order)"
                        )),
                        Err(e) => Finding::error(
                            Concern::Tables,
                            "cannot read the columns",
                            &e,
                            PRIVILEGES,
                        ),
                    },
                );
            }
            return out;
        }
    };
    out.extend(publication(&client, s, &cdc.publication, &tables, &existing).await);
    out.push(
        slot(
            &client,
            &home,
            &cdc.slot,
            cdc.on_missing_slot,
            &conn.database,
        )
        .await,
    );
    if cdc.slot_failover {
        out.extend(survival(s.postgres_url.expose(), &cdc.slot).await);
    }
    out
}

/// `--slot-failover`: what the slot needs to survive a failover, with the fixes (a slot
/// that does not exist yet is made a failover slot by `run`).
async fn survival(url: &str, slot: &str) -> Vec<Finding> {
    match super::survival::assess(url, slot).await {
        Ok(survival) => survival
            .conditions
            .into_iter()
            .filter(|c| !c.what.ends_with("does not exist yet"))
            .map(|c| match c.holds {
                true => Finding::holds(c.what),
                false => Finding::fails(Concern::Slot, c.what, c.fix),
            })
            .collect(),
        Err(e) => vec![Finding::error(
            Concern::Slot,
            "cannot tell whether the slot survives a failover",
            &e,
            PRIVILEGES,
        )],
    }
}

async fn wal_level(client: &tokio_postgres::Client) -> Finding {
    match client.query_one("SHOW wal_level", &[]).await {
        Ok(row) => match catalog::wal_level_problem(row.get(0)) {
            None => Finding::holds("wal_level = logical"),
            Some(problem) => Finding::Fails(Concern::Server, problem),
        },
        Err(e) => Finding::fails(
            Concern::Role,
            format!("cannot read wal_level: {e}"),
            PRIVILEGES,
        ),
    }
}

/// `--cleanup`: the role may delete from `table`, and (CDC, which deletes by key) the table
/// has a primary key.
async fn cleanup(client: &tokio_postgres::Client, table: &TableName, by_key: bool) -> Finding {
    if let Err(e) = super::cleanup::may_delete(client, table).await {
        return Finding::error(
            Concern::Role,
            "--cleanup",
            &e,
            &format!("GRANT DELETE ON {} TO <relay role>;", qualified(table)),
        );
    }
    if by_key {
        if let Err(e) = super::cleanup::TableKey::read(client, table).await {
            return Finding::error(
                Concern::Tables,
                "--cleanup",
                &e,
                &format!("ALTER TABLE {} ADD PRIMARY KEY (id);", qualified(table)),
            );
        }
    }
    Finding::holds(format!("--cleanup may delete relayed rows from {table}"))
}

async fn replication_role(client: &tokio_postgres::Client) -> Finding {
    let row = client
        .query_one(
            "SELECT rolreplication OR rolsuper, current_user::text FROM pg_roles WHERE rolname = current_user",
            &[],
        )
        .await;
    match row {
        Ok(row) if row.get::<_, bool>(0) => {
            Finding::holds(format!("role {} may replicate", row.get::<_, String>(1)))
        }
        Ok(row) => {
            let role: String = row.get(1);
            Finding::fails(
                Concern::Role,
                format!("role {role} lacks the REPLICATION attribute"),
                format!("ALTER ROLE {} REPLICATION;", escape_identifier(&role)),
            )
        }
        Err(e) => Finding::fails(
            Concern::Role,
            format!("cannot read the role: {e}"),
            PRIVILEGES,
        ),
    }
}

async fn readable(client: &tokio_postgres::Client, table: &TableName) -> bool {
    client
        .query_one(
            "SELECT has_table_privilege(current_user, $1::text::regclass, 'SELECT')",
            &[&qualified(table)],
        )
        .await
        .map(|r| r.get::<_, bool>(0))
        .unwrap_or(false)
}

/// Polling retires relayed rows: it needs DELETE or UPDATE on the table.
async fn polling_privilege(
    client: &tokio_postgres::Client,
    table: &TableName,
    retire: &Retire,
) -> Finding {
    let (privilege, action) = match retire {
        Retire::Delete => ("DELETE", "delete relayed rows"),
        Retire::MarkProcessed(_) => ("UPDATE", "mark relayed rows"),
    };
    let allowed = client
        .query_one(
            "SELECT has_table_privilege($1::text::regclass, $2)",
            &[&qualified(table), &privilege],
        )
        .await
        .map(|r| r.get::<_, bool>(0))
        .unwrap_or(false);
    if allowed {
        Finding::holds(format!("polling mode may {action} in {table}"))
    } else {
        Finding::fails(
            Concern::Role,
            format!("polling mode cannot {action}: no {privilege} privilege on {table}"),
            format!(
                "GRANT {privilege} ON {} TO CURRENT_USER;  -- as the owner",
                qualified(table)
            ),
        )
    }
}

/// An existing publication carries every INSERT of each `existing` table, with every
/// column the routing reads (the same rules `run` stops on); a missing one can be created by
/// this role once all `tables` exist, and sends the generated columns the routing reads.
async fn publication(
    client: &tokio_postgres::Client,
    s: &Settings,
    publication: &str,
    tables: &[TableName],
    existing: &[TableName],
) -> Vec<Finding> {
    let read = s.router.columns_read();
    let exists = client
        .query_opt(
            "SELECT 1 FROM pg_publication WHERE pubname = $1",
            &[&publication],
        )
        .await;
    match exists {
        Ok(Some(_)) => {
            let mut out = Vec::new();
            for table in existing {
                out.push(
                    match catalog::publication_gap(client, publication, table, &read).await {
                        Ok(None) => {
                            Finding::holds(format!("publication {publication} includes {table}"))
                        }
                        Ok(Some(problem)) => Finding::Fails(Concern::Publication, problem),
                        Err(e) => Finding::error(
                            Concern::Publication,
                            &format!("cannot read publication {publication}"),
                            &e,
                            PRIVILEGES,
                        ),
                    },
                );
            }
            out
        }
        Ok(None) if existing.len() == tables.len() => {
            // The generated columns the routing reads: refused before PostgreSQL 18 (and
            // when virtual), published by the publication run creates on 18.
            let mut generated = false;
            let version = catalog::server_version_num(client).await.unwrap_or(0);
            for table in tables {
                match catalog::generated_columns(client, table, &read).await {
                    Ok(columns) => {
                        if let Some(problem) =
                            catalog::generated_column_problem(table, &columns, version)
                        {
                            return vec![Finding::Fails(Concern::Tables, problem)];
                        }
                        generated |= !columns.is_empty();
                    }
                    Err(e) => {
                        return vec![Finding::error(
                            Concern::Tables,
                            &format!("cannot read the columns of {table}"),
                            &e,
                            PRIVILEGES,
                        )]
                    }
                }
            }
            let with = if generated {
                ", publish_generated_columns = stored"
            } else {
                ""
            };
            let mut can_create = true;
            for table in tables {
                can_create &= client
                    .query_one(
                        "SELECT r.rolsuper OR pg_has_role(current_user, c.relowner, 'USAGE') \
                         FROM pg_class c, pg_roles r WHERE c.oid = $1::text::regclass AND r.rolname = current_user",
                        &[&qualified(table)],
                    )
                    .await
                    .map(|r| r.get::<_, bool>(0))
                    .unwrap_or(false);
            }
            if can_create {
                return vec![Finding::holds(format!(
                    "publication {publication} is missing; run will create it{}",
                    if generated {
                        " with publish_generated_columns = stored (the routing reads a generated column)"
                    } else {
                        ""
                    }
                ))];
            }
            vec![Finding::fails(
                Concern::Publication,
                format!("publication {publication} is missing and this role may not create it"),
                format!(
                    "as the table owner: CREATE PUBLICATION {}{} WITH (publish = 'insert'{with});",
                    escape_identifier(publication),
                    catalog::for_tables(tables)
                ),
            )]
        }
        Ok(None) => Vec::new(),
        Err(e) => vec![Finding::fails(
            Concern::Publication,
            format!("cannot read publications: {e}"),
            PRIVILEGES,
        )],
    }
}

/// An existing slot serves the relay (the same rule `run` stops on); a missing one can be
/// made, or was lost and `on_missing` says what `run` does about it.
async fn slot(
    client: &tokio_postgres::Client,
    home: &TableName,
    slot: &str,
    on_missing: OnMissingSlot,
    database: &str,
) -> Finding {
    let state = match catalog::slot_state(client, slot).await {
        Ok(state) => state,
        Err(e) => {
            return Finding::fails(
                Concern::Role,
                format!("cannot read replication slots: {e}"),
                PRIVILEGES,
            )
        }
    };
    if let Some(state) = state {
        return match catalog::slot_problem(&state, slot, database) {
            Some(problem) => Finding::Fails(Concern::Slot, problem),
            None => Finding::holds(format!(
                "slot {slot} (pgoutput) resumes at {}{}",
                state
                    .confirmed_flush_lsn
                    .map(|l| l.to_string())
                    .unwrap_or_default(),
                state
                    .active_pid
                    .map(|p| format!("; held by pid {p}: run will wait for it (standby)"))
                    .unwrap_or_default()
            )),
        };
    }
    let streamed_before = super::slot_history::remembered(client, &home.schema, slot)
        .await
        .ok()
        .flatten()
        .is_some();
    if streamed_before && on_missing == OnMissingSlot::Refuse {
        return Finding::fails(
            Concern::Slot,
            format!(
                "slot {slot} is gone, but this relay streamed from it: events since its last position would be skipped"
            ),
            "run with --on-missing-slot reread (relay every row still in the outbox again) or --on-missing-slot accept-gap",
        );
    }
    let free = client
        .query_one(
            "SELECT current_setting('max_replication_slots')::int - (SELECT count(*) FROM pg_replication_slots)::int",
            &[],
        )
        .await;
    match free {
        Ok(row) if row.get::<_, i32>(0) > 0 => Finding::holds(format!(
            "slot {slot} is missing; run will create it ({} free{})",
            row.get::<_, i32>(0),
            if streamed_before {
                let choice = match on_missing {
                    OnMissingSlot::Reread => "reread",
                    _ => "accept-gap",
                };
                format!(", --on-missing-slot {choice}")
            } else {
                String::new()
            }
        )),
        Ok(_) => Finding::Fails(Concern::Server, catalog::no_free_slot()),
        Err(e) => Finding::fails(
            Concern::Role,
            format!("cannot count replication slots: {e}"),
            PRIVILEGES,
        ),
    }
}

/// With Kafka Connect output (`--debezium-config`): whether every column the routing reads
/// has a type outbox-relay writes the way Debezium does, before anything runs.
async fn column_types(
    client: &tokio_postgres::Client,
    s: &Settings,
    table: &TableName,
) -> Option<Finding> {
    let mut router = outbox_router::Router::new(s.router.clone());
    if !router.wants_column_facts() {
        return None;
    }
    let read = async {
        let relation = super::sql_rows::relation(client, table, 0).await?;
        let facts = catalog::column_facts(client, table).await?;
        Ok::<_, RelayError>((relation, facts))
    };
    Some(match read.await {
        Err(e) => Finding::fails(
            Concern::Role,
            format!("cannot read the column types of {table}: {e}"),
            "the relay's role needs SELECT on the table",
        ),
        Ok((relation, facts)) => match router.column_problem(&relation, facts) {
            None => Finding::holds(format!(
                "the columns of {table} that the routing reads have types Debezium maps"
            )),
            Some(problem) => Finding::fails(
                Concern::Tables,
                problem,
                "see docs/debezium-compatibility.md, \"Column types\"",
            ),
        },
    })
}
