//! The pure part of `dead-letters`: what a record of the dead-letter topic says (the relay's
//! own headers, or Kafka Connect's `errors.deadletterqueue` ones), whether a filter selects
//! it, and where a replay sends it. No I/O: tested on bytes.

use crate::deliver::dead_letter as relay;
use bytes::Bytes;
use outbox_router::{OutboxRecord, RouteOutcome, Router, RouterConfig, TableName};
use pgoutput::{Column, ColumnValue, Insert, LogicalMessage, Relation, ReplicaIdentity, TupleData};
use std::collections::HashMap;

/// The headers Kafka Connect's DeadLetterQueueReporter adds with
/// `errors.deadletterqueue.context.headers.enable=true`, all under this prefix.
pub const CONNECT_PREFIX: &str = "__connect.errors.";
const CONNECT_TOPIC: &str = "__connect.errors.topic";
const CONNECT_EXCEPTION_MESSAGE: &str = "__connect.errors.exception.message";
const CONNECT_EXCEPTION_CLASS: &str = "__connect.errors.exception.class.name";
/// The relay's own dead-letter headers: every one under this prefix.
const RELAY_PREFIX: &str = "outbox-relay.";

/// One record as read from the dead-letter topic.
#[derive(Debug, Clone, Default)]
pub struct Consumed {
    pub partition: i32,
    pub offset: i64,
    pub timestamp_ms: Option<i64>,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(String, Option<Bytes>)>,
}

/// Who wrote a dead letter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// outbox-relay (`outbox-relay.error.reason`).
    Relay,
    /// Kafka Connect's dead-letter queue reporter (`__connect.errors.*`).
    Connect,
    /// Neither: a record someone else wrote to the topic.
    Unknown,
}

impl Format {
    pub fn label(self) -> &'static str {
        match self {
            Format::Relay => "outbox-relay",
            Format::Connect => "kafka-connect",
            Format::Unknown => "unknown",
        }
    }
}

/// A row's columns: name and text (`None`: NULL), in the table's column order.
pub type Row = Vec<(String, Option<String>)>;

/// A dead letter, read.
#[derive(Debug, Clone)]
pub struct Letter {
    pub partition: i32,
    pub offset: i64,
    pub timestamp_ms: Option<i64>,
    pub format: Format,
    /// Why: the relay's reason, or Connect's exception message (its class when it has none).
    pub reason: Option<String>,
    /// `schema.table` the row came from (relay).
    pub table: Option<String>,
    pub lsn: Option<String>,
    /// The topic the record was meant for (or was consumed from, for Connect).
    pub original_topic: Option<String>,
    /// The payload's size when it was left out of the dead letter.
    pub original_size: Option<String>,
    /// The row (`outbox-relay.source.row`): column name and text, in column order; `Err`
    /// when the header is there but unreadable.
    pub row: Option<Result<Row, String>>,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    /// The original record's headers: every header but the dead-letter ones.
    pub headers: Vec<(String, Option<Bytes>)>,
    /// `outbox-relay.row.kept`: the table and id of the row kept for an event this letter
    /// cannot give back whole (polling mode's dead-letter table).
    pub row_kept: Option<String>,
    /// Where the whole row of an event whose payload was left out was found (`row` is then
    /// that row), or why it was not: see `kept.rs`.
    pub found: Option<Result<String, String>>,
}

fn text(value: &Option<Bytes>) -> Option<String> {
    value
        .as_deref()
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

impl Letter {
    pub fn parse(record: Consumed) -> Letter {
        let header = |name: &str| {
            record
                .headers
                .iter()
                .rev()
                .find(|(k, _)| k == name)
                .and_then(|(_, v)| text(v))
        };
        let format = if record.headers.iter().any(|(k, _)| k == relay::REASON) {
            Format::Relay
        } else if record
            .headers
            .iter()
            .any(|(k, _)| k.starts_with(CONNECT_PREFIX))
        {
            Format::Connect
        } else {
            Format::Unknown
        };
        let mut letter = Letter {
            partition: record.partition,
            offset: record.offset,
            timestamp_ms: record.timestamp_ms,
            format,
            reason: None,
            table: None,
            lsn: None,
            original_topic: None,
            original_size: None,
            row: None,
            key: record.key.clone(),
            value: record.value.clone(),
            headers: Vec::new(),
            row_kept: None,
            found: None,
        };
        let ours: fn(&str) -> bool = match format {
            Format::Relay => {
                letter.reason = header(relay::REASON);
                letter.table = header(relay::SOURCE_TABLE);
                letter.lsn = header(relay::SOURCE_LSN);
                letter.original_topic = header(relay::ORIGINAL_TOPIC);
                letter.original_size = header(relay::ORIGINAL_SIZE);
                letter.row = header(relay::SOURCE_ROW).map(|json| parse_row(&json));
                letter.row_kept = header(relay::ROW_KEPT);
                // And `--exactly-once`'s position (`__outbox_relay.position`): an old
                // position planted as a partition's last record would mislead the next replay.
                |k| k.starts_with(RELAY_PREFIX) || k.starts_with("__outbox_relay.")
            }
            Format::Connect => {
                letter.reason = header(CONNECT_EXCEPTION_MESSAGE)
                    .filter(|m| !m.is_empty())
                    .or_else(|| header(CONNECT_EXCEPTION_CLASS));
                letter.original_topic = header(CONNECT_TOPIC).filter(|t| !t.is_empty());
                // Cut down in polling mode: where the whole row is kept.
                letter.row_kept = header(relay::ROW_KEPT);
                |k| k.starts_with(CONNECT_PREFIX) || k == relay::ROW_KEPT
            }
            Format::Unknown => |_| false,
        };
        letter.headers = record
            .headers
            .into_iter()
            .filter(|(k, _)| !ours(k))
            .collect();
        letter
    }

    /// Where it is on the dead-letter topic, and its replay marker's key:
    /// `<topic>@<topic id>/<partition>/<offset>`. A topic deleted and made again under the
    /// same name has another id (Kafka 2.8+), so its letters are never taken for the old
    /// topic's at the same place. Without an id (an older broker), the letter's time tells
    /// them apart: `<topic>/<partition>/<offset>/<timestamp>`.
    pub fn marker_key(&self, dead_letter_topic: &str, topic_id: Option<&str>) -> String {
        match topic_id {
            Some(id) => format!(
                "{dead_letter_topic}@{id}/{}/{}",
                self.partition, self.offset
            ),
            None => format!(
                "{dead_letter_topic}/{}/{}/{}",
                self.partition,
                self.offset,
                self.timestamp_ms.unwrap_or(-1)
            ),
        }
    }

    /// Whether a replay marked this letter replayed: `markers` maps each marker's key to when
    /// it was written. A marker of the older form, `<topic>/<partition>/<offset>`, counts only
    /// for a letter written no later than the marker: a letter of a topic made again since is
    /// newer than every marker of the old one.
    pub fn replayed(
        &self,
        dead_letter_topic: &str,
        topic_id: Option<&str>,
        markers: &HashMap<Vec<u8>, Option<i64>>,
    ) -> bool {
        // Its own key; or the one written while the broker gave no topic ids (upgraded since).
        if markers.contains_key(self.marker_key(dead_letter_topic, topic_id).as_bytes())
            || markers.contains_key(self.marker_key(dead_letter_topic, None).as_bytes())
        {
            return true;
        }
        let older = format!("{dead_letter_topic}/{}/{}", self.partition, self.offset);
        markers.get(older.as_bytes()).is_some_and(
            |marked| matches!((self.timestamp_ms, marked), (Some(l), Some(m)) if l <= *m),
        )
    }

    /// The event id (`id` header) the original record carried.
    pub fn event_id(&self) -> Option<String> {
        self.headers
            .iter()
            .find(|(k, _)| k == "id")
            .and_then(|(_, v)| text(v))
    }
}

pub fn parse_row(json: &str) -> Result<Row, String> {
    let object: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(json).map_err(|e| format!("not a JSON object: {e}"))?;
    object
        .into_iter()
        .map(|(name, value)| match value {
            serde_json::Value::Null => Ok((name, None)),
            serde_json::Value::String(s) => Ok((name, Some(s))),
            other => Err(format!("column {name:?} is {other}, not text or null")),
        })
        .collect()
}

/// `--since`: a point in time, or a duration back from now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Since {
    /// Epoch milliseconds.
    At(i64),
    /// Milliseconds before now.
    Ago(i64),
}

impl Since {
    /// An RFC 3339 time (`2026-05-01T12:00:00Z`, `…+02:00`) or a duration (`2h`, `90m`,
    /// `1d 12h`, `PT2H`).
    pub fn parse(text: &str) -> Result<Since, String> {
        let text = text.trim();
        if let Ok(at) = text.parse::<jiff::Timestamp>() {
            return Ok(Since::At(at.as_millisecond()));
        }
        let span: jiff::Span = text.parse().map_err(|_| {
            format!("{text:?} is neither an RFC 3339 time (2026-05-01T12:00:00Z) nor a duration (2h, 30m, 1d)")
        })?;
        let duration = span
            .to_duration(jiff::SpanRelativeTo::days_are_24_hours())
            .map_err(|e| format!("{text:?}: {e}"))?;
        if duration.is_negative() {
            return Err(format!("{text:?} is a negative duration"));
        }
        Ok(Since::Ago(duration.as_millis() as i64))
    }

    pub fn epoch_ms(self, now_ms: i64) -> i64 {
        match self {
            Since::At(ms) => ms,
            Since::Ago(ms) => now_ms.saturating_sub(ms),
        }
    }
}

/// Which dead letters a command takes: every condition given must hold.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// A substring of the reason, in any case.
    pub reason: Option<String>,
    /// Written at or after (epoch milliseconds).
    pub since_ms: Option<i64>,
    /// The original topic, exactly.
    pub topic: Option<String>,
}

impl Filter {
    pub fn matches(&self, letter: &Letter) -> bool {
        let reason = self.reason.as_ref().is_none_or(|wanted| {
            letter
                .reason
                .as_ref()
                .is_some_and(|r| r.to_lowercase().contains(&wanted.to_lowercase()))
        });
        let since = self
            .since_ms
            .is_none_or(|since| letter.timestamp_ms.is_some_and(|t| t >= since));
        let topic = self
            .topic
            .as_ref()
            .is_none_or(|t| letter.original_topic.as_ref() == Some(t));
        reason && since && topic
    }
}

/// What a replay does with a dead letter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Produce this record.
    Record(OutboxRecord),
    /// It cannot be replayed, and why: left where it is.
    NotReplayable(String),
}

/// The current configuration's router, to route dead-lettered rows again as `run` would.
pub struct Reroute {
    router: Router,
    /// `schema.table` -> column name -> (type oid, type modifier), where the catalog was read
    /// (Kafka Connect output types its fields from them); text otherwise.
    types: HashMap<String, HashMap<String, (u32, i32)>>,
}

/// The relation id the rerouted rows go under (one row at a time, its Relation first).
const RELATION_ID: u32 = 1;

impl Reroute {
    pub fn new(config: RouterConfig) -> Self {
        Self {
            router: Router::new(config),
            types: HashMap::new(),
        }
    }

    pub fn router_mut(&mut self) -> &mut Router {
        &mut self.router
    }

    /// The column types of `table` as the catalog has them now.
    pub fn set_types(&mut self, table: &TableName, relation: &Relation) {
        self.types.insert(
            table.to_string(),
            relation
                .columns
                .iter()
                .map(|c| (c.name.clone(), (c.type_oid, c.type_modifier)))
                .collect(),
        );
    }

    fn route(&mut self, table: &TableName, row: &[(String, Option<String>)]) -> RouteOutcome {
        let types = self.types.get(&table.to_string());
        let relation = Relation {
            relation_id: RELATION_ID,
            namespace: table.schema.clone(),
            name: table.name.clone(),
            replica_identity: ReplicaIdentity::Default,
            columns: row
                .iter()
                .map(|(name, _)| {
                    let (type_oid, type_modifier) = types
                        .and_then(|t| t.get(name).copied())
                        .unwrap_or((TEXT_OID, -1));
                    Column {
                        flags: 0,
                        name: name.clone(),
                        type_oid,
                        type_modifier,
                    }
                })
                .collect(),
        };
        self.router.route(&LogicalMessage::Relation(relation));
        // Finished: the transforms before and after the EventRouter run, as `run` applies them.
        self.router.route(&LogicalMessage::Insert(Insert {
            relation_id: RELATION_ID,
            new_tuple: TupleData {
                columns: row
                    .iter()
                    .map(|(_, value)| match value {
                        Some(text) => ColumnValue::Text(Bytes::from(text.clone())),
                        None => ColumnValue::Null,
                    })
                    .collect(),
            },
        }))
    }
}

const TEXT_OID: u32 = 25;

/// Where a replay sends `letter`: a row it carries is routed again by `reroute` (the current
/// configuration); otherwise the record goes back to its original topic as it was (its key,
/// payload and headers, less the dead-letter ones).
pub fn target(letter: &Letter, reroute: &mut Reroute) -> Target {
    let not = |why: String| Target::NotReplayable(why);
    let stamped = |mut record: OutboxRecord| {
        // The time the event was first read (the dead letter's), unless the outbox names one.
        if record.timestamp_ms.is_none() {
            record.timestamp_ms = letter.timestamp_ms;
        }
        Target::Record(record)
    };
    match (&letter.format, &letter.row) {
        (Format::Unknown, _) => not(format!(
            "not a dead letter: no {} header and no {CONNECT_PREFIX}* headers",
            relay::REASON
        )),
        (Format::Relay | Format::Connect, Some(Err(e))) => {
            not(format!("its {} header: {e}", relay::SOURCE_ROW))
        }
        // A row it carries, or its whole row found where the source kept it (kept.rs).
        (Format::Relay | Format::Connect, Some(Ok(row))) => {
            let Some(table) = letter
                .table
                .as_deref()
                .and_then(|t| TableName::parse(t).ok())
            else {
                return not(format!("its {} header names no table", relay::SOURCE_TABLE));
            };
            match reroute.route(&table, row) {
                RouteOutcome::Record(record) => stamped(record),
                RouteOutcome::Invalid(invalid) => not(format!(
                    "still cannot be routed with the current configuration: {}",
                    invalid.reason
                )),
                RouteOutcome::Ignored => not(format!(
                    "{table} is not an outbox table of the current configuration (--table)"
                )),
                RouteOutcome::SkippedUpdate { .. } => not("not an inserted row".into()),
                RouteOutcome::Fatal(reason) | RouteOutcome::Unavailable(reason) => not(reason),
                RouteOutcome::Connect(_) => unreachable!("route() returns it transformed"),
            }
        }
        (Format::Relay | Format::Connect, None) => {
            if let Some(size) = &letter.original_size {
                let why = match &letter.found {
                    Some(Err(why)) => why.clone(),
                    _ => "no row to route".into(),
                };
                return not(format!(
                    "its payload ({size} bytes) was left out of the dead letter, and {why}"
                ));
            }
            let Some(topic) = &letter.original_topic else {
                return not(match letter.format {
                    Format::Connect => format!(
                        "no {CONNECT_TOPIC} header (errors.deadletterqueue.context.headers.enable=false)"
                    ),
                    _ => format!("no {} header and no row to route", relay::ORIGINAL_TOPIC),
                });
            };
            if let Err(e) = outbox_router::validate_topic_name(topic) {
                return not(format!("its original topic {topic:?} is invalid: {e}"));
            }
            stamped(OutboxRecord {
                topic: topic.as_str().into(),
                key: letter.key.clone(),
                value: letter.value.clone(),
                headers: letter
                    .headers
                    .iter()
                    .map(|(k, v)| (k.as_str().into(), v.clone()))
                    .collect(),
                partition: None,
                timestamp_ms: None,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deliver::DeadLetter;
    use outbox_router::InvalidRow;

    fn consumed(record: &OutboxRecord, offset: i64) -> Consumed {
        Consumed {
            partition: 0,
            offset,
            timestamp_ms: Some(1_700_000_000_000),
            key: record.key.clone(),
            value: record.value.clone(),
            headers: record
                .headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        }
    }

    fn b(s: &str) -> Option<Bytes> {
        Some(Bytes::copy_from_slice(s.as_bytes()))
    }

    /// What the relay dead-letters for a row of public.outbox routed by a column it lacks.
    fn unroutable_letter() -> Letter {
        let row = vec![
            ("id".to_string(), b("e-1")),
            ("aggregate_type".to_string(), b("Order")),
            ("aggregate_id".to_string(), b("o-1")),
            ("event_type".to_string(), b("Created")),
            ("payload".to_string(), b(r#"{"n": 1}"#)),
            ("note".to_string(), None),
        ];
        let letter = DeadLetter::from_invalid_row(
            InvalidRow {
                reason: "column \"kind\" is missing from the table".into(),
                table: "public.outbox".into(),
                original_topic: None,
                key: b("o-1"),
                value: b(r#"{"n": 1}"#),
                event_id: b("e-1"),
                row: Some(row),
                connect_dlq: None,
            },
            Some(pgoutput::Lsn::from_u64(0x16_B374_D848)),
        );
        Letter::parse(consumed(&letter.to_record(&"dlq".into()), 7))
    }

    fn record(target: Target) -> OutboxRecord {
        match target {
            Target::Record(r) => r,
            Target::NotReplayable(why) => panic!("not replayable: {why}"),
        }
    }

    fn why(target: Target) -> String {
        match target {
            Target::NotReplayable(why) => why,
            Target::Record(r) => panic!("replayable to {}", r.topic),
        }
    }

    #[test]
    fn a_relay_dead_letter_is_read_from_its_headers() {
        let letter = unroutable_letter();
        assert_eq!(letter.format, Format::Relay);
        assert_eq!(
            letter.reason.as_deref(),
            Some("column \"kind\" is missing from the table")
        );
        assert_eq!(letter.table.as_deref(), Some("public.outbox"));
        assert_eq!(letter.lsn.as_deref(), Some("16/B374D848"));
        assert_eq!(letter.event_id().as_deref(), Some("e-1"));
        assert_eq!(
            letter.marker_key("outbox-relay.dlq", Some("0123456789abcdef0123456789abcdef")),
            "outbox-relay.dlq@0123456789abcdef0123456789abcdef/0/7"
        );
        let row = letter.row.clone().unwrap().unwrap();
        assert_eq!(row[0], ("id".into(), Some("e-1".into())));
        assert_eq!(row[5], ("note".into(), None), "NULL stays NULL");
        let names: Vec<&str> = letter.headers.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["id"], "the dead-letter headers are not the event's");
    }

    #[test]
    fn a_row_is_routed_again_with_the_current_configuration() {
        let letter = unroutable_letter();
        // Still the broken configuration: still not routable, and said why.
        let broken = RouterConfig {
            route_by_column: "kind".into(),
            ..RouterConfig::default()
        };
        let reason = why(target(&letter, &mut Reroute::new(broken)));
        assert!(reason.contains("still cannot be routed"), "{reason}");
        assert!(reason.contains("\"kind\""), "{reason}");
        // Fixed: the record `run` would have produced, stamped with the dead letter's time.
        let r = record(target(&letter, &mut Reroute::new(RouterConfig::default())));
        assert_eq!(&*r.topic, "Order.events");
        assert_eq!(r.key, b("o-1"));
        assert_eq!(r.value, b(r#"{"n": 1}"#));
        let headers: Vec<(&str, Option<&[u8]>)> = r
            .headers
            .iter()
            .map(|(k, v)| (&**k, v.as_deref()))
            .collect();
        assert_eq!(
            headers,
            [
                ("id", Some(&b"e-1"[..])),
                ("eventType", Some(&b"Created"[..]))
            ]
        );
        assert_eq!(r.timestamp_ms, Some(1_700_000_000_000));
        // Another table than the configured outbox.
        let other = RouterConfig {
            tables: vec![TableName::parse("app.outbox").unwrap()],
            ..RouterConfig::default()
        };
        let reason = why(target(&letter, &mut Reroute::new(other)));
        assert!(reason.contains("not an outbox table"), "{reason}");
    }

    #[test]
    fn without_a_row_the_record_goes_back_to_its_original_topic_unless_its_payload_was_left_out() {
        let refused = |value_len: usize, oversized: bool| {
            let record = crate::deliver::RefusedRecord {
                topic: "Order.events".into(),
                key: b("o-1"),
                event_id: b("e-1"),
                value: b("{}"),
                value_len,
            };
            let record = if oversized {
                record.oversized()
            } else {
                record
            };
            let letter = DeadLetter::refused(
                "Broker: Policy violation",
                record,
                "public.outbox".into(),
                None,
            );
            Letter::parse(consumed(&letter.to_record(&"dlq".into()), 3))
        };
        let r = record(target(
            &refused(2, false),
            &mut Reroute::new(RouterConfig::default()),
        ));
        assert_eq!(&*r.topic, "Order.events");
        assert_eq!((r.key, r.value), (b("o-1"), b("{}")));
        let names: Vec<&str> = r.headers.iter().map(|(k, _)| &**k).collect();
        assert_eq!(names, ["id"], "no outbox-relay.* header goes back");
        let reason = why(target(
            &refused(2_000_000, true),
            &mut Reroute::new(RouterConfig::default()),
        ));
        assert!(reason.contains("2000000 bytes"), "{reason}");
        // A row the router dead-lettered with an invalid topic name and no row header (an
        // older dead letter): its original topic cannot take it.
        let mut old = Consumed {
            headers: vec![
                (relay::REASON.into(), b("topic name is invalid")),
                (relay::ORIGINAL_TOPIC.into(), b("Order lines.events")),
            ],
            ..Consumed::default()
        };
        let reason = why(target(
            &Letter::parse(old.clone()),
            &mut Reroute::new(RouterConfig::default()),
        ));
        assert!(
            reason.contains("\"Order lines.events\" is invalid"),
            "{reason}"
        );
        old.headers.push((relay::SOURCE_ROW.into(), b("[1]")));
        let reason = why(target(
            &Letter::parse(old),
            &mut Reroute::new(RouterConfig::default()),
        ));
        assert!(reason.contains("not a JSON object"), "{reason}");
    }

    #[test]
    fn a_kafka_connect_dead_letter_goes_back_to_the_topic_it_was_consumed_from() {
        let connect = Consumed {
            partition: 0,
            offset: 0,
            timestamp_ms: Some(5),
            key: b("k"),
            value: b("v"),
            headers: vec![
                ("trace".into(), b("t-1")),
                ("__connect.errors.topic".into(), b("payments")),
                ("__connect.errors.partition".into(), b("2")),
                ("__connect.errors.offset".into(), b("41")),
                ("__connect.errors.connector.name".into(), b("jdbc-sink")),
                (
                    "__connect.errors.exception.class.name".into(),
                    b("org.apache.kafka.connect.errors.DataException"),
                ),
                (
                    "__connect.errors.exception.message".into(),
                    b("Converting byte[] to Kafka Connect data failed"),
                ),
            ],
        };
        let letter = Letter::parse(connect.clone());
        assert_eq!(letter.format, Format::Connect);
        assert_eq!(
            letter.reason.as_deref(),
            Some("Converting byte[] to Kafka Connect data failed")
        );
        assert_eq!(letter.original_topic.as_deref(), Some("payments"));
        let r = record(target(&letter, &mut Reroute::new(RouterConfig::default())));
        assert_eq!(&*r.topic, "payments");
        assert_eq!((r.key, r.value, r.timestamp_ms), (b("k"), b("v"), Some(5)));
        let headers: Vec<&str> = r.headers.iter().map(|(k, _)| &**k).collect();
        assert_eq!(headers, ["trace"]);
        // Without the context headers there is no topic to go back to.
        let bare = Consumed {
            headers: vec![("__connect.errors.exception.message".into(), b("boom"))],
            ..connect
        };
        let reason = why(target(
            &Letter::parse(bare),
            &mut Reroute::new(RouterConfig::default()),
        ));
        assert!(reason.contains("__connect.errors.topic"), "{reason}");
        let foreign = Letter::parse(Consumed::default());
        assert_eq!(foreign.format, Format::Unknown);
        assert!(
            why(target(&foreign, &mut Reroute::new(RouterConfig::default())))
                .contains("not a dead letter")
        );
    }

    #[test]
    fn filters_select_by_reason_time_and_original_topic() {
        let mut letter = unroutable_letter();
        letter.original_topic = Some("Order.events".into());
        let all = Filter::default();
        assert!(all.matches(&letter));
        let reason = |r: &str| Filter {
            reason: Some(r.into()),
            ..Filter::default()
        };
        assert!(reason("IS MISSING").matches(&letter), "any case");
        assert!(!reason("too large").matches(&letter));
        let since = |ms| Filter {
            since_ms: Some(ms),
            ..Filter::default()
        };
        assert!(since(1_700_000_000_000).matches(&letter));
        assert!(!since(1_700_000_000_001).matches(&letter));
        let topic = |t: &str| Filter {
            topic: Some(t.into()),
            ..Filter::default()
        };
        assert!(topic("Order.events").matches(&letter));
        assert!(!topic("Order").matches(&letter), "the whole name");
        let both = Filter {
            reason: Some("missing".into()),
            topic: Some("Invoice.events".into()),
            ..Filter::default()
        };
        assert!(!both.matches(&letter), "every condition");
    }

    #[test]
    fn since_takes_a_time_or_a_duration() {
        assert_eq!(
            Since::parse("2023-11-14T22:13:20Z"),
            Ok(Since::At(1_700_000_000_000))
        );
        assert_eq!(
            Since::parse("2023-11-15T00:13:20+02:00"),
            Ok(Since::At(1_700_000_000_000))
        );
        assert_eq!(Since::parse("2h"), Ok(Since::Ago(7_200_000)));
        assert_eq!(Since::parse("90m"), Ok(Since::Ago(5_400_000)));
        assert_eq!(Since::parse("1d"), Ok(Since::Ago(86_400_000)));
        assert_eq!(Since::parse("PT30S"), Ok(Since::Ago(30_000)));
        assert_eq!(Since::Ago(1_000).epoch_ms(5_000), 4_000);
        assert!(Since::parse("yesterday").unwrap_err().contains("RFC 3339"));
        assert!(Since::parse("2023-13-01").is_err());
    }

    /// A dead-letter topic deleted and made again restarts its offsets: its letters are never
    /// taken for the old topic's at the same place, whose markers name the old topic's id (or,
    /// in the older form, were written before the new letter).
    #[test]
    fn a_marker_names_the_topic_it_was_written_for() {
        let mut letter = unroutable_letter();
        letter.timestamp_ms = Some(2_000);
        let (old, new) = (
            "00000000000000000000000000000001",
            "00000000000000000000000000000002",
        );
        let marked = |key: String, at: i64| HashMap::from([(key.into_bytes(), Some(at))]);
        let dlq = "outbox-relay.dlq";
        let by_old_id = marked(letter.marker_key(dlq, Some(old)), 1_000);
        assert!(letter.replayed(dlq, Some(old), &by_old_id));
        assert!(
            !letter.replayed(dlq, Some(new), &by_old_id),
            "the topic made again"
        );
        // Without ids: the letter's time.
        let mut later = letter.clone();
        later.timestamp_ms = Some(3_000);
        let by_time = marked(letter.marker_key(dlq, None), 2_500);
        assert!(letter.replayed(dlq, None, &by_time));
        assert!(!later.replayed(dlq, None, &by_time));
        // The older form counts for letters written before its marker only.
        let older = marked(format!("{dlq}/0/7"), 2_500);
        assert!(letter.replayed(dlq, Some(new), &older));
        assert!(!later.replayed(dlq, Some(new), &older));
    }
}
