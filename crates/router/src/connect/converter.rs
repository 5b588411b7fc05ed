//! Kafka Connect's converters, byte for byte: what a Connect worker writes for a record's
//! key, value and headers under `org.apache.kafka.connect.json.JsonConverter` (with and
//! without `schemas.enable`), `...storage.StringConverter`, `...converters.ByteArrayConverter`
//! and the default header converter `...storage.SimpleHeaderConverter`.

use super::avro::AvroConverter;
use super::data::{Schema, SchemaType, Value};
use super::json::{write_double, write_string};
use super::json_schema::{JsonSchemaConverter, JSON_SCHEMA_CONVERTER};
use super::protobuf::ProtobufConverter;
use base64::Engine;
use bytes::Bytes;
use std::sync::Arc;

/// Connect's Decimal logical type.
const DECIMAL: &str = "org.apache.kafka.connect.data.Decimal";

/// A key or value converter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Converter {
    Json {
        schemas_enable: bool,
        /// `replace.null.with.default` (Kafka 3.7+, KIP-581): a null field is written as its
        /// schema's default (true, the default) or as null (false).
        replace_null_with_default: bool,
    },
    String,
    ByteArray,
    /// Debezium's `io.debezium.converters.BinaryDataConverter`: a BYTES value (or one
    /// without a schema) as its bytes, anything else through the `delegate.converter.type`
    /// converter, refused without one.
    BinaryData {
        delegate: Option<Delegate>,
    },
    /// A schema-registry Avro converter (Confluent's or Apicurio's).
    Avro(Arc<AvroConverter>),
    /// Debezium's CloudEventsConverter (JSON), which reads the record's headers.
    CloudEvents(Box<super::cloudevents::CloudEvents>),
    /// Confluent's schema-registry JSON Schema converter.
    JsonSchema(Arc<JsonSchemaConverter>),
    /// Confluent's schema-registry Protobuf converter.
    Protobuf(Arc<ProtobufConverter>),
}

/// The converter `BinaryDataConverter` hands what is not bytes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delegate {
    Json {
        schemas_enable: bool,
        replace_null_with_default: bool,
    },
    String,
    ByteArray,
}

impl Delegate {
    pub fn converter(self) -> Converter {
        match self {
            Delegate::Json {
                schemas_enable,
                replace_null_with_default,
            } => Converter::Json {
                schemas_enable,
                replace_null_with_default,
            },
            Delegate::String => Converter::String,
            Delegate::ByteArray => Converter::ByteArray,
        }
    }
}

/// A header converter (`header.converter`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderConverter {
    /// Kafka Connect's default: strings as they are, numbers and booleans as text.
    Simple,
    Other(Converter),
}

impl Converter {
    /// Kafka Connect's class of this converter.
    pub fn class(&self) -> &'static str {
        match self {
            Converter::Json { .. } => "org.apache.kafka.connect.json.JsonConverter",
            Converter::String => "org.apache.kafka.connect.storage.StringConverter",
            Converter::ByteArray => "org.apache.kafka.connect.converters.ByteArrayConverter",
            Converter::BinaryData { .. } => "io.debezium.converters.BinaryDataConverter",
            Converter::Avro(avro) => avro.class.name(),
            Converter::CloudEvents(_) => super::cloudevents::CLASS,
            Converter::JsonSchema(_) => JSON_SCHEMA_CONVERTER,
            Converter::Protobuf(p) => p.class(),
        }
    }

    /// The bytes of a record key or value; `None` is a Kafka null (a tombstone for values).
    /// `schema` is `None` only for the EventRouter's tombstones.
    pub fn encode(&self, schema: Option<&Schema>, value: &Value) -> Result<Option<Bytes>, String> {
        match self {
            Converter::Json {
                schemas_enable,
                replace_null_with_default,
            } => {
                let Some(schema) = schema else {
                    return Ok(None);
                };
                let json = Json {
                    replace_null_with_default: *replace_null_with_default,
                    dialect: Dialect::Kafka,
                };
                let mut out = Vec::new();
                if *schemas_enable {
                    out.extend_from_slice(b"{\"schema\":");
                    write_schema(&mut out, schema);
                    out.extend_from_slice(b",\"payload\":");
                    json.write(&mut out, schema, value)?;
                    out.push(b'}');
                } else {
                    json.write(&mut out, schema, value)?;
                }
                Ok(Some(out.into()))
            }
            Converter::String => Ok(to_java_string(schema, value)),
            // Kafka Connect refuses non-bytes values here and the task dies; outbox-relay
            // writes the value's text instead (documented in the README).
            Converter::ByteArray => Ok(match value {
                Value::Bytes(b) => Some(b.clone()),
                other => to_java_string(schema, other),
            }),
            Converter::BinaryData { delegate } => match (schema, value) {
                (Some(s), _) if s.kind != SchemaType::Bytes => {
                    binary_delegate(*delegate, value)?.encode(schema, value)
                }
                (_, Value::Bytes(b)) => Ok(Some(b.clone())),
                (_, Value::Null) => Ok(None),
                _ => binary_delegate(*delegate, value)?.encode(schema, value),
            },
            Converter::Avro(_) | Converter::Protobuf(_) => Err(AVRO_NEEDS_TOPIC.into()),
            // Without the record's headers, as for a record without metadata.
            Converter::CloudEvents(ce) => ce.encode(schema, value, &[]),
            Converter::JsonSchema(_) => Err(JSON_SCHEMA_NEEDS_TOPIC.into()),
        }
    }

    /// The bytes of a string value that has no schema (a null Connect schema): JsonConverter
    /// writes `{"schema":null,"payload":"…"}` (or the bare string without schemas); the
    /// others write it as they write any string.
    pub fn encode_schemaless_string(&self, text: &Bytes) -> Result<Option<Bytes>, String> {
        let value = Value::String(text.clone());
        let string = Schema::new(SchemaType::String, true);
        match self {
            Converter::Json { schemas_enable, .. } => {
                let mut out = Vec::new();
                if *schemas_enable {
                    out.extend_from_slice(b"{\"schema\":null,\"payload\":");
                }
                write_string(&mut out, &String::from_utf8_lossy(text));
                if *schemas_enable {
                    out.push(b'}');
                }
                Ok(Some(out.into()))
            }
            other => other.encode(Some(&string), &value),
        }
    }
}

impl Converter {
    /// The bytes of a value without a schema (a transform's schemaless result): JsonConverter
    /// writes `{"schema":null,"payload":…}` (or the bare JSON), inferring the JSON type from
    /// the value; the others write its text.
    pub fn encode_schemaless(&self, value: &Value) -> Result<Option<Bytes>, String> {
        if value.is_null() {
            return Ok(None);
        }
        match self {
            Converter::Json { schemas_enable, .. } => {
                let mut out = Vec::new();
                if *schemas_enable {
                    out.extend_from_slice(b"{\"schema\":null,\"payload\":");
                }
                write_schemaless(&mut out, value)?;
                if *schemas_enable {
                    out.push(b'}');
                }
                Ok(Some(out.into()))
            }
            Converter::String => Ok(to_java_string(None, value)),
            Converter::ByteArray => Ok(match value {
                Value::Bytes(b) => Some(b.clone()),
                other => to_java_string(None, other),
            }),
            Converter::BinaryData { delegate } => match value {
                Value::Bytes(b) => Ok(Some(b.clone())),
                other => binary_delegate(*delegate, other)?.encode_schemaless(other),
            },
            Converter::Avro(_) | Converter::Protobuf(_) => Err(AVRO_NEEDS_TOPIC.into()),
            // No schema: a Kafka null.
            Converter::CloudEvents(_) => Ok(None),
            Converter::JsonSchema(_) => Err(JSON_SCHEMA_NEEDS_TOPIC.into()),
        }
    }
}

/// A text value as a JSON string.
fn write_text(out: &mut Vec<u8>, text: &[u8]) -> Result<(), String> {
    write_string(
        out,
        std::str::from_utf8(text).map_err(|_| "text value is not valid UTF-8".to_owned())?,
    );
    Ok(())
}

/// A boolean, number, text or bytes value as Jackson writes its node (JsonConverter's and
/// the JSON Schema converter's): doubles in Java's layout, non-finite ones quoted
/// (`QUOTE_NON_NUMERIC_NUMBERS`), bytes as base64. False, writing nothing, for the others.
pub(super) fn write_scalar(out: &mut Vec<u8>, value: &Value) -> Result<bool, String> {
    match value {
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Int(i) => out.extend_from_slice(i.to_string().as_bytes()),
        Value::Float(f) if !f.is_finite() => {
            out.push(b'"');
            write_double(out, *f);
            out.push(b'"');
        }
        Value::Float(f) => write_double(out, *f),
        Value::String(s) => write_text(out, s)?,
        Value::Bytes(b) => write_base64(out, b),
        _ => return Ok(false),
    }
    Ok(true)
}

/// Bytes as JsonConverter writes them: a string of their standard base64.
pub(super) fn write_base64(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'"');
    out.extend_from_slice(
        base64::engine::general_purpose::STANDARD
            .encode(bytes)
            .as_bytes(),
    );
    out.push(b'"');
}

/// `BinaryDataConverter`'s delegate for a value that is not bytes, or its refusal.
fn binary_delegate(delegate: Option<Delegate>, value: &Value) -> Result<Converter, String> {
    delegate.map(Delegate::converter).ok_or_else(|| {
        let mut text = Vec::new();
        java_string(&mut text, None, value);
        format!(
            "A record of type '{}' requires a delegate.converter.type to be configured",
            String::from_utf8_lossy(&text)
        )
    })
}
/// A schema-registry converter writes a record's key or value ([`super::Data::encode_to`]),
/// for its topic's subject; nothing else.
const AVRO_NEEDS_TOPIC: &str =
    "a schema-registry converter (Avro, Protobuf) writes only record keys and values";
const JSON_SCHEMA_NEEDS_TOPIC: &str =
    "the JSON Schema converter writes only record keys and values";

/// JsonConverter.convertToJson with a null schema: the JSON type from the value (a map with
/// string keys an object, any other map an array of pairs).
fn write_schemaless(out: &mut Vec<u8>, value: &Value) -> Result<(), String> {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Decimal(d) => out.extend_from_slice(d.java_string().as_bytes()),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_schemaless(out, item)?;
            }
            out.push(b']');
        }
        Value::Map(entries) => {
            let object = entries.iter().all(|(k, _)| matches!(k, Value::String(_)));
            out.push(if object { b'{' } else { b'[' });
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                if !object {
                    out.push(b'[');
                }
                write_schemaless(out, k)?;
                out.push(if object { b':' } else { b',' });
                write_schemaless(out, v)?;
                if !object {
                    out.push(b']');
                }
            }
            out.push(if object { b'}' } else { b']' });
        }
        Value::Struct(_) => {
            return Err("a Struct without a schema cannot be converted".into());
        }
        // Booleans, numbers, text, bytes.
        _ => {
            write_scalar(out, value)?;
        }
    }
    Ok(())
}

impl HeaderConverter {
    /// Kafka Connect's class of this header converter.
    pub fn class(&self) -> &'static str {
        match self {
            HeaderConverter::Simple => "org.apache.kafka.connect.storage.SimpleHeaderConverter",
            HeaderConverter::Other(c) => c.class(),
        }
    }

    /// The bytes of a header's schema and value; a schemaless one is written as its value's
    /// own type says (Connect infers a schema from it).
    pub fn encode_data(&self, data: &super::record::Data) -> Result<Option<Bytes>, String> {
        match (&data.schema, &data.value) {
            (Some(schema), value) => self.encode(schema, value),
            (None, Value::Null) => Ok(None),
            (None, value) => match self {
                HeaderConverter::Simple => match value {
                    Value::Struct(_) | Value::Array(_) | Value::Map(_) => {
                        let mut out = Vec::new();
                        write_schemaless(&mut out, value)?;
                        Ok(Some(out.into()))
                    }
                    Value::Bytes(b) => Ok(Some(
                        base64::engine::general_purpose::STANDARD.encode(b).into(),
                    )),
                    other => Ok(to_java_string(None, other)),
                },
                HeaderConverter::Other(c) => match value {
                    Value::String(text) => c.encode_schemaless_string(text),
                    other => c.encode_schemaless(other),
                },
            },
        }
    }

    pub fn encode(&self, schema: &Schema, value: &Value) -> Result<Option<Bytes>, String> {
        match self {
            HeaderConverter::Simple => Ok(match value {
                Value::Null => None,
                Value::Struct(_) | Value::Array(_) | Value::Map(_) => {
                    let mut out = Vec::new();
                    write_value(&mut out, schema, value)?;
                    Some(out.into())
                }
                Value::Bytes(b) => Some(base64::engine::general_purpose::STANDARD.encode(b).into()),
                Value::Int(v) => match connect_date_millis(schema, *v) {
                    Some(millis) => Some(kafka_date_string(millis).into()),
                    None => to_java_string(Some(schema), value),
                },
                other => to_java_string(Some(schema), other),
            }),
            HeaderConverter::Other(c) => c.encode(Some(schema), value),
        }
    }
}

/// A value of Connect's logical Date (days), Time or Timestamp (milliseconds), in milliseconds
/// since the epoch: a `java.util.Date` in Connect.
fn connect_date_millis(schema: &Schema, value: i64) -> Option<i64> {
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
fn kafka_date_string(millis: i64) -> String {
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
fn to_java_string(schema: Option<&Schema>, value: &Value) -> Option<Bytes> {
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

fn java_string_in(out: &mut Vec<u8>, schema: Option<&Schema>, value: &Value, nested: bool) {
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
            let item_schema = match schema.map(|s| &s.kind) {
                Some(SchemaType::Array(items)) => Some(&**items),
                _ => None,
            };
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(b", ");
                }
                java_string_in(out, item_schema, item, true);
            }
            out.push(b']');
        }
        Value::Map(entries) => {
            let (keys, values) = match schema.map(|s| &s.kind) {
                Some(SchemaType::Map(k, v)) => (Some(&**k), Some(&**v)),
                _ => (None, None),
            };
            out.push(b'{');
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(b", ");
                }
                java_string_in(out, keys, k, true);
                out.push(b'=');
                java_string_in(out, values, v, true);
            }
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

/// JsonConverter.asJsonSchema: type, items/fields, optional, name, version, parameters,
/// default, in that order.
pub fn write_schema(out: &mut Vec<u8>, schema: &Schema) {
    write_schema_with_field(out, schema, None);
}

fn write_schema_with_field(out: &mut Vec<u8>, schema: &Schema, field: Option<&str>) {
    let type_name = match &schema.kind {
        SchemaType::Boolean => "boolean",
        SchemaType::Int8 => "int8",
        SchemaType::Int16 => "int16",
        SchemaType::Int32 => "int32",
        SchemaType::Int64 => "int64",
        SchemaType::Float32 => "float",
        SchemaType::Float64 => "double",
        SchemaType::String => "string",
        SchemaType::Bytes => "bytes",
        SchemaType::Array(_) => "array",
        SchemaType::Map(..) => "map",
        SchemaType::Struct(_) => "struct",
    };
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(type_name.as_bytes());
    out.push(b'"');
    match &schema.kind {
        SchemaType::Array(items) => {
            out.extend_from_slice(b",\"items\":");
            write_schema(out, items);
        }
        SchemaType::Map(keys, values) => {
            out.extend_from_slice(b",\"keys\":");
            write_schema(out, keys);
            out.extend_from_slice(b",\"values\":");
            write_schema(out, values);
        }
        SchemaType::Struct(fields) => {
            out.extend_from_slice(b",\"fields\":[");
            for (i, (name, field_schema)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_schema_with_field(out, field_schema, Some(name));
            }
            out.push(b']');
        }
        _ => {}
    }
    out.extend_from_slice(b",\"optional\":");
    out.extend_from_slice(if schema.optional { b"true" } else { b"false" });
    if let Some(name) = &schema.name {
        out.extend_from_slice(b",\"name\":");
        write_string(out, name);
    }
    if let Some(version) = schema.version {
        out.extend_from_slice(format!(",\"version\":{version}").as_bytes());
    }
    if let Some(doc) = &schema.doc {
        out.extend_from_slice(b",\"doc\":");
        write_string(out, doc);
    }
    if !schema.parameters.is_empty() {
        out.extend_from_slice(b",\"parameters\":{");
        for (i, (k, v)) in schema.parameters.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_string(out, k);
            out.push(b':');
            write_string(out, v);
        }
        out.push(b'}');
    }
    if let Some(default) = &schema.default {
        out.extend_from_slice(b",\"default\":");
        // A default is a valid value of its own schema.
        let _ = write_value(out, schema, default);
    }
    if let Some(field) = field {
        out.extend_from_slice(b",\"field\":");
        write_string(out, field);
    }
    out.push(b'}');
}

/// JsonConverter.convertToJson with Kafka Connect's default settings.
pub fn write_value(out: &mut Vec<u8>, schema: &Schema, value: &Value) -> Result<(), String> {
    Json::default().write(out, schema, value)
}

/// How a Connect value is written as JSON: by Kafka's JsonConverter, or as Confluent's JSON
/// Schema converter writes `JsonSchemaData.fromConnectData`'s tree.
#[derive(Debug, Clone, Copy)]
pub(super) struct Json {
    /// A null is written as its schema's default (JsonConverter's
    /// `replace.null.with.default`; always so in the JSON Schema converter).
    replace_null_with_default: bool,
    dialect: Dialect,
}

/// Where the two writers differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dialect {
    /// JsonConverter.convertToJson: a required null without a default is an error; a map
    /// whose keys are strings is an object, any other an array of `[key, value]` pairs; a
    /// BigDecimal is base64 like any bytes.
    Kafka,
    /// JsonSchemaData.fromConnectData: a required null without a default is Java's null
    /// (a struct leaves the field out, an array or a map writes `null`); a map is an object
    /// only when its keys are required strings, else an array of `{"key", "value"}` objects;
    /// a BigDecimal is base64 only under Connect's Decimal, a number otherwise.
    JsonSchema,
}

impl Default for Json {
    fn default() -> Self {
        Json {
            replace_null_with_default: true,
            dialect: Dialect::Kafka,
        }
    }
}

impl Json {
    /// Confluent's JSON Schema converter (7.0.16, `decimal.format=BASE64`).
    pub(super) const JSON_SCHEMA: Json = Json {
        replace_null_with_default: true,
        dialect: Dialect::JsonSchema,
    };

    /// JsonConverter.convertToJson; struct fields are read with `Struct.get` (the default
    /// replaces a null) or `Struct.getWithoutDefault` as `replace.null.with.default` says.
    fn write(self, out: &mut Vec<u8>, schema: &Schema, value: &Value) -> Result<(), String> {
        self.write_or_null(out, schema, value)
    }

    /// `value` written, or `null` where the JSON Schema dialect has no value.
    fn write_or_null(
        self,
        out: &mut Vec<u8>,
        schema: &Schema,
        value: &Value,
    ) -> Result<(), String> {
        if !self.write_node(out, schema, value)? {
            out.extend_from_slice(b"null");
        }
        Ok(())
    }

    /// Writes `value`'s JSON; false, writing nothing, for the JSON Schema dialect's Java
    /// null (never in Kafka's).
    pub(super) fn write_node(
        self,
        out: &mut Vec<u8>,
        schema: &Schema,
        value: &Value,
    ) -> Result<bool, String> {
        match value {
            Value::Null => {
                if let Some(default) = schema
                    .default
                    .as_ref()
                    .filter(|_| self.replace_null_with_default)
                {
                    return self.write_node(out, schema, default);
                }
                if !schema.optional {
                    return match self.dialect {
                        Dialect::Kafka => Err(
                            "null value for a field that is required and has no default value"
                                .into(),
                        ),
                        Dialect::JsonSchema => Ok(false),
                    };
                }
                out.extend_from_slice(b"null");
            }
            // Decimal.fromLogical: the unscaled value's bytes, base64 like any bytes.
            Value::Decimal(d) => match self.dialect {
                Dialect::Kafka => write_base64(out, &d.unscaled_bytes().unwrap_or_default()),
                Dialect::JsonSchema if schema.name.as_deref() == Some(DECIMAL) => {
                    let bytes = d
                        .unscaled_bytes()
                        .ok_or_else(|| format!("{} is not a Connect Decimal", d.java_string()))?;
                    write_base64(out, &bytes);
                }
                Dialect::JsonSchema => out.extend_from_slice(d.java_string().as_bytes()),
            },
            Value::Map(entries) => {
                let SchemaType::Map(key_schema, value_schema) = &schema.kind else {
                    return Err("map value for a non-map schema".into());
                };
                let object = matches!(key_schema.kind, SchemaType::String)
                    && (self.dialect == Dialect::Kafka || !key_schema.optional);
                // What stands before, between and after an entry's key and value.
                let (open, between, close): (&[u8], &[u8], &[u8]) = match (object, self.dialect) {
                    (true, _) => (b"", b":", b""),
                    (false, Dialect::Kafka) => (b"[", b",", b"]"),
                    (false, Dialect::JsonSchema) => (b"{\"key\":", b",\"value\":", b"}"),
                };
                out.push(if object { b'{' } else { b'[' });
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(open);
                    match (object, self.dialect) {
                        (true, Dialect::JsonSchema) => {
                            let Some(key) = k.as_str() else {
                                return Err("a map key is not a string".into());
                            };
                            write_string(out, key);
                        }
                        _ => self.write_or_null(out, key_schema, k)?,
                    }
                    out.extend_from_slice(between);
                    self.write_or_null(out, value_schema, v)?;
                    out.extend_from_slice(close);
                }
                out.push(if object { b'}' } else { b']' });
            }
            Value::Array(items) => {
                let SchemaType::Array(item_schema) = &schema.kind else {
                    return Err("array value for a non-array schema".into());
                };
                out.push(b'[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    // ArrayNode.add(null) adds a null node.
                    self.write_or_null(out, item_schema, item)?;
                }
                out.push(b']');
            }
            Value::Struct(values) => {
                let SchemaType::Struct(fields) = &schema.kind else {
                    return Err("struct value for a non-struct schema".into());
                };
                out.push(b'{');
                let mut first = true;
                for (i, (name, field_schema)) in fields.iter().enumerate() {
                    let mark = out.len();
                    if !first {
                        out.push(b',');
                    }
                    write_string(out, name);
                    out.push(b':');
                    // A field without a value is left out.
                    if self.write_node(out, field_schema, values.get(i).unwrap_or(&Value::Null))? {
                        first = false;
                    } else {
                        out.truncate(mark);
                    }
                }
                out.push(b'}');
            }
            // Booleans, numbers, text, bytes.
            _ => {
                write_scalar(out, value)?;
            }
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_dates_in_headers_are_written_as_kafkas_values_formats_them() {
        let named = |name: &str| {
            let mut schema = Schema::new(SchemaType::Int64, true);
            schema.name = Some(name.into());
            schema
        };
        let header = |name: &str, v: i64| {
            let bytes = HeaderConverter::Simple
                .encode(&named(name), &Value::Int(v))
                .unwrap()
                .unwrap();
            String::from_utf8(bytes.to_vec()).unwrap()
        };
        // What Debezium 3.6 + Kafka Connect 4.3 wrote for time '23:59:59.999' under
        // time.precision.mode=connect.
        assert_eq!(
            header("org.apache.kafka.connect.data.Time", 86_399_999),
            "23:59:59.999Z"
        );
        assert_eq!(
            header("org.apache.kafka.connect.data.Date", 20_516),
            "2026-03-04"
        );
        assert_eq!(
            header("org.apache.kafka.connect.data.Timestamp", 1_772_600_767_120),
            "2026-03-04T05:06:07.120Z"
        );
        // Midnight is a date, and anything under a day since the epoch a time of day.
        assert_eq!(
            header("org.apache.kafka.connect.data.Timestamp", 1_772_582_400_000),
            "2026-03-04"
        );
        assert_eq!(
            header("org.apache.kafka.connect.data.Timestamp", -1_000),
            "23:59:59.000Z"
        );
        // Debezium's own time types stay numbers.
        assert_eq!(
            header("io.debezium.time.MicroTime", 86_399_999_999),
            "86399999999"
        );
    }

    fn json_schema() -> Schema {
        Schema::new(SchemaType::String, false).named("io.debezium.data.Json", Some(1))
    }

    fn text(b: &Option<Bytes>) -> &str {
        std::str::from_utf8(b.as_ref().unwrap()).unwrap()
    }

    #[test]
    fn jsonb_payload_under_each_converter() {
        let payload = Value::text(r#"{"id": 1}"#);
        let s = json_schema();
        let off = Converter::Json {
            schemas_enable: false,
            replace_null_with_default: true,
        };
        let on = Converter::Json {
            schemas_enable: true,
            replace_null_with_default: true,
        };
        assert_eq!(
            text(&off.encode(Some(&s), &payload).unwrap()),
            r#""{\"id\": 1}""#
        );
        assert_eq!(
            text(&on.encode(Some(&s), &payload).unwrap()),
            r#"{"schema":{"type":"string","optional":false,"name":"io.debezium.data.Json","version":1},"payload":"{\"id\": 1}"}"#
        );
        assert_eq!(
            text(&Converter::String.encode(Some(&s), &payload).unwrap()),
            r#"{"id": 1}"#
        );
        assert_eq!(
            text(&Converter::ByteArray.encode(Some(&s), &payload).unwrap()),
            r#"{"id": 1}"#
        );
    }

    #[test]
    fn null_values_and_tombstones() {
        let s = Schema::new(SchemaType::String, true).named("io.debezium.data.Json", Some(1));
        let off = Converter::Json {
            schemas_enable: false,
            replace_null_with_default: true,
        };
        let on = Converter::Json {
            schemas_enable: true,
            replace_null_with_default: true,
        };
        assert_eq!(text(&off.encode(Some(&s), &Value::Null).unwrap()), "null");
        assert_eq!(
            text(&on.encode(Some(&s), &Value::Null).unwrap()),
            r#"{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":null}"#
        );
        assert_eq!(off.encode(None, &Value::Null).unwrap(), None);
        assert_eq!(
            Converter::String.encode(Some(&s), &Value::Null).unwrap(),
            None
        );
    }

    /// Kafka's JsonConverter.convertToJson (3.7+): a struct field is read with `Struct.get`
    /// (null → the field's default) unless `replace.null.with.default=false`, which reads
    /// it with `getWithoutDefault` and writes null; a required field without a value and
    /// without a default is an error either way (`DataException`).
    #[test]
    fn replace_null_with_default_decides_what_a_null_field_becomes() {
        let mut region = Schema::new(SchemaType::String, true);
        region.default = Some(Value::text("eu"));
        let envelope = Schema::new(SchemaType::Struct(vec![("region".into(), region)]), false);
        let row = Value::Struct(vec![Value::Null]);
        let json = |replace_null_with_default| Converter::Json {
            schemas_enable: false,
            replace_null_with_default,
        };
        assert_eq!(
            text(&json(true).encode(Some(&envelope), &row).unwrap()),
            r#"{"region":"eu"}"#
        );
        assert_eq!(
            text(&json(false).encode(Some(&envelope), &row).unwrap()),
            r#"{"region":null}"#
        );
        let mut required = Schema::new(SchemaType::String, false);
        required.default = Some(Value::text("eu"));
        let strict = Schema::new(SchemaType::Struct(vec![("region".into(), required)]), false);
        assert!(json(true).encode(Some(&strict), &row).is_ok());
        assert!(json(false).encode(Some(&strict), &row).is_err());
    }

    #[test]
    fn envelope_struct_schema_lists_fields_with_their_names_last() {
        let envelope = Schema::new(
            SchemaType::Struct(vec![
                ("payload".into(), json_schema()),
                ("eventType".into(), Schema::new(SchemaType::String, false)),
            ]),
            false,
        )
        .named("orders.public.outbox.Order.Value", None);
        let value = Value::Struct(vec![Value::text("{}"), Value::text("OrderCreated")]);
        let on = Converter::Json {
            schemas_enable: true,
            replace_null_with_default: true,
        };
        assert_eq!(
            text(&on.encode(Some(&envelope), &value).unwrap()),
            concat!(
                r#"{"schema":{"type":"struct","fields":[{"type":"string","optional":false,"name":"io.debezium.data.Json","version":1,"field":"payload"},"#,
                r#"{"type":"string","optional":false,"field":"eventType"}],"optional":false,"name":"orders.public.outbox.Order.Value"},"#,
                r#""payload":{"payload":"{}","eventType":"OrderCreated"}}"#
            )
        );
        assert_eq!(
            text(&struct_to_java_string(&envelope, &value)),
            "Struct{payload={},eventType=OrderCreated}"
        );
    }

    /// StringConverter writes `Struct.toString()`: field names from the schema, nested
    /// structs alike, null fields left out; a Decimal as `BigDecimal.toString()`.
    #[test]
    fn string_converter_prints_expanded_payloads_with_field_names() {
        let inner = Schema::new(
            SchemaType::Struct(vec![("sku".into(), Schema::new(SchemaType::String, true))]),
            true,
        );
        let payload = Schema::new(
            SchemaType::Struct(vec![
                ("id".into(), Schema::new(SchemaType::Int64, true)),
                ("note".into(), Schema::new(SchemaType::String, true)),
                ("item".into(), inner),
            ]),
            true,
        );
        let value = Value::Struct(vec![
            Value::Int(7),
            Value::Null,
            Value::Struct(vec![Value::text("A-1")]),
        ]);
        assert_eq!(
            text(&Converter::String.encode(Some(&payload), &value).unwrap()),
            "Struct{id=7,item=Struct{sku=A-1}}"
        );
        // A bytea within a struct is Debezium's ByteBuffer, printed as such.
        let with_bytes = Schema::new(
            SchemaType::Struct(vec![(
                "payload".into(),
                Schema::new(SchemaType::Bytes, true),
            )]),
            true,
        );
        assert_eq!(
            text(
                &Converter::String
                    .encode(
                        Some(&with_bytes),
                        &Value::Struct(vec![Value::Bytes(b"null".to_vec().into())])
                    )
                    .unwrap()
            ),
            "Struct{payload=java.nio.HeapByteBuffer[pos=0 lim=4 cap=4]}"
        );
        let decimal = Value::Decimal(super::super::Numeric::parse("0.00000012").unwrap());
        assert_eq!(
            text(&Converter::String.encode(Some(&payload), &decimal).unwrap()),
            "1.2E-7"
        );
    }

    #[test]
    fn headers_are_plain_text_by_default() {
        let uuid = Schema::new(SchemaType::String, false).named("io.debezium.data.Uuid", Some(1));
        let id = Value::text("6b1c0e4e-0000-4000-8000-000000000001");
        assert_eq!(
            text(&HeaderConverter::Simple.encode(&uuid, &id).unwrap()),
            "6b1c0e4e-0000-4000-8000-000000000001"
        );
        let int = Schema::new(SchemaType::Int64, false);
        assert_eq!(
            text(
                &HeaderConverter::Simple
                    .encode(&int, &Value::Int(42))
                    .unwrap()
            ),
            "42"
        );
        assert_eq!(
            text(
                &HeaderConverter::Other(Converter::Json {
                    schemas_enable: false,
                    replace_null_with_default: true
                })
                .encode(&uuid, &id)
                .unwrap()
            ),
            "\"6b1c0e4e-0000-4000-8000-000000000001\""
        );
    }
}

#[cfg(test)]
mod binary_data_tests {
    use super::*;
    use bytes::Bytes;

    /// Debezium's BinaryDataConverter: bytes as they are, a tombstone as null, anything
    /// else through its delegate, refused without one.
    #[test]
    fn binary_data_writes_bytes_and_delegates_the_rest() {
        let bytes = Value::Bytes(Bytes::from_static(b"\x00\xffraw"));
        let plain = Converter::BinaryData { delegate: None };
        let schema = Schema::new(SchemaType::Bytes, true);
        assert_eq!(
            plain.encode(Some(&schema), &bytes).unwrap().as_deref(),
            Some(&b"\x00\xffraw"[..])
        );
        assert_eq!(plain.encode(None, &Value::Null).unwrap(), None);
        let text = Schema::new(SchemaType::String, false);
        let err = plain.encode(Some(&text), &Value::text("x")).unwrap_err();
        assert!(err.contains("requires a delegate.converter.type"), "{err}");
        let delegating = Converter::BinaryData {
            delegate: Some(Delegate::Json {
                schemas_enable: false,
                replace_null_with_default: true,
            }),
        };
        assert_eq!(
            delegating
                .encode(Some(&text), &Value::text("x"))
                .unwrap()
                .as_deref(),
            Some(&b"\"x\""[..])
        );
    }
}
