//! Errors by what the caller must do about them. Every error the relay meets is built into
//! one of these kinds from a SQLSTATE code or a librdkafka error code — never from message
//! text, which a server with another `lc_messages` translates — and each kind maps once, in
//! [`RelayError::consequence`], to what the one supervisor loop does (`supervisor.rs`).
//!
//! | kind | consequence |
//! |---|---|
//! | [`SlotBusy`](RelayError::SlotBusy) | stand by: retry about every second, take over when free |
//! | [`ConnectionLost`](RelayError::ConnectionLost), [`BrokerUnavailable`](RelayError::BrokerUnavailable), [`RegistryUnavailable`](RelayError::RegistryUnavailable) | back off, resume from the last confirmed position |
//! | [`Authentication`](RelayError::Authentication), [`MissingPrivilege`](RelayError::MissingPrivilege), [`Misconfiguration`](RelayError::Misconfiguration), [`Undecodable`](RelayError::Undecodable) | exit non-zero with the fix |
//!
//! A broker refusing one record for what it is (too large, invalid, a partition the topic
//! does not have) is not an error of the session: it is a delivery outcome
//! (`deliver::Outcome::Refused`) and the record is dead-lettered.

use pgoutput::Lsn;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum RelayError {
    /// The replication slot is streaming to another process: this instance is its standby.
    #[error("replication slot {slot} is in use by another process ({detail})")]
    SlotBusy { slot: String, detail: String },
    /// PostgreSQL went away or refused for a reason that passes (restart, shutdown, network,
    /// too many connections, a failed statement that may succeed next time).
    #[error("{0:#}")]
    ConnectionLost(anyhow::Error),
    /// PostgreSQL refused with a SQLSTATE the relay does not know to pass (an internal error
    /// of the walsender, a lock timeout, a code it has never seen): resumed like a lost
    /// connection, but the same code at the same confirmed position only within a budget
    /// (`supervisor::Repeats`); then the relay exits naming both.
    #[error("{error:#}")]
    ServerError { code: String, error: anyhow::Error },
    /// Kafka did not acknowledge (timeout, broker down, fatal idempotent-producer state):
    /// nothing after the last acknowledged event is confirmed, the session resumes.
    #[error("{0:#}")]
    BrokerUnavailable(anyhow::Error),
    /// The schema registry a converter needs could not be reached, timed out or answered
    /// 5xx: nothing from the record it was converting on is confirmed, the session resumes.
    #[error("{0:#}")]
    RegistryUnavailable(anyhow::Error),
    /// The credentials were refused (PostgreSQL or Kafka) or a certificate does not verify.
    #[error("{error:#}; {fix}")]
    Authentication { error: anyhow::Error, fix: String },
    /// The role may not do what the relay needs; `fix` says what to grant.
    #[error("{error:#}; {fix}")]
    MissingPrivilege { error: anyhow::Error, fix: String },
    /// A setting, a table or the database's configuration must change; the message says how.
    #[error("{0:#}")]
    Misconfiguration(anyhow::Error),
    /// The replication stream held something the decoder or router cannot read.
    #[error("undecodable change at LSN {lsn}: {error}; nothing after the last confirmed position was confirmed")]
    Undecodable { lsn: Lsn, error: String },
}

/// Something the database (or a setting) must change before the relay can work: what is
/// wrong, and what fixes it. Kept typed inside [`RelayError::Misconfiguration`], so that
/// `check` and Connect's validate show both parts without reading message text.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{what}; {fix}")]
pub struct Problem {
    pub what: String,
    pub fix: String,
}

impl Problem {
    pub fn new(what: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            what: what.into(),
            fix: fix.into(),
        }
    }
}

impl From<Problem> for RelayError {
    fn from(problem: Problem) -> Self {
        RelayError::Misconfiguration(anyhow::Error::new(problem))
    }
}

/// What the supervisor does about an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consequence {
    /// Another instance holds the slot: wait about a second and try to take it over.
    StandBy,
    /// Back off (exponentially, with jitter) and start a new session from the last
    /// confirmed position.
    Resume,
    /// Stop and exit non-zero; retrying cannot help.
    Exit,
}

/// SQLSTATE classes and codes the relay acts on (PostgreSQL's Appendix A).
pub mod sqlstate {
    pub const OBJECT_IN_USE: &str = "55006";
    /// object_not_in_prerequisite_state: on a replication connection, the slot was
    /// invalidated (its WAL removed) or cannot stream.
    pub const NOT_IN_PREREQUISITE_STATE: &str = "55000";
    pub const INSUFFICIENT_PRIVILEGE: &str = "42501";
    pub const INVALID_PASSWORD: &str = "28P01";
    pub const INVALID_AUTHORIZATION: &str = "28000";
    pub const INVALID_CATALOG_NAME: &str = "3D000";
    pub const UNDEFINED_OBJECT: &str = "42704";
    pub const UNDEFINED_TABLE: &str = "42P01";
    pub const FEATURE_NOT_SUPPORTED: &str = "0A000";
    /// configuration_limit_exceeded: every replication slot (or walsender) is in use.
    pub const CONFIGURATION_LIMIT_EXCEEDED: &str = "53400";
    /// Class 08 (connection exception), 53 (insufficient resources), 57 (operator
    /// intervention: shutdown, terminated backend), 58 (system error): all pass.
    pub const TRANSIENT_CLASSES: &[&str] = &["08", "53", "57", "58", "40"];
}

impl RelayError {
    pub fn consequence(&self) -> Consequence {
        match self {
            RelayError::SlotBusy { .. } => Consequence::StandBy,
            RelayError::ConnectionLost(_)
            | RelayError::ServerError { .. }
            | RelayError::BrokerUnavailable(_)
            | RelayError::RegistryUnavailable(_) => Consequence::Resume,
            RelayError::Authentication { .. }
            | RelayError::MissingPrivilege { .. }
            | RelayError::Misconfiguration(_)
            | RelayError::Undecodable { .. } => Consequence::Exit,
        }
    }

    pub fn misconfigured(message: impl std::fmt::Display) -> Self {
        RelayError::Misconfiguration(anyhow::anyhow!("{message}"))
    }

    /// What is wrong and what fixes it, when this error carries both: a [`Problem`], a
    /// missing privilege, refused credentials.
    pub fn problem(&self) -> Option<Problem> {
        match self {
            RelayError::Misconfiguration(e) => e.downcast_ref::<Problem>().cloned(),
            RelayError::Authentication { error, fix }
            | RelayError::MissingPrivilege { error, fix } => {
                Some(Problem::new(format!("{error:#}"), fix.clone()))
            }
            _ => None,
        }
    }

    /// A PostgreSQL error by its SQLSTATE. `context` says what the relay was doing;
    /// `privilege_fix` what to grant if the role lacks a privilege.
    fn from_sqlstate(
        code: Option<&str>,
        error: anyhow::Error,
        slot: Option<&str>,
        privilege_fix: impl FnOnce() -> String,
    ) -> Self {
        let Some(code) = code else {
            return RelayError::ConnectionLost(error);
        };
        match code {
            sqlstate::OBJECT_IN_USE if slot.is_some() => RelayError::SlotBusy {
                slot: slot.unwrap_or_default().to_owned(),
                detail: format!("{error:#}"),
            },
            sqlstate::NOT_IN_PREREQUISITE_STATE if slot.is_some() => {
                RelayError::Misconfiguration(error.context(
                    "the replication slot cannot stream (invalidated by max_slot_wal_keep_size, or not a logical slot); \
                     see `outbox-relay status` and pg_replication_slots.wal_status",
                ))
            }
            sqlstate::INVALID_PASSWORD | sqlstate::INVALID_AUTHORIZATION => {
                RelayError::Authentication {
                    error,
                    fix: "check the user and password in --postgres-url (or the password file) and pg_hba.conf"
                        .into(),
                }
            }
            sqlstate::INSUFFICIENT_PRIVILEGE => RelayError::MissingPrivilege {
                error,
                fix: privilege_fix(),
            },
            sqlstate::CONFIGURATION_LIMIT_EXCEEDED => RelayError::Misconfiguration(error.context(
                "raise max_replication_slots / max_wal_senders (needs a restart) or drop an unused slot",
            )),
            sqlstate::INVALID_CATALOG_NAME
            | sqlstate::UNDEFINED_OBJECT
            | sqlstate::UNDEFINED_TABLE
            | sqlstate::FEATURE_NOT_SUPPORTED => RelayError::Misconfiguration(error),
            c if sqlstate::TRANSIENT_CLASSES.iter().any(|class| c.starts_with(class)) => {
                RelayError::ConnectionLost(error)
            }
            // Anything else (a lock timeout, an internal error of the walsender, a code the
            // relay has never seen) may succeed next time: retried with backoff, never in a
            // tight loop, and not for ever at the same position.
            c => RelayError::ServerError {
                code: c.to_owned(),
                error,
            },
        }
    }

    /// A failed SQL statement or connection attempt, with the server's own message
    /// (tokio-postgres' Display says only "db error").
    pub fn postgres(
        context: &str,
        e: tokio_postgres::Error,
        privilege_fix: impl FnOnce() -> String,
    ) -> Self {
        let code = e.code().map(|c| c.code().to_owned());
        let message = match e.as_db_error() {
            Some(_) => format!("{context}: {}", server_message(&e)),
            None => {
                let source = std::error::Error::source(&e)
                    .map(|s| format!(": {s}"))
                    .unwrap_or_default();
                format!("{context}: {e}{source}")
            }
        };
        // A TLS certificate the client refuses will not change by retrying.
        if code.is_none() && is_certificate_error(&e) {
            return RelayError::Authentication {
                error: anyhow::anyhow!(message),
                fix: "check sslmode, sslrootcert, sslcert and sslkey in --postgres-url".into(),
            };
        }
        Self::from_sqlstate(
            code.as_deref(),
            anyhow::anyhow!(message),
            None,
            privilege_fix,
        )
    }

    /// An error of the replication connection. pgwire-replication keeps only the server's
    /// text, to which it appends `(SQLSTATE xxxxx)`: the code is read from that suffix.
    pub fn replication(e: pgwire_replication::PgWireError, display: &str, slot: &str) -> Self {
        use pgwire_replication::PgWireError;
        let error = anyhow::anyhow!("replication stream from {display}: {e}");
        match &e {
            PgWireError::Auth(_) => RelayError::Authentication {
                error,
                fix: "check the user and password in --postgres-url (or the password file) and pg_hba.conf".into(),
            },
            PgWireError::Tls(_) => RelayError::Authentication {
                error,
                fix: "check sslmode, sslrootcert, sslcert and sslkey in --postgres-url".into(),
            },
            PgWireError::Server(text) => {
                Self::from_sqlstate(sqlstate_suffix(text), error, Some(slot), || {
                    "the role needs the REPLICATION attribute: ALTER ROLE <user> REPLICATION;"
                        .into()
                })
            }
            _ => RelayError::ConnectionLost(error),
        }
    }
}

/// The server's own message of a failed statement (tokio-postgres' Display says "db error").
pub fn server_message(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.severity(), db.message()),
        None => e.to_string(),
    }
}

/// The SQLSTATE pgwire-replication appends to a server error: `... (SQLSTATE 55006)`.
fn sqlstate_suffix(text: &str) -> Option<&str> {
    let start = text.rfind("(SQLSTATE ")? + "(SQLSTATE ".len();
    let code = text[start..].strip_suffix(')')?;
    (code.len() == 5 && code.bytes().all(|b| b.is_ascii_alphanumeric())).then_some(code)
}

fn is_certificate_error(e: &tokio_postgres::Error) -> bool {
    let mut source: Option<&dyn std::error::Error> = std::error::Error::source(e);
    while let Some(s) = source {
        if s.downcast_ref::<rustls::Error>().is_some() {
            return true;
        }
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            if io
                .get_ref()
                .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some())
            {
                return true;
            }
        }
        source = s.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use pgwire_replication::PgWireError;

    #[test]
    fn a_busy_slot_is_recognised_by_its_sqlstate_in_any_language() {
        for text in [
            "replication slot \"s\" is active for PID 42 (SQLSTATE 55006)",
            "le slot de réplication « s » est actif pour le PID 42 (SQLSTATE 55006)",
            "Replikations-Slot »s« ist aktiv für PID 42 (SQLSTATE 55006)",
        ] {
            let e = RelayError::replication(PgWireError::Server(text.into()), "db", "s");
            assert_eq!(e.consequence(), Consequence::StandBy, "{text}");
        }
    }

    #[test]
    fn errors_map_to_their_consequence_by_code() {
        let server = |t: &str| RelayError::replication(PgWireError::Server(t.into()), "db", "s");
        assert_eq!(
            server("doit être super-utilisateur (SQLSTATE 42501)").consequence(),
            Consequence::Exit
        );
        assert!(matches!(
            server("x (SQLSTATE 42501)"),
            RelayError::MissingPrivilege { .. }
        ));
        assert!(matches!(
            server("x (SQLSTATE 28P01)"),
            RelayError::Authentication { .. }
        ));
        assert_eq!(
            server("x (SQLSTATE 57P01)").consequence(),
            Consequence::Resume
        );
        assert_eq!(
            server("x (SQLSTATE 3D000)").consequence(),
            Consequence::Exit
        );
        assert_eq!(server("no code at all").consequence(), Consequence::Resume);
        assert!(matches!(
            server("invalid memory alloc request size 1073741824 (SQLSTATE XX000)"),
            RelayError::ServerError { ref code, .. } if code == "XX000"
        ));
        assert!(matches!(
            server("x (SQLSTATE 57P01)"),
            RelayError::ConnectionLost(_)
        ));
        assert_eq!(
            server("all replication slots are in use (SQLSTATE 53400)").consequence(),
            Consequence::Exit
        );
        assert_eq!(
            server("can no longer get changes from replication slot (SQLSTATE 55000)")
                .consequence(),
            Consequence::Exit,
            "an invalidated slot is never retried"
        );
        let io = PgWireError::Io(std::sync::Arc::new(std::io::Error::other("reset")));
        assert_eq!(
            RelayError::replication(io, "db", "s").consequence(),
            Consequence::Resume
        );
        assert_eq!(
            RelayError::replication(PgWireError::Auth("no".into()), "db", "s").consequence(),
            Consequence::Exit
        );
    }

    #[test]
    fn the_sqlstate_suffix_is_read_exactly() {
        assert_eq!(sqlstate_suffix("a (SQLSTATE 55006)"), Some("55006"));
        assert_eq!(sqlstate_suffix("a (SQLSTATE 5500)"), None);
        assert_eq!(sqlstate_suffix("a (SQLSTATE 55006) trailing"), None);
        assert_eq!(sqlstate_suffix("a"), None);
    }
}
