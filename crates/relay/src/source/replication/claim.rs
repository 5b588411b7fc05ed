//! One instance per slot, before anything is read for it. PostgreSQL gives a slot to one
//! walsender at a time, but only once it streams: the initial snapshot is read before that,
//! on SQL connections, and a slot made with an exported snapshot is released when it has been
//! made. So two instances started together (an active/standby pair, two Connect workers with
//! the same connector) could both read the whole outbox, and its rows would arrive twice.
//!
//! A session therefore claims its slot first: a session-level advisory lock, keyed by the
//! slot's name, on the session's SQL connection, held for the session's whole life (the
//! snapshot, then the stream) and released with the connection. An instance that cannot take
//! it stands by, as for a slot another walsender holds. The lock needs no privilege.

use crate::error::RelayError;

/// The advisory lock's key: the slot's name, hashed (`hashtext`), as a bigint.
const KEY: &str = "hashtext('outbox-relay slot ' || $1)::bigint";

/// A server process, by pid and start time (a pid alone can be reused after a restart).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Backend {
    pub pid: i32,
    pub backend_start: String,
}

/// Takes `slot`'s claim on `sql`'s session: true when this session holds it now.
pub(super) async fn claim(sql: &tokio_postgres::Client, slot: &str) -> Result<bool, RelayError> {
    let row = sql
        .query_one(&format!("SELECT pg_try_advisory_lock({KEY})"), &[&slot])
        .await
        .map_err(|e| {
            RelayError::postgres(
                "claiming the replication slot (pg_try_advisory_lock)",
                e,
                || "pg_try_advisory_lock needs no privilege: check the connection".into(),
            )
        })?;
    Ok(row.get(0))
}

/// The backend of `sql`'s session (to recognise it as a stale claimant later).
pub(super) async fn own_backend(sql: &tokio_postgres::Client) -> Option<Backend> {
    let row = sql
        .query_opt(
            "SELECT pid, backend_start::text FROM pg_stat_activity WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .ok()??;
    Some(Backend {
        pid: row.get(0),
        backend_start: row.get::<_, Option<String>>(1).unwrap_or_default(),
    })
}

/// The backend holding `slot`'s claim, if any.
pub(super) async fn claimant(sql: &tokio_postgres::Client, slot: &str) -> Option<Backend> {
    // A bigint key is kept as classid (its high 32 bits) and objid (its low ones).
    let query = format!(
        "SELECT a.pid, a.backend_start::text FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid \
         WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 \
           AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
           AND l.classid::bigint = (({KEY} >> 32) & 4294967295) AND l.objid::bigint = ({KEY} & 4294967295)"
    );
    let row = sql.query_opt(&query, &[&slot]).await.ok()??;
    Some(Backend {
        pid: row.get(0),
        backend_start: row.get::<_, Option<String>>(1).unwrap_or_default(),
    })
}
