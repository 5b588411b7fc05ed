//! What a delivery report means for the relay: acknowledged, a refusal of the record (to
//! dead-letter, with what it keeps of it), a refusal of the relay's principal, or a failure on
//! the way to the broker. Error codes only, never message text.

use super::super::dead_letter::RefusedRecord;
use super::super::outcome::Outcome;
use bytes::Bytes;
use outbox_router::OutboxRecord;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{BorrowedMessage, Headers, Message};

/// Errors about the record itself, not the path to the broker: retrying cannot help. Among
/// them a timestamp the topic refuses (Kafka 4 refuses one more than an hour ahead by default,
/// `message.timestamp.after.max.ms`; a `table.field.event.timestamp` column can hold one), which
/// librdkafka would otherwise have the relay retry forever.
pub(super) fn is_refusal(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::MessageSizeTooLarge
            | RDKafkaErrorCode::InvalidMessageSize
            | RDKafkaErrorCode::InvalidRecord
            | RDKafkaErrorCode::InvalidMessage
            | RDKafkaErrorCode::InvalidTimestamp
            | RDKafkaErrorCode::PolicyViolation
            | RDKafkaErrorCode::UnsupportedForMessageFormat
            | RDKafkaErrorCode::UnknownPartition
    )
}

/// The broker refuses the relay's principal, not the record: retrying cannot help.
pub(super) fn is_forbidden(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::TopicAuthorizationFailed
            | RDKafkaErrorCode::ClusterAuthorizationFailed
            | RDKafkaErrorCode::SaslAuthenticationFailed
            | RDKafkaErrorCode::Authentication
    )
}

/// What a dead letter keeps of `record`.
pub fn refused_record(record: &OutboxRecord) -> RefusedRecord {
    RefusedRecord {
        topic: record.topic.to_string(),
        key: record.key.clone(),
        event_id: record
            .headers
            .iter()
            .find(|(k, _)| &**k == "id")
            .and_then(|(_, v)| v.clone()),
        value: record.value.clone(),
        value_len: record.value.as_ref().map_or(0, |v| v.len()),
    }
}

/// What a dead letter keeps of a record librdkafka reports as not delivered (refused by the
/// broker: its payload is copied, unless its size is what was refused).
pub(super) fn undelivered_record(
    message: &BorrowedMessage<'_>,
    code: Option<RDKafkaErrorCode>,
) -> RefusedRecord {
    let record = RefusedRecord {
        topic: message.topic().to_owned(),
        key: message.key().map(Bytes::copy_from_slice),
        event_id: message.headers().and_then(|h| {
            h.iter()
                .find(|h| h.key == "id")
                .and_then(|h| h.value.map(Bytes::copy_from_slice))
        }),
        value: message.payload().map(Bytes::copy_from_slice),
        value_len: message.payload().map_or(0, |p| p.len()),
    };
    if code.is_some_and(is_size_refusal) {
        record.oversized()
    } else {
        record
    }
}

/// A refusal of the record's size.
pub(super) fn is_size_refusal(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::MessageSizeTooLarge | RDKafkaErrorCode::InvalidMessageSize
    )
}

pub(super) fn delivery_outcome(
    error: KafkaError,
    record: RefusedRecord,
    fatal: Option<(RDKafkaErrorCode, String)>,
) -> Outcome {
    let code = error.rdkafka_error_code();
    // A report of an unknown partition is librdkafka's view of the metadata, not the
    // record: it fails the records it holds for a topic that a broker briefly reports with
    // fewer partitions or none (a broker restarting, a topic just created; rdkafka_topic.c
    // says so). Sent again by the next session; a partition that truly does not exist is
    // refused on `send`, before any report.
    let refused = code.is_some_and(|c| is_refusal(c) && c != RDKafkaErrorCode::UnknownPartition);
    if refused {
        return Outcome::Refused {
            error: error.to_string(),
            record,
        };
    }
    let error = match &fatal {
        Some((code, text)) => format!("{error} (producer fatal error: {code}: {text})"),
        None => error.to_string(),
    };
    if code.is_some_and(is_forbidden) || fatal.as_ref().is_some_and(|(c, _)| is_forbidden(*c)) {
        Outcome::Forbidden { error }
    } else {
        Outcome::Failed { error }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_partition_in_a_report_is_sent_again_not_dead_lettered() {
        let record = || RefusedRecord {
            topic: "t".into(),
            key: None,
            event_id: None,
            value: None,
            value_len: 0,
        };
        let report = |code| delivery_outcome(KafkaError::MessageProduction(code), record(), None);
        assert!(matches!(
            report(RDKafkaErrorCode::UnknownPartition),
            Outcome::Failed { .. }
        ));
        assert!(matches!(
            report(RDKafkaErrorCode::InvalidTimestamp),
            Outcome::Refused { .. }
        ));
        assert!(matches!(
            report(RDKafkaErrorCode::MessageTimedOut),
            Outcome::Failed { .. }
        ));
    }
}
