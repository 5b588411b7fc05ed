//! Errors classified once, by what the caller must do about them.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum RelayError {
    /// Worth retrying: a connection dropped, the broker or database is restarting, the slot
    /// is held by another instance. The relay reconnects with backoff and resumes from the
    /// last confirmed position; nothing is lost.
    #[error("{0:#}")]
    Transient(anyhow::Error),
    /// Retrying cannot help: a setting, privilege or schema must change. The message says
    /// what to fix; the relay exits non-zero without confirming anything further.
    #[error("{0:#}")]
    Fatal(anyhow::Error),
}

impl RelayError {
    pub fn is_transient(&self) -> bool {
        matches!(self, RelayError::Transient(_))
    }

    /// The slot is streaming to another process (an active instance of which this one is
    /// the standby): retry often, to take over within seconds once it is gone.
    pub fn is_slot_busy(&self) -> bool {
        // SQLSTATE 55006 (object_in_use): "replication slot ... is active for PID ...".
        matches!(self, RelayError::Transient(e) if format!("{e:#}").contains("is active for PID"))
    }

    /// A failed SQL statement, with the server's message (tokio-postgres' own Display says
    /// only "db error"). Missing privileges are fatal, with `privilege_fix` saying what to
    /// grant; anything else is retried.
    pub fn query_failed(
        context: &str,
        e: tokio_postgres::Error,
        privilege_fix: impl FnOnce() -> String,
    ) -> Self {
        let message = match e.as_db_error() {
            Some(db) => format!("{context}: {}: {}", db.severity(), db.message()),
            None => format!("{context}: {e}"),
        };
        if e.code() == Some(&tokio_postgres::error::SqlState::INSUFFICIENT_PRIVILEGE) {
            RelayError::Fatal(anyhow::anyhow!("{message}; {}", privilege_fix()))
        } else {
            RelayError::Transient(anyhow::anyhow!(message))
        }
    }

    pub fn classify_postgres(e: tokio_postgres::Error, display: &str) -> Self {
        use tokio_postgres::error::SqlState;
        let fatal = e.code().is_some_and(|c| {
            [
                SqlState::INVALID_PASSWORD,
                SqlState::INVALID_AUTHORIZATION_SPECIFICATION,
                SqlState::INVALID_CATALOG_NAME,
                SqlState::INSUFFICIENT_PRIVILEGE,
            ]
            .contains(c)
        });
        let error = anyhow::Error::new(e).context(format!("PostgreSQL at {display}"));
        // A certificate the client refuses will not change by retrying.
        let fatal = fatal || format!("{error:#}").contains("certificate");
        if fatal {
            RelayError::Fatal(error)
        } else {
            RelayError::Transient(error)
        }
    }

    pub fn classify_replication(e: pgwire_replication::PgWireError, display: &str) -> Self {
        let text = e.to_string();
        let error = anyhow::anyhow!("replication stream from {display}: {text}");
        // SQLSTATE is only inside the server's text (building-blocks.md).
        let fatal_markers = [
            "28P01", // invalid_password
            "28000", // invalid_authorization_specification
            "3D000", // invalid_catalog_name
            "42501", // insufficient_privilege
            "must be superuser or replication role",
            "permission denied",
            "password authentication failed",
        ];
        if e.is_auth() || fatal_markers.iter().any(|m| text.contains(m)) {
            RelayError::Fatal(error)
        } else {
            RelayError::Transient(error)
        }
    }
}
