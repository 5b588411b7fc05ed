use crate::connect::{Converter, ExpandBehaviour, HeaderConverter, TypeModes};
use crate::error::ConfigError;
use crate::topic::TopicTemplate;
use std::fmt;
use std::sync::Arc;

/// A schema-qualified table name, e.g. `public.outbox`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TableName {
    pub schema: String,
    pub name: String,
}

impl TableName {
    /// Parses `schema.table` or `table` (schema `public`). Quotes are not interpreted:
    /// names are matched exactly as PostgreSQL reports them in Relation messages.
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let text = text.trim();
        let (schema, name) = match text.split_once('.') {
            Some((s, n)) => (s, n),
            None => ("public", text),
        };
        if schema.is_empty() || name.is_empty() || name.contains('.') {
            return Err(ConfigError::InvalidTable(text.to_owned()));
        }
        Ok(Self {
            schema: schema.to_owned(),
            name: name.to_owned(),
        })
    }
}

impl fmt::Display for TableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.schema, self.name)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// A Kafka header named by the alias (or the column name).
    Header,
    /// A field of the value, which becomes `{"payload": ..., "<alias>": ...}`.
    Envelope,
    /// The record's partition (an integer column; the alias is ignored, as in Debezium).
    Partition,
}

/// One entry of `table.fields.additional.placement` (`column:placement[:alias]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdditionalField {
    pub column: String,
    pub placement: Placement,
    pub alias: Arc<str>,
}

impl AdditionalField {
    /// Parses Debezium's comma-separated `col:placement[:alias]` list.
    pub fn parse_list(text: &str) -> Result<Vec<Self>, ConfigError> {
        text.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|entry| {
                let parts: Vec<&str> = entry.split(':').map(str::trim).collect();
                let (column, placement, alias) = match parts.as_slice() {
                    [c, p] => (*c, *p, *c),
                    [c, p, a] => (*c, *p, *a),
                    _ => return Err(ConfigError::InvalidPlacement(entry.to_owned())),
                };
                let placement = match placement {
                    "header" => Placement::Header,
                    "envelope" => Placement::Envelope,
                    "partition" => Placement::Partition,
                    _ => return Err(ConfigError::InvalidPlacement(entry.to_owned())),
                };
                if column.is_empty() || alias.is_empty() {
                    return Err(ConfigError::InvalidPlacement(entry.to_owned()));
                }
                Ok(Self {
                    column: column.to_owned(),
                    placement,
                    alias: alias.into(),
                })
            })
            .collect()
    }
}

/// What the router needs to know; every default is the one the seeds' schema uses.
#[derive(Debug, Clone)]
pub struct RouterConfig {
    /// The outbox tables; changes to any other table are ignored.
    pub tables: Vec<TableName>,
    /// Column whose value goes into header `id` (Debezium `table.field.event.id`).
    pub id_column: String,
    /// Column whose value is the record key (`table.field.event.key`).
    pub key_column: String,
    /// Column whose value is the record value (`table.field.event.payload`).
    pub payload_column: String,
    /// Column whose value builds the topic (`route.by.field`).
    pub route_by_column: String,
    /// `route.topic.replacement`, e.g. `${routedByValue}.events`.
    pub topic_template: TopicTemplate,
    /// Extra columns placed in headers (`table.fields.additional.placement`).
    pub additional: Vec<AdditionalField>,
    /// A NULL payload becomes a tombstone (null value, same key).
    pub tombstone_on_null_payload: bool,
    /// Parse the payload and produce it as compact JSON, dropping null fields and empty
    /// arrays like Debezium's `table.expand.json.payload` with its default behaviours.
    /// A payload that is not JSON is dead-lettered (Debezium logs and keeps the string).
    pub expand_json_payload: bool,
    /// Kafka record timestamp from this column (`table.field.event.timestamp`); unset =
    /// the producer's clock, as in Debezium.
    pub timestamp_column: Option<String>,
    /// An additional field whose column is missing is skipped rather than an error
    /// (`table.field.additional.missing=ignore`).
    pub ignore_missing_additional: bool,
    /// What an UPDATE of an outbox row does (`table.op.invalid.behavior`).
    pub on_update: InvalidOperation,
    /// How records are written: the native raw bytes, or what a Kafka Connect worker
    /// with the given converters would write (Debezium drop-in).
    pub output: Output,
}

/// `table.op.invalid.behavior`: UPDATEs are not events; `warn`/`error` skip them with a
/// log line at that level, `fatal` stops the relay (nothing after the last confirmed
/// position is confirmed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InvalidOperation {
    /// Skipped silently (native mode: cleanup jobs may update rows).
    #[default]
    Ignore,
    Warn,
    Error,
    Fatal,
}

/// The record format.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Output {
    /// Key, value and header values are the columns' text, byte for byte (StringConverter
    /// for every part): the fastest path, no copy of the payload.
    #[default]
    Raw,
    /// What Kafka Connect + Debezium write with these converters.
    Connect(ConnectFormat),
}

/// The Kafka Connect side of a Debezium setup.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectFormat {
    pub key: Converter,
    pub value: Converter,
    pub header: HeaderConverter,
    /// `topic.prefix` (`database.server.name`): names the envelope schema
    /// `<prefix>.<schema>.<table>.<routedByValue>.Value`.
    pub topic_prefix: String,
    /// `table.expand.json.payload` and its null / empty-array behaviours.
    pub expand: Option<ExpandBehaviour>,
    /// `table.field.event.schema.version`: INT32 column giving the envelope's schema version.
    pub schema_version_column: Option<String>,
    /// `tracing.span.context.field`: a java.util.Properties text whose `traceparent` and
    /// `tracestate` are propagated as headers.
    pub tracing_span_context_column: Option<String>,
    /// `route.tombstone.on.empty.payload`: a NULL or blank payload is a tombstone; when
    /// off, a NULL payload is written as the converter writes null (`null` in JSON).
    pub tombstone_on_empty_payload: bool,
    /// Debezium's context headers on every record (`extended.headers.enabled`, default
    /// true since 3.2); `None` when disabled.
    pub context_headers: Option<ContextHeaders>,
    /// The connector options that change how columns are typed (decimal, time, interval,
    /// hstore and binary handling modes, ...).
    pub types: TypeModes,
}

/// `__debezium.context.*` (`DebeziumHeaderProducer.contextHeaders`), in this order, before
/// the EventRouter's own headers.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextHeaders {
    /// `connectorLogicalName`: `topic.prefix`.
    pub connector_logical_name: String,
    /// `taskId`: "0" (the PostgreSQL connector has one task).
    pub task_id: String,
    /// `connectorName`: the plugin's name, "postgresql" (not the Connect connector's name).
    pub connector_name: String,
    /// `runId` (Debezium 3.4+): a UUIDv7 per task start; `None` writes no `runId` header.
    pub run_id: Option<String>,
}

impl ContextHeaders {
    /// What Debezium's PostgreSQL connector writes with this `topic.prefix`.
    pub fn postgres(topic_prefix: &str, run_id: Option<String>) -> Self {
        Self {
            connector_logical_name: topic_prefix.to_owned(),
            task_id: "0".into(),
            connector_name: "postgresql".into(),
            run_id,
        }
    }

    /// `(name, value)` in Debezium's order.
    pub fn entries(&self) -> Vec<(&'static str, &str)> {
        let mut out = vec![
            (
                "__debezium.context.connectorLogicalName",
                self.connector_logical_name.as_str(),
            ),
            ("__debezium.context.taskId", self.task_id.as_str()),
            (
                "__debezium.context.connectorName",
                self.connector_name.as_str(),
            ),
        ];
        if let Some(run_id) = &self.run_id {
            out.push(("__debezium.context.runId", run_id.as_str()));
        }
        out
    }
}

impl Default for RouterConfig {
    fn default() -> Self {
        Self {
            tables: vec![TableName {
                schema: "public".into(),
                name: "outbox".into(),
            }],
            id_column: "id".into(),
            key_column: "aggregate_id".into(),
            payload_column: "payload".into(),
            route_by_column: "aggregate_type".into(),
            topic_template: TopicTemplate::parse("${routedByValue}.events").expect("valid default"),
            additional: vec![AdditionalField {
                column: "event_type".into(),
                placement: Placement::Header,
                alias: "eventType".into(),
            }],
            tombstone_on_null_payload: true,
            expand_json_payload: false,
            timestamp_column: None,
            ignore_missing_additional: false,
            on_update: InvalidOperation::Ignore,
            output: Output::Raw,
        }
    }
}
