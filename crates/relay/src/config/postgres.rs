//! The PostgreSQL URL, parsed once: what the replication client and the SQL connections need,
//! with libpq's TLS parameters (which tokio-postgres does not know) taken out.

use tokio_postgres::config::Host;

/// libpq's `target_session_attrs`: which of the URL's hosts a session may use. Hosts are
/// tried in order; the check runs on each server reached (libpq's semantics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SessionTarget {
    /// The first server that answers.
    #[default]
    Any,
    /// `SHOW transaction_read_only` is off.
    ReadWrite,
    /// `SHOW transaction_read_only` is on.
    ReadOnly,
    /// Not in recovery.
    Primary,
    /// In recovery (a hot standby).
    Standby,
    /// A standby if any host is one, else any server.
    PreferStandby,
}

impl SessionTarget {
    fn parse(value: &str) -> Result<Self, anyhow::Error> {
        Ok(match value {
            "any" => Self::Any,
            "read-write" => Self::ReadWrite,
            "read-only" => Self::ReadOnly,
            "primary" => Self::Primary,
            "standby" => Self::Standby,
            "prefer-standby" => Self::PreferStandby,
            other => anyhow::bail!(
                "target_session_attrs={other}: expected any, read-write, read-only, primary, standby or prefer-standby"
            ),
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Any => "any",
            Self::ReadWrite => "read-write",
            Self::ReadOnly => "read-only",
            Self::Primary => "primary",
            Self::Standby => "standby",
            Self::PreferStandby => "prefer-standby",
        }
    }

    /// Whether a server with these properties is acceptable; `standby_pass` is the first
    /// pass of prefer-standby (standbys only).
    pub fn accepts(self, read_only: bool, in_recovery: bool, standby_pass: bool) -> bool {
        match self {
            Self::Any => true,
            Self::ReadWrite => !read_only,
            Self::ReadOnly => read_only,
            Self::Primary => !in_recovery,
            Self::Standby => in_recovery,
            Self::PreferStandby => !standby_pass || in_recovery,
        }
    }

    /// Whether the server's state must be read to decide.
    pub fn checks(self) -> bool {
        self != Self::Any
    }
}

/// What the replication client needs, parsed from the URL once.
#[derive(Clone)]
pub struct ConnectionInfo {
    /// The first host (the one a single-host URL names).
    pub host: String,
    pub port: u16,
    /// Every host of a multi-host URL, in order, with its port.
    pub hosts: Vec<(String, u16)>,
    /// `target_session_attrs` (taken out of the URL: the relay applies it to the SQL and the
    /// replication connection alike).
    pub target: SessionTarget,
    /// `connect_timeout`, per host.
    pub connect_timeout: Option<std::time::Duration>,
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
/// disable/prefer/require and no certificate files), and `target_session_attrs` (it knows
/// only three of libpq's six, and the relay applies it to both connections itself), and
/// returns what remains.
fn split_tls(
    url: &str,
) -> Result<(String, pgwire_replication::TlsConfig, SessionTarget), anyhow::Error> {
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
    let mut target = SessionTarget::Any;
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
            "target_session_attrs" => target = SessionTarget::parse(&value)?,
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
    Ok((sql_url, tls, target))
}

impl ConnectionInfo {
    pub fn parse(url: &str) -> Result<Self, anyhow::Error> {
        let (sql_url, mut tls, target) = split_tls(url)?;
        let config: tokio_postgres::Config = sql_url.parse().map_err(|e| {
            anyhow::anyhow!(
                "not a PostgreSQL URL ({e}); expected postgres://USER:PASSWORD@HOST:PORT/DATABASE"
            )
        })?;
        let name = |h: &Host| match h {
            Host::Tcp(h) => h.clone(),
            #[cfg(unix)]
            Host::Unix(p) => p.display().to_string(),
        };
        let ports = config.get_ports();
        let mut hosts: Vec<(String, u16)> = config
            .get_hosts()
            .iter()
            .enumerate()
            .map(|(i, h)| {
                // libpq: one port for every host, or one per host.
                let port = match ports.len() {
                    0 => 5432,
                    1 => ports[0],
                    _ => ports.get(i).copied().unwrap_or(5432),
                };
                (name(h), port)
            })
            .collect();
        if hosts.is_empty() {
            hosts.push((
                "localhost".to_owned(),
                ports.first().copied().unwrap_or(5432),
            ));
        }
        let (host, port) = hosts[0].clone();
        let user = config.get_user().map(str::to_owned).ok_or_else(|| {
            anyhow::anyhow!("the URL names no user; expected postgres://USER@HOST/DATABASE")
        })?;
        let password = config
            .get_password()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .unwrap_or_default();
        let database = config.get_dbname().unwrap_or(&user).to_owned();
        let display = format!(
            "postgres://{user}@{}/{database}{}",
            hosts
                .iter()
                .map(|(h, p)| format!("{h}:{p}"))
                .collect::<Vec<_>>()
                .join(","),
            if target.checks() {
                format!("?target_session_attrs={}", target.name())
            } else {
                String::new()
            }
        );
        if tls.mode == pgwire_replication::SslMode::VerifyFull {
            tls.sni_hostname = Some(host.clone());
        }
        Ok(Self {
            host,
            port,
            connect_timeout: config.get_connect_timeout().copied(),
            hosts,
            target,
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
    fn multi_host_urls_list_every_host_and_take_target_session_attrs_out() {
        let c = ConnectionInfo::parse(
            "postgres://relay:pw@h1:5432,h2:6543/app?target_session_attrs=read-write&connect_timeout=3",
        )
        .unwrap();
        assert_eq!(c.hosts, [("h1".to_owned(), 5432), ("h2".to_owned(), 6543)]);
        assert_eq!(c.target, SessionTarget::ReadWrite);
        assert_eq!(c.connect_timeout, Some(std::time::Duration::from_secs(3)));
        assert!(!c.sql_url.contains("target_session_attrs"), "{}", c.sql_url);
        assert_eq!(
            c.display,
            "postgres://relay@h1:5432,h2:6543/app?target_session_attrs=read-write"
        );
        // The keyword form, one port for every host; libpq's other targets.
        let k = ConnectionInfo::parse(
            "host=h1,h2 port=5433 user=relay dbname=app target_session_attrs=prefer-standby",
        )
        .unwrap();
        assert_eq!(k.hosts, [("h1".to_owned(), 5433), ("h2".to_owned(), 5433)]);
        assert_eq!(k.target, SessionTarget::PreferStandby);
        for (name, target) in [
            ("primary", SessionTarget::Primary),
            ("standby", SessionTarget::Standby),
            ("read-only", SessionTarget::ReadOnly),
            ("any", SessionTarget::Any),
        ] {
            let url = format!("postgres://u@h/db?target_session_attrs={name}");
            assert_eq!(ConnectionInfo::parse(&url).unwrap().target, target);
        }
        let bad = ConnectionInfo::parse("postgres://u@h/db?target_session_attrs=leader")
            .err()
            .unwrap()
            .to_string();
        assert!(bad.contains("target_session_attrs=leader"), "{bad}");
    }

    /// libpq's rules: (read_only, in_recovery) of a server, and prefer-standby's first pass
    /// taking standbys only.
    #[test]
    fn each_target_accepts_the_servers_libpq_accepts() {
        let primary = (false, false);
        let standby = (true, true);
        let read_only_primary = (true, false);
        let cases = [
            (SessionTarget::Any, [true, true, true]),
            (SessionTarget::ReadWrite, [true, false, false]),
            (SessionTarget::ReadOnly, [false, true, true]),
            (SessionTarget::Primary, [true, false, true]),
            (SessionTarget::Standby, [false, true, false]),
        ];
        for (target, want) in cases {
            for (server, accepted) in [primary, standby, read_only_primary].iter().zip(want) {
                assert_eq!(
                    target.accepts(server.0, server.1, false),
                    accepted,
                    "{target:?} {server:?}"
                );
            }
        }
        let prefer = SessionTarget::PreferStandby;
        assert!(
            !prefer.accepts(false, false, true),
            "first pass: standbys only"
        );
        assert!(prefer.accepts(true, true, true));
        assert!(
            prefer.accepts(false, false, false),
            "second pass: any server"
        );
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
