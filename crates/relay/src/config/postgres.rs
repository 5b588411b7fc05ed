//! The PostgreSQL URL, parsed once: what the replication client and the SQL connections need,
//! with libpq's TLS parameters (which tokio-postgres does not know) taken out.

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
    pub(crate) sql_url: String,
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
    // libpq: with a root certificate file, sslmode=require verifies the chain as verify-ca.
    if tls.mode == SslMode::Require && tls.ca_pem_path.as_ref().is_some_and(|p| p.exists()) {
        tls.mode = SslMode::VerifyCa;
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

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn sslmode_require_with_a_root_certificate_verifies_the_chain_as_libpq_does() {
        use pgwire_replication::SslMode;
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("root.crt");
        std::fs::write(&ca, "").unwrap();
        let mode = |url: String| ConnectionInfo::parse(&url).unwrap().tls.mode;
        let base = "postgres://relay@db/app?sslmode";
        assert_eq!(
            mode(format!("{base}=require&sslrootcert={}", ca.display())),
            SslMode::VerifyCa
        );
        assert_eq!(mode(format!("{base}=require")), SslMode::Require);
        // libpq: a root certificate file that is not there verifies nothing under require.
        assert_eq!(
            mode(format!("{base}=require&sslrootcert=/nonexistent/root.crt")),
            SslMode::Require
        );
        assert_eq!(
            mode(format!("{base}=verify-full&sslrootcert={}", ca.display())),
            SslMode::VerifyFull
        );
        assert_eq!(
            mode(format!("{base}=prefer&sslrootcert={}", ca.display())),
            SslMode::Prefer
        );
        let keywords = format!(
            "host=db user=relay sslmode=require sslrootcert={}",
            ca.display()
        );
        assert_eq!(
            ConnectionInfo::parse(&keywords).unwrap().tls.mode,
            SslMode::VerifyCa
        );
    }
}
