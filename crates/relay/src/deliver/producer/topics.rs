//! The topics the relay creates: their configs, and what a CreateTopics error means.

use crate::error::RelayError;
use anyhow::anyhow;
use rdkafka::error::RDKafkaErrorCode;

/// Topic configs for topics the relay creates. With `acks=all`, a record is acknowledged once
/// every in-sync replica has it; with `min.insync.replicas=1` that can be the leader alone,
/// which may then fail and lose a record whose position is already confirmed. So a
/// replicated topic needs at least two in-sync replicas to accept a write — the relay
/// prefers waiting (PostgreSQL keeps the WAL) to losing. With the broker's default
/// replication factor (-1) the broker's own `min.insync.replicas` applies.
pub fn topic_configs(replication_factor: i32) -> Vec<(&'static str, String)> {
    if replication_factor >= 2 {
        vec![("min.insync.replicas", 2.to_string())]
    } else {
        Vec::new()
    }
}

pub(super) enum TopicRefusal {
    /// The broker refuses this topic (its name, a naming policy): its records are dead-lettered.
    ThisTopic(String),
    /// Every topic would be refused, or the broker is away: stop (or resume) with the cause.
    Fatal(RelayError),
}

/// What a CreateTopics error code means for the relay. Only codes, never message text.
pub(super) fn topic_refusal(
    topic: &str,
    code: RDKafkaErrorCode,
    partitions: i32,
    replication: i32,
) -> TopicRefusal {
    use RDKafkaErrorCode as C;
    match code {
        C::InvalidTopic | C::PolicyViolation => TopicRefusal::ThisTopic(format!(
            "the broker refused to create topic {topic} ({code}); create it beforehand, or route such rows elsewhere"
        )),
        C::InvalidReplicationFactor | C::InvalidPartitions | C::InvalidReplicaAssignment | C::InvalidConfig => {
            TopicRefusal::Fatal(RelayError::misconfigured(format!(
                "the broker refused to create topic {topic} with {partitions} partition(s) and replication factor \
                 {replication} ({code}); pass --topic-partitions / --topic-replication-factor values the cluster accepts \
                 (-1 = the broker's default), or create the topics beforehand"
            )))
        }
        C::UnsupportedVersion | C::InvalidRequest => TopicRefusal::Fatal(RelayError::misconfigured(format!(
            "the broker cannot create topic {topic} ({code}); create it (and the dead-letter topic) beforehand"
        ))),
        C::TopicAuthorizationFailed | C::ClusterAuthorizationFailed => {
            TopicRefusal::Fatal(RelayError::MissingPrivilege {
                error: anyhow!("not allowed to create topic {topic} ({code})"),
                fix: "create it beforehand or grant CREATE on the cluster".into(),
            })
        }
        _ => TopicRefusal::Fatal(RelayError::BrokerUnavailable(anyhow!("creating topic {topic}: {code}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_topic_is_dead_lettered_and_a_refused_setting_stops_the_relay() {
        use crate::error::Consequence;
        let per_record = |c| matches!(topic_refusal("t", c, 1, 1), TopicRefusal::ThisTopic(_));
        assert!(per_record(RDKafkaErrorCode::InvalidTopic));
        assert!(per_record(RDKafkaErrorCode::PolicyViolation));
        let fatal = |c| match topic_refusal("t", c, 1, 3) {
            TopicRefusal::Fatal(e) => e.consequence(),
            TopicRefusal::ThisTopic(_) => panic!("{c:?} is not about one topic"),
        };
        assert_eq!(
            fatal(RDKafkaErrorCode::InvalidReplicationFactor),
            Consequence::Exit
        );
        assert_eq!(
            fatal(RDKafkaErrorCode::TopicAuthorizationFailed),
            Consequence::Exit
        );
        assert_eq!(
            fatal(RDKafkaErrorCode::RequestTimedOut),
            Consequence::Resume
        );
    }

    #[test]
    fn replicated_topics_need_two_in_sync_replicas_to_acknowledge() {
        assert!(topic_configs(-1).is_empty(), "the broker's default applies");
        assert!(topic_configs(1).is_empty());
        assert_eq!(topic_configs(2), [("min.insync.replicas", "2".to_string())]);
        assert_eq!(topic_configs(3), [("min.insync.replicas", "2".to_string())]);
    }
}
