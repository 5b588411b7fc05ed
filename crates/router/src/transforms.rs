//! Kafka Connect's transforms after the EventRouter, applied to each record in the order a
//! worker's `transforms=a,b,c` applies them, each with its predicate (`predicate`, `negate`).
//! Pure: records in, records out (or none: filtered).
//!
//! The transforms here work on what the EventRouter produced, topic and headers, with the
//! semantics of Kafka's own classes (`org.apache.kafka.connect.transforms.*`):
//! - `RegexRouter`: `regex` must match the whole topic (`Matcher.matches()`), which is then
//!   `replaceFirst(replacement)`, Java's regular expressions and replacement syntax;
//! - `InsertHeader`: `header` added last with `value.literal`, parsed as Connect's
//!   `Values.parseString` does and written by the header converter;
//! - `DropHeaders`: every header named in `headers`;
//! - `Filter`: the record is dropped (with a predicate: the records it matches).
//!
//! Predicates (`org.apache.kafka.connect.transforms.predicates.*`): `TopicNameMatches`
//! (`pattern`, whole topic), `HasHeaderKey` (`name`), `RecordIsTombstone` (a null value).

use crate::record::OutboxRecord;
use crate::topic::TopicTemplate;
use bytes::Bytes;
use std::sync::Arc;

/// A condition on a record.
#[derive(Debug, Clone)]
pub enum Predicate {
    TopicNameMatches(regex::Regex),
    HasHeaderKey(String),
    RecordIsTombstone,
}

impl Predicate {
    /// `TopicNameMatches` with Java's `Pattern.matches` semantics (the whole topic).
    pub fn topic_name_matches(pattern: &str) -> Result<Self, String> {
        crate::topic::java_whole_match(pattern).map(Predicate::TopicNameMatches)
    }

    pub fn test(&self, record: &OutboxRecord) -> bool {
        match self {
            Predicate::TopicNameMatches(regex) => regex.is_match(&record.topic),
            Predicate::HasHeaderKey(name) => record.headers.iter().any(|(k, _)| &**k == name),
            Predicate::RecordIsTombstone => record.value.is_none(),
        }
    }
}

/// One transform.
#[derive(Debug, Clone)]
pub enum Transform {
    /// `RegexRouter`: the topic, rewritten where the regex matches all of it.
    RegexRouter(TopicTemplate),
    /// `InsertHeader`: a header added after the others.
    InsertHeader {
        header: Arc<str>,
        value: Option<Bytes>,
    },
    /// `DropHeaders`: every header with one of these names.
    DropHeaders(Vec<String>),
    /// `Filter`: no record.
    Filter,
}

/// A transform, under its alias, with its predicate (and `negate`).
#[derive(Debug, Clone)]
pub struct Step {
    pub alias: String,
    pub transform: Transform,
    pub predicate: Option<(Predicate, bool)>,
}

impl Step {
    fn applies_to(&self, record: &OutboxRecord) -> bool {
        match &self.predicate {
            None => true,
            Some((predicate, negate)) => predicate.test(record) != *negate,
        }
    }
}

/// The transforms after the EventRouter, in order.
#[derive(Debug, Clone, Default)]
pub struct Chain {
    pub steps: Vec<Step>,
}

impl Chain {
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// The record each step makes of it, in order; `None` when a step filtered it out.
    pub fn apply(&self, mut record: OutboxRecord) -> Option<OutboxRecord> {
        for step in &self.steps {
            if !step.applies_to(&record) {
                continue;
            }
            match &step.transform {
                Transform::RegexRouter(template) => {
                    let topic = template.render(&record.topic);
                    if *topic != *record.topic {
                        record.topic = topic.into();
                    }
                }
                Transform::InsertHeader { header, value } => {
                    record.headers.push((header.clone(), value.clone()));
                }
                Transform::DropHeaders(names) => {
                    record
                        .headers
                        .retain(|(k, _)| !names.iter().any(|n| **k == **n));
                }
                Transform::Filter => return None,
            }
        }
        Some(record)
    }
}

/// What Connect's `Values.parseString` makes of an `InsertHeader` literal, as the default
/// `SimpleHeaderConverter` writes it: `true`/`false` (exactly: `TRUE` stays a string, as
/// Kafka Connect + Debezium showed in the differential test) as a boolean, a whole number as
/// its integer (`007` is `7`), anything else as the string itself. Returns the text.
pub fn simple_header_literal(literal: &str) -> String {
    if literal == "true" || literal == "false" {
        return literal.to_owned();
    }
    let digits = literal.strip_prefix(['+', '-']).unwrap_or(literal);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        if let Ok(n) = literal.parse::<i64>() {
            return n.to_string();
        }
    }
    literal.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(topic: &str, headers: &[(&str, &str)], value: Option<&str>) -> OutboxRecord {
        OutboxRecord {
            topic: topic.into(),
            key: Some(Bytes::from_static(b"k")),
            value: value.map(|v| Bytes::copy_from_slice(v.as_bytes())),
            headers: headers
                .iter()
                .map(|(k, v)| ((*k).into(), Some(Bytes::copy_from_slice(v.as_bytes()))))
                .collect(),
            partition: None,
            timestamp_ms: None,
        }
    }

    fn names(r: &OutboxRecord) -> Vec<&str> {
        r.headers.iter().map(|(k, _)| &**k).collect()
    }

    #[test]
    fn steps_apply_in_order_each_under_its_predicate() {
        let chain = Chain {
            steps: vec![
                Step {
                    alias: "route".into(),
                    transform: Transform::RegexRouter(
                        TopicTemplate::with_regex("(.*)\\.events", "prod.$1").unwrap(),
                    ),
                    predicate: None,
                },
                Step {
                    alias: "source".into(),
                    transform: Transform::InsertHeader {
                        header: "source".into(),
                        value: Some(Bytes::from_static(b"orders")),
                    },
                    // Only on the renamed Order topic.
                    predicate: Some((
                        Predicate::topic_name_matches("prod\\.Order").unwrap(),
                        false,
                    )),
                },
                Step {
                    alias: "drop".into(),
                    transform: Transform::DropHeaders(vec!["eventType".into()]),
                    predicate: None,
                },
            ],
        };
        let out = chain
            .apply(record(
                "Order.events",
                &[("id", "1"), ("eventType", "Created")],
                Some("{}"),
            ))
            .unwrap();
        assert_eq!(&*out.topic, "prod.Order");
        assert_eq!(names(&out), ["id", "source"]);
        let out = chain
            .apply(record("Customer.events", &[("id", "2")], Some("{}")))
            .unwrap();
        assert_eq!(&*out.topic, "prod.Customer");
        assert_eq!(names(&out), ["id"], "the predicate did not match");
        // A topic the regex does not match all of is kept.
        let out = chain.apply(record("audit", &[], Some("{}"))).unwrap();
        assert_eq!(&*out.topic, "audit");
    }

    #[test]
    fn filter_drops_what_its_predicate_says_and_negate_inverts_it() {
        let filter = |predicate: Predicate, negate: bool| Chain {
            steps: vec![Step {
                alias: "f".into(),
                transform: Transform::Filter,
                predicate: Some((predicate, negate)),
            }],
        };
        let tombstone = record("t", &[], None);
        let event = record("t", &[("trace", "x")], Some("{}"));
        let drop_tombstones = filter(Predicate::RecordIsTombstone, false);
        assert!(drop_tombstones.apply(tombstone.clone()).is_none());
        assert!(drop_tombstones.apply(event.clone()).is_some());
        let keep_traced = filter(Predicate::HasHeaderKey("trace".into()), true);
        assert!(keep_traced.apply(event).is_some());
        assert!(keep_traced.apply(tombstone).is_none());
        let all = Chain {
            steps: vec![Step {
                alias: "f".into(),
                transform: Transform::Filter,
                predicate: None,
            }],
        };
        assert!(all.apply(record("t", &[], Some("{}"))).is_none());
    }

    #[test]
    fn topic_name_matches_is_a_whole_match_with_javas_classes() {
        let p = Predicate::topic_name_matches("Order\\.\\w+").unwrap();
        assert!(p.test(&record("Order.events", &[], None)));
        assert!(!p.test(&record("xOrder.events", &[], None)), "whole topic");
        assert!(
            !p.test(&record("Order.événements", &[], None)),
            "\\w is ASCII in Java"
        );
    }

    #[test]
    fn insert_header_literals_are_written_as_connect_parses_them() {
        assert_eq!(simple_header_literal("orders-service"), "orders-service");
        assert_eq!(simple_header_literal("007"), "7");
        assert_eq!(simple_header_literal("-12"), "-12");
        assert_eq!(simple_header_literal("true"), "true");
        assert_eq!(simple_header_literal("TRUE"), "TRUE", "a string to Connect");
        assert_eq!(simple_header_literal("1.5"), "1.5");
    }
}
