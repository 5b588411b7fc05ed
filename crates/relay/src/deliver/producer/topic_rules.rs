//! What each topic takes, as its configs say (DescribeConfigs), and the checks of a record
//! against them before it is sent: the broker refuses a whole batch for one record it
//! refuses, its neighbours included, so such a record is refused here, alone.

use super::wire_size::record_wire_size;
use foldhash::{HashMap, HashMapExt as _, HashSet, HashSetExt as _};
use outbox_router::OutboxRecord;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a topic's configs are trusted before they are read again.
const LIMIT_TTL: Duration = Duration::from_secs(60);

/// How soon a topic whose configs could not be read (a request that timed out, a broker
/// that did not know the topic yet) is asked again; twice as long after each further
/// failure, up to [`LIMIT_TTL`] (each read that times out holds the delivery stage).
const UNREAD_RETRY: Duration = Duration::from_secs(5);

/// How long after its `failures`-th failure in a row a read is tried again: [`UNREAD_RETRY`],
/// doubled per further failure, at most [`LIMIT_TTL`].
pub(super) fn retry_wait(failures: u32) -> Duration {
    UNREAD_RETRY
        .saturating_mul(1 << failures.saturating_sub(1).min(8))
        .min(LIMIT_TTL)
}

/// When a topic's configs were last asked for, and whether the broker answered.
#[derive(Clone, Copy)]
enum Read {
    /// The broker answered (with or without `max.message.bytes`), or cannot answer
    /// DescribeConfigs at all: asked again after [`LIMIT_TTL`].
    Answered(Instant),
    /// No answer, this many times in a row: asked again after [`UNREAD_RETRY`] (doubled per
    /// further failure); the rules learned before, if any, hold meanwhile.
    Unanswered(Instant, u32),
}

/// Why a topic's configs are to be read again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Due {
    /// Read more than [`LIMIT_TTL`] ago: an operator may have changed them (its partition
    /// count too).
    Refresh,
    /// The last read got no answer.
    Retry,
}

pub(super) struct TopicRules {
    /// Each known topic's `max.message.bytes`, where the broker says it.
    limits: HashMap<Arc<str>, usize>,
    /// Topics with `cleanup.policy=compact` (they refuse records without a key).
    compacted: HashSet<Arc<str>>,
    /// Per topic, how far before and after now a record's timestamp may be
    /// (`message.timestamp.before.max.ms`, `.after.max.ms`).
    timestamp_windows: HashMap<Arc<str>, (i64, i64)>,
    /// When each topic's configs were last read: they are read again after [`LIMIT_TTL`], so
    /// an operator who raises (or lowers) a limit does not have to restart the relay, and
    /// after [`UNREAD_RETRY`] when the read got no answer.
    read_at: HashMap<Arc<str>, Read>,
    /// Whether records are compressed (then the broker, not the relay, judges a record's size).
    compressed: bool,
}

impl TopicRules {
    pub(super) fn new(compressed: bool) -> Self {
        Self {
            limits: HashMap::new(),
            compacted: HashSet::new(),
            timestamp_windows: HashMap::new(),
            read_at: HashMap::new(),
            compressed,
        }
    }

    /// Learns `topic`'s rules from its config entries (`entry(name)`: the value, if set);
    /// returns its `max.message.bytes`.
    pub(super) fn learn(
        &mut self,
        topic: &Arc<str>,
        entry: impl Fn(&str) -> Option<String>,
    ) -> Option<usize> {
        self.read_at
            .insert(topic.clone(), Read::Answered(Instant::now()));
        let compacted = entry("cleanup.policy")
            .is_some_and(|policy| policy.split(',').any(|p| p.trim() == "compact"));
        if compacted {
            self.compacted.insert(topic.clone());
        } else {
            self.compacted.remove(topic);
        }
        // The record timestamps the topic takes (CreateTime only; the broker stamps
        // LogAppendTime itself).
        let setting = |name: &str| -> Option<i64> { entry(name)?.parse().ok() };
        let create_time = entry("message.timestamp.type").is_none_or(|t| t == "CreateTime");
        match (
            setting("message.timestamp.before.max.ms"),
            setting("message.timestamp.after.max.ms"),
        ) {
            (Some(before), Some(after)) if create_time => {
                self.timestamp_windows
                    .insert(topic.clone(), (before, after));
            }
            _ => {
                self.timestamp_windows.remove(topic);
            }
        }
        let limit: usize = entry("max.message.bytes")?.parse().ok()?;
        // batch.size 0 is refused by librdkafka; a limit that small refuses every record anyway.
        self.limits.insert(topic.clone(), limit.max(1));
        Some(limit)
    }

    /// The broker answered without `topic`'s limit (or will not answer): nothing is checked
    /// against it until the next read.
    pub(super) fn forget_limit(&mut self, topic: &Arc<str>) {
        self.read_at
            .insert(topic.clone(), Read::Answered(Instant::now()));
        self.limits.remove(topic);
    }

    /// `topic`'s configs could not be read this time: what was learned before holds, and
    /// they are asked for again soon.
    pub(super) fn unanswered(&mut self, topic: &Arc<str>) {
        self.not_read(topic, 1);
    }

    /// `topic`'s configs were not asked for (requests fail, the next try is not due): asked
    /// for later, as after its last read, without counting a failure.
    pub(super) fn postponed(&mut self, topic: &Arc<str>) {
        self.not_read(topic, 0);
    }

    /// `topic`'s configs were not read now, `failed` more times in a row (at least once).
    fn not_read(&mut self, topic: &Arc<str>, failed: u32) {
        let failures = match self.read_at.get(topic) {
            Some(Read::Unanswered(_, failures)) => failures.saturating_add(failed),
            _ => 1,
        };
        self.read_at
            .insert(topic.clone(), Read::Unanswered(Instant::now(), failures));
    }

    /// Whether (and why) `topic`'s configs are to be read again.
    pub(super) fn due(&self, topic: &Arc<str>) -> Option<Due> {
        self.due_at(topic, Instant::now())
    }

    fn due_at(&self, topic: &Arc<str>, now: Instant) -> Option<Due> {
        match *self.read_at.get(topic)? {
            Read::Answered(at) => {
                (now.saturating_duration_since(at) > LIMIT_TTL).then_some(Due::Refresh)
            }
            Read::Unanswered(at, failures) => {
                (now.saturating_duration_since(at) > retry_wait(failures)).then_some(Due::Retry)
            }
        }
    }

    /// Why `record` cannot go to its topic as it is: larger than its `max.message.bytes`.
    pub(super) fn too_large(&self, record: &OutboxRecord) -> Option<String> {
        let limit = *self.limits.get(&record.topic)?;
        let size = record_wire_size(record);
        (!self.compressed && size > limit).then(|| {
            format!(
                "the record ({size} bytes on the wire) is larger than topic {}'s max.message.bytes ({limit}); raise the \
                 topic's max.message.bytes to relay such events",
                record.topic
            )
        })
    }

    /// A record without a key for a compacted topic: the broker refuses it (INVALID_RECORD).
    pub(super) fn keyless_for_compacted(&self, record: &OutboxRecord) -> Option<String> {
        (record.key.is_none() && self.compacted.contains(&record.topic)).then(|| {
            format!(
                "the record has no key and topic {} is compacted (cleanup.policy=compact), which refuses records \
                 without a key; give the event a key (its key column is NULL)",
                record.topic
            )
        })
    }

    /// A record timestamp outside what the topic takes: the broker refuses it
    /// (INVALID_TIMESTAMP; Kafka 4 takes at most an hour ahead by default).
    pub(super) fn timestamp_out_of_range(&self, record: &OutboxRecord) -> Option<String> {
        let stamp = record.timestamp_ms?;
        let (before, after) = *self.timestamp_windows.get(&record.topic)?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let outside = stamp > now.saturating_add(after) || stamp < now.saturating_sub(before);
        outside.then(|| {
            format!(
                "the record's timestamp ({stamp} ms) is outside what topic {} takes (message.timestamp.before.max.ms \
                 {before}, message.timestamp.after.max.ms {after}); fix the event's timestamp column or the topic's \
                 settings",
                record.topic
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn record(
        topic: &str,
        key: Option<&str>,
        timestamp_ms: Option<i64>,
        size: usize,
    ) -> OutboxRecord {
        OutboxRecord {
            topic: topic.into(),
            key: key.map(|k| Bytes::copy_from_slice(k.as_bytes())),
            value: Some(Bytes::from(vec![b'x'; size])),
            headers: vec![],
            partition: None,
            timestamp_ms,
        }
    }

    #[test]
    fn a_topics_configs_decide_what_it_refuses() {
        let mut rules = TopicRules::new(false);
        let topic: Arc<str> = "t".into();
        let configs = [
            ("max.message.bytes", "1000"),
            ("cleanup.policy", "compact,delete"),
            ("message.timestamp.type", "CreateTime"),
            ("message.timestamp.before.max.ms", "9223372036854775807"),
            ("message.timestamp.after.max.ms", "3600000"),
        ];
        let entry = |name: &str| {
            configs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        };
        assert_eq!(rules.learn(&topic, entry), Some(1000));
        assert!(rules
            .too_large(&record("t", Some("k"), None, 2000))
            .is_some());
        assert!(rules.too_large(&record("t", Some("k"), None, 10)).is_none());
        assert!(rules
            .too_large(&record("other", Some("k"), None, 2000))
            .is_none());
        assert!(rules
            .keyless_for_compacted(&record("t", None, None, 1))
            .is_some());
        assert!(rules
            .keyless_for_compacted(&record("t", Some("k"), None, 1))
            .is_none());
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let in_two_hours = now + 2 * 3_600_000;
        assert!(rules
            .timestamp_out_of_range(&record("t", Some("k"), Some(in_two_hours), 1))
            .is_some());
        assert!(rules
            .timestamp_out_of_range(&record("t", Some("k"), Some(now), 1))
            .is_none());
        assert_eq!(rules.due(&topic), None, "read just now");
        // Compressed records: the broker judges the size of the compressed batch.
        let mut compressed = TopicRules::new(true);
        assert_eq!(compressed.learn(&topic, entry), Some(1000));
        assert!(compressed
            .too_large(&record("t", Some("k"), None, 2000))
            .is_none());
    }

    #[test]
    fn a_topic_is_read_again_a_minute_after_an_answer_and_seconds_after_none() {
        let mut rules = TopicRules::new(false);
        let topic: Arc<str> = "t".into();
        // Whether the topic is due `after` from now.
        let due =
            |rules: &TopicRules, after: Duration| rules.due_at(&topic, Instant::now() + after);
        assert_eq!(
            due(&rules, LIMIT_TTL * 2),
            None,
            "never asked: not known here"
        );
        let entry = |name: &str| (name == "max.message.bytes").then(|| "1000".to_owned());
        rules.learn(&topic, entry);
        assert_eq!(due(&rules, UNREAD_RETRY * 2), None);
        assert_eq!(due(&rules, LIMIT_TTL * 2), Some(Due::Refresh));
        // A read that timed out keeps what was learned, and is retried within seconds.
        rules.unanswered(&topic);
        assert!(rules
            .too_large(&record("t", Some("k"), None, 2000))
            .is_some());
        assert_eq!(due(&rules, Duration::ZERO), None);
        assert_eq!(due(&rules, UNREAD_RETRY * 2), Some(Due::Retry));
        // Failing again: asked less and less often; not asked (requests fail, the next try is
        // not due): no failure counted.
        for step in [TopicRules::unanswered, TopicRules::postponed] {
            step(&mut rules, &topic);
            assert_eq!(due(&rules, UNREAD_RETRY * 3 / 2), None);
            assert_eq!(due(&rules, UNREAD_RETRY * 3), Some(Due::Retry));
        }
        // At least once a minute however often it failed.
        for _ in 0..20 {
            rules.unanswered(&topic);
        }
        assert_eq!(due(&rules, LIMIT_TTL / 2), None);
        assert_eq!(due(&rules, LIMIT_TTL * 2), Some(Due::Retry));
        // An answer without a limit: read again a minute later.
        rules.forget_limit(&topic);
        assert!(rules
            .too_large(&record("t", Some("k"), None, 2000))
            .is_none());
        assert_eq!(due(&rules, UNREAD_RETRY * 2), None);
        assert_eq!(due(&rules, LIMIT_TTL * 2), Some(Due::Refresh));
    }
}
