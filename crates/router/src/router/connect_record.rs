//! Debezium's EventRouter with Kafka Connect converters: one outbox row in, the exact key,
//! value and header bytes a Connect worker would produce out (see the README's drop-in
//! table for where outbox-relay deliberately differs: it never crashes on a row).

use super::TopicCache;
use crate::config::{ConnectFormat, Placement, RouterConfig};
use crate::connect::{
    default_value, expand, expands_to_no_schema, has_default_mapper, ColumnFacts, ColumnKind,
    ConnectRecord, Data, Header, PgType, Schema, SchemaType, Value,
};
use crate::record::{ChangeEventAt, InvalidRow, PendingRecord, RouteOutcome};
use crate::SourcePosition;
use bytes::Bytes;
use pgoutput::{ColumnValue, Relation};
use std::sync::Arc;

/// A column as Debezium types it.
#[derive(Debug, Clone)]
struct TypedColumn {
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

#[derive(Debug, Clone)]
pub(crate) struct ConnectPlan {
    /// Set when a used column has a type outbox-relay cannot write as Debezium would.
    unsupported: Option<String>,
    id: Result<TypedColumn, String>,
    key: Result<TypedColumn, String>,
    payload: Result<TypedColumn, String>,
    route_by: Result<TypedColumn, String>,
    /// In configuration order; missing columns are `Err` unless ignored.
    additional: Vec<(Placed, Arc<str>, Result<TypedColumn, String>)>,
    timestamp: Option<Result<TypedColumn, String>>,
    schema_version: Option<Result<TypedColumn, String>>,
    tracing: Option<usize>,
    /// `<topic.prefix>.<schema>.<table>`, the prefix of the envelope schema name.
    value_schema_prefix: String,
    /// Whether any additional field goes into the envelope.
    envelope: bool,
    /// Debezium's context headers, converted once.
    context: Vec<Header>,
    /// The table's schema and name (the change event's source block).
    namespace: String,
    name: String,
}

/// The envelope schema's name per schema version, as Debezium's EventRouter keeps it: built
/// from the first event it routes (that event's table and routed value) and kept for every
/// later event of the connector, whatever its routed value (`EventRouterDelegate`'s
/// `defaultValueSchema` and `versionedValueSchema`, found by the differential test).
#[derive(Debug, Default)]
pub(crate) struct EnvelopeNames(std::collections::HashMap<Option<i32>, Arc<str>>);

impl EnvelopeNames {
    fn name(&mut self, version: Option<i32>, first: impl FnOnce() -> String) -> Arc<str> {
        self.0
            .entry(version)
            .or_insert_with(|| first().into())
            .clone()
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
            let column = &relation.columns[position];
            let fact = facts.iter().find(|f| f.name == name);
            let pg_type = fact
                .and_then(|f| f.pg_type.clone())
                .unwrap_or_else(|| PgType::builtin(column.type_oid, column.type_modifier));
            let kind = match ColumnKind::resolve(&pg_type, &format.types) {
                Ok(kind) => kind,
                Err(what) => {
                    unsupported.get_or_insert_with(|| format!(
                        "column {name:?} of {}.{} has {what}, which outbox-relay cannot write the way Debezium does; \
                         change the column's type, or use outbox-relay's native options instead of --debezium-config",
                        relation.namespace, relation.name
                    ));
                    return Err(format!("column {name:?} has an unsupported type"));
                }
            };
            let mut schema = kind.schema(!fact.is_some_and(|f| f.not_null));
            schema.default = fact
                .and_then(|f| f.default_expression.as_deref())
                .filter(|_| has_default_mapper(&pg_type))
                .and_then(|e| default_value(&kind, e));
            Ok(TypedColumn {
                position,
                kind,
                schema,
            })
        };
        let id = typed(&config.id_column);
        let key = typed(&config.key_column);
        let payload = typed(&config.payload_column);
        let route_by = typed(&config.route_by_column);
        let additional = config
            .additional
            .iter()
            .filter(|f| {
                !config.ignore_missing_additional || relation.column_index(&f.column).is_some()
            })
            .map(|f| {
                let placed = match f.placement {
                    Placement::Header => Placed::Header(f.alias.clone()),
                    Placement::Envelope => Placed::Envelope,
                    Placement::Partition => Placed::Partition,
                };
                (placed, f.alias.clone(), typed(&f.column))
            })
            .collect::<Vec<_>>();
        let timestamp = config.timestamp_column.as_deref().map(&mut typed);
        let schema_version = format.schema_version_column.as_deref().map(&mut typed);
        let tracing = format
            .tracing_span_context_column
            .as_deref()
            .and_then(|c| relation.column_index(c));
        let envelope = additional
            .iter()
            .any(|(p, _, _)| matches!(p, Placed::Envelope));
        let context = format
            .context_headers
            .iter()
            .flat_map(|c| c.entries())
            .map(|(name, value)| {
                Header::encoded_once(name, Data::text(value), &format.header)
                    .expect("a string header always converts")
            })
            .collect();
        Self {
            unsupported,
            id,
            key,
            payload,
            route_by,
            additional,
            timestamp,
            schema_version,
            tracing,
            value_schema_prefix: format.schema_name(format!(
                "{}.{}.{}",
                format.topic_prefix, relation.namespace, relation.name
            )),
            envelope,
            context,
            namespace: relation.namespace.clone(),
            name: relation.name.clone(),
        }
    }

    /// Set when a column the routing reads has a type outbox-relay cannot write as Debezium
    /// would.
    pub(crate) fn problem(&self) -> Option<&str> {
        self.unsupported.as_deref()
    }

    /// `transforms`: whether transforms follow the EventRouter (the record is then left
    /// for them, unconverted).
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
        let invalid = |reason: String, original_topic: Option<String>| {
            RouteOutcome::Invalid(dead(reason, original_topic))
        };
        macro_rules! or_invalid {
            ($e:expr) => {
                match $e {
                    Ok(v) => v,
                    Err(reason) => return invalid(reason, None),
                }
            };
        }

        let routing = match raw(&self.route_by) {
            Some(r) => r,
            None => {
                let reason = match &self.route_by {
                    Err(e) => e.clone(),
                    // Debezium's task dies here (NullPointerException); dead-letter instead.
                    Ok(_) => format!("routing column {:?} is NULL", config.route_by_column),
                };
                return invalid(reason, None);
            }
        };
        let topic = match topics.topic_for(&routing, config) {
            Ok(topic) => topic,
            Err((reason, topic)) => return invalid(reason, topic),
        };
        let with_topic = |reason: String| invalid(reason, Some(topic.to_string()));

        // The record's headers: Debezium's context headers, trace context (opt-in), `id`, then
        // additional fields (EventRouterDelegate.apply appends to the record's headers). A
        // NULL column is a header with a null value (SimpleHeaderConverter), not a missing one.
        let mut headers = Vec::with_capacity(self.context.len() + 1 + self.additional.len());
        headers.extend(self.context.iter().cloned());
        // Propagated trace context goes where Debezium's tracing SMT puts it: before `id`.
        if let Some(context) = self.tracing.and_then(|p| match columns.get(p) {
            Some(ColumnValue::Text(b)) => Some(b.clone()),
            _ => None,
        }) {
            headers.extend(trace_headers(&context).into_iter().map(|(k, v)| Header {
                name: k,
                data: Data::new(
                    Schema::new(SchemaType::String, false),
                    Value::String(v.clone()),
                ),
                encoded: Some(Some(v)),
            }));
        }
        let (id, id_column) = or_invalid!(field_of(columns, &self.id));
        headers.push(Header::new("id", Data::new(id_column.schema.clone(), id)));

        let (mut payload, payload_column) = or_invalid!(field_of(columns, &self.payload));
        let mut payload_schema = payload_column.schema.clone();
        let mut schemaless = None;
        if let (Some(behaviour), Value::String(text)) = (format.expand, &payload) {
            if let Some((schema, value)) = expand(&config.payload_column, text, behaviour) {
                payload_schema = schema;
                payload = value;
            } else if expands_to_no_schema(text, behaviour) {
                schemaless = Some(text.clone());
            }
        }

        let mut envelope_fields = vec![(Arc::<str>::from("payload"), payload_schema.clone())];
        let mut envelope_values = vec![payload.clone()];
        let mut partition = None;
        for (placed, alias, column) in &self.additional {
            let (value, column) = match placed {
                Placed::Partition => or_invalid!(value_of(columns, column)),
                _ => or_invalid!(field_of(columns, column)),
            };
            match placed {
                Placed::Header(name) => {
                    headers.push(Header::new(
                        name.clone(),
                        Data::new(column.schema.clone(), value),
                    ));
                }
                Placed::Envelope => {
                    envelope_fields.push((alias.clone(), column.schema.clone()));
                    envelope_values.push(value);
                }
                Placed::Partition => {
                    partition = match value {
                        Value::Int(p) if (0..=i64::from(i32::MAX)).contains(&p) => Some(p as i32),
                        Value::Null => None,
                        other => {
                            return with_topic(format!(
                                "partition column value {other:?} is not a partition number (Debezium needs an int4 column)"
                            ))
                        }
                    }
                }
            }
        }

        let timestamp_ms = match &self.timestamp {
            None => None,
            Some(column) => {
                let column = or_invalid!(column.as_ref().map_err(Clone::clone));
                match columns.get(column.position) {
                    Some(ColumnValue::Text(t)) => Some(or_invalid!(column.kind.epoch_millis(t))),
                    // NULL: when the relay read the event (Debezium's ts_ms), stamped by the route stage.
                    _ => None,
                }
            }
        };

        let envelope = if self.envelope {
            let mut schema = Schema::new(SchemaType::Struct(envelope_fields), false);
            if let Some(version) = &self.schema_version {
                let (v, _) = or_invalid!(value_of(columns, version));
                schema.version = match v {
                    Value::Int(v) => i32::try_from(v).ok(),
                    _ => None,
                };
            }
            let routed = String::from_utf8_lossy(&routing);
            schema.name = Some(envelope_names.name(schema.version, || {
                format!("{}.{routed}.Value", self.value_schema_prefix)
            }));
            Some((schema, Value::Struct(envelope_values)))
        } else {
            None
        };
        let value = event_router_value(format, payload, payload_schema, schemaless, envelope);
        let (key, key_column) = or_invalid!(field_of(columns, &self.key));
        let record = ConnectRecord {
            topic,
            partition,
            key: Data::new(key_column.schema.clone(), key),
            value,
            headers,
            timestamp_ms,
        };
        let event = position.map(|position| {
            Box::new(ChangeEventAt {
                position: position.clone(),
                schema: self.namespace.clone(),
                table: self.name.clone(),
                context: self.context.len(),
            })
        });
        finish(record, format, transforms, event, || {
            dead(String::new(), None)
        })
    }
}

/// A record the connector made, converted now, or left for the transforms when some follow.
/// A converter that fails on it makes it `dead`, with the converter's reason.
/// `event`: the change event the transforms before the EventRouter see, when some do.
pub(super) fn finish(
    record: ConnectRecord,
    format: &ConnectFormat,
    transforms: bool,
    event: Option<Box<ChangeEventAt>>,
    dead: impl FnOnce() -> InvalidRow,
) -> RouteOutcome {
    if transforms || event.is_some() {
        return RouteOutcome::Connect(Box::new(PendingRecord {
            record,
            event,
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

/// A column as the EventRouter reads it with `Struct.get`: NULL becomes the column's
/// default when its schema has one (id, key, payload, header and envelope fields; the
/// routing, timestamp and schema-version columns are read without it).
fn field_of<'a>(
    columns: &[ColumnValue],
    column: &'a Result<TypedColumn, String>,
) -> Result<(Value, &'a TypedColumn), String> {
    let (value, column) = value_of(columns, column)?;
    match (&value, &column.schema.default) {
        (Value::Null, Some(default)) => Ok((default.clone(), column)),
        _ => Ok((value, column)),
    }
}

/// The Connect value of a row's column.
fn value_of<'a>(
    columns: &[ColumnValue],
    column: &'a Result<TypedColumn, String>,
) -> Result<(Value, &'a TypedColumn), String> {
    let column = column.as_ref().map_err(Clone::clone)?;
    let value = match columns.get(column.position) {
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
    };
    Ok((value, column))
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
