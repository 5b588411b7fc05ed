//! Connect values as Java prints them: `Object.toString()` as StringConverter writes a value,
//! and `java.util.Date` as SimpleHeaderConverter writes a header.

use super::data::{Schema, SchemaType, Value};
use super::json::write_double;
use bytes::Bytes;

/// A value of Connect's logical Date (days), Time or Timestamp (milliseconds), in milliseconds
/// since the epoch: a `java.util.Date` in Connect.
pub(super) fn connect_date_millis(schema: &Schema, value: i64) -> Option<i64> {
    match schema.name.as_deref()? {
        "org.apache.kafka.connect.data.Date" => value.checked_mul(86_400_000),
        "org.apache.kafka.connect.data.Time" | "org.apache.kafka.connect.data.Timestamp" => {
            Some(value)
        }
        _ => None,
    }
}

/// A `java.util.Date` as SimpleHeaderConverter writes it (Kafka's `Values.dateFormatFor`, in
/// UTC): under a day since the epoch (negative ones too) as `HH:mm:ss.SSS'Z'`, a whole number
/// of days as `yyyy-MM-dd`, anything else as `yyyy-MM-dd'T'HH:mm:ss.SSS'Z'` (found by the
/// differential test: the relay wrote the number). Years are proleptic Gregorian; Java's
/// calendar is Julian before 1582-10-15.
pub(super) fn kafka_date_string(millis: i64) -> String {
    const DAY: i64 = 86_400_000;
    let days = millis.div_euclid(DAY);
    let in_day = millis.rem_euclid(DAY);
    let time = format!(
        "{:02}:{:02}:{:02}.{:03}Z",
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000
    );
    if millis < DAY {
        return time;
    }
    let (year, month, day) = super::pg_text::civil_from_days(days);
    let date = format!("{year:04}-{month:02}-{day:02}");
    if in_day == 0 {
        date
    } else {
        format!("{date}T{}", time.trim_end_matches('Z')) + "Z"
    }
}

/// Java's `toString()` of the value, as StringConverter writes it.
pub(super) fn to_java_string(schema: Option<&Schema>, value: &Value) -> Option<Bytes> {
    let mut out = Vec::new();
    if value.is_null() {
        return None;
    }
    java_string(&mut out, schema, value);
    Some(out.into())
}

/// `Object.toString()` of a Connect value: `Struct{name=value,…}` (non-null fields only),
/// `[a, b]` for lists, `{k=v, …}` for maps, `BigDecimal.toString()` for decimals. The field
/// names come from the schema. Bytes within a struct, list or map are the ByteBuffer Debezium
/// gives a bytea, `java.nio.HeapByteBuffer[pos=0 lim=n cap=n]` (found by the differential
/// test, seed 51 case 302: ValueToKey of a bytea payload under StringConverter keys).
pub(super) fn java_string(out: &mut Vec<u8>, schema: Option<&Schema>, value: &Value) {
    java_string_in(out, schema, value, false)
}

pub(super) fn java_string_in(
    out: &mut Vec<u8>,
    schema: Option<&Schema>,
    value: &Value,
    nested: bool,
) {
    match value {
        Value::Bytes(b) if nested => out.extend_from_slice(
            format!("java.nio.HeapByteBuffer[pos=0 lim={0} cap={0}]", b.len()).as_bytes(),
        ),
        Value::Null => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Int(i) => out.extend_from_slice(i.to_string().as_bytes()),
        Value::Float(f) => write_double(out, *f),
        Value::String(s) | Value::Bytes(s) => out.extend_from_slice(s),
        Value::Decimal(d) => out.extend_from_slice(d.java_string().as_bytes()),
        Value::Array(items) => {
            out.push(b'[');
            joined(out, items, b", ", |out, item| {
                java_string_in(out, item_schema(schema), item, true)
            });
            out.push(b']');
        }
        Value::Map(entries) => {
            let (keys, values) = entry_schemas(schema);
            out.push(b'{');
            joined(out, entries, b", ", |out, (k, v)| {
                java_string_in(out, keys, k, true);
                out.push(b'=');
                java_string_in(out, values, v, true);
            });
            out.push(b'}');
        }
        Value::Struct(values) => {
            let fields = match schema.map(|s| &s.kind) {
                Some(SchemaType::Struct(fields)) => Some(fields),
                _ => None,
            };
            out.extend_from_slice(b"Struct{");
            let mut first = true;
            for (i, v) in values.iter().enumerate() {
                if v.is_null() {
                    continue;
                }
                if !first {
                    out.push(b',');
                }
                let field = fields.and_then(|f| f.get(i));
                if let Some((name, _)) = field {
                    out.extend_from_slice(name.as_bytes());
                    out.push(b'=');
                }
                java_string_in(out, field.map(|(_, s)| s), v, true);
                first = false;
            }
            out.push(b'}');
        }
    }
}

/// `Struct.toString()` with field names, for StringConverter values that are envelopes.
pub fn struct_to_java_string(schema: &Schema, value: &Value) -> Option<Bytes> {
    to_java_string(Some(schema), value)
}

/// A struct, list or map as SimpleHeaderConverter writes it (Kafka's `Values.convertToString`,
/// its `append`): `{"name":value,…}` for a struct (a null field as its default, as
/// `Struct.get` reads it), `[a,b]`, `{k:v,…}`; strings within them quoted with only `\` and
/// `"` escaped (a newline stays a newline: found by the differential test), bytes in base64,
/// numbers as Java prints them, `java.util.Date`s (Connect's Date, Time, Timestamp) formatted
/// unquoted. Top-level strings and bytes are written bare.
pub(super) fn kafka_values_string(
    out: &mut Vec<u8>,
    schema: Option<&Schema>,
    value: &Value,
    embedded: bool,
) {
    let quoted = |out: &mut Vec<u8>, text: &[u8]| {
        if embedded {
            out.push(b'"');
        }
        out.extend_from_slice(text);
        if embedded {
            out.push(b'"');
        }
    };
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Int(v) => match schema.and_then(|s| connect_date_millis(s, *v)) {
            Some(millis) => out.extend_from_slice(kafka_date_string(millis).as_bytes()),
            None => out.extend_from_slice(v.to_string().as_bytes()),
        },
        Value::Float(f) => write_double(out, *f),
        Value::Decimal(d) => out.extend_from_slice(d.java_string().as_bytes()),
        Value::String(s) if embedded => {
            out.push(b'"');
            for &b in s.iter() {
                if matches!(b, b'\\' | b'"') {
                    out.push(b'\\');
                }
                out.push(b);
            }
            out.push(b'"');
        }
        Value::String(s) => out.extend_from_slice(s),
        Value::Bytes(b) => {
            use base64::Engine as _;
            quoted(
                out,
                base64::engine::general_purpose::STANDARD
                    .encode(b)
                    .as_bytes(),
            )
        }
        Value::Array(items) => {
            out.push(b'[');
            joined(out, items, b",", |out, item| {
                kafka_values_string(out, item_schema(schema), item, true)
            });
            out.push(b']');
        }
        Value::Map(entries) => {
            let (keys, values) = entry_schemas(schema);
            out.push(b'{');
            joined(out, entries, b",", |out, (k, v)| {
                kafka_values_string(out, keys, k, true);
                out.push(b':');
                kafka_values_string(out, values, v, true);
            });
            out.push(b'}');
        }
        Value::Struct(values) => {
            let fields = match schema.map(|s| &s.kind) {
                Some(SchemaType::Struct(fields)) => &fields[..],
                _ => &[],
            };
            out.push(b'{');
            for (i, (name, field_schema)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                kafka_values_string(
                    out,
                    None,
                    &Value::String(name.as_bytes().to_vec().into()),
                    true,
                );
                out.push(b':');
                let value = match (values.get(i).unwrap_or(&Value::Null), &field_schema.default) {
                    (Value::Null, Some(default)) => default,
                    (value, _) => value,
                };
                kafka_values_string(out, Some(field_schema), value, true);
            }
            out.push(b'}');
        }
    }
}

/// The schema of an array's items, when `schema` is an array's.
fn item_schema(schema: Option<&Schema>) -> Option<&Schema> {
    match schema.map(|s| &s.kind) {
        Some(SchemaType::Array(items)) => Some(items),
        _ => None,
    }
}

/// The schemas of a map's keys and values, when `schema` is a map's.
fn entry_schemas(schema: Option<&Schema>) -> (Option<&Schema>, Option<&Schema>) {
    match schema.map(|s| &s.kind) {
        Some(SchemaType::Map(k, v)) => (Some(k), Some(v)),
        _ => (None, None),
    }
}

/// `items` written one after another with `separator` between them.
fn joined<T>(
    out: &mut Vec<u8>,
    items: &[T],
    separator: &[u8],
    mut each: impl FnMut(&mut Vec<u8>, &T),
) {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(separator);
        }
        each(out, item);
    }
}
