//! Route: the pure router (`outbox_router`) turns a decoded row into a Kafka record; this
//! step decides, once for every source, what the relay does with each of its outcomes —
//! deliver a record, dead-letter a row that cannot be routed, log a skipped UPDATE, or stop
//! on a row the configuration cannot handle.

use crate::deliver::Routed;
use crate::error::RelayError;
use outbox_router::RouteOutcome;
use pgoutput::Lsn;

/// What to hand to the delivery stage, if anything. `position` is the row's WAL position
/// (`None` for rows read with SQL).
pub fn triage(outcome: RouteOutcome, position: Option<Lsn>) -> Result<Option<Routed>, RelayError> {
    let lsn = position.map(|p| p.to_string());
    match outcome {
        RouteOutcome::Ignored => Ok(None),
        RouteOutcome::Record(record) => Ok(Some(Routed::Record(record))),
        RouteOutcome::Invalid(row) => Ok(Some(Routed::Invalid(row))),
        RouteOutcome::SkippedUpdate {
            table,
            error: false,
        } => {
            tracing::warn!(%table, lsn, "an UPDATE of an outbox row was skipped (table.op.invalid.behavior=warn)");
            Ok(None)
        }
        RouteOutcome::SkippedUpdate { table, error: true } => {
            tracing::error!(%table, lsn, "an UPDATE of an outbox row was skipped (table.op.invalid.behavior=error)");
            Ok(None)
        }
        RouteOutcome::Fatal(reason) => Err(RelayError::misconfigured(format!(
            "{reason} ({}; nothing after the last confirmed position was confirmed)",
            match position {
                Some(p) => format!("at LSN {p}"),
                None => "in a polled row, which stays in the outbox".into(),
            }
        ))),
    }
}
