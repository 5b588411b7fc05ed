//! Debezium's EventRouter with Kafka Connect converters: one outbox row in, the exact key,
//! value and header bytes a Connect worker would produce out (see docs/switching-from-debezium.md, the drop-in
//! table for where outbox-relay deliberately differs: it never crashes on a row).

use super::change_event::{self, change_event_topic, RowImage};
use super::{ColumnRef, RowColumns, TopicCache};
use crate::config::{ConnectFormat, Placement, RouterConfig};
use crate::connect::{
    default_value, expand, expands_to_no_schema, has_default_mapper, ColumnFacts, ColumnKind,
    ConnectRecord, Converter, Data, ExpandBehaviour, Header, HeaderConverter, JsonConverter,
    PgType, Schema, SchemaType, Value,
};
use crate::kafka_record::{ChangeEventAt, InvalidRow, OutboxRecord, PendingRecord, RouteOutcome};
use crate::{BeforeRouter, SourcePosition};
use bytes::{Bytes, BytesMut};
use pgoutput::{ColumnValue, Relation};
use std::sync::Arc;

/// A column as Debezium types it.
#[derive(Debug, Clone)]
struct TypedColumn {
    name: Arc<str>,
    position: usize,
    kind: ColumnKind,
    schema: Schema,
}

#[derive(Debug, Clone)]
enum Placed {
    Header(Arc<str>),
    Envelope,
    Partition,
}

/// An additional field (`table.fields.additional.placement`): where it goes, its alias, its
/// column, and that column's typing (`Err` when the table lacks it).
#[derive(Debug, Clone)]
struct Additional {
    placed: Placed,
    alias: Arc<str>,
    column: Arc<str>,
    typed: Result<TypedColumn, String>,
}

#[derive(Debug, Clone)]
pub(crate) struct ConnectPlan {
    /// Set when a used column has a type outbox-relay cannot write as Debezium would.
    unsupported: Option<String>,
    id: Result<TypedColumn, String>,
    key: Result<TypedColumn, String>,
    payload: Result<TypedColumn, String>,
    route_by: Result<TypedColumn, String>,
    /// In configuration order.
    additional: Vec<Additional>,
    timestamp: Option<Result<TypedColumn, String>>,
    schema_version: Option<Result<TypedColumn, String>>,
    tracing: Option<usize>,
    /// The name of the row's schema, `<topic.prefix>.<schema>.<table>.Value` (the table's
    /// change event topic, as Debezium names its record schemas): the EventRouter names its
    /// envelope after it.
    value_schema_name: String,
    /// Whether any additional field goes into the envelope.
    envelope: bool,
    /// The expanded payload is written straight to the value's JSON (`payload_json.rs`):
    /// the value converter is JsonConverter without schemas, the payload is expanded with
    /// the default behaviours, and nothing else reads the value or can fail on the record
    /// (no transform, no envelope, a key converter that takes any key).
    direct_json: bool,
    /// Debezium's context headers, converted once.
    context: Vec<Header>,
    /// The same as the Kafka record's headers, for the direct path.
    context_encoded: Vec<(Arc<str>, Option<Bytes>)>,
    /// The Kafka record written straight from the row's text, where nothing but the
    /// converters stands between the EventRouter and Kafka (see [`Direct`]).
    direct: Option<Direct>,
    /// The table's schema and name (the change event's source block).
    namespace: String,
    name: String,
    relation_id: u32,
    /// The change event's row image, when transforms run before the EventRouter.
    image: Option<ImagePlan>,
}

/// The change event Debezium makes of a row, for the transforms before the EventRouter:
/// its `after` image (every column Debezium has a schema for, in table order, as the
/// struct `<topic.prefix>.<schema>.<table>.Value`) and key (the primary key's columns, as
/// `….Key`; no key without a primary key), as `TableSchemaBuilder` builds them.
#[derive(Debug, Clone)]
struct ImagePlan {
    columns: Vec<TypedColumn>,
    /// The key struct's schema and its columns' indexes in `columns`.
    key: Option<(Schema, Vec<usize>)>,
    /// The change events' topic and schema (`….Envelope`).
    envelope: (Arc<str>, Schema),
}

/// The envelope schema's name, as Debezium's EventRouter keeps it: built from the first event
/// it routes (that event's table and routed value) and kept for every later one, whatever
/// its routed value (found by the differential test). `EventRouterDelegate` keeps it per
/// schema version with `table.field.event.schema.version` (`versionedValueSchema`), else
/// per payload schema (`payloadSchemaCache`, 10,000 of them, the least recently used
/// forgotten). Here the first 64 are kept, which each row is compared with: payload schemas
/// vary with the column's type, and from row to row only with `table.expand.json.payload`
/// and the envelope, which Debezium's task fails on; one beyond them is named anew each
/// time, as a forgotten one would be.
#[derive(Debug, Default)]
pub(crate) struct EnvelopeNames {
    versioned: std::collections::HashMap<Option<i32>, Arc<str>>,
    by_payload: Vec<(Schema, Arc<str>)>,
}

impl EnvelopeNames {
    const PAYLOAD_SCHEMAS: usize = 64;

    /// `version`: `Some` (the event's schema version) when versions are configured.
    pub(crate) fn name(
        &mut self,
        version: Option<Option<i32>>,
        payload: &Schema,
        first: impl FnOnce() -> String,
    ) -> Arc<str> {
        if let Some(version) = version {
            return self
                .versioned
                .entry(version)
                .or_insert_with(|| first().into())
                .clone();
        }
        if let Some((_, name)) = self.by_payload.iter().find(|(s, _)| s == payload) {
            return name.clone();
        }
        let name: Arc<str> = first().into();
        if self.by_payload.len() < Self::PAYLOAD_SCHEMAS {
            self.by_payload.push((payload.clone(), name.clone()));
        }
        name
    }
}

impl ConnectPlan {
    pub(crate) fn new(
        relation: &Relation,
        facts: &[ColumnFacts],
        config: &RouterConfig,
        format: &ConnectFormat,
    ) -> Self {
        let mut unsupported = None;
        let mut typed = |name: &str| -> Result<TypedColumn, String> {
            let position = relation
                .column_index(name)
                .ok_or_else(|| format!("column {name:?} is missing from the table"))?;
            type_column(relation, facts, format, position).map_err(|(what, _)| {
                unsupported.get_or_insert_with(|| format!(
                    "column {name:?} of {}.{} has {what}, which outbox-relay cannot write the way Debezium does; \
                     change the column's type, or use outbox-relay's native options instead of --debezium-config",
                    relation.namespace, relation.name
                ));
                format!("column {name:?} has an unsupported type")
            })
        };
        let id = typed(&config.id_column);
        let key = typed(&config.key_column);
        let payload = typed(&config.payload_column);
        let route_by = typed(&config.route_by_column);
        let additional = config
            .additional
            .iter()
            .map(|f| {
                let placed = match f.placement {
                    Placement::Header => Placed::Header(f.alias.clone()),
                    Placement::Envelope => Placed::Envelope,
                    Placement::Partition => Placed::Partition,
                };
                Additional {
                    placed,
                    alias: f.alias.clone(),
                    column: f.column.as_str().into(),
                    typed: typed(&f.column),
                }
            })
            .collect::<Vec<_>>();
        let timestamp = config.timestamp_column.as_deref().map(&mut typed);
        let schema_version = format.schema_version_column.as_deref().map(&mut typed);
        let tracing = format
            .tracing_span_context_column
            .as_deref()
            .and_then(|c| relation.column_index(c));
        // `onlyHeadersInOutputMessage`: from the configuration, whether or not the table has
        // the envelope's columns.
        let envelope = config
            .additional
            .iter()
            .any(|f| f.placement == Placement::Envelope);
        let context: Vec<Header> = format
            .context_headers
            .iter()
            .flat_map(|c| c.entries())
            .map(|(name, value)| {
                Header::encoded_once(name, Data::text(value), &format.header)
                    .expect("a string header always converts")
            })
            .collect();
        let context_encoded = context
            .iter()
            .map(|h| {
                let bytes = h.encoded.clone().expect("encoded once");
                (h.name.clone(), bytes)
            })
            .collect();
        let direct_json = matches!(
            format.value,
            Converter::Json(JsonConverter {
                schemas_enable: false,
                ..
            })
        ) && matches!(format.key, Converter::String | Converter::Json(_))
            && matches!(format.header, HeaderConverter::Simple)
            && format.expand == Some(ExpandBehaviour::default())
            && config.chain.is_empty()
            && config.before.is_none()
            && !envelope;
        let image = config.before.is_some().then(|| {
            let (image, problem) = ImagePlan::new(relation, facts, format);
            if let Some(problem) = problem {
                unsupported.get_or_insert(problem);
            }
            image
        });
        let direct = Direct::new(
            [&id, &key, &payload],
            &additional,
            envelope || tracing.is_some() || timestamp.is_some() || image.is_some(),
            config,
            format,
        );
        Self {
            direct,
            unsupported,
            id,
            key,
            payload,
            route_by,
            additional,
            timestamp,
            schema_version,
            tracing,
            value_schema_name: format.schema_name(format!(
                "{}.Value",
                change_event_topic(&format.topic_prefix, &relation.namespace, &relation.name)
            )),
            envelope,
            direct_json,
            context,
            context_encoded,
            namespace: relation.namespace.clone(),
            name: relation.name.clone(),
            relation_id: relation.relation_id,
            image,
        }
    }

    /// The row's Kafka record written the direct way (see [`Direct`]), or `None` for
    /// [`Self::route`].
    pub(crate) fn route_direct(
        &self,
        row: &impl RowColumns,
        format: &ConnectFormat,
        config: &RouterConfig,
        topics: &mut TopicCache,
        out: &mut WriteBuffer,
    ) -> Option<OutboxRecord> {
        if self.unsupported.is_some() {
            return None;
        }
        self.direct.as_ref()?.route(
            row,
            &self.context_encoded,
            &self.route_by,
            format,
            config,
            topics,
            out,
        )
    }

    /// Set when a column the routing reads has a type outbox-relay cannot write as Debezium
    /// would.
    pub(crate) fn problem(&self) -> Option<&str> {
        self.unsupported.as_deref()
    }

    /// `transforms`: whether transforms follow the EventRouter (the record is then left
    /// for them, unconverted). `position`: where the row is in the WAL, when transforms run
    /// before the EventRouter: the row's change event is then left for them (see
    /// [`Self::route_event`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn route(
        &self,
        columns: &[ColumnValue],
        table: &str,
        format: &ConnectFormat,
        config: &RouterConfig,
        topics: &mut TopicCache,
        envelope_names: &mut EnvelopeNames,
        transforms: bool,
        position: Option<&SourcePosition>,
    ) -> RouteOutcome {
        if let Some(reason) = &self.unsupported {
            return RouteOutcome::Fatal(reason.clone());
        }
        let raw = |column: &Result<TypedColumn, String>| -> Option<Bytes> {
            column
                .as_ref()
                .ok()
                .and_then(|c| match columns.get(c.position) {
                    Some(ColumnValue::Text(b) | ColumnValue::Binary(b)) => Some(b.clone()),
                    _ => None,
                })
        };
        let dead = |reason: String, original_topic: Option<String>| InvalidRow {
            reason,
            table: table.to_owned(),
            original_topic,
            key: raw(&self.key),
            value: raw(&self.payload),
            event_id: raw(&self.id),
            row: None,
            connect_dlq: None,
        };
        if let (Some(image), Some(position), Some(before)) = (&self.image, position, &config.before)
        {
            let record = match image.change_event(self, columns, before, format, position) {
                Ok(record) => record,
                Err(reason) => return RouteOutcome::Invalid(dead(reason, None)),
            };
            return RouteOutcome::Connect(Box::new(PendingRecord {
                record,
                dead: dead(String::new(), None),
                event: Some(Box::new(ChangeEventAt {
                    relation_id: self.relation_id,
                })),
            }));
        }
        // The context headers, then room for the EventRouter's (`id`, additional fields).
        // On the direct path they are put, converted once, on the Kafka record instead.
        let mut headers = Vec::with_capacity(self.context.len() + 1 + self.additional.len());
        if !self.direct_json {
            headers.extend(self.context.iter().cloned());
        }
        let routed = self.event_router(
            &Tuple(columns),
            headers,
            (Some(&self.value_schema_name), Ok(None)),
            format,
            config,
            topics,
            envelope_names,
        );
        match routed {
            Ok((mut record, None)) => {
                if self.direct_json {
                    // A payload the direct path left to the general one.
                    record.headers.splice(0..0, self.context.iter().cloned());
                }
                finish(record, format, transforms, || dead(String::new(), None))
            }
            // The value written already: the converters make the key and the other headers.
            Ok((record, Some(value))) => {
                match convert(record, None, format, || dead(String::new(), None)) {
                    RouteOutcome::Record(mut record) => {
                        record.value = Some(value);
                        record
                            .headers
                            .splice(0..0, self.context_encoded.iter().cloned());
                        RouteOutcome::Record(record)
                    }
                    other => other,
                }
            }
            Err((reason, topic)) => RouteOutcome::Invalid(dead(reason, topic)),
        }
    }

    /// Debezium's EventRouter on the change event the transforms before it made of a row
    /// (`dead`: the row's dead letter): the routed record, left for the transforms after
    /// the EventRouter and the converters. A record that is not a change event any more
    /// (its value schema's name no longer ends with `.Envelope`) passes unchanged, as
    /// `SmtManager.isValidEnvelope` lets it; a delete is dropped and an update handled as
    /// `table.op.invalid.behavior` says, as the EventRouter does.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn route_event(
        &self,
        event: ConnectRecord,
        format: &ConnectFormat,
        config: &RouterConfig,
        topics: &mut TopicCache,
        envelope_names: &mut EnvelopeNames,
        mut dead: InvalidRow,
    ) -> RouteOutcome {
        // A tombstone the transforms made is dropped; a record that is no longer a change
        // event passes unchanged.
        if event.value.value.is_null() {
            return RouteOutcome::Ignored;
        }
        let fields = match &event.value.schema {
            Some(Schema {
                kind: SchemaType::Struct(fields),
                name: Some(name),
                ..
            }) if name.ends_with(".Envelope") => fields,
            _ => {
                return RouteOutcome::Connect(Box::new(PendingRecord {
                    record: event,
                    dead,
                    event: None,
                }))
            }
        };
        let invalid = |mut dead: InvalidRow, reason: String| {
            dead.reason = reason;
            RouteOutcome::Invalid(dead)
        };
        let Value::Struct(values) = &event.value.value else {
            let found = crate::connect::java_class(event.value.schema.as_ref(), &event.value.value);
            return invalid(
                dead,
                format!(
                    "Only Struct objects supported for [Detect Debezium Operation], found: {found}"
                ),
            );
        };
        let envelope = Image { fields, values };
        match envelope.get("op") {
            Ok((Value::String(op), _)) if &op[..] == b"d" => return RouteOutcome::Ignored,
            Ok((Value::String(op), _)) if &op[..] == b"u" => {
                return super::unexpected_update(config, &dead.table)
            }
            Ok((Value::String(_), _)) => {}
            // Debezium's `op.equals(…)` on a null `op`.
            Ok(_) => return invalid(dead, "op is null (NullPointerException)".into()),
            Err(reason) => return invalid(dead, reason),
        }
        let Some((after, schema)) = envelope.find("after") else {
            return invalid(dead, "Unknown field: after".into());
        };
        let (Value::Struct(values), SchemaType::Struct(fields)) = (after, &schema.kind) else {
            let found = crate::connect::java_class(Some(schema), after);
            return invalid(
                dead,
                format!("Only Struct objects supported for [Read Outbox Event], found: {found}"),
            );
        };
        // EventRouterDelegate reads the payload's field first.
        if !fields_named(fields, &config.payload_column) {
            return invalid(
                dead,
                format!(
                    "Unable to find payload field {} in event",
                    config.payload_column
                ),
            );
        }
        // The record's time where no timestamp field gives one (`getInt64("ts_ms")`).
        let ts_ms = match envelope.get("ts_ms") {
            // `getInt64` checks the field's type before its value.
            Ok((_, schema)) if schema.kind != SchemaType::Int64 => {
                Err("Field 'ts_ms' is not of type INT64".into())
            }
            Ok((Value::Int(ms), _)) => Ok(Some(ms)),
            Ok(_) => Ok(None),
            Err(reason) => Err(reason),
        };
        let routed = self.event_router(
            &Image { fields, values },
            event.headers,
            (schema.name.as_deref(), ts_ms),
            format,
            config,
            topics,
            envelope_names,
        );
        match routed {
            Ok((record, _)) => RouteOutcome::Connect(Box::new(PendingRecord {
                record,
                dead,
                event: None,
            })),
            Err((reason, topic)) => {
                dead.reason = reason;
                dead.original_topic = topic;
                RouteOutcome::Invalid(dead)
            }
        }
    }

    /// `EventRouterDelegate.apply` on `row` (the change event's `after`): the routed record,
    /// its headers `headers` then the EventRouter's, or why it cannot be routed (and the
    /// topic, once known). `(value schema name, ts_ms)`: the name of `after`'s schema, which
    /// names the envelope, and the change event's `ts_ms` (the record's timestamp when no
    /// timestamp field gives one; `None`: when the relay read the event; `Err`: why it
    /// cannot be read).
    #[allow(clippy::too_many_arguments)]
    fn event_router(
        &self,
        row: &impl Row,
        mut headers: Vec<Header>,
        (value_schema, ts_ms): (Option<&str>, Result<Option<i64>, String>),
        format: &ConnectFormat,
        config: &RouterConfig,
        topics: &mut TopicCache,
        envelope_names: &mut EnvelopeNames,
    ) -> Result<(ConnectRecord, Option<Bytes>), (String, Option<String>)> {
        let invalid = |reason: String| (reason, None);
        let routing = match row.routing(&config.route_by_column, &self.route_by) {
            Ok(Some(r)) => r,
            // Debezium's task dies here (NullPointerException); dead-letter instead.
            Ok(None) => {
                return Err(invalid(format!(
                    "routing column {:?} is NULL",
                    config.route_by_column
                )))
            }
            Err(reason) => return Err(invalid(reason)),
        };
        let topic = topics.topic_for(&routing, config)?;
        let with_topic = |reason: String| (reason, Some(topic.to_string()));

        // The record's headers: Debezium's context headers, trace context (opt-in), `id`, then
        // additional fields (EventRouterDelegate.apply appends to the record's headers). A
        // NULL column is a header with a null value (SimpleHeaderConverter), not a missing one.
        headers.reserve(1 + self.additional.len());
        // Propagated trace context goes where Debezium's tracing SMT puts it: before `id`.
        if let Some(context) = format
            .tracing_span_context_column
            .as_deref()
            .and_then(|name| row.text(name, self.tracing))
        {
            headers.extend(trace_headers(&context).into_iter().map(|(k, v)| Header {
                name: k,
                data: Data::new(
                    Schema::new(SchemaType::String, false),
                    Value::String(v.clone()),
                ),
                encoded: Some(Some(v)),
            }));
        }
        let (id, id_schema) = field_of(row, &config.id_column, &self.id).map_err(invalid)?;
        headers.push(Header::new("id", Data::new(id_schema.clone(), id)));

        let (mut payload, payload_schema) =
            field_of(row, &config.payload_column, &self.payload).map_err(invalid)?;
        let mut payload_schema = payload_schema.clone();
        let mut schemaless = None;
        let mut direct = None;
        if let (Some(behaviour), Value::String(text)) = (format.expand, &payload) {
            if let Some(json) = self
                .direct_json
                .then(|| crate::connect::payload_json::expanded(text))
                .flatten()
            {
                // The record keeps an empty struct in its place, which the converter writes
                // cheaply and which is then replaced by the JSON already written.
                direct = Some(Bytes::from(json));
                payload = Value::Struct(Vec::new());
                payload_schema = Schema::new(SchemaType::Struct(Vec::new()), true);
            } else if let Some((schema, value)) = expand(&config.payload_column, text, behaviour) {
                payload_schema = schema;
                payload = value;
            } else if expands_to_no_schema(text, behaviour) {
                schemaless = Some(text.clone());
            }
        }

        // The envelope's fields, when there is one: the payload and the fields placed there.
        let (mut envelope_fields, mut envelope_values) = if self.envelope {
            (
                vec![(Arc::<str>::from("payload"), payload_schema.clone())],
                vec![payload.clone()],
            )
        } else {
            (Vec::new(), Vec::new())
        };
        let mut partition = None;
        for Additional {
            placed,
            alias,
            column: name,
            typed: column,
        } in &self.additional
        {
            if config.ignore_missing_additional && !row.has(name, column) {
                continue;
            }
            let (value, schema) = match placed {
                Placed::Partition => row.value(name, column),
                _ => field_of(row, name, column),
            }
            .map_err(invalid)?;
            match placed {
                Placed::Header(header) => {
                    headers.push(Header::new(
                        header.clone(),
                        Data::new(schema.clone(), value),
                    ));
                }
                Placed::Envelope => {
                    envelope_fields.push((alias.clone(), schema.clone()));
                    envelope_values.push(value);
                }
                Placed::Partition => {
                    partition = match value {
                        Value::Int(p) if (0..=i64::from(i32::MAX)).contains(&p) => Some(p as i32),
                        Value::Null => None,
                        other => {
                            return Err(with_topic(format!(
                                "partition column value {other:?} is not a partition number (Debezium needs an int4 column)"
                            )))
                        }
                    }
                }
            }
        }

        let timestamp_ms = match (&config.timestamp_column, &self.timestamp) {
            (Some(name), Some(column)) => row.timestamp_ms(name, column).map_err(invalid)?,
            _ => None,
        };
        let timestamp_ms = match timestamp_ms {
            Some(ms) => Some(ms),
            None => ts_ms.map_err(invalid)?,
        };

        let envelope = if self.envelope {
            let mut schema = Schema::new(SchemaType::Struct(envelope_fields), false);
            if let (Some(name), Some(column)) =
                (&format.schema_version_column, &self.schema_version)
            {
                let (v, _) = row.value(name, column).map_err(invalid)?;
                schema.version = match v {
                    Value::Int(v) => i32::try_from(v).ok(),
                    _ => None,
                };
            }
            let routed = String::from_utf8_lossy(&routing);
            // EventRouterDelegate.getSchemaName: the routed topic before the last part of
            // the row's schema name.
            let version = format
                .schema_version_column
                .is_some()
                .then_some(schema.version);
            schema.name =
                Some(
                    envelope_names.name(version, &payload_schema, || match value_schema {
                        Some(name) => match name.rsplit_once('.') {
                            Some((head, tail)) => format!("{head}.{routed}.{tail}"),
                            None => format!("{routed}.{name}"),
                        },
                        None => routed.into_owned(),
                    }),
                );
            Some((schema, Value::Struct(envelope_values)))
        } else {
            None
        };
        let value = event_router_value(format, payload, payload_schema, schemaless, envelope);
        let (key, key_schema) = field_of(row, &config.key_column, &self.key).map_err(invalid)?;
        Ok((
            ConnectRecord {
                topic,
                partition,
                key: Data::new(key_schema.clone(), key),
                value,
                headers,
                timestamp_ms,
            },
            direct,
        ))
    }
}

/// Where the direct path writes keys and values: each is split off one buffer, so that a
/// record's key and value cost no allocation of their own. A fresh buffer is taken when the
/// one in use has no room for the next part (every [`WriteBuffer::CHUNK`] bytes or so); a
/// buffer is freed with the last part split off it, which is once librdkafka copied the
/// records (or a dead letter went), so only the records in the delivery stage hold buffers.
#[derive(Debug, Default)]
pub(crate) struct WriteBuffer(BytesMut);

impl WriteBuffer {
    const CHUNK: usize = 64 << 10;

    /// What `write` appends, as its own `Bytes`; `need`: about how many bytes it writes.
    fn write(&mut self, need: usize, write: impl FnOnce(&mut BytesMut)) -> Bytes {
        if need > Self::CHUNK {
            // A part larger than a chunk gets an allocation of its own, freed with it: the
            // shared buffer never keeps the size of the largest event.
            let mut own = BytesMut::with_capacity(need);
            write(&mut own);
            return own.freeze();
        }
        if self.0.capacity() - self.0.len() < need {
            self.0.reserve(Self::CHUNK);
        }
        write(&mut self.0);
        let part = self.0.split().freeze();
        if self.0.capacity() > 2 * Self::CHUNK {
            // A write outgrew its estimate (escapes) and the buffer grew with it: the grown
            // buffer goes with the parts split off it.
            self.0 = BytesMut::new();
        }
        part
    }
}

/// The Kafka record of a row written straight from its text, as the general path would write
/// it, where nothing but the converters stands between the EventRouter and Kafka: no
/// transform, no envelope, no trace context, no timestamp field; key, payload, `id` and the
/// header fields are columns whose Connect value is their text (text, varchar, uuid, jsonb,
/// …); the key and value converters StringConverter or JsonConverter, the header converter
/// SimpleHeaderConverter. The schemas' JSON is written once, here. A row it does not take
/// (a NULL, text that is not UTF-8, a routing value that makes no topic, an empty payload
/// that is a tombstone, an expanded payload the one-pass writer leaves) goes the general way,
/// which decides; a test holds the two to the same records.
#[derive(Debug, Clone)]
struct Direct {
    id: usize,
    /// The `id` header's name, made once.
    id_name: Arc<str>,
    key: (usize, DirectPart),
    payload: (usize, DirectPart),
    /// The header fields, in configuration order: name and column.
    headers: Vec<(Arc<str>, usize)>,
}

/// How a column's text becomes the key's or the value's bytes.
#[derive(Debug, Clone)]
enum DirectPart {
    /// StringConverter: the text itself.
    Text,
    /// JsonConverter: the text as a JSON string, inside `{"schema":…,"payload":` and `}`
    /// when schemas are written (the prefix), alone otherwise.
    Json { prefix: Option<Vec<u8>> },
    /// The payload expanded (`table.expand.json.payload`), JsonConverter without schemas.
    Expanded,
}

impl Direct {
    fn new(
        [id, key, payload]: [&Result<TypedColumn, String>; 3],
        additional: &[Additional],
        more_than_converters: bool,
        config: &RouterConfig,
        format: &ConnectFormat,
    ) -> Option<Self> {
        if more_than_converters
            || !config.chain.is_empty()
            || config.before.is_some()
            || !matches!(format.header, HeaderConverter::Simple)
        {
            return None;
        }
        let text = |column: &Result<TypedColumn, String>| -> Option<(usize, Schema)> {
            let column = column.as_ref().ok()?;
            matches!(
                column.kind,
                ColumnKind::Text
                    | ColumnKind::Json
                    | ColumnKind::Uuid
                    | ColumnKind::Xml
                    | ColumnKind::Ltree
                    | ColumnKind::Tsvector
                    | ColumnKind::Enum(_)
            )
            .then(|| (column.position, column.schema.clone()))
        };
        let part = |converter: &Converter, schema: &Schema| -> Option<DirectPart> {
            match converter {
                Converter::String => Some(DirectPart::Text),
                Converter::Json(JsonConverter { schemas_enable, .. }) => Some(DirectPart::Json {
                    prefix: schemas_enable.then(|| {
                        let mut prefix = b"{\"schema\":".to_vec();
                        crate::connect::write_schema(&mut prefix, schema);
                        prefix.extend_from_slice(b",\"payload\":");
                        prefix
                    }),
                }),
                _ => None,
            }
        };
        let (id, _) = text(id)?;
        let (key_position, key_schema) = text(key)?;
        let (payload_position, payload_schema) = text(payload)?;
        let value = match (format.expand, &format.value) {
            (None, converter) => part(converter, &payload_schema)?,
            (
                Some(behaviour),
                Converter::Json(JsonConverter {
                    schemas_enable: false,
                    ..
                }),
            ) if behaviour == ExpandBehaviour::default() => DirectPart::Expanded,
            _ => return None,
        };
        let headers = additional
            .iter()
            .map(|a| match &a.placed {
                Placed::Header(name) => Some((name.clone(), text(&a.typed)?.0)),
                Placed::Envelope | Placed::Partition => None,
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Self {
            id,
            id_name: "id".into(),
            key: (key_position, part(&format.key, &key_schema)?),
            payload: (payload_position, value),
            headers,
        })
    }

    /// The record, or `None` for the general path.
    #[allow(clippy::too_many_arguments)]
    fn route(
        &self,
        row: &impl RowColumns,
        context: &[(Arc<str>, Option<Bytes>)],
        route_by: &Result<TypedColumn, String>,
        format: &ConnectFormat,
        config: &RouterConfig,
        topics: &mut TopicCache,
        out: &mut WriteBuffer,
    ) -> Option<OutboxRecord> {
        // The column's text (present, in text format): the converters refuse text that is
        // not UTF-8.
        let text = |position: usize| match row.get(position) {
            Some(ColumnRef::Value(b)) if !row.binary(position) => Some((position, utf8(b)?)),
            _ => None,
        };
        let payload = text(self.payload.0)?;
        if format.tombstone_on_empty_payload && payload.1.trim_ascii().is_empty() {
            return None;
        }
        let routing = match row.get(route_by.as_ref().ok()?.position)? {
            ColumnRef::Value(routing) => routing,
            ColumnRef::Null | ColumnRef::UnchangedToast => return None,
        };
        let topic = topics.topic_for(routing, config).ok()?;
        let mut write = |part: &DirectPart, (position, text): (usize, &str)| -> Option<Bytes> {
            Some(match part {
                DirectPart::Text => row.owned(position),
                DirectPart::Json { prefix } => {
                    let need =
                        prefix.as_ref().map_or(0, Vec::len) + text.len() + text.len() / 8 + 3;
                    out.write(need, |out| {
                        if let Some(prefix) = prefix {
                            out.extend_from_slice(prefix);
                        }
                        crate::connect::json::write_string(out, text);
                        if prefix.is_some() {
                            out.extend_from_slice(b"}");
                        }
                    })
                }
                DirectPart::Expanded => {
                    crate::connect::payload_json::expanded(text.as_bytes())?.into()
                }
            })
        };
        // The headers first: a NULL among them sends the row the general way before the
        // value is written.
        let mut headers = Vec::with_capacity(context.len() + 1 + self.headers.len());
        headers.extend(context.iter().cloned());
        headers.push((self.id_name.clone(), Some(row.owned(text(self.id)?.0))));
        for (name, position) in &self.headers {
            headers.push((name.clone(), Some(row.owned(text(*position)?.0))));
        }
        let key = write(&self.key.1, text(self.key.0)?)?;
        let value = write(&self.payload.1, payload)?;
        Some(OutboxRecord {
            topic,
            key: Some(key),
            value: Some(value),
            headers,
            partition: None,
            timestamp_ms: None,
        })
    }
}

/// `bytes` as text, when they are UTF-8. ASCII, what JSON payloads nearly always are, is told
/// apart first with a scan several times cheaper than UTF-8 validation.
fn utf8(bytes: &[u8]) -> Option<&str> {
    if bytes.is_ascii() {
        // SAFETY: ASCII is UTF-8.
        Some(unsafe { std::str::from_utf8_unchecked(bytes) })
    } else {
        std::str::from_utf8(bytes).ok()
    }
}

impl ImagePlan {
    /// The plan, and why the change events cannot be made as Debezium makes them, if so.
    fn new(
        relation: &Relation,
        facts: &[ColumnFacts],
        format: &ConnectFormat,
    ) -> (Self, Option<String>) {
        // Columns Debezium has no schema for are left out, as it leaves them out; one it
        // writes in a way outbox-relay does not is a problem of the plan.
        let mut problem = None;
        let mut columns = Vec::with_capacity(relation.columns.len());
        for (position, column) in relation.columns.iter().enumerate() {
            match type_column(relation, facts, format, position) {
                Ok(typed) => columns.push(typed),
                Err((what, pg_type)) => {
                    if crate::connect::debezium_writes_unproduced(&pg_type) {
                        problem.get_or_insert_with(|| {
                            format!(
                                "column {:?} of {}.{} has {what}, which the transforms before the EventRouter \
                                 would read in the change event; change the column's type, or move those \
                                 transforms after the EventRouter",
                                column.name, relation.namespace, relation.name
                            )
                        });
                    }
                }
            }
        }
        let prefix = change_event_topic(&format.topic_prefix, &relation.namespace, &relation.name);
        let value_schema = Schema::new(
            SchemaType::Struct(
                columns
                    .iter()
                    .map(|c| (c.name.clone(), c.schema.clone()))
                    .collect(),
            ),
            true,
        )
        .named(&format.schema_name(format!("{prefix}.Value")), None);
        let mut key: Vec<(i32, usize)> = columns
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                let fact = facts.iter().find(|f| *f.name == *c.name)?;
                Some((fact.key_position?, i))
            })
            .collect();
        key.sort_unstable();
        let key = (!key.is_empty()).then(|| {
            let indexes: Vec<usize> = key.into_iter().map(|(_, i)| i).collect();
            let fields = indexes
                .iter()
                .map(|&i| (columns[i].name.clone(), columns[i].schema.clone()))
                .collect();
            let schema = Schema::new(SchemaType::Struct(fields), false)
                .named(&format.schema_name(format!("{prefix}.Key")), None);
            (schema, indexes)
        });
        let plan = Self {
            columns,
            key,
            envelope: (
                prefix.as_str().into(),
                change_event::envelope_schema(
                    &format.schema_name(format!("{prefix}.Envelope")),
                    value_schema,
                ),
            ),
        };
        (plan, problem)
    }

    /// The change event of the INSERT of `columns`, as Debezium's PostgreSQL connector
    /// makes it (its `ts_ms` set by [`change_event::stamp`] when the transforms run).
    fn change_event(
        &self,
        plan: &ConnectPlan,
        columns: &[ColumnValue],
        before: &BeforeRouter,
        format: &ConnectFormat,
        position: &SourcePosition,
    ) -> Result<ConnectRecord, String> {
        let after = self
            .columns
            .iter()
            .map(|c| value_of(columns, c))
            .collect::<Result<Vec<Value>, String>>()?;
        let key = match &self.key {
            Some((schema, indexes)) => Data::new(
                schema.clone(),
                Value::Struct(indexes.iter().map(|&i| after[i].clone()).collect()),
            ),
            None => Data::null(),
        };
        Ok(change_event::insert_event(
            before,
            self.envelope.clone(),
            &format.topic_prefix,
            &plan.namespace,
            &plan.name,
            position,
            &plan.context,
            RowImage {
                after: Value::Struct(after),
                key,
            },
        ))
    }
}

/// A column typed as Debezium types it, or `what` it has that Debezium does not map.
fn type_column(
    relation: &Relation,
    facts: &[ColumnFacts],
    format: &ConnectFormat,
    position: usize,
) -> Result<TypedColumn, (String, PgType)> {
    let column = &relation.columns[position];
    let fact = facts.iter().find(|f| f.name == column.name);
    let pg_type = fact
        .and_then(|f| f.pg_type.clone())
        .unwrap_or_else(|| PgType::builtin(column.type_oid, column.type_modifier));
    let kind = match ColumnKind::resolve(&pg_type, &format.types) {
        Ok(kind) => kind,
        Err(what) => return Err((what, pg_type)),
    };
    let mut schema = kind.schema(!fact.is_some_and(|f| f.not_null));
    schema.default = fact
        .and_then(|f| f.default_expression.as_deref())
        .filter(|_| has_default_mapper(&pg_type))
        .and_then(|e| default_value(&kind, e));
    Ok(TypedColumn {
        name: column.name.as_str().into(),
        position,
        kind,
        schema,
    })
}

/// Where the EventRouter reads a row's fields, as `Struct.get` on the change event's
/// `after`: each read names the field and gives the plan's typing of the table's column of
/// that name, which a tuple is read with.
trait Row {
    /// The field's value (NULL as `Null`) and schema.
    fn value<'s>(
        &'s self,
        name: &str,
        column: &'s Result<TypedColumn, String>,
    ) -> Result<(Value, &'s Schema), String>;
    /// Whether the row has the field.
    fn has(&self, name: &str, column: &Result<TypedColumn, String>) -> bool;
    /// The routing field's text; `None` when NULL.
    fn routing(
        &self,
        name: &str,
        column: &Result<TypedColumn, String>,
    ) -> Result<Option<Bytes>, String>;
    /// The event timestamp field in epoch milliseconds; `None` when NULL.
    fn timestamp_ms(
        &self,
        name: &str,
        column: &Result<TypedColumn, String>,
    ) -> Result<Option<i64>, String>;
    /// A text field's bytes (the tracing span context); `None` when NULL or missing.
    fn text(&self, name: &str, position: Option<usize>) -> Option<Bytes>;
}

/// A row as the replication stream sent it, typed by the plan.
struct Tuple<'a>(&'a [ColumnValue]);

impl Row for Tuple<'_> {
    fn value<'s>(
        &'s self,
        _: &str,
        column: &'s Result<TypedColumn, String>,
    ) -> Result<(Value, &'s Schema), String> {
        let column = column.as_ref().map_err(Clone::clone)?;
        Ok((value_of(self.0, column)?, &column.schema))
    }

    fn has(&self, _: &str, column: &Result<TypedColumn, String>) -> bool {
        column.is_ok()
    }

    fn routing(
        &self,
        _: &str,
        column: &Result<TypedColumn, String>,
    ) -> Result<Option<Bytes>, String> {
        let column = column.as_ref().map_err(Clone::clone)?;
        Ok(match self.0.get(column.position) {
            Some(ColumnValue::Text(b) | ColumnValue::Binary(b)) => Some(b.clone()),
            _ => None,
        })
    }

    fn timestamp_ms(
        &self,
        _: &str,
        column: &Result<TypedColumn, String>,
    ) -> Result<Option<i64>, String> {
        let column = column.as_ref().map_err(Clone::clone)?;
        match self.0.get(column.position) {
            Some(ColumnValue::Text(t)) => column.kind.epoch_millis(t).map(Some),
            // NULL: when the relay read the event (Debezium's ts_ms), stamped by the route stage.
            _ => Ok(None),
        }
    }

    fn text(&self, _: &str, position: Option<usize>) -> Option<Bytes> {
        match self.0.get(position?) {
            Some(ColumnValue::Text(b)) => Some(b.clone()),
            _ => None,
        }
    }
}

/// A struct of the change event (its `after`, or the envelope itself) after the transforms
/// before the EventRouter: fields are found by name, with the schemas the transforms gave.
struct Image<'a> {
    fields: &'a [(Arc<str>, Schema)],
    values: &'a [Value],
}

impl<'a> Image<'a> {
    /// The field `name`, as `Struct.get` finds it (without its default).
    fn find(&self, name: &str) -> Option<(&'a Value, &'a Schema)> {
        let i = self.fields.iter().position(|(n, _)| &**n == name)?;
        Some((
            self.values.get(i).unwrap_or(&Value::Null),
            &self.fields[i].1,
        ))
    }

    fn get(&self, name: &str) -> Result<(Value, &'a Schema), String> {
        let (value, schema) = self
            .find(name)
            .ok_or_else(|| format!("{name} is not a valid field name"))?;
        Ok((value.clone(), schema))
    }
}

/// Whether a struct's `fields` hold one named `name`.
fn fields_named(fields: &[(Arc<str>, Schema)], name: &str) -> bool {
    fields.iter().any(|(n, _)| &**n == name)
}

impl Row for Image<'_> {
    fn value<'s>(
        &'s self,
        name: &str,
        _: &'s Result<TypedColumn, String>,
    ) -> Result<(Value, &'s Schema), String> {
        self.get(name)
    }

    fn has(&self, name: &str, _: &Result<TypedColumn, String>) -> bool {
        fields_named(self.fields, name)
    }

    fn routing(
        &self,
        name: &str,
        _: &Result<TypedColumn, String>,
    ) -> Result<Option<Bytes>, String> {
        match self.get(name)? {
            (Value::String(text), _) => Ok(Some(text)),
            (Value::Null, _) => Ok(None),
            (_, schema) => Err(format!(
                "Field '{name}' is not of type STRING (routing field of type {})",
                schema.kind.type_name()
            )),
        }
    }

    fn timestamp_ms(
        &self,
        name: &str,
        _: &Result<TypedColumn, String>,
    ) -> Result<Option<i64>, String> {
        let (value, schema) = self
            .get(name)
            .map_err(|_| format!("Unable to find timestamp field {name} in event"))?;
        let unsupported = || {
            format!(
                "Unsupported field type {} for event timestamp",
                schema.name.as_deref().unwrap_or(schema.kind.type_name())
            )
        };
        // As a tuple's column is read: Debezium's time types by their names, a plain
        // integer as epoch milliseconds, the text of a ZonedTimestamp or IsoTimestamp
        // (`time.precision.mode=isostring`).
        match (value, schema.name.as_deref()) {
            (Value::Null, _) => Ok(None),
            (Value::Int(t), Some("io.debezium.time.MicroTimestamp")) => {
                Ok(Some(t.div_euclid(1000)))
            }
            (Value::Int(t), Some("io.debezium.time.NanoTimestamp")) => {
                Ok(Some(t.div_euclid(1_000_000)))
            }
            (
                Value::Int(t),
                None
                | Some("io.debezium.time.Timestamp" | "org.apache.kafka.connect.data.Timestamp"),
            ) => Ok(Some(t)),
            (
                Value::String(text),
                Some("io.debezium.time.ZonedTimestamp" | "io.debezium.time.IsoTimestamp"),
            ) => {
                let text = String::from_utf8_lossy(&text).replacen('T', " ", 1);
                crate::connect::pg_text::parse_timestamp_micros(text.trim_end_matches('Z'))
                    .map(|micros| Some(micros.div_euclid(1000)))
                    .ok_or_else(|| format!("cannot read a timestamp from {text:?}"))
            }
            _ => Err(unsupported()),
        }
    }

    fn text(&self, name: &str, _: Option<usize>) -> Option<Bytes> {
        match self.get(name).ok()? {
            (Value::String(text), _) => Some(text),
            _ => None,
        }
    }
}

/// A record the connector made, converted now, or left for the transforms when some follow.
/// A converter that fails on it makes it `dead`, with the converter's reason.
pub(super) fn finish(
    record: ConnectRecord,
    format: &ConnectFormat,
    transforms: bool,
    dead: impl FnOnce() -> InvalidRow,
) -> RouteOutcome {
    if transforms {
        return RouteOutcome::Connect(Box::new(PendingRecord {
            record,
            event: None,
            dead: dead(),
        }));
    }
    convert(record, None, format, dead)
}

/// The Kafka record the worker's converters make of `record`, or the dead letter `dead`
/// becomes when one of them fails on it. `original`: the record before the transforms, when
/// some ran (the one a dead letter keeps).
pub(super) fn convert(
    record: ConnectRecord,
    original: Option<&ConnectRecord>,
    format: &ConnectFormat,
    dead: impl FnOnce() -> InvalidRow,
) -> RouteOutcome {
    match record.convert(format.converters()) {
        Ok(record) => RouteOutcome::Record(record),
        Err(error) if error.stop == Some(crate::connect::Stop::Unavailable) => {
            RouteOutcome::Unavailable(format!("{}: {}", error.class, error.message))
        }
        Err(error) if error.stop == Some(crate::connect::Stop::Unauthorized) => {
            RouteOutcome::Fatal(format!("{}: {}", error.class, error.message))
        }
        Err(error) => {
            let mut row = dead();
            row.original_topic
                .get_or_insert_with(|| record.topic.to_string());
            super::tolerance::failed(
                format,
                Some(original.unwrap_or(&record)),
                super::tolerance::Failure {
                    stage: error.stage,
                    class: error.class,
                    message: error.message,
                },
                row,
            )
        }
    }
}

/// The EventRouter's value: a tombstone (null, no schema) for a NULL or blank payload when
/// `route.tombstone.on.empty.payload` asks for one, the envelope struct when additional
/// fields go into it, a payload expanded to no schema as that string, else the payload with
/// its own schema.
pub(super) fn event_router_value(
    format: &ConnectFormat,
    payload: Value,
    payload_schema: Schema,
    schemaless: Option<Bytes>,
    envelope: Option<(Schema, Value)>,
) -> Data {
    let blank = match &payload {
        Value::Null => true,
        Value::String(s) => s.iter().all(u8::is_ascii_whitespace),
        _ => false,
    };
    if blank && format.tombstone_on_empty_payload {
        return Data::null();
    }
    match (envelope, schemaless) {
        (Some((schema, value)), _) => Data::new(schema, value),
        (None, Some(text)) => Data {
            schema: None,
            value: Value::String(text),
        },
        (None, None) => Data::new(payload_schema, payload),
    }
}

/// A field as the EventRouter reads it with `Struct.get`: NULL becomes the field's default
/// when its schema has one (id, key, payload, header and envelope fields; the routing,
/// timestamp and schema-version fields are read without it).
fn field_of<'s>(
    row: &'s impl Row,
    name: &str,
    column: &'s Result<TypedColumn, String>,
) -> Result<(Value, &'s Schema), String> {
    let (value, schema) = row.value(name, column)?;
    match (&value, &schema.default) {
        (Value::Null, Some(default)) => Ok((default.clone(), schema)),
        _ => Ok((value, schema)),
    }
}

/// The Connect value of a row's column.
fn value_of(columns: &[ColumnValue], column: &TypedColumn) -> Result<Value, String> {
    Ok(match columns.get(column.position) {
        Some(ColumnValue::Null) => Value::Null,
        Some(ColumnValue::Text(b)) => column.kind.value(b)?,
        Some(ColumnValue::Binary(_)) => {
            return Err("binary-format column values are not converted".into())
        }
        Some(ColumnValue::UnchangedToast) => {
            return Err("unchanged TOAST value in an INSERT".into())
        }
        None => {
            return Err(format!(
                "row has {} columns, expected at least {}",
                columns.len(),
                column.position + 1
            ))
        }
    })
}

/// `traceparent` / `tracestate` from a java.util.Properties text (`key=value` lines), the
/// format Debezium's tracing field holds. Debezium starts a child span and writes its own
/// span id; outbox-relay has no tracer and propagates the writer's context unchanged.
fn trace_headers(context: &[u8]) -> Vec<(Arc<str>, Bytes)> {
    let text = String::from_utf8_lossy(context);
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        let Some((k, v)) = line.split_once(['=', ':']) else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        if k == "traceparent" || k == "tracestate" {
            out.push((Arc::<str>::from(k), Bytes::copy_from_slice(v.as_bytes())));
        }
    }
    out
}

#[cfg(test)]
mod write_buffer_tests {
    use super::WriteBuffer;

    #[test]
    fn parts_are_their_own_bytes_and_the_buffer_stays_a_chunk() {
        let mut out = WriteBuffer::default();
        let a = out.write(3, |b| b.extend_from_slice(b"key"));
        let b = out.write(5, |b| b.extend_from_slice(b"value"));
        assert_eq!((&a[..], &b[..]), (&b"key"[..], &b"value"[..]));
        // One part larger than a chunk: an allocation of its own, the shared buffer untouched.
        let large = vec![b'x'; 3 * WriteBuffer::CHUNK];
        let big = out.write(large.len(), |b| b.extend_from_slice(&large));
        assert_eq!(big.len(), large.len());
        assert!(
            out.0.capacity() <= WriteBuffer::CHUNK,
            "{}",
            out.0.capacity()
        );
        // A write far past its estimate grows the buffer once; it is not kept.
        let grown = out.write(1, |b| b.extend_from_slice(&large));
        assert_eq!(grown, big);
        assert!(
            out.0.capacity() <= 2 * WriteBuffer::CHUNK,
            "{}",
            out.0.capacity()
        );
        // The parts split off before are intact.
        assert_eq!((&a[..], &b[..]), (&b"key"[..], &b"value"[..]));
        let c = out.write(4, |b| b.extend_from_slice(b"next"));
        assert_eq!(&c[..], b"next");
    }
}
