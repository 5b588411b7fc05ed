//! `setup-sql`: the DDL a DBA runs by hand — a least-privilege role, the outbox table, the
//! publication and the slot.

use crate::config::{validate_identifier, validate_slot_name};
use outbox_router::TableName;
use postgres_protocol::escape::{escape_identifier, escape_literal};

/// `setup-sql`: least-privilege role, outbox table, publication and slot, for a DBA.
pub fn setup_sql(
    table: &TableName,
    publication: &str,
    slot: &str,
    role: &str,
    cleanup: bool,
) -> Result<String, String> {
    validate_slot_name(slot).map_err(|m| format!("slot: {m}"))?;
    validate_identifier(publication).map_err(|m| format!("publication: {m}"))?;
    let schema = escape_identifier(&table.schema);
    let qualified = format!("{schema}.{}", escape_identifier(&table.name));
    let role_ident = escape_identifier(role);
    let ddl = crate::OUTBOX_DDL
        .replace("public.outbox", &qualified)
        .replace(
            "idx_outbox_created_at",
            &format!("idx_{}_created_at", table.name),
        )
        .replace("idx_outbox_seq", &format!("idx_{}_seq", table.name));
    let cleanup_sql = if cleanup {
        let ledger = crate::source::cleanup::ledger_table(&table.schema);
        format!(
            "
-- run --cleanup: the relay deletes the rows it relayed (by primary key), and keeps their keys
-- in {ledger} between the confirmation and the delete.
GRANT DELETE ON {qualified} TO {role_ident};
{};
GRANT SELECT, INSERT, DELETE ON {ledger} TO {role_ident};
GRANT USAGE ON SEQUENCE {} TO {role_ident};
",
            crate::source::cleanup::ledger_ddl(&table.schema),
            crate::source::cleanup::ledger_sequence(&table.schema)
        )
    } else {
        String::new()
    };
    Ok(format!(
        "-- outbox-relay: run as a superuser (or the table owner) once; then start
--   outbox-relay run --postgres-url postgres://{role}:PASSWORD@HOST:PORT/DATABASE ...
-- The role needs REPLICATION (logical decoding) and SELECT on the outbox table; it records the
-- slots it streams from in {history}, so that a dropped slot is noticed instead of skipped past.

CREATE ROLE {role_ident} WITH LOGIN REPLICATION PASSWORD 'change-me';
GRANT USAGE ON SCHEMA {schema} TO {role_ident};

{ddl}
GRANT SELECT ON {qualified} TO {role_ident};

{history_ddl};
GRANT SELECT, INSERT, DELETE ON {history} TO {role_ident};
{cleanup_sql}
-- The end-to-end canary (--canary-interval): a row per slot, written again every interval and
-- carried by the relay's publication only, so no other consumer of the database receives it.
{canary_ddl};
GRANT SELECT, INSERT, UPDATE, DELETE ON {canary} TO {role_ident};

-- --mode polling only: the whole row of an event Kafka refuses for good (too large) is copied here
-- before the row leaves the outbox; `dead-letters replay` sends it again from here.
{dead_letters_ddl};
GRANT SELECT, INSERT, UPDATE ON {dead_letters} TO {role_ident};

-- Only INSERTs are events: UPDATE, DELETE and TRUNCATE are not even sent.
CREATE PUBLICATION {} FOR TABLE {qualified}, {canary} WITH (publish = 'insert');

-- The slot holds WAL from now on: events written after this line are relayed.
SELECT pg_create_logical_replication_slot({}, 'pgoutput');
",
        escape_identifier(publication),
        escape_literal(slot),
        history_ddl = crate::source::slot_history::ddl(&table.schema),
        canary_ddl = crate::source::canary::table_ddl(&table.schema),
        canary = crate::source::canary::table(&table.schema),
        dead_letters_ddl = crate::source::dead_letter_table::ddl(&table.schema),
        dead_letters = crate::source::dead_letter_table::table(&table.schema),
        history = crate::source::sql_rows::qualified(&TableName {
            schema: table.schema.clone(),
            name: crate::source::slot_history::TABLE.into(),
        }),
    ))
}
