//! What a delivery report means for the relay: acknowledged, a refusal of the record (to
//! dead-letter, with what it keeps of it), a refusal of the relay's principal, or a failure on
//! the way to the broker. Error codes only, never message text (one exception, documented
//! at [`NEIGHBOUR_OF_A_REFUSED_RECORD`]).

use super::super::dead_letter::RefusedRecord;
use super::super::outcome::Outcome;
use outbox_router::OutboxRecord;
use rdkafka::error::RDKafkaErrorCode;

/// What a Kafka error code means for a record the relay produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorClass {
    /// The record itself is refused: retrying cannot help. It is dead-lettered with the
    /// reason (its payload kept unless its size is what was refused) and never retried.
    Refusal,
    /// The broker refuses the relay's principal or credentials: nothing gets through until
    /// an operator acts; the relay stops with the fix.
    Forbidden,
    /// The broker refuses the producer's settings, or is too old for them: the relay stops
    /// naming the error.
    Misconfigured,
    /// On the way to the broker (leaders moving, replicas missing, timeouts, connections)
    /// or in the idempotent producer's state: never skipped; librdkafka retries, and past
    /// that the session ends and resumes, with a new producer, from the last confirmed
    /// position.
    Transient,
}

/// Every error code librdkafka 2.12 knows, classified on purpose (error codes only, never
/// message text). `None`: a code added later, a transient failure until it is classified.
pub(crate) fn error_class(code: RDKafkaErrorCode) -> Option<ErrorClass> {
    use ErrorClass::*;
    use RDKafkaErrorCode as C;
    Some(match code {
        // The record itself. A compacted topic refuses a null key with INVALID_RECORD; a
        // topic's max.message.bytes with MESSAGE_TOO_LARGE; a timestamp out of the topic's
        // range (Kafka 4: more than an hour ahead) with INVALID_TIMESTAMP.
        C::InvalidMessage
        | C::InvalidMessageSize
        | C::MessageSizeTooLarge
        | C::MessageBatchTooLarge
        | C::InvalidTimestamp
        | C::UnsupportedForMessageFormat
        | C::PolicyViolation
        | C::InvalidRecord
        | C::InvalidTopic
        | C::UnsupportedCompressionType
        | C::BadMessage
        | C::UnknownPartition => Refusal,
        // The relay's principal or credentials.
        C::TopicAuthorizationFailed
        | C::GroupAuthorizationFailed
        | C::ClusterAuthorizationFailed
        | C::TransactionalIdAuthorizationFailed
        | C::UnsupportedSASLMechanism
        | C::IllegalSASLState
        | C::SaslAuthenticationFailed
        | C::SecurityDisabled
        | C::DelegationTokenAuthDisabled
        | C::DelegationTokenNotFound
        | C::DelegationTokenOwnerMismatch
        | C::DelegationTokenRequestNotAllowed
        | C::DelegationTokenAuthorizationFailed
        | C::DelegationTokenExpired
        | C::InvalidPrincipalType
        | C::UnacceptableCredential
        | C::PrincipalDeserializationFailure
        | C::Authentication => Forbidden,
        // The producer's settings, or a broker too old for them.
        C::InvalidRequiredAcks
        | C::UnsupportedVersion
        | C::InvalidConfig
        | C::InvalidRequest
        | C::NotImplemented
        | C::UnsupportedFeature
        | C::InvalidArgument
        | C::NotConfigured
        | C::UnknownProtocol
        | C::InvalidType
        | C::Conflict
        | C::ReadOnly => Misconfigured,
        // The way to the broker, and the cluster moving: leaders, replicas, controllers.
        C::BrokerTransportFailure
        | C::Resolve
        | C::AllBrokersDown
        | C::BrokerDestroy
        | C::DestroyBroker
        | C::UnknownBroker
        | C::SSL
        | C::MessageTimedOut
        | C::OperationTimedOut
        | C::TimedOutQueue
        | C::RequestTimedOut
        | C::NetworkException
        | C::QueueFull
        | C::ISRInsufficient
        | C::NodeUpdate
        | C::UnknownTopic
        | C::UnknownTopicOrPartition
        | C::UnknownTopicId
        | C::LeaderNotAvailable
        | C::NotLeaderForPartition
        | C::BrokerNotAvailable
        | C::ReplicaNotAvailable
        | C::NotEnoughReplicas
        | C::NotEnoughReplicasAfterAppend
        | C::KafkaStorageError
        | C::LogDirNotFound
        | C::StaleControllerEpoch
        | C::NotController
        | C::FencedLeaderEpoch
        | C::UnknownLeaderEpoch
        | C::PreferredLeaderNotAvailable
        | C::EligibleLeadersNotAvailable
        | C::ReassignmentInProgress
        | C::ThrottlingQuotaExceeded
        | C::RebootstrapRequired
        | C::ListenerNotFound
        | C::Retry
        | C::InProgress
        | C::PreviousInProgress
        | C::WaitCache
        | C::Interrupted
        | C::State
        | C::Fail
        | C::CriticalSystemResource
        | C::FileSystem
        | C::Unknown
        // Another record of the same batch was refused; this one was not.
        | C::InvalidDifferentRecord => Transient,
        // The idempotent producer's state (sequence numbers, producer id, epoch): a new
        // producer, in the next session, starts clean.
        C::Fatal
        | C::OutOfOrderSequenceNumber
        | C::DuplicateSequenceNumber
        | C::InvalidProducerEpoch
        | C::InvalidProducerIdMapping
        | C::UnknownProducerId
        | C::ProducerFenced
        | C::Fenced
        | C::GaplessGuarantee
        | C::Inconsistent
        | C::InvalidTransactionalState
        | C::InvalidTransactionTimeout
        | C::ConcurrentTransactions
        | C::TransactionCoordinatorFenced
        | C::OperationNotAttempted
        | C::PurgeQueue
        | C::PurgeInflight => Transient,
        // Codes of consumers, groups, admin requests and librdkafka's own bookkeeping: not
        // reported for a produced record; if one is, the session starts again.
        C::Begin
        | C::End
        | C::NoError
        | C::BadCompression
        | C::PartitionEOF
        | C::WaitingForCoordinator
        | C::UnknownGroup
        | C::ExistingSubscription
        | C::AssignPartitions
        | C::RevokePartitions
        | C::NoOffset
        | C::Outdated
        | C::KeySerialization
        | C::ValueSerialization
        | C::KeyDeserialization
        | C::ValueDeserialization
        | C::Partial
        | C::NoEnt
        | C::Underflow
        | C::PollExceeded
        | C::Application
        | C::AssignmentLost
        | C::Noop
        | C::AutoOffsetReset
        | C::LogTruncation
        | C::OffsetOutOfRange
        | C::CoordinatorLoadInProgress
        | C::CoordinatorNotAvailable
        | C::NotCoordinator
        | C::OffsetMetadataTooLarge
        | C::IllegalGeneration
        | C::InconsistentGroupProtocol
        | C::InvalidGroupId
        | C::UnknownMemberId
        | C::InvalidSessionTimeout
        | C::RebalanceInProgress
        | C::InvalidCommitOffsetSize
        | C::TopicAlreadyExists
        | C::InvalidPartitions
        | C::InvalidReplicationFactor
        | C::InvalidReplicaAssignment
        | C::NonEmptyGroup
        | C::GroupIdNotFound
        | C::FetchSessionIdNotFound
        | C::InvalidFetchSessionEpoch
        | C::TopicDeletionDisabled
        | C::StaleBrokerEpoch
        | C::OffsetNotAvailable
        | C::MemberIdRequired
        | C::GroupMaxSizeReached
        | C::FencedInstanceId
        | C::ElectionNotNeeded
        | C::NoReassignmentInProgress
        | C::GroupSubscribedToTopic
        | C::UnstableOffsetCommit
        | C::ResourceNotFound
        | C::DuplicateResource
        | C::InconsistentVoterSet
        | C::InvalidUpdateVersion
        | C::FeatureUpdateFailed
        | C::FencedMemberEpoch
        | C::UnreleasedInstanceId
        | C::UnsupportedAssignor
        | C::StaleMemberEpoch
        | C::UnknownSubscriptionId
        | C::TelemetryTooLarge
        | C::EndAll => Transient,
        _ => return None,
    })
}

fn class_of(code: RDKafkaErrorCode) -> ErrorClass {
    error_class(code).unwrap_or(ErrorClass::Transient)
}

/// Errors about the record itself, not the path to the broker: retrying cannot help.
pub(super) fn is_refusal(code: RDKafkaErrorCode) -> bool {
    class_of(code) == ErrorClass::Refusal
}

/// What a dead letter keeps of `record`.
pub fn refused_record(record: &OutboxRecord) -> RefusedRecord {
    RefusedRecord {
        topic: record.topic.to_string(),
        key: record.key.as_ref().map(outbox_router::detached),
        event_id: record
            .headers
            .iter()
            .find(|(k, _)| &**k == "id")
            .and_then(|(_, v)| v.as_ref().map(outbox_router::detached)),
        value: record.value.as_ref().map(outbox_router::detached),
        value_len: record.value.as_ref().map_or(0, |v| v.len()),
    }
}

/// How librdkafka 2.12 words the report of a record that the broker did not refuse but
/// failed with the one record of its batch it refused (KIP-467 record errors). With exactly
/// one refused record, librdkafka overwrites every record's error code with the batch's
/// (`rd_kafka_interceptors_on_acknowledgement_queue` forces it): this text is then the only
/// difference, so it is matched here, the one exception to "codes, never text". The real
/// broker test `broker_refusals::a_batch_the_broker_refuses_for_one_record_delivers_its_neighbours`
/// fails if a librdkafka upgrade changes it.
const NEIGHBOUR_OF_A_REFUSED_RECORD: &str =
    "Failed to append record because it was part of a batch";

pub(super) fn delivery_outcome(
    refusal: super::reports::Refusal,
    fatal: Option<(RDKafkaErrorCode, String)>,
) -> Outcome {
    let super::reports::Refusal {
        error,
        record,
        detail,
    } = refusal;
    let code = error.rdkafka_error_code();
    // Another record of its batch was refused, not this one: sent again by the next session,
    // whose replay dead-letters the refused one first (see `deliver/refusals.rs`).
    let neighbour = code == Some(RDKafkaErrorCode::InvalidDifferentRecord)
        || detail
            .as_deref()
            .is_some_and(|d| d.starts_with(NEIGHBOUR_OF_A_REFUSED_RECORD));
    // The broker's own words for this record, when it gave any (and they add something).
    let error = match detail.filter(|d| !error.to_string().contains(d.as_str())) {
        Some(detail) => format!("{error}: {detail}"),
        None => error.to_string(),
    };
    // A report of an unknown partition is librdkafka's view of the metadata, not the
    // record: it fails the records it holds for a topic that a broker briefly reports with
    // fewer partitions or none (a broker restarting, a topic just created; rdkafka_topic.c
    // says so). Sent again by the next session; a partition that truly does not exist is
    // refused on `send`, before any report.
    if neighbour {
        return Outcome::Neighbour { error, record };
    }
    let refused = code.is_some_and(|c| is_refusal(c) && c != RDKafkaErrorCode::UnknownPartition);
    if refused {
        return Outcome::Refused { error, record };
    }
    let error = match &fatal {
        Some((code, text)) => format!("{error} (producer fatal error: {code}: {text})"),
        None => error.to_string(),
    };
    let class = |c: RDKafkaErrorCode| class_of(c);
    let classes = [code, fatal.as_ref().map(|(c, _)| *c)];
    if classes
        .iter()
        .flatten()
        .any(|c| class(*c) == ErrorClass::Forbidden)
    {
        Outcome::Forbidden { error }
    } else if classes
        .iter()
        .flatten()
        .any(|c| class(*c) == ErrorClass::Misconfigured)
    {
        Outcome::Misconfigured { error }
    } else {
        Outcome::Failed { error }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use rdkafka::error::KafkaError;

    /// The outcome of a delivery report with `code`, for a record without key or value.
    fn report(code: RDKafkaErrorCode) -> Outcome {
        let record = RefusedRecord {
            topic: "t".into(),
            key: None,
            event_id: None,
            value: None,
            value_len: 0,
        };
        delivery_outcome(
            super::super::reports::Refusal {
                error: KafkaError::MessageProduction(code),
                record,
                detail: None,
            },
            None,
        )
    }

    /// A record failed only because another record of its batch was refused is not refused
    /// itself, whichever code librdkafka gives it.
    #[test]
    fn the_neighbours_of_a_refused_record_are_sent_again_not_dead_lettered() {
        let outcome = |code, detail: Option<&str>| {
            delivery_outcome(
                super::super::reports::Refusal {
                    error: KafkaError::MessageProduction(code),
                    record: RefusedRecord {
                        topic: "t".into(),
                        key: None,
                        event_id: None,
                        value: Some(Bytes::from_static(b"{}")),
                        value_len: 2,
                    },
                    detail: detail.map(str::to_owned),
                },
                None,
            )
        };
        let neighbour = "Failed to append record because it was part of a batch which had one more more invalid records";
        assert!(matches!(
            outcome(RDKafkaErrorCode::InvalidRecord, Some(neighbour)),
            Outcome::Neighbour { .. }
        ));
        assert!(matches!(
            outcome(RDKafkaErrorCode::InvalidDifferentRecord, None),
            Outcome::Neighbour { .. }
        ));
        match outcome(
            RDKafkaErrorCode::InvalidRecord,
            Some("Compacted topic cannot accept message without key in topic partition t-0."),
        ) {
            Outcome::Refused { error, record } => {
                assert!(error.contains("Compacted topic cannot accept"), "{error}");
                assert!(record.value.is_some(), "the payload is kept");
            }
            other => panic!("{other:?}"),
        }
    }

    /// Every code librdkafka knows is in the table on purpose: none falls through to the
    /// default; the ones below are refusals of the record.
    #[test]
    fn every_kafka_error_code_is_classified_on_purpose() {
        use rdkafka::types::RDKafkaRespErr;
        let mut known = 0;
        for n in -200..=200 {
            let Ok(raw) = RDKafkaRespErr::try_from(n) else {
                continue;
            };
            let code = RDKafkaErrorCode::from(raw);
            known += 1;
            assert!(
                error_class(code).is_some(),
                "{code:?} ({n}) is not classified"
            );
        }
        assert!(known > 150, "{known} codes");
        for refused in [
            RDKafkaErrorCode::InvalidTimestamp,
            RDKafkaErrorCode::MessageBatchTooLarge,
            RDKafkaErrorCode::UnsupportedForMessageFormat,
            RDKafkaErrorCode::PolicyViolation,
            RDKafkaErrorCode::InvalidRecord,
            RDKafkaErrorCode::MessageSizeTooLarge,
        ] {
            assert_eq!(
                error_class(refused),
                Some(ErrorClass::Refusal),
                "{refused:?}"
            );
        }
        assert!(matches!(
            report(RDKafkaErrorCode::UnsupportedVersion),
            Outcome::Misconfigured { .. }
        ));
        assert!(matches!(
            report(RDKafkaErrorCode::TopicAuthorizationFailed),
            Outcome::Forbidden { .. }
        ));
        assert!(matches!(
            report(RDKafkaErrorCode::NotEnoughReplicas),
            Outcome::Failed { .. }
        ));
    }

    #[test]
    fn an_unknown_partition_in_a_report_is_sent_again_not_dead_lettered() {
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
