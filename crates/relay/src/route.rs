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
    // Formatted only for the rare outcomes that log it: not per record.
    let lsn = || position.map(|p| p.to_string());
    match outcome {
        RouteOutcome::Ignored => Ok(None),
        RouteOutcome::Record(mut record) => {
            // Debezium's record timestamp, when the outbox names no timestamp column (or
            // its value is NULL), is the envelope's ts_ms: when the connector read the
            // event, not when the producer got round to sending it.
            record.timestamp_ms.get_or_insert_with(now_ms);
            Ok(Some(Routed::Record(record)))
        }
        RouteOutcome::Invalid(row) => Ok(Some(Routed::Invalid(row))),
        RouteOutcome::SkippedUpdate {
            table,
            error: false,
        } => {
            tracing::warn!(%table, lsn = lsn(), "an UPDATE of an outbox row was skipped (table.op.invalid.behavior=warn)");
            Ok(None)
        }
        RouteOutcome::SkippedUpdate { table, error: true } => {
            tracing::error!(%table, lsn = lsn(), "an UPDATE of an outbox row was skipped (table.op.invalid.behavior=error)");
            Ok(None)
        }
        RouteOutcome::Connect(_) => Err(RelayError::misconfigured(
            "a Kafka Connect record reached delivery without its transforms and converters (a bug of outbox-relay: please report it)",
        )),
        RouteOutcome::Unavailable(reason) => Err(RelayError::RegistryUnavailable(anyhow::anyhow!(
            "{reason} ({}; nothing after the last confirmed position was confirmed: the record is converted again when the session resumes)",
            match position {
                Some(p) => format!("at LSN {p}"),
                None => "in a polled row, which stays in the outbox".into(),
            }
        ))),
        RouteOutcome::Fatal(reason) => Err(RelayError::misconfigured(format!(
            "{reason} ({}; nothing after the last confirmed position was confirmed)",
            match position {
                Some(p) => format!("at LSN {p}"),
                None => "in a polled row, which stays in the outbox".into(),
            }
        ))),
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use outbox_router::OutboxRecord;

    fn record(timestamp_ms: Option<i64>) -> RouteOutcome {
        RouteOutcome::Record(OutboxRecord {
            topic: "t".into(),
            key: None,
            value: None,
            headers: Vec::new(),
            partition: None,
            timestamp_ms,
        })
    }

    fn timestamp(outcome: RouteOutcome) -> i64 {
        match triage(outcome, None) {
            Ok(Some(Routed::Record(r))) => r.timestamp_ms.expect("a timestamp"),
            _ => panic!("a record"),
        }
    }

    #[test]
    fn records_are_stamped_when_read_unless_the_outbox_gave_a_time() {
        assert_eq!(
            timestamp(record(Some(1_700_000_000_123))),
            1_700_000_000_123
        );
        let before = now_ms();
        let stamped = timestamp(record(None));
        assert!((before..=now_ms()).contains(&stamped), "{stamped}");
    }
}
