//! `InsertField$Key` / `$Value`: the record's topic, partition, timestamp and a static string
//! added as fields (`topic.field`, `partition.field`, `timestamp.field`, `static.field` with
//! `static.value`; a `!` suffix makes a field required, `?` or none optional). A null
//! key/value is left alone; a struct's schema keeps its name, version, doc and parameters
//! and becomes required (`SchemaUtil.copySchemaBasics`).

use super::fields::{
    add_field, copy_schema_basics, field_value, java_map_copy, map_put, part, require_map,
    require_struct, timestamp_schema,
};
use super::{Entry, Options, Side, Transformation};
use crate::connect::{ConnectRecord, Data, Schema, SchemaType, Value};
use std::sync::Arc;

pub(super) const ENTRY: Entry = Entry {
    class: "org.apache.kafka.connect.transforms.InsertField",
    sides: true,
    parse,
    doc: "the topic, partition, timestamp or a static string inserted as fields",
};

const PURPOSE: &str = "field insertion";

#[derive(Debug, Clone)]
struct Spec {
    name: String,
    optional: bool,
}

impl Spec {
    /// `InsertionSpec.parse`: one trailing `?` (optional) or `!` (required) is stripped.
    fn parse(text: Option<String>) -> Option<Self> {
        let text = text?;
        Some(if let Some(name) = text.strip_suffix('?') {
            Spec {
                name: name.into(),
                optional: true,
            }
        } else if let Some(name) = text.strip_suffix('!') {
            Spec {
                name: name.into(),
                optional: false,
            }
        } else {
            Spec {
                name: text,
                optional: true,
            }
        })
    }
}

#[derive(Debug)]
struct InsertField {
    side: Side,
    topic: Option<Spec>,
    partition: Option<Spec>,
    timestamp: Option<Spec>,
    fixed: Option<(Spec, String)>,
    replace_null_with_default: bool,
}

fn parse(o: &Options<'_>, side: Option<Side>) -> Result<Arc<dyn Transformation>, String> {
    let side = side.unwrap_or(Side::Value);
    if o.get("offset.field").is_some() {
        return Err(format!(
            "{}: offset insertion is only supported for sink connectors (Kafka Connect fails every record of a source \
             connector with it: \"Only SinkRecord supported for [field insertion]\")",
            o.key("offset.field")
        ));
    }
    let fixed = match (Spec::parse(o.get("static.field")), o.get("static.value")) {
        (Some(spec), Some(value)) => Some((spec, value)),
        (Some(_), None) => {
            return Err(format!(
                "{}: No value specified for static field {}",
                o.key("static.value"),
                o.key("static.field")
            ))
        }
        (None, _) => None,
    };
    let transform = InsertField {
        side,
        topic: Spec::parse(o.get("topic.field")),
        partition: Spec::parse(o.get("partition.field")),
        timestamp: Spec::parse(o.get("timestamp.field")),
        fixed,
        replace_null_with_default: o.flag("replace.null.with.default", true)?,
    };
    if transform.topic.is_none()
        && transform.partition.is_none()
        && transform.timestamp.is_none()
        && transform.fixed.is_none()
    {
        return Err(format!(
            "transforms.{}: No field insertion configured (set topic.field, partition.field, timestamp.field or static.field)",
            o.alias
        ));
    }
    Ok(Arc::new(transform))
}

impl Transformation for InsertField {
    fn apply(
        &self,
        mut record: ConnectRecord,
        now_ms: i64,
    ) -> Result<Option<ConnectRecord>, String> {
        if part(&mut record, self.side).value.is_null() {
            return Ok(Some(record));
        }
        let timestamp = match &self.timestamp {
            // The record keeps the time it was stamped with.
            Some(_) => Some(*record.timestamp_ms.get_or_insert(now_ms)),
            None => None,
        };
        let topic = record.topic.clone();
        let partition = record.partition;
        let data = part(&mut record, self.side);
        let updated = match &data.schema {
            None => {
                let mut entries = require_map(data, PURPOSE)?.to_vec();
                let copied = entries.len();
                if let Some(spec) = &self.topic {
                    map_put(&mut entries, &spec.name, Value::text(&topic));
                }
                if let (Some(spec), Some(p)) = (&self.partition, partition) {
                    map_put(&mut entries, &spec.name, Value::Int(i64::from(p)));
                }
                if let (Some(spec), Some(t)) = (&self.timestamp, timestamp) {
                    map_put(&mut entries, &spec.name, Value::Int(t));
                }
                if let Some((spec, value)) = &self.fixed {
                    map_put(&mut entries, &spec.name, Value::text(value));
                }
                Data {
                    schema: None,
                    value: java_map_copy(entries, copied),
                }
            }
            Some(_) => {
                let (schema, fields, values) = require_struct(data, PURPOSE)?;
                let mut new_fields = fields.to_vec();
                let mut new_values: Vec<Value> = fields
                    .iter()
                    .zip(values)
                    .map(|((_, s), v)| field_value(s, v, self.replace_null_with_default))
                    .collect();
                let mut insert = |spec: &Spec, kind: Schema, value: Value| {
                    add_field(&mut new_fields, &spec.name, kind)?;
                    new_values.push(value);
                    Ok::<_, String>(())
                };
                let string = |optional| Schema::new(SchemaType::String, optional);
                if let Some(spec) = &self.topic {
                    insert(spec, string(spec.optional), Value::text(&topic))?;
                }
                if let Some(spec) = &self.partition {
                    insert(
                        spec,
                        Schema::new(SchemaType::Int32, spec.optional),
                        partition.map_or(Value::Null, |p| Value::Int(i64::from(p))),
                    )?;
                }
                if let Some(spec) = &self.timestamp {
                    insert(
                        spec,
                        timestamp_schema(spec.optional),
                        timestamp.map_or(Value::Null, Value::Int),
                    )?;
                }
                if let Some((spec, value)) = &self.fixed {
                    insert(spec, string(spec.optional), Value::text(value))?;
                }
                Data::new(
                    copy_schema_basics(schema, SchemaType::Struct(new_fields)),
                    Value::Struct(new_values),
                )
            }
        };
        *data = updated;
        Ok(Some(record))
    }
}
