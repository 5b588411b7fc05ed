//! What Kafka Connect's field transforms share (`org.apache.kafka.connect.transforms.util`):
//! the part of the record a `$Key` or `$Value` variant works on, `Requirements.requireStruct`
//! and `requireMap` with their messages, `SchemaUtil.copySchemaBasics`, and struct access.

use super::Side;
use crate::connect::{ConnectRecord, Data, Schema, SchemaType, Value};
use std::sync::Arc;

/// The key or the value.
pub(super) fn part(record: &mut ConnectRecord, side: Side) -> &mut Data {
    match side {
        Side::Key => &mut record.key,
        Side::Value => &mut record.value,
    }
}

pub(super) use crate::connect::java_class;

/// A struct schema's fields.
pub(super) type Fields = [(Arc<str>, Schema)];

/// A struct value's schema, fields and values (`Requirements.requireStruct`).
pub(super) fn require_struct<'a>(
    data: &'a Data,
    purpose: &str,
) -> Result<(&'a Schema, &'a Fields, &'a [Value]), String> {
    match (&data.schema, &data.value) {
        (
            Some(
                schema @ Schema {
                    kind: SchemaType::Struct(fields),
                    ..
                },
            ),
            Value::Struct(values),
        ) => Ok((schema, fields, values)),
        (schema, value) => Err(format!(
            "Only Struct objects supported for [{purpose}], found: {}",
            java_class(schema.as_ref(), value)
        )),
    }
}

/// A schemaless map's entries (`Requirements.requireMap`).
pub(super) fn require_map<'a>(
    data: &'a Data,
    purpose: &str,
) -> Result<&'a [(Value, Value)], String> {
    match &data.value {
        Value::Map(entries) => Ok(entries),
        value => Err(format!(
            "Only Map objects supported in absence of schema for [{purpose}], found: {}",
            java_class(None, value)
        )),
    }
}

/// `SchemaUtil.copySchemaBasics`: a new schema of `kind` with `source`'s name, version, doc
/// and parameters (not its optionality or default).
pub(super) fn copy_schema_basics(source: &Schema, kind: SchemaType) -> Schema {
    Schema {
        kind,
        optional: false,
        name: source.name.clone(),
        version: source.version,
        doc: source.doc.clone(),
        parameters: source.parameters.clone(),
        default: None,
    }
}

/// `Struct.get(field)`: a null value is the field's default when it has one (unless
/// `replace.null.with.default=false`, `getWithoutDefault`).
pub(super) fn field_value(
    schema: &Schema,
    value: &Value,
    replace_null_with_default: bool,
) -> Value {
    match (value, &schema.default) {
        (Value::Null, Some(default)) if replace_null_with_default => default.clone(),
        _ => value.clone(),
    }
}

/// A schemaless map's value under a string key.
pub(super) fn map_get<'a>(entries: &'a [(Value, Value)], key: &str) -> Option<&'a Value> {
    entries
        .iter()
        .find(|(k, _)| k.as_str() == Some(key))
        .map(|(_, v)| v)
}

/// Sets a string key of a schemaless map (`HashMap.put`: replaces in place, else appends).
pub(super) fn map_put(entries: &mut Vec<(Value, Value)>, key: &str, value: Value) {
    match entries.iter_mut().find(|(k, _)| k.as_str() == Some(key)) {
        Some((_, v)) => *v = value,
        None => entries.push((Value::text(key), value)),
    }
}

/// Connect's `ConnectSchema.validateValue` for a value put into a struct field: a null for a
/// required field is refused (its default is not considered there).
pub(super) fn check_null(name: &str, schema: &Schema, value: &Value) -> Result<(), String> {
    if value.is_null() && !schema.optional {
        return Err(format!(
            "Invalid value: null used for required field: \"{name}\", schema type: {}",
            type_name(&schema.kind)
        ));
    }
    Ok(())
}

/// Connect's `Schema.Type` name.
pub(super) fn type_name(kind: &SchemaType) -> &'static str {
    kind.type_name()
}

/// `Schema.toString()`: `Schema{name:TYPE}`, or `Schema{TYPE}` without a name.
pub(super) fn schema_string(schema: &Schema) -> String {
    match &schema.name {
        Some(name) => format!("Schema{{{name}:{}}}", type_name(&schema.kind)),
        None => format!("Schema{{{}}}", type_name(&schema.kind)),
    }
}

/// A struct schema's fields with one more, refused as `SchemaBuilder.field` refuses a name
/// twice or an empty one.
pub(super) fn add_field(
    fields: &mut Vec<(Arc<str>, Schema)>,
    name: &str,
    schema: Schema,
) -> Result<(), String> {
    if name.is_empty() {
        return Err("fieldName cannot be null.".into());
    }
    if fields.iter().any(|(n, _)| &**n == name) {
        return Err(format!(
            "Cannot create field because of field name duplication {name}"
        ));
    }
    fields.push((name.into(), schema));
    Ok(())
}

/// Connect's logical Timestamp schema.
pub(super) fn timestamp_schema(optional: bool) -> Schema {
    Schema::new(SchemaType::Int64, optional)
        .named("org.apache.kafka.connect.data.Timestamp", Some(1))
}

/// A schemaless map as `new HashMap<>(source)` and then `put`s leave it (Cast,
/// TimestampConverter): `entries` are the source's, in its order, then the keys put after
/// them, in order; `copied` is how many came from the source. Iterated as Java iterates it:
/// by bucket, then in insertion order. The copy is sized for the source (JDK 17: the power
/// of two from `copied / 0.75 + 1`, so `{id}` plus `at` share a bucket of four and keep
/// their order) and doubles as the puts fill it past three quarters.
pub(super) fn java_map_copy(entries: Vec<(Value, Value)>, copied: usize) -> Value {
    let capacity = if copied == 0 {
        16
    } else {
        ((copied as f32 / 0.75 + 1.0) as usize).next_power_of_two()
    };
    java_map_sized(entries, capacity)
}

/// A schemaless map as `new HashMap<>(expected)` and then `put`s in order leave it
/// (ReplaceField, ValueToKey): sized to the power of two at or above `expected`.
pub(super) fn java_map_presized(entries: Vec<(Value, Value)>, expected: usize) -> Value {
    java_map_sized(entries, expected.max(1).next_power_of_two())
}

/// A `java.util.HashMap` of `capacity` buckets filled with `entries` in order.
fn java_map_sized(entries: Vec<(Value, Value)>, mut capacity: usize) -> Value {
    if !entries.iter().all(|(k, _)| k.as_str().is_some()) {
        return Value::Map(entries);
    }
    while entries.len() > capacity * 3 / 4 {
        capacity *= 2;
    }
    let mut keyed: Vec<(usize, (Value, Value))> = entries
        .into_iter()
        .map(|entry| {
            let h = entry
                .0
                .as_str()
                .unwrap_or_default()
                .encode_utf16()
                .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)));
            let spread = (h ^ ((h as u32) >> 16) as i32) as u32 as usize;
            (spread & (capacity - 1), entry)
        })
        .collect();
    // A stable sort: insertion order within a bucket.
    keyed.sort_by_key(|(bucket, _)| *bucket);
    Value::Map(keyed.into_iter().map(|(_, entry)| entry).collect())
}

/// A required, non-empty list option (Kafka 4.3's `ValidList.anyNonDuplicateValues`):
/// repeated items dropped, the first kept.
pub(super) fn required_list(o: &super::Options<'_>, name: &str) -> Result<Vec<String>, String> {
    o.required(name)?;
    let mut items = o.list(name);
    if items.is_empty() {
        return Err(format!(
            "Configuration '{}' must not be empty. Valid values include: any non-empty value",
            o.key(name)
        ));
    }
    let mut seen = Vec::new();
    items.retain(|i| {
        let new = !seen.contains(i);
        if new {
            seen.push(i.clone());
        }
        new
    });
    Ok(items)
}
