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

/// An entry of a Debezium include/exclude list (`table.include.list`,
/// `message.prefix.include.list`, …): a regular expression matched whole and without
/// regard to case (Debezium compiles these lists with `Pattern.CASE_INSENSITIVE` and tests
/// them with `matches()`).
#[derive(Debug, Clone)]
pub struct ListPattern {
    source: String,
    regex: regex::Regex,
    /// A table pattern's schema filter (`schema.include.list` / `schema.exclude.list`):
    /// Debezium captures a table only where both its schema and its table filter take it.
    schemas: Option<std::sync::Arc<SchemaFilter>>,
}

impl ListPattern {
    pub fn new(pattern: &str) -> Result<Self, String> {
        let regex = regex::RegexBuilder::new(&format!("^(?:{pattern})$"))
            .case_insensitive(true)
            .build()
            .map_err(|e| format!("{pattern:?} is not a regular expression: {e}"))?;
        Ok(Self {
            source: pattern.to_owned(),
            regex,
            schemas: None,
        })
    }

    /// This table pattern, taking only tables whose schema `schemas` takes.
    pub fn within(self, schemas: std::sync::Arc<SchemaFilter>) -> Self {
        Self {
            schemas: Some(schemas),
            ..self
        }
    }

    /// Whether the table `schema.name` matches (and its schema filter takes its schema).
    pub fn matches(&self, schema: &str, name: &str) -> bool {
        self.is_match(&format!("{schema}.{name}"))
            && self.schemas.as_ref().is_none_or(|f| f.accepts(schema))
    }

    pub fn is_match(&self, text: &str) -> bool {
        self.regex.is_match(text)
    }

    pub fn as_str(&self) -> &str {
        &self.source
    }
}

/// Debezium's schema filter: `schema.include.list` (only the schemas it matches) or
/// `schema.exclude.list` (all but those), each a list of regular expressions matched against
/// the whole schema name, without regard to case.
#[derive(Debug, Clone)]
pub enum SchemaFilter {
    Include(Vec<ListPattern>),
    Exclude(Vec<ListPattern>),
}

impl SchemaFilter {
    pub fn accepts(&self, schema: &str) -> bool {
        match self {
            SchemaFilter::Include(patterns) => patterns.iter().any(|p| p.is_match(schema)),
            SchemaFilter::Exclude(patterns) => !patterns.iter().any(|p| p.is_match(schema)),
        }
    }
}

/// Logical decoding messages (`pg_logical_emit_message(true, prefix, content)`) relayed as
/// outbox events: the content is a JSON object with the outbox columns as fields.
#[derive(Debug, Clone, Default)]
pub struct MessageConfig {
    /// Prefixes relayed (`message.prefix.include.list`); when empty, every prefix that
    /// `exclude` does not match.
    pub include: Vec<ListPattern>,
    pub exclude: Vec<ListPattern>,
    /// `DecodeLogicalDecodingMessageContent`'s `fields.null.include`: null fields kept (as
    /// optional bytes) rather than left out of the decoded struct.
    pub keep_null_fields: bool,
}

impl MessageConfig {
    /// Whether messages with `prefix` are relayed (Debezium's `LogicalDecodingMessageFilter`:
    /// the include list wins when both are set).
    pub fn accepts(&self, prefix: &str) -> bool {
        if !self.include.is_empty() {
            return self.include.iter().any(|p| p.is_match(prefix));
        }
        !self.exclude.iter().any(|p| p.is_match(prefix))
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
    /// Further outbox tables, by pattern (a table created later that matches is relayed
    /// from its first row).
    pub table_patterns: Vec<ListPattern>,
    /// Logical decoding messages relayed as events, if any.
    pub messages: Option<MessageConfig>,
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
    /// Kafka Connect's transforms after the EventRouter (`transforms=outbox,route,…`).
    pub chain: crate::transforms::Chain,
    /// The transforms before the EventRouter (on the change events), if any.
    pub before: Option<crate::BeforeRouter>,
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
// One per relay, built once at start: the size of the Connect variant costs nothing.
#[allow(clippy::large_enum_variant)]
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
    /// `schema.name.adjustment.mode=avro`: the connector's schema names made valid Avro
    /// full names (Debezium's `SchemaNameAdjuster`).
    pub avro_schema_names: bool,
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
    /// Where Debezium's heartbeat records go (`__debezium-heartbeat.<topic.prefix>`), when
    /// `heartbeat.interval.ms` asks for them.
    pub heartbeat_topic: Option<Arc<str>>,
    /// BEGIN/END records (`provide.transaction.metadata`), if written.
    pub transaction_metadata: Option<TransactionMetadata>,
    /// Debezium's notifications (`notification.enabled.channels`), if any channel is on.
    pub notifications: Option<Notifications>,
    /// Kafka Connect's `errors.*` options: what becomes of a record a transform or converter
    /// fails on.
    pub errors: ErrorHandling,
}

/// Debezium's notification channels the relay writes to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Notifications {
    /// `sink`: records to `notification.sink.topic.name`.
    pub sink_topic: Option<Arc<str>>,
    /// `log`: a log line each (`LogNotificationChannel`).
    pub log: bool,
}

/// Kafka Connect's error handling options, as outbox-relay applies them to a record a
/// transform or converter fails on. It is never dropped: with `errors.tolerance=all` and
/// `errors.deadletterqueue.topic.name` it goes to that topic as Connect's dead-letter
/// reporter writes records; otherwise to the relay's own dead-letter topic.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ErrorHandling {
    /// `errors.tolerance=all`.
    pub tolerate_all: bool,
    /// `errors.deadletterqueue.topic.name`.
    pub dead_letter_queue: Option<Arc<str>>,
    /// `errors.deadletterqueue.context.headers.enable`: the `__connect.errors.*` headers.
    pub context_headers: bool,
    /// `errors.log.enable`: each failure logged as Connect's LogReporter logs it.
    pub log: bool,
    /// `errors.log.include.messages`: with the record.
    pub log_messages: bool,
    /// The connector's name, for the headers and the log (`name`).
    pub connector: String,
}

/// Debezium's transaction metadata records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionMetadata {
    /// `<topic.prefix>.transaction` (`topic.transaction`).
    pub topic: Arc<str>,
    /// `skipped.operations` (`u`, `d`, `t`): changes Debezium does not dispatch, so does not count.
    pub skipped: Vec<char>,
}

impl RouterConfig {
    /// Whether any transform runs besides the EventRouter (before or after it).
    pub fn has_transforms(&self) -> bool {
        !self.chain.is_empty() || self.before.is_some()
    }
}

impl ConnectFormat {
    /// The key, value and header converters.
    pub fn converters(&self) -> crate::connect::Converters<'_> {
        crate::connect::Converters {
            key: &self.key,
            value: &self.value,
            header: &self.header,
        }
    }

    /// These converters with Kafka Connect's default header converter and every other
    /// option at Debezium's default (no expansion, no context headers, no heartbeat or
    /// transaction records).
    pub fn new(key: Converter, value: Converter, topic_prefix: &str) -> Self {
        ConnectFormat {
            key,
            value,
            header: HeaderConverter::Simple,
            topic_prefix: topic_prefix.to_owned(),
            expand: None,
            schema_version_column: None,
            tracing_span_context_column: None,
            tombstone_on_empty_payload: false,
            context_headers: None,
            types: TypeModes::default(),
            heartbeat_topic: None,
            transaction_metadata: None,
            notifications: None,
            errors: ErrorHandling::default(),
            avro_schema_names: false,
        }
    }

    /// A schema name the connector makes (`<topic.prefix>.<schema>.<table>…`), as
    /// `schema.name.adjustment.mode` adjusts it.
    pub fn schema_name(&self, name: String) -> String {
        if self.avro_schema_names {
            crate::connect::avro_fullname(&name)
        } else {
            name
        }
    }
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

impl RouterConfig {
    /// The columns of an outbox row the routing reads, each with what it is read for, in a
    /// stable order and once each: a column pgoutput does not send (a generated column before
    /// PostgreSQL 18, a publication's column list) would leave every event without it.
    pub fn columns_read(&self) -> Vec<(&str, &'static str)> {
        let mut out: Vec<(&str, &'static str)> = vec![
            (self.route_by_column.as_str(), "the topic (route-by column)"),
            (self.key_column.as_str(), "the record key"),
            (self.payload_column.as_str(), "the payload"),
            (self.id_column.as_str(), "the event id"),
        ];
        if let Some(column) = &self.timestamp_column {
            out.push((column.as_str(), "the record timestamp"));
        }
        for field in &self.additional {
            out.push((
                field.column.as_str(),
                match field.placement {
                    Placement::Header => "a header (additional placement)",
                    Placement::Envelope => "an envelope field (additional placement)",
                    Placement::Partition => "the partition (additional placement)",
                },
            ));
        }
        let mut seen = std::collections::HashSet::new();
        out.retain(|(column, _)| seen.insert(*column));
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
            table_patterns: Vec::new(),
            messages: None,
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
            chain: crate::transforms::Chain::default(),
            before: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_columns_read_are_each_routing_column_once_with_what_it_is_for() {
        let config = RouterConfig {
            timestamp_column: Some("created_at".into()),
            additional: AdditionalField::parse_list(
                "event_type:header:eventType,aggregate_type:envelope:type,shard:partition",
            )
            .unwrap(),
            ..RouterConfig::default()
        };
        let read = config.columns_read();
        let names: Vec<&str> = read.iter().map(|(c, _)| *c).collect();
        assert_eq!(
            names,
            [
                "aggregate_type",
                "aggregate_id",
                "payload",
                "id",
                "created_at",
                "event_type",
                "shard"
            ]
        );
        assert_eq!(read[0].1, "the topic (route-by column)");
        assert_eq!(read[6].1, "the partition (additional placement)");
        // A column the defaults' outbox has and the routing does not read is not listed.
        assert!(!RouterConfig::default()
            .columns_read()
            .iter()
            .any(|(c, _)| *c == "created_at"));
    }
}
