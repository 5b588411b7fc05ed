//! Connections to PostgreSQL: the URL parsed once (libpq's TLS parameters included) and
//! ordinary SQL connections over the same TLS settings as the replication connection.

use crate::config::ConnectionInfo;
use crate::error::RelayError;

/// The session settings every connection pins, replication included (the walsender prints
/// column values with them): the text formats the column readers parse, whatever the
/// server's or the role's defaults. `DateStyle=ISO` is what pgjdbc (and so Debezium) sends;
/// `IntervalStyle=postgres`, `bytea_output=hex` and an en_US-like `lc_monetary` are the
/// server defaults Debezium's parsers assume.
pub const SESSION_OPTIONS: &str =
    "-c DateStyle=ISO -c IntervalStyle=postgres -c bytea_output=hex -c lc_monetary=C";

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
