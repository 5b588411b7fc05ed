//! What becomes of a record a transform or converter fails on (Kafka Connect's `errors.*`
//! options). Kafka Connect fails the task (`errors.tolerance=none`) or drops the record
//! (`all`: source connectors have no dead-letter queue there). outbox-relay never stops and
//! never drops: the record is dead-lettered, to the relay's own dead-letter topic, or, with
//! `errors.tolerance=all` and `errors.deadletterqueue.topic.name`, to that topic as Kafka
//! Connect's dead-letter reporter writes a record (the original record's bytes and headers,
//! then the `__connect.errors.*` context headers when they are enabled). With
//! `errors.log.enable` each failure is logged as Connect's LogReporter logs it.

use crate::config::ConnectFormat;
use crate::connect::ConnectRecord;
use crate::kafka_record::{InvalidRow, OutboxRecord, RouteOutcome};
use bytes::Bytes;
use std::sync::Arc;

/// Kafka Connect's header prefix for a dead letter's context.
const CONTEXT_PREFIX: &str = "__connect.errors.";

/// A stage of Kafka Connect's record processing that failed on a record.
pub(crate) struct Failure<'a> {
    /// `TRANSFORMATION`, `HEADER_CONVERTER`, `KEY_CONVERTER`, `VALUE_CONVERTER`.
    pub stage: &'a str,
    /// The transform's or converter's class.
    pub class: &'a str,
    pub message: String,
}

/// The outcome of a record `failure` happened to: `dead` with the reason, and the record
/// Connect's dead-letter reporter writes when that is where it goes. `original`: the record
/// as the EventRouter made it, before the transforms.
pub(crate) fn failed(
    format: &ConnectFormat,
    original: Option<&ConnectRecord>,
    failure: Failure<'_>,
    mut dead: InvalidRow,
) -> RouteOutcome {
    let errors = &format.errors;
    if errors.log {
        let details = match (errors.log_messages, original) {
            (true, Some(record)) => format!(", where source record is = {record:?}"),
            _ => String::new(),
        };
        tracing::error!(
            target: "org.apache.kafka.connect.runtime.errors.LogReporter",
            "Error encountered in task {}-0. Executing stage '{}' with class '{}'{details}: {}",
            errors.connector,
            failure.stage,
            failure.class,
            failure.message
        );
    }
    if let (true, Some(topic)) = (errors.tolerate_all, &errors.dead_letter_queue) {
        dead.connect_dlq = Some(Box::new(dead_letter_record(
            format, original, &failure, &dead, topic,
        )));
    }
    // A converter's failure names the converter, as a transform's names the transform.
    dead.reason = match failure.stage {
        "TRANSFORMATION" => failure.message,
        stage => format!(
            "{} {} failed: {}",
            stage.to_ascii_lowercase().replace('_', " "),
            failure.class,
            failure.message
        ),
    };
    RouteOutcome::Invalid(dead)
}

/// The record Kafka Connect's `DeadLetterQueueReporter` writes: the original record's key,
/// value and headers (converted as the worker converts them; the row's key and payload bytes
/// when even the original does not convert), then the context headers.
fn dead_letter_record(
    format: &ConnectFormat,
    original: Option<&ConnectRecord>,
    failure: &Failure<'_>,
    dead: &InvalidRow,
    topic: &Arc<str>,
) -> OutboxRecord {
    let converted = original.and_then(|r| r.convert(format.converters()).ok());
    let (key, value, mut headers, partition) = match converted {
        Some(r) => (r.key, r.value, r.headers, r.partition),
        None => (dead.key.clone(), dead.value.clone(), Vec::new(), None),
    };
    if format.errors.context_headers {
        let text = |s: &str| Some(Bytes::copy_from_slice(s.as_bytes()));
        let name = |n: &str| Arc::<str>::from(format!("{CONTEXT_PREFIX}{n}"));
        let original_topic = original
            .map(|r| r.topic.to_string())
            .or_else(|| dead.original_topic.clone());
        if let Some(t) = original_topic {
            headers.push((name("topic"), text(&t)));
        }
        if let Some(p) = partition {
            headers.push((name("partition"), text(&p.to_string())));
        }
        let exception = "org.apache.kafka.connect.errors.DataException";
        for (n, v) in [
            ("connector.name", format.errors.connector.as_str()),
            ("task.id", "0"),
            ("stage", failure.stage),
            ("class.name", failure.class),
            ("exception.class.name", exception),
            ("exception.message", failure.message.as_str()),
            (
                "exception.stacktrace",
                &format!("{exception}: {}", failure.message),
            ),
        ] {
            headers.push((name(n), text(v)));
        }
    }
    OutboxRecord {
        topic: topic.clone(),
        key,
        value,
        headers,
        partition: None,
        timestamp_ms: original.and_then(|r| r.timestamp_ms),
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{ConnectFormat, ErrorHandling, Output, RouterConfig};
    use crate::connect::{ConnectRecord, Converter, Data, Header};
    use crate::kafka_record::{InvalidRow, PendingRecord, RouteOutcome};
    use crate::Router;

    fn pending() -> RouteOutcome {
        RouteOutcome::Connect(Box::new(PendingRecord {
            event: None,
            record: ConnectRecord {
                topic: "Order.events".into(),
                partition: None,
                key: Data::text("a-1"),
                value: Data::null(),
                headers: vec![Header::new("id", Data::text("e-1"))],
                timestamp_ms: Some(5),
            },
            dead: InvalidRow {
                reason: String::new(),
                table: "public.outbox".into(),
                original_topic: None,
                key: None,
                value: None,
                event_id: None,
                row: None,
                connect_dlq: None,
            },
        }))
    }

    fn router(errors: ErrorHandling) -> Router {
        let chain = crate::transforms::tests::chain(&[(
            "tokey",
            "org.apache.kafka.connect.transforms.ValueToKey",
            &[("fields", "id")],
            None,
        )]);
        Router::new(RouterConfig {
            output: Output::Connect(ConnectFormat {
                errors,
                ..ConnectFormat::new(Converter::String, Converter::String, "dbserver1")
            }),
            chain,
            ..RouterConfig::default()
        })
    }

    /// ValueToKey fails on a tombstone: with errors.tolerance=all and a dead-letter queue,
    /// the record goes there as Connect's reporter writes it (original key, value and
    /// headers, then the context headers); without, to the relay's own dead-letter topic.
    #[test]
    fn a_record_a_transform_fails_on_goes_to_connects_dead_letter_queue_when_asked() {
        let all = ErrorHandling {
            tolerate_all: true,
            dead_letter_queue: Some("dlq.orders".into()),
            context_headers: true,
            connector: "outbox-connector".into(),
            ..ErrorHandling::default()
        };
        let RouteOutcome::Invalid(dead) = router(all).finish(pending()) else {
            panic!("not dead-lettered")
        };
        assert!(dead.reason.contains("ValueToKey"), "{}", dead.reason);
        let record = dead.connect_dlq.expect("Connect's dead letter");
        assert_eq!(&*record.topic, "dlq.orders");
        assert_eq!(record.key.as_deref(), Some(&b"a-1"[..]));
        assert_eq!(record.value, None);
        let headers: Vec<(&str, String)> = record
            .headers
            .iter()
            .map(|(k, v)| {
                (
                    &**k,
                    String::from_utf8_lossy(v.as_deref().unwrap_or_default()).into_owned(),
                )
            })
            .collect();
        assert_eq!(headers[0], ("id", "e-1".to_owned()));
        assert_eq!(
            headers[1],
            ("__connect.errors.topic", "Order.events".to_owned())
        );
        assert_eq!(
            headers[2],
            (
                "__connect.errors.connector.name",
                "outbox-connector".to_owned()
            )
        );
        assert_eq!(
            headers[4],
            ("__connect.errors.stage", "TRANSFORMATION".to_owned())
        );
        assert_eq!(
            headers[5],
            (
                "__connect.errors.class.name",
                "org.apache.kafka.connect.transforms.ValueToKey".to_owned()
            )
        );
        assert_eq!(record.timestamp_ms, Some(5));

        let RouteOutcome::Invalid(dead) = router(ErrorHandling::default()).finish(pending()) else {
            panic!("not dead-lettered")
        };
        assert!(
            dead.connect_dlq.is_none(),
            "errors.tolerance=none: the relay's own"
        );
    }
}
