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

/// `TimestampRouter`'s `timestamp.format`: Java's `SimpleDateFormat` in UTC, the pattern
/// letters a topic name takes (`yyyy yy MM M dd d HH H mm m ss s SSS`) and quoted literals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DateFormat(Vec<DatePart>);

#[derive(Debug, Clone, PartialEq, Eq)]
enum DatePart {
    Literal(String),
    /// A field and its minimum width.
    Field(char, usize),
}

impl DateFormat {
    pub fn parse(pattern: &str) -> Result<Self, String> {
        let mut parts = Vec::new();
        let mut chars = pattern.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\'' => {
                    // '' is a quote; 'text' is literal text.
                    let mut text = String::new();
                    if chars.peek() == Some(&'\'') {
                        chars.next();
                        parts.push(DatePart::Literal("'".into()));
                        continue;
                    }
                    loop {
                        match chars.next() {
                            Some('\'') if chars.peek() == Some(&'\'') => {
                                chars.next();
                                text.push('\'');
                            }
                            Some('\'') => break,
                            Some(c) => text.push(c),
                            None => return Err(format!("{pattern:?}: an unclosed quote")),
                        }
                    }
                    parts.push(DatePart::Literal(text));
                }
                'y' | 'M' | 'd' | 'H' | 'm' | 's' | 'S' => {
                    let mut width = 1;
                    while chars.peek() == Some(&c) {
                        chars.next();
                        width += 1;
                    }
                    if c == 'M' && width > 2 {
                        return Err(format!(
                            "{pattern:?}: month names (MMM) are not supported; use MM"
                        ));
                    }
                    parts.push(DatePart::Field(c, width));
                }
                c if c.is_ascii_alphabetic() => {
                    return Err(format!(
                        "{pattern:?}: the pattern letter {c:?} is not supported; outbox-relay formats y, M, d, H, m, s and S"
                    ))
                }
                c => parts.push(DatePart::Literal(c.to_string())),
            }
        }
        Ok(Self(parts))
    }

    /// `millis` since the epoch, in UTC.
    pub fn format(&self, millis: i64) -> String {
        let days = millis.div_euclid(86_400_000);
        let ms_of_day = millis.rem_euclid(86_400_000);
        let (year, month, day) = civil_from_days(days);
        let mut out = String::new();
        for part in &self.0 {
            match part {
                DatePart::Literal(text) => out.push_str(text),
                DatePart::Field(c, width) => {
                    let value = match c {
                        // SimpleDateFormat: `yy` is the year modulo 100, other counts the
                        // whole year padded.
                        'y' if *width == 2 => year.rem_euclid(100),
                        'y' => year,
                        'M' => month as i64,
                        'd' => day as i64,
                        'H' => ms_of_day / 3_600_000,
                        'm' => ms_of_day / 60_000 % 60,
                        's' => ms_of_day / 1000 % 60,
                        _ => ms_of_day % 1000,
                    };
                    out.push_str(&format!("{value:0width$}"));
                }
            }
        }
        out
    }
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's
/// days-to-civil).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// One transform.
#[derive(Debug, Clone)]
pub enum Transform {
    /// `RegexRouter`: the topic, rewritten where the regex matches all of it.
    RegexRouter(TopicTemplate),
    /// `TimestampRouter`: `topic.format` with `${topic}` and `${timestamp}` (the record's
    /// timestamp in `timestamp.format`).
    TimestampRouter {
        topic_format: String,
        timestamp: DateFormat,
    },
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
    /// `now_ms`: the time of a record without a timestamp of its own (the producer stamps
    /// it when it is sent, a moment later).
    pub fn apply(&self, mut record: OutboxRecord, now_ms: i64) -> Option<OutboxRecord> {
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
                Transform::TimestampRouter {
                    topic_format,
                    timestamp,
                } => {
                    // The record keeps the time its topic was named after.
                    let millis = *record.timestamp_ms.get_or_insert(now_ms);
                    record.topic = topic_format
                        .replace("${topic}", &record.topic)
                        .replace("${timestamp}", &timestamp.format(millis))
                        .into();
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
            .apply_now(record(
                "Order.events",
                &[("id", "1"), ("eventType", "Created")],
                Some("{}"),
            ))
            .unwrap();
        assert_eq!(&*out.topic, "prod.Order");
        assert_eq!(names(&out), ["id", "source"]);
        let out = chain
            .apply_now(record("Customer.events", &[("id", "2")], Some("{}")))
            .unwrap();
        assert_eq!(&*out.topic, "prod.Customer");
        assert_eq!(names(&out), ["id"], "the predicate did not match");
        // A topic the regex does not match all of is kept.
        let out = chain.apply_now(record("audit", &[], Some("{}"))).unwrap();
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
        assert!(drop_tombstones.apply(tombstone.clone(), 0).is_none());
        assert!(drop_tombstones.apply(event.clone(), 0).is_some());
        let keep_traced = filter(Predicate::HasHeaderKey("trace".into()), true);
        assert!(keep_traced.apply(event, 0).is_some());
        assert!(keep_traced.apply(tombstone, 0).is_none());
        let all = Chain {
            steps: vec![Step {
                alias: "f".into(),
                transform: Transform::Filter,
                predicate: None,
            }],
        };
        assert!(all.apply_now(record("t", &[], Some("{}"))).is_none());
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

    impl Chain {
        fn apply_now(&self, record: OutboxRecord) -> Option<OutboxRecord> {
            self.apply(record, 0)
        }
    }

    #[test]
    fn timestamp_router_names_the_topic_after_the_records_time_in_utc() {
        let format = DateFormat::parse("yyyyMMdd").unwrap();
        // 2026-11-26T05:59:33.123Z
        let t = 1_795_672_773_123;
        assert_eq!(format.format(t), "20261126");
        assert_eq!(
            DateFormat::parse("yy-M-d'T'HH:mm:ss.SSS''")
                .unwrap()
                .format(t),
            "26-11-26T05:59:33.123'"
        );
        assert_eq!(DateFormat::parse("yyyy").unwrap().format(0), "1970");
        assert_eq!(
            DateFormat::parse("yyyyMMdd")
                .unwrap()
                .format(951_782_400_000),
            "20000229"
        );
        assert!(DateFormat::parse("EEE").unwrap_err().contains("'E'"));
        assert!(DateFormat::parse("MMM").is_err());
        let chain = Chain {
            steps: vec![Step {
                alias: "ts".into(),
                transform: Transform::TimestampRouter {
                    topic_format: "${topic}-${timestamp}".into(),
                    timestamp: format,
                },
                predicate: None,
            }],
        };
        let mut stamped = record("Order.events", &[], Some("{}"));
        stamped.timestamp_ms = Some(t);
        assert_eq!(
            &*chain.apply(stamped, 0).unwrap().topic,
            "Order.events-20261126"
        );
        // Without a timestamp of its own: now, kept on the record.
        let out = chain
            .apply(record("Order.events", &[], Some("{}")), 0)
            .unwrap();
        assert_eq!(&*out.topic, "Order.events-19700101");
        assert_eq!(out.timestamp_ms, Some(0));
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
