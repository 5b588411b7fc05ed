//! Connections to PostgreSQL: the URL parsed once (libpq's TLS parameters included) and
//! ordinary SQL connections over the same TLS settings as the replication connection.

use crate::config::ConnectionInfo;
use crate::error::RelayError;

pub async fn connect(url: &str) -> Result<tokio_postgres::Client, RelayError> {
    let info = ConnectionInfo::parse(url).map_err(RelayError::misconfigured)?;
    let tls = crate::tls::client_config(&info.tls)
        .map_err(|e| RelayError::misconfigured(format!("TLS to PostgreSQL: {e}")))?;
    let client = match tls {
        None => {
            let (client, connection) =
                tokio_postgres::connect(&info.sql_url, tokio_postgres::NoTls)
                    .await
                    .map_err(|e| connect_error(e, &info.display))?;
            tokio::spawn(drive(connection));
            client
        }
        Some(config) => {
            let connector = tokio_postgres_rustls::MakeRustlsConnect::new(config);
            let (client, connection) = tokio_postgres::connect(&info.sql_url, connector)
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
