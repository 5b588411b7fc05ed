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
    /// The database that takes the relay's writes (the publication, its bookkeeping tables,
    /// the canary, --cleanup): `--primary-url` when the relay captures from a standby, else
    /// the one `--postgres-url` names.
    pub fn for_writes(settings: &crate::config::Settings) -> Self {
        Self::new(
            settings
                .primary_url
                .clone()
                .unwrap_or_else(|| settings.postgres_url.clone()),
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
        Ok(self.connect_host().await?.0)
    }

    /// [`Self::connect`], and which of the URL's hosts it reached (the replication
    /// connection of the same session goes to that one).
    pub async fn connect_host(&self) -> Result<(tokio_postgres::Client, usize), RelayError> {
        let (client, host) = connect_to(self.url.expose(), None).await?;
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
        Ok((client, host))
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
    Ok(connect_to(url, None).await?.0)
}

/// An SQL connection to the first of `url`'s hosts (in order, `connect_timeout` each) that
/// answers and that `target_session_attrs` accepts, as libpq chooses; `only`: that host
/// alone. Also says which host it is.
pub async fn connect_to(
    url: &str,
    only: Option<usize>,
) -> Result<(tokio_postgres::Client, usize), RelayError> {
    let target = ConnectionInfo::parse(url)
        .map_err(RelayError::misconfigured)?
        .target;
    connect_to_target(url, only, target).await
}

/// [`connect_to`] with `target` instead of the URL's `target_session_attrs` (to reach the
/// primary, or a standby, of a multi-host URL).
pub async fn connect_to_target(
    url: &str,
    only: Option<usize>,
    target: crate::config::SessionTarget,
) -> Result<(tokio_postgres::Client, usize), RelayError> {
    use crate::config::SessionTarget;
    let mut info = ConnectionInfo::parse(url).map_err(RelayError::misconfigured)?;
    info.target = target;
    let tls = crate::tls::client_config(&info.tls)
        .map_err(|e| RelayError::misconfigured(format!("TLS to PostgreSQL: {e}")))?;
    let base: tokio_postgres::Config = info
        .sql_url
        .parse()
        .map_err(|e| RelayError::misconfigured(format!("PostgreSQL URL: {e}")))?;
    let passes: &[bool] = if info.target == SessionTarget::PreferStandby {
        &[true, false]
    } else {
        &[false]
    };
    let mut failed: Option<RelayError> = None;
    let mut permanent: Option<RelayError> = None;
    let mut refused: Vec<String> = Vec::new();
    for &standby_pass in passes {
        for (i, (host, port)) in info.hosts.iter().enumerate() {
            if only.is_some_and(|o| o != i) {
                continue;
            }
            let config = single_host(&base, host, *port);
            let client = match connect_config(config, tls.clone(), &info.display).await {
                Ok(client) => client,
                Err(e) => {
                    refused.push(format!("{host}:{port}: {e}"));
                    if e.consequence() == crate::error::Consequence::Exit {
                        permanent.get_or_insert(e);
                    } else {
                        failed = Some(e);
                    }
                    continue;
                }
            };
            if !info.target.checks() {
                return Ok((client, i));
            }
            match server_state(&client).await {
                Ok((read_only, in_recovery)) => {
                    if info.target.accepts(read_only, in_recovery, standby_pass) {
                        return Ok((client, i));
                    }
                    refused.push(format!(
                        "{host}:{port} is {}",
                        if in_recovery {
                            "a standby (in recovery)"
                        } else if read_only {
                            "read-only"
                        } else {
                            "a read-write primary"
                        }
                    ));
                }
                Err(e) => refused.push(format!("{host}:{port}: {e}")),
            }
        }
    }
    match (failed, permanent) {
        // A host that refused for good (a wrong password, no such database) does not
        // change its mind: that error stands, whatever the other hosts said.
        (_, Some(e)) => Err(e),
        // Every host failed the same way a single one would: its classification stands.
        (Some(e), None) if refused.len() == 1 || info.target == SessionTarget::Any => Err(e),
        _ => Err(RelayError::ConnectionLost(anyhow::anyhow!(
            "no server of {} is {} (target_session_attrs): {}",
            info.display,
            info.target.name(),
            refused.join("; ")
        ))),
    }
}

/// `SHOW transaction_read_only` and `pg_is_in_recovery()` of the server `client` reached.
pub async fn server_state(client: &tokio_postgres::Client) -> Result<(bool, bool), RelayError> {
    let row = client
        .query_one(
            "SELECT current_setting('transaction_read_only') = 'on', pg_is_in_recovery()",
            &[],
        )
        .await
        .map_err(|e| {
            RelayError::postgres("reading whether the server is a standby", e, String::new)
        })?;
    Ok((row.get(0), row.get(1)))
}

/// `base` (a parsed URL, maybe of several hosts) for `host` alone.
fn single_host(base: &tokio_postgres::Config, host: &str, port: u16) -> tokio_postgres::Config {
    let mut c = tokio_postgres::Config::new();
    c.host(host).port(port);
    if let Some(user) = base.get_user() {
        c.user(user);
    }
    if let Some(password) = base.get_password() {
        c.password(password);
    }
    if let Some(dbname) = base.get_dbname() {
        c.dbname(dbname);
    }
    if let Some(name) = base.get_application_name() {
        c.application_name(name);
    }
    if let Some(timeout) = base.get_connect_timeout() {
        c.connect_timeout(*timeout);
    }
    if let Some(timeout) = base.get_tcp_user_timeout() {
        c.tcp_user_timeout(*timeout);
    }
    c.ssl_mode(base.get_ssl_mode())
        .ssl_negotiation(base.get_ssl_negotiation())
        .channel_binding(base.get_channel_binding())
        .keepalives(base.get_keepalives())
        .keepalives_idle(base.get_keepalives_idle());
    if let Some(interval) = base.get_keepalives_interval() {
        c.keepalives_interval(interval);
    }
    if let Some(retries) = base.get_keepalives_retries() {
        c.keepalives_retries(retries);
    }
    let options = match base.get_options() {
        Some(theirs) => format!("{theirs} {SESSION_OPTIONS}"),
        None => SESSION_OPTIONS.to_owned(),
    };
    c.options(&options);
    c
}

async fn connect_config(
    config: tokio_postgres::Config,
    tls: Option<rustls::ClientConfig>,
    display: &str,
) -> Result<tokio_postgres::Client, RelayError> {
    let info_display = display;
    let client = match tls {
        None => {
            let (client, connection) = config
                .connect(tokio_postgres::NoTls)
                .await
                .map_err(|e| connect_error(e, info_display))?;
            tokio::spawn(drive(connection));
            client
        }
        Some(tls) => {
            let connector = tokio_postgres_rustls::MakeRustlsConnect::new(tls);
            let (client, connection) = config
                .connect(connector)
                .await
                .map_err(|e| connect_error(e, info_display))?;
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
