//! Connections to PostgreSQL: the URL parsed once (libpq's TLS parameters included) and
//! ordinary SQL connections over the same TLS settings as the replication connection.

use crate::config::ConnectionInfo;
use crate::error::RelayError;
use crate::secret::Secret;
use std::sync::Arc;

/// The session settings every connection pins, replication included (the walsender prints
/// column values with them): the text formats the column readers parse, whatever the
/// server's or the role's defaults. `DateStyle=ISO` is what pgjdbc (and so Debezium) sends;
/// `IntervalStyle=postgres`, `bytea_output=hex` and an en_US-like `lc_monetary` are the
/// server defaults Debezium's parsers assume.
pub const SESSION_OPTIONS: &str =
    "-c DateStyle=ISO -c IntervalStyle=postgres -c bytea_output=hex -c lc_monetary=C";

/// The database the relay reads: its URL and the statements every SQL connection runs
/// first (Debezium's `database.initial.statements`; not run on the replication
/// connection, as in Debezium).
#[derive(Debug, Clone)]
pub struct Database {
    pub url: Secret,
    pub initial_statements: Arc<[String]>,
}

impl Database {
    /// The database `settings` name, for SQL connections.
    pub fn of(settings: &crate::config::Settings) -> Self {
        Self::new(
            settings.postgres_url.clone(),
            settings.initial_statements.clone(),
        )
    }
    pub fn new(url: Secret, initial_statements: Vec<String>) -> Self {
        Self {
            url,
            initial_statements: initial_statements.into(),
        }
    }

    /// An SQL connection with the session settings pinned and the initial statements run
    /// (in one transaction, committed, as Debezium's `JdbcConnection.execute` runs them).
    pub async fn connect(&self) -> Result<tokio_postgres::Client, RelayError> {
        let client = connect(self.url.expose()).await?;
        check_server_version(&client).await?;
        if !self.initial_statements.is_empty() {
            // A statement the server refuses (a syntax error, an unknown setting, a
            // missing privilege) fails the same way next time: a configuration error.
            // A lost connection or an exhausted server is retried like any other.
            let failed = |e: tokio_postgres::Error| {
                let code = e.code().map(|c| c.code().to_owned());
                match code {
                    Some(c)
                        if !crate::error::sqlstate::TRANSIENT_CLASSES
                            .iter()
                            .any(|class| c.starts_with(class)) =>
                    {
                        RelayError::misconfigured(format!(
                            "database.initial.statements: {}",
                            crate::error::server_message(&e)
                        ))
                    }
                    _ => RelayError::postgres("database.initial.statements", e, String::new),
                }
            };
            client.batch_execute("BEGIN").await.map_err(failed)?;
            for statement in self.initial_statements.iter() {
                client.batch_execute(statement).await.map_err(failed)?;
            }
            client.batch_execute("COMMIT").await.map_err(failed)?;
        }
        Ok(client)
    }
}

/// The PostgreSQL majors the relay supports: those its test suite runs on (README,
/// "Supported PostgreSQL versions").
pub const SUPPORTED_MAJORS: std::ops::RangeInclusive<u32> = 15..=18;

/// Refuses a server outside [`SUPPORTED_MAJORS`], naming its version.
pub async fn check_server_version(client: &tokio_postgres::Client) -> Result<u32, RelayError> {
    let row = client
        .query_one(
            "SELECT current_setting('server_version_num'), current_setting('server_version')",
            &[],
        )
        .await
        .map_err(|e| RelayError::postgres("reading server_version", e, String::new))?;
    let number: String = row.get(0);
    let version: String = row.get(1);
    let major = number.parse::<u32>().unwrap_or(0) / 10_000;
    supported(major, &version)?;
    Ok(major)
}

fn supported(major: u32, version: &str) -> Result<(), RelayError> {
    if SUPPORTED_MAJORS.contains(&major) {
        return Ok(());
    }
    Err(RelayError::misconfigured(format!(
        "PostgreSQL {version} is not supported: outbox-relay supports PostgreSQL {} to {} (the versions its \
         test suite runs on){}",
        SUPPORTED_MAJORS.start(),
        SUPPORTED_MAJORS.end(),
        if major < *SUPPORTED_MAJORS.start() {
            "; upgrade the server"
        } else {
            "; use a release of outbox-relay that supports it"
        }
    )))
}

/// `database.initial.statements` split as Debezium's `JdbcConnection.parseSqlStatementString`
/// splits it: `;` ends a statement, `;;` is a literal `;`, statements are trimmed and empty
/// ones dropped.
pub fn split_statements(statements: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut chars = statements.chars().peekable();
    while let Some(c) = chars.next() {
        if c != ';' {
            current.push(c);
        } else if chars.peek() == Some(&';') {
            chars.next();
            current.push(';');
        } else {
            let statement = current.trim();
            if !statement.is_empty() {
                out.push(statement.to_owned());
            }
            current.clear();
        }
    }
    let statement = current.trim();
    if !statement.is_empty() {
        out.push(statement.to_owned());
    }
    out
}

/// An SQL connection to `url` with the session settings pinned (no initial statements:
/// for tools that only read the catalog, such as `status`).
pub async fn connect(url: &str) -> Result<tokio_postgres::Client, RelayError> {
    let info = ConnectionInfo::parse(url).map_err(RelayError::misconfigured)?;
    let tls = crate::tls::client_config(&info.tls)
        .map_err(|e| RelayError::misconfigured(format!("TLS to PostgreSQL: {e}")))?;
    let mut config: tokio_postgres::Config = info
        .sql_url
        .parse()
        .map_err(|e| RelayError::misconfigured(format!("PostgreSQL URL: {e}")))?;
    let options = match config.get_options() {
        Some(theirs) => format!("{theirs} {SESSION_OPTIONS}"),
        None => SESSION_OPTIONS.to_owned(),
    };
    config.options(&options);
    let client = match tls {
        None => {
            let (client, connection) = config
                .connect(tokio_postgres::NoTls)
                .await
                .map_err(|e| connect_error(e, &info.display))?;
            tokio::spawn(drive(connection));
            client
        }
        Some(tls) => {
            let connector = tokio_postgres_rustls::MakeRustlsConnect::new(tls);
            let (client, connection) = config
                .connect(connector)
                .await
                .map_err(|e| connect_error(e, &info.display))?;
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

/// Why a connection failed, by SQLSTATE (a wrong password or database is not retried).
fn connect_error(e: tokio_postgres::Error, display: &str) -> RelayError {
    RelayError::postgres(&format!("PostgreSQL at {display}"), e, || {
        "the role needs the CONNECT privilege on the database".into()
    })
}

#[cfg(test)]
mod tests {
    use super::split_statements;

    #[test]
    fn servers_outside_the_tested_majors_are_refused_by_version() {
        for major in 15..=18 {
            assert!(super::supported(major, "x").is_ok());
        }
        let old = super::supported(14, "14.12 (Debian 14.12-1)")
            .unwrap_err()
            .to_string();
        assert!(
            old.contains("PostgreSQL 14.12 (Debian 14.12-1) is not supported")
                && old.contains("15 to 18")
                && old.contains("upgrade"),
            "{old}"
        );
        let new = super::supported(19, "19devel").unwrap_err().to_string();
        assert!(new.contains("PostgreSQL 19devel is not supported"), "{new}");
    }

    /// Cases worked through JdbcConnection.parseSqlStatementString by hand.
    #[test]
    fn initial_statements_split_as_debezium_splits_them() {
        assert_eq!(
            split_statements("SET search_path = app;SET statement_timeout = 0"),
            ["SET search_path = app", "SET statement_timeout = 0"]
        );
        assert_eq!(
            split_statements(" SELECT 'a;;b' ; ;SET x = 1;"),
            ["SELECT 'a;b'", "SET x = 1"]
        );
        assert_eq!(split_statements(";;;"), [";"]);
        assert!(split_statements(" ; ").is_empty());
    }
}
