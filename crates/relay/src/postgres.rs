//! Ordinary SQL against PostgreSQL: the publication and slot the relay needs, created
//! when missing, and the slot's state. Names are validated in config and quoted here.

use crate::error::RelayError;
use anyhow::Context;
use outbox_router::TableName;
use postgres_protocol::escape::{escape_identifier, escape_literal};
use tokio_postgres::config::Host;

/// What the replication client needs, parsed from the URL once.
#[derive(Clone)]
pub struct ConnectionInfo {
    pub host: String,
    pub port: u16,
    pub user: String,
    pub password: String,
    pub database: String,
    /// The URL without its password, for logs.
    pub display: String,
    /// sslmode, sslrootcert, sslcert, sslkey from the URL.
    pub tls: pgwire_replication::TlsConfig,
    /// The URL as tokio-postgres understands it (sslmode mapped, ssl files removed).
    sql_url: String,
}

/// Takes libpq's TLS parameters out of a connection string (tokio-postgres knows only
/// disable/prefer/require and no certificate files) and returns what remains.
fn split_tls(url: &str) -> Result<(String, pgwire_replication::TlsConfig), anyhow::Error> {
    use pgwire_replication::SslMode;
    let is_url = url.starts_with("postgres://") || url.starts_with("postgresql://");
    let (base, params, separator): (&str, Vec<&str>, &str) = if is_url {
        match url.split_once('?') {
            Some((b, q)) => (b, q.split('&').collect(), "&"),
            None => (url, Vec::new(), "&"),
        }
    } else {
        ("", url.split_whitespace().collect(), " ")
    };
    let mut tls = pgwire_replication::TlsConfig {
        mode: SslMode::Prefer,
        ..Default::default()
    };
    let mut kept = Vec::new();
    for param in params {
        let Some((key, value)) = param.split_once('=') else {
            kept.push(param.to_owned());
            continue;
        };
        let value = percent_encoding::percent_decode_str(value.trim_matches('\''))
            .decode_utf8_lossy()
            .into_owned();
        match key {
            "sslmode" => {
                tls.mode = match value.as_str() {
                    "disable" => SslMode::Disable,
                    "allow" | "prefer" => SslMode::Prefer,
                    "require" => SslMode::Require,
                    "verify-ca" => SslMode::VerifyCa,
                    "verify-full" => SslMode::VerifyFull,
                    other => anyhow::bail!("sslmode={other}: expected disable, prefer, require, verify-ca or verify-full"),
                };
                let mapped = match tls.mode {
                    SslMode::Disable => "disable",
                    SslMode::Prefer => "prefer",
                    _ => "require",
                };
                kept.push(format!("sslmode={mapped}"));
            }
            "sslrootcert" => tls.ca_pem_path = Some(value.into()),
            "sslcert" => tls.client_cert_pem_path = Some(value.into()),
            "sslkey" => tls.client_key_pem_path = Some(value.into()),
            _ => kept.push(param.to_owned()),
        }
    }
    let rest = kept.join(separator);
    let sql_url = match (base.is_empty(), rest.is_empty()) {
        (true, _) => rest,
        (false, true) => base.to_owned(),
        (false, false) => format!("{base}?{rest}"),
    };
    Ok((sql_url, tls))
}

impl ConnectionInfo {
    pub fn parse(url: &str) -> Result<Self, anyhow::Error> {
        let (sql_url, mut tls) = split_tls(url)?;
        let config: tokio_postgres::Config = sql_url.parse().map_err(|e| {
            anyhow::anyhow!(
                "not a PostgreSQL URL ({e}); expected postgres://USER:PASSWORD@HOST:PORT/DATABASE"
            )
        })?;
        let host = match config.get_hosts().first() {
            Some(Host::Tcp(h)) => h.clone(),
            #[cfg(unix)]
            Some(Host::Unix(p)) => p.display().to_string(),
            None => "localhost".to_owned(),
        };
        let port = config.get_ports().first().copied().unwrap_or(5432);
        let user = config.get_user().map(str::to_owned).ok_or_else(|| {
            anyhow::anyhow!("the URL names no user; expected postgres://USER@HOST/DATABASE")
        })?;
        let password = config
            .get_password()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .unwrap_or_default();
        let database = config.get_dbname().unwrap_or(&user).to_owned();
        let display = format!("postgres://{user}@{host}:{port}/{database}");
        if tls.mode == pgwire_replication::SslMode::VerifyFull {
            tls.sni_hostname = Some(host.clone());
        }
        Ok(Self {
            host,
            port,
            user,
            password,
            database,
            display,
            tls,
            sql_url,
        })
    }
}

pub async fn connect(url: &str) -> Result<tokio_postgres::Client, RelayError> {
    let info = ConnectionInfo::parse(url).map_err(RelayError::Fatal)?;
    let tls = crate::tls::client_config(&info.tls)
        .map_err(|e| RelayError::Fatal(anyhow::anyhow!("TLS to PostgreSQL: {e}")))?;
    let client = match tls {
        None => {
            let (client, connection) =
                tokio_postgres::connect(&info.sql_url, tokio_postgres::NoTls)
                    .await
                    .map_err(|e| RelayError::classify_postgres(e, &info.display))?;
            tokio::spawn(drive(connection));
            client
        }
        Some(config) => {
            let connector = tokio_postgres_rustls::MakeRustlsConnect::new(config);
            let (client, connection) = tokio_postgres::connect(&info.sql_url, connector)
                .await
                .map_err(|e| RelayError::classify_postgres(e, &info.display))?;
            tokio::spawn(drive(connection));
            client
        }
    };
    Ok(client)
}

async fn drive<S, T>(connection: tokio_postgres::Connection<S, T>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    if let Err(e) = connection.await {
        tracing::debug!(error = %e, "postgres connection closed");
    }
}

/// State of the replication slot, as `pg_replication_slots` reports it.
#[derive(Debug, Clone)]
pub struct SlotState {
    pub plugin: Option<String>,
    pub database: Option<String>,
    pub active_pid: Option<i32>,
    pub confirmed_flush_lsn: Option<u64>,
}

pub async fn slot_state(
    client: &tokio_postgres::Client,
    slot: &str,
) -> Result<Option<SlotState>, tokio_postgres::Error> {
    let row = client
        .query_opt(
            "SELECT plugin::text, database::text, active_pid, confirmed_flush_lsn::text \
             FROM pg_replication_slots WHERE slot_name = $1",
            &[&slot],
        )
        .await?;
    Ok(row.map(|r| SlotState {
        plugin: r.get(0),
        database: r.get(1),
        active_pid: r.get(2),
        confirmed_flush_lsn: r.get::<_, Option<String>>(3).and_then(|l| parse_lsn(&l)),
    }))
}

pub fn parse_lsn(text: &str) -> Option<u64> {
    let (hi, lo) = text.split_once('/')?;
    Some((u64::from_str_radix(hi, 16).ok()? << 32) | u64::from_str_radix(lo, 16).ok()?)
}

pub fn format_lsn(lsn: u64) -> String {
    format!("{:X}/{:X}", lsn >> 32, lsn & 0xFFFF_FFFF)
}

/// Creates the publication and the slot when missing; checks what exists. Returns the
/// slot's confirmed position (where streaming resumes).
/// What to do when the publication does not exist (Debezium's `publication.autocreate.mode`
/// plus outbox-relay's own default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PublicationMode {
    /// `FOR TABLE <outbox> WITH (publish = 'insert')`: only what the relay needs.
    #[default]
    OutboxInsertsOnly,
    /// Debezium `filtered`: `FOR TABLE <outbox>`, every operation.
    Filtered,
    /// Debezium `all_tables` (its default): `FOR ALL TABLES`; needs a superuser.
    AllTables,
    /// Debezium `no_tables`: an empty publication, tables added by a DBA.
    NoTables,
    /// Debezium `disabled`: the publication must exist.
    Disabled,
}

pub async fn ensure_publication_and_slot(
    client: &tokio_postgres::Client,
    table: &TableName,
    publication: &str,
    mode: PublicationMode,
    slot: &str,
    database: &str,
) -> Result<SlotStart, RelayError> {
    let wal_level: String = client
        .query_one("SHOW wal_level", &[])
        .await
        .context("reading wal_level")
        .map_err(RelayError::Transient)?
        .get(0);
    if wal_level != "logical" {
        return Err(RelayError::Fatal(anyhow::anyhow!(
            "PostgreSQL has wal_level = {wal_level}; logical replication needs `ALTER SYSTEM SET wal_level = logical;` and a server restart"
        )));
    }
    ensure_table_exists(client, table).await?;
    ensure_publication(client, publication, mode, table).await?;
    ensure_slot(client, slot, database).await
}

/// Where streaming starts, and whether the slot was created just now (so that
/// `snapshot.mode=initial` knows the outbox's existing rows were never relayed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotStart {
    pub lsn: u64,
    pub created: bool,
}

async fn ensure_table_exists(
    client: &tokio_postgres::Client,
    table: &TableName,
) -> Result<(), RelayError> {
    let exists = client
        .query_opt(
            "SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = $1 AND tablename = $2",
            &[&table.schema, &table.name],
        )
        .await
        .map_err(|e| RelayError::Transient(e.into()))?
        .is_some();
    if !exists {
        return Err(RelayError::Fatal(anyhow::anyhow!(
            "the outbox table {table} does not exist; create it (sql/outbox.sql has the DDL) or pass --table SCHEMA.TABLE"
        )));
    }
    Ok(())
}

/// Whether `table` is partitioned: its rows then reach the relay only through a
/// publication with `publish_via_partition_root` (otherwise they carry the partitions' names).
async fn is_partitioned(
    client: &tokio_postgres::Client,
    table: &TableName,
) -> Result<bool, RelayError> {
    let qualified = crate::table_rows::qualified(table);
    let row = client
        .query_one(
            "SELECT relkind = 'p' FROM pg_class WHERE oid = $1::text::regclass",
            &[&qualified],
        )
        .await
        .map_err(|e| RelayError::Transient(e.into()))?;
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
        .map_err(|e| RelayError::Transient(e.into()))?
        .is_some())
}

async fn ensure_publication(
    client: &tokio_postgres::Client,
    publication: &str,
    mode: PublicationMode,
    table: &TableName,
) -> Result<(), RelayError> {
    let partitioned = is_partitioned(client, table).await?;
    let mut exists = publication_exists(client, publication).await?;
    if !exists && mode != PublicationMode::OutboxInsertsOnly {
        create_debezium_publication(client, publication, mode, table).await?;
        exists = true;
    }
    if exists {
        let published = client
            .query_opt(
                "SELECT 1 FROM pg_publication_tables WHERE pubname = $1 AND schemaname = $2 AND tablename = $3",
                &[&publication, &table.schema, &table.name],
            )
            .await
            .map_err(|e| RelayError::Transient(e.into()))?
            .is_some();
        let via_root: bool = client
            .query_one(
                "SELECT pubviaroot FROM pg_publication WHERE pubname = $1",
                &[&publication],
            )
            .await
            .map_err(|e| RelayError::Transient(e.into()))?
            .get(0);
        if partitioned && !via_root {
            return Err(RelayError::Fatal(anyhow::anyhow!(
                "{table} is partitioned but publication {publication} publishes its partitions under their own names, \
                 which the relay would not recognise; run `ALTER PUBLICATION {} SET (publish_via_partition_root = true);`",
                escape_identifier(publication)
            )));
        }
        if !published {
            return Err(RelayError::Fatal(anyhow::anyhow!(
                "publication {publication} exists but does not include {table}; run `ALTER PUBLICATION {} ADD TABLE {}.{};`",
                escape_identifier(publication),
                escape_identifier(&table.schema),
                escape_identifier(&table.name)
            )));
        }
        return Ok(());
    }
    // Only INSERTs are events: UPDATE/DELETE/TRUNCATE of the outbox (cleanup jobs) are not
    // even sent, which saves the walsender the work.
    let sql = format!(
        "CREATE PUBLICATION {} FOR TABLE {}.{} WITH (publish = 'insert'{})",
        escape_identifier(publication),
        escape_identifier(&table.schema),
        escape_identifier(&table.name),
        if partitioned {
            ", publish_via_partition_root = true"
        } else {
            ""
        }
    );
    match client.batch_execute(&sql).await {
        Ok(()) => {
            tracing::info!(publication, %table, "created publication");
            Ok(())
        }
        // Another instance created it at the same moment.
        Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::DUPLICATE_OBJECT) => Ok(()),
        Err(e) => Err(RelayError::Fatal(anyhow::anyhow!(
            "could not create publication {publication}: {e}; a DBA can run `{sql};` (the table's owner or a superuser may)"
        ))),
    }
}

/// Creates the publication as Debezium's `publication.autocreate.mode` would.
async fn create_debezium_publication(
    client: &tokio_postgres::Client,
    publication: &str,
    mode: PublicationMode,
    table: &TableName,
) -> Result<(), RelayError> {
    let name = escape_identifier(publication);
    let qualified = crate::table_rows::qualified(table);
    let sql = match mode {
        PublicationMode::Disabled => {
            return Err(RelayError::Fatal(anyhow::anyhow!(
                "publication {publication} does not exist and publication.autocreate.mode=disabled;                  a DBA can run `CREATE PUBLICATION {name} FOR TABLE {qualified};`"
            )))
        }
        PublicationMode::AllTables => format!("CREATE PUBLICATION {name} FOR ALL TABLES"),
        PublicationMode::NoTables => format!("CREATE PUBLICATION {name}"),
        PublicationMode::Filtered | PublicationMode::OutboxInsertsOnly => {
            format!(
                "CREATE PUBLICATION {name} FOR TABLE {qualified}{}",
                if is_partitioned(client, table).await? {
                    " WITH (publish_via_partition_root = true)"
                } else {
                    ""
                }
            )
        }
    };
    match client.batch_execute(&sql).await {
        Ok(()) => {
            tracing::info!(publication, ?mode, "created publication");
            Ok(())
        }
        Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::DUPLICATE_OBJECT) => Ok(()),
        Err(e) => Err(RelayError::Fatal(anyhow::anyhow!(
            "could not create publication {publication} (publication.autocreate.mode={mode:?}): {e};              a DBA can run `{sql};`, or use publication.autocreate.mode=filtered (FOR ALL TABLES needs a superuser)"
        ))),
    }
}

/// Nullability and defaults of `table`'s columns, for Kafka Connect schemas.
pub async fn column_facts(
    client: &tokio_postgres::Client,
    table: &TableName,
) -> Result<Vec<outbox_router::connect::ColumnFacts>, RelayError> {
    let qualified = crate::table_rows::qualified(table);
    let rows = client
        .query(
            "SELECT a.attname::text, a.attnotnull, pg_get_expr(d.adbin, d.adrelid) \
             FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum \
             WHERE a.attrelid = $1::text::regclass AND a.attnum > 0 AND NOT a.attisdropped",
            &[&qualified],
        )
        .await
        .map_err(|e| RelayError::Transient(anyhow::anyhow!("reading the columns of {table}: {e}")))?;
    Ok(rows
        .iter()
        .map(|r| outbox_router::connect::ColumnFacts {
            name: r.get(0),
            not_null: r.get(1),
            default_expression: r.get(2),
        })
        .collect())
}

async fn ensure_slot(
    client: &tokio_postgres::Client,
    slot: &str,
    database: &str,
) -> Result<SlotStart, RelayError> {
    let state = slot_state(client, slot)
        .await
        .map_err(|e| RelayError::Transient(e.into()))?;
    let mut created = false;
    let state = match state {
        Some(state) => state,
        None => {
            let sql = format!(
                "SELECT pg_create_logical_replication_slot({}, 'pgoutput')",
                escape_literal(slot)
            );
            match client.batch_execute(&sql).await {
                Ok(()) => {
                    created = true;
                    tracing::info!(slot, "created replication slot")
                }
                Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::DUPLICATE_OBJECT) => {}
                Err(e) => {
                    return Err(RelayError::Fatal(anyhow::anyhow!(
                        "could not create replication slot {slot}: {e}; the user needs the REPLICATION attribute \
                         (`ALTER ROLE ... REPLICATION;`) and a free slot (max_replication_slots)"
                    )))
                }
            }
            slot_state(client, slot)
                .await
                .map_err(|e| RelayError::Transient(e.into()))?
                .ok_or_else(|| {
                    RelayError::Transient(anyhow::anyhow!(
                        "slot {slot} vanished right after creation"
                    ))
                })?
        }
    };
    if state.plugin.as_deref() != Some("pgoutput") {
        return Err(RelayError::Fatal(anyhow::anyhow!(
            "replication slot {slot} uses plugin {:?}, outbox-relay needs pgoutput; drop it (`SELECT pg_drop_replication_slot('{slot}');`) or choose another --slot",
            state.plugin.unwrap_or_default()
        )));
    }
    if state.database.as_deref() != Some(database) {
        return Err(RelayError::Fatal(anyhow::anyhow!(
            "replication slot {slot} belongs to database {:?}, not {database:?}; choose another --slot",
            state.database.unwrap_or_default()
        )));
    }
    Ok(SlotStart {
        lsn: state.confirmed_flush_lsn.unwrap_or(0),
        created,
    })
}

/// Moves the slot's confirmed position to `lsn` after streaming stopped. The replication
/// protocol has no "final status" on close, so a graceful shutdown records its last
/// acknowledged position this way. Retries while the walsender is still exiting.
pub async fn advance_slot(url: &str, slot: &str, lsn: u64) -> Result<(), RelayError> {
    let client = connect(url).await?;
    let mut last_error = None;
    for _ in 0..50 {
        let current = slot_state(&client, slot)
            .await
            .map_err(|e| RelayError::Transient(e.into()))?;
        match current {
            Some(s) if s.confirmed_flush_lsn.unwrap_or(0) >= lsn => return Ok(()),
            Some(s) if s.active_pid.is_some() => {}
            Some(_) => {
                let sql = format!(
                    "SELECT pg_replication_slot_advance({}, '{}')",
                    escape_literal(slot),
                    format_lsn(lsn)
                );
                match client.batch_execute(&sql).await {
                    Ok(()) => return Ok(()),
                    Err(e) => last_error = Some(e.to_string()),
                }
            }
            None => {
                return Err(RelayError::Fatal(anyhow::anyhow!(
                    "replication slot {slot} was dropped"
                )))
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    Err(RelayError::Transient(anyhow::anyhow!(
        "could not record the final position {} on slot {slot}: {}",
        format_lsn(lsn),
        last_error.unwrap_or_else(|| "the slot stayed active".into())
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lsn_text_round_trips() {
        assert_eq!(parse_lsn("0/15313A8"), Some(0x15313A8));
        assert_eq!(parse_lsn("1A/0"), Some(0x1A_0000_0000));
        assert_eq!(format_lsn(0x1A_0153_13A8), "1A/15313A8");
        assert_eq!(parse_lsn("nope"), None);
    }

    #[test]
    fn url_parsing_keeps_the_password_out_of_display() {
        let c = ConnectionInfo::parse("postgres://relay:s3cret@db:6543/app").unwrap();
        assert_eq!(
            (
                c.host.as_str(),
                c.port,
                c.user.as_str(),
                c.password.as_str(),
                c.database.as_str()
            ),
            ("db", 6543, "relay", "s3cret", "app")
        );
        assert!(!c.display.contains("s3cret"));
        assert!(ConnectionInfo::parse("postgres://db/app").is_err());
    }
}
