//! Confluent's schema-registry JSON Schema converter, byte for byte:
//! `io.confluent.connect.json.JsonSchemaConverter` 7.0.16 (`JsonSchemaData`, the JSON Schema
//! provider and `AbstractKafkaJsonSchemaSerializer`, everit-json-schema 1.14.3, org.json
//! 20231013, Jackson). A Connect schema becomes a JSON Schema document (Connect's types as
//! `connect.type`, names as `title`, docs as `description`, versions, parameters and field
//! indexes as `connect.*` keywords, optional schemas as `oneOf` with `{"type":"null"}`),
//! registered with (or looked up in) a schema registry as `schemaType: JSON`; the value is
//! written as Jackson writes `JsonSchemaData.fromConnectData`'s tree, after Confluent's
//! framing (magic byte 0, four-byte schema id).
//!
//! Where the text comes from: `JsonSchemaData.fromConnectSchema` builds everit schema
//! objects; `JsonSchema(Schema)` reads `schema.toString()` (everit's `ToStringVisitor`) with
//! Jackson and `canonicalString()` writes that tree back compactly: what is registered.
//! everit keeps properties and `unprocessedProperties` in `java.util.HashMap`s and writes
//! `connect.parameters` through org.json's `JSONObject` (a `HashMap` too), so their keys come
//! in Java's hash order. Numbers in the text went through org.json's `numberToString`, then
//! Jackson's reading with `USE_BIG_DECIMAL_FOR_FLOATS` and exact big decimals.
//!
//! Later 7.x releases differ: 7.3.14, 7.4.11, 7.5.10 and later type a Decimal (BASE64) as
//! `"type":"string"` where 7.0.16 writes `"type":"number"`.
//!
//! The router does no I/O: the registry is a
//! [`SchemaRegistry`](super::registry::SchemaRegistry) the relay provides.

use super::data::{Schema, SchemaType, Value};
use super::json::{write_double, write_string_as_text};
use super::json_value::Json;
use super::pg_text::Numeric;
use super::postgres_types::{java_hash_map_order, java_hash_map_order_in};
use super::registry::{
    confluent_prefix, RegistrySerde, SchemaCache, SchemaFormat, SchemaText, SerdeError,
};
use base64::Engine;
use bytes::Bytes;
use std::sync::Arc;

pub const JSON_SCHEMA_CONVERTER: &str = "io.confluent.connect.json.JsonSchemaConverter";

const DECIMAL: &str = "org.apache.kafka.connect.data.Decimal";
/// `JsonSchemaData.NAMESPACE`: parameters under it are the converter's own, not written.
const NAMESPACE: &str = "io.confluent.connect.json";
const ONE_OF: &str = "io.confluent.connect.json.OneOf";
const ENUM: &str = "io.confluent.connect.json.Enum";
const ID: &str = "io.confluent.connect.json.Id";

/// A configured JSON Schema converter (one for keys, one for values).
#[derive(Debug, PartialEq, Eq)]
pub struct JsonSchemaConverter {
    pub serde: RegistrySerde,
    /// `object.additional.properties` (default true): false writes
    /// `"additionalProperties":false` in every struct's object schema.
    pub additional_properties: bool,
    /// The schemas translated lately (`fromConnectSchemaCache`).
    translated: SchemaCache<Result<JsonSchemaText, String>>,
}

/// Connect's schema as a JSON Schema document: its canonical text and its `title` (what
/// the record name strategies name the subject after).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonSchemaText {
    pub json: String,
    pub title: Option<String>,
}

impl JsonSchemaConverter {
    pub fn new(serde: RegistrySerde) -> Self {
        Self {
            serde,
            additional_properties: true,
            translated: SchemaCache::new(),
        }
    }

    fn translate(&self, schema: &Schema) -> Arc<Result<JsonSchemaText, String>> {
        self.translated
            .get(schema, || json_schema(schema, self.additional_properties))
    }

    /// The subject the schema is registered under (the record name strategies name it after
    /// the schema's `title`, and refuse a schema without one).
    pub fn subject(&self, topic: &str, schema: &JsonSchemaText) -> Result<String, String> {
        self.serde.subject(topic, schema.title.as_deref())
    }

    /// The bytes of a key or value written to `topic`; `None` for a Kafka null.
    pub fn encode(
        &self,
        topic: &str,
        schema: Option<&Schema>,
        value: &Value,
    ) -> Result<Option<Bytes>, SerdeError> {
        let failed = |m: String| {
            SerdeError::Record(format!(
                "Converting Kafka Connect data to byte[] failed due to serialization error of topic {topic}: {m}"
            ))
        };
        let Some(schema) = schema else {
            return match value {
                Value::Null => Ok(None),
                _ => Err(failed(
                    "a value without a schema is not written by outbox-relay's JSON Schema converter"
                        .into(),
                )),
            };
        };
        let mut body = Vec::with_capacity(64);
        // A null the schema gives no default and does not allow is Java's null: no record
        // value, nothing registered.
        if !Json::JSON_SCHEMA
            .write_node(&mut body, schema, value)
            .map_err(failed)?
        {
            return Ok(None);
        }
        let translated = self.translate(schema);
        let json = translated
            .as_ref()
            .as_ref()
            .map_err(|e| failed(e.clone()))?;
        let text = SchemaText {
            format: SchemaFormat::Json,
            text: &json.json,
            references: &[],
        };
        let id = self.serde.id(topic, json.title.as_deref(), &text, failed)?;
        let mut out = Vec::with_capacity(body.len() + 5);
        out.extend_from_slice(&confluent_prefix(id).map_err(failed)?);
        out.extend_from_slice(&body);
        Ok(Some(out.into()))
    }
}

// ---------------------------------------------------------------------------------------
// JsonSchemaData.fromConnectSchema, as everit writes it and Jackson rewrites it
// ---------------------------------------------------------------------------------------

/// Connect's schema as the JSON Schema text Confluent's converter registers.
pub fn json_schema(schema: &Schema, additional_properties: bool) -> Result<JsonSchemaText, String> {
    let json = FromConnect {
        additional_properties,
    }
    .schema(schema, None)?;
    Ok(JsonSchemaText {
        json,
        title: if schema.optional {
            // An optional schema is a `oneOf` without a title of its own.
            None
        } else {
            schema.name.as_deref().map(str::to_owned)
        },
    })
}

/// The everit schema kinds `fromConnectSchema` builds, with what `ToStringVisitor` writes
/// for each besides the keywords every schema has.
enum Kind {
    /// `NumberSchema`: `"type":"integer"` or `"type":"number"`, first.
    Number { integer: bool },
    /// `StringSchema`: `"type":"string"`, first.
    String,
    /// `BooleanSchema`: `"type":"boolean"`, last.
    Boolean,
    /// `ArraySchema`: `"type":"array"` first, `"items"` last.
    Array(String),
    /// `ObjectSchema`: `"type":"object"` and `"additionalProperties":false` first, then the
    /// common keywords, then the schema of additional properties and the properties.
    Object {
        closed: bool,
        values: Option<String>,
        properties: Vec<(String, String)>,
    },
    /// `CombinedSchema` (`oneOf`): the common keywords, then the subschemas.
    OneOf(Vec<String>),
}

/// The keywords every everit schema writes (`ToStringVisitor.visitSchema`): title,
/// description, default, then its unprocessed properties (`connect.*`) in hash order.
#[derive(Default)]
struct Common {
    title: Option<String>,
    description: Option<String>,
    default: Option<String>,
    index: Option<usize>,
    version: Option<i32>,
    connect_type: Option<&'static str>,
    parameters: Option<String>,
}

impl Common {
    fn write(&self, out: &mut Vec<(String, String)>) {
        if let Some(t) = &self.title {
            out.push(("title".into(), text(t)));
        }
        if let Some(d) = &self.description {
            out.push(("description".into(), text(d)));
        }
        if let Some(d) = &self.default {
            out.push(("default".into(), d.clone()));
        }
        // `new HashMap<>(unprocessedProps)` holds at most these four keys, so at most eight
        // buckets, where (ties kept in the sixteen-bucket source order) they always come as
        // connect.index (0), connect.version (1), connect.type (1 or 5), connect.parameters.
        if let Some(i) = self.index {
            out.push(("connect.index".into(), i.to_string()));
        }
        if let Some(v) = self.version {
            out.push(("connect.version".into(), v.to_string()));
        }
        if let Some(t) = self.connect_type {
            out.push(("connect.type".into(), text(t)));
        }
        if let Some(p) = &self.parameters {
            out.push(("connect.parameters".into(), p.clone()));
        }
    }
}

fn render(kind: Kind, common: &Common) -> String {
    let mut keys: Vec<(String, String)> = Vec::new();
    match kind {
        Kind::Number { integer } => {
            keys.push((
                "type".into(),
                text(if integer { "integer" } else { "number" }),
            ));
            common.write(&mut keys);
        }
        Kind::String => {
            keys.push(("type".into(), text("string")));
            common.write(&mut keys);
        }
        Kind::Boolean => {
            common.write(&mut keys);
            keys.push(("type".into(), text("boolean")));
        }
        Kind::Array(items) => {
            keys.push(("type".into(), text("array")));
            common.write(&mut keys);
            keys.push(("items".into(), items));
        }
        Kind::Object {
            closed,
            values,
            properties,
        } => {
            keys.push(("type".into(), text("object")));
            if closed {
                keys.push(("additionalProperties".into(), "false".into()));
            }
            common.write(&mut keys);
            if let Some(values) = values {
                keys.push(("additionalProperties".into(), values));
            }
            if !properties.is_empty() {
                keys.push(("properties".into(), object(java_hash_map_order(properties))));
            }
        }
        Kind::OneOf(subschemas) => {
            common.write(&mut keys);
            keys.push(("oneOf".into(), format!("[{}]", subschemas.join(","))));
        }
    }
    object(keys)
}

/// `{"k":v,...}` from keys and JSON texts.
fn object(keys: Vec<(String, String)>) -> String {
    let mut out = Vec::new();
    out.push(b'{');
    for (i, (k, v)) in keys.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_string_as_text(&mut out, k);
        out.push(b':');
        out.extend_from_slice(v.as_bytes());
    }
    out.push(b'}');
    String::from_utf8(out).expect("JSON text is UTF-8")
}

/// A string as Jackson writes it into the canonical text (`writeValueAsString`).
fn text(s: &str) -> String {
    let mut out = Vec::new();
    write_string_as_text(&mut out, s);
    String::from_utf8(out).expect("UTF-8")
}

const NULL_SCHEMA: &str = r#"{"type":"null"}"#;

struct FromConnect {
    additional_properties: bool,
}

impl FromConnect {
    /// `rawSchemaFromConnectSchema(ctx, schema, index, false)`.
    fn schema(&self, schema: &Schema, index: Option<usize>) -> Result<String, String> {
        if schema
            .parameters
            .iter()
            .any(|(k, _)| &**k == ID || &**k == ENUM)
            || schema.name.as_deref() == Some(ONE_OF)
        {
            return Err(format!(
                "schemas with {NAMESPACE}.* names or parameters (ids, enums, oneOf) are not written by outbox-relay"
            ));
        }
        let mut common = Common::default();
        let kind = match &schema.kind {
            SchemaType::Int8 => integer(&mut common, "int8"),
            SchemaType::Int16 => integer(&mut common, "int16"),
            SchemaType::Int32 => integer(&mut common, "int32"),
            SchemaType::Int64 => integer(&mut common, "int64"),
            SchemaType::Float32 => {
                common.connect_type = Some("float32");
                Kind::Number { integer: false }
            }
            SchemaType::Float64 => {
                common.connect_type = Some("float64");
                Kind::Number { integer: false }
            }
            SchemaType::Boolean => Kind::Boolean,
            SchemaType::String => Kind::String,
            SchemaType::Bytes => {
                common.connect_type = Some("bytes");
                if schema.name.as_deref() == Some(DECIMAL) {
                    Kind::Number { integer: false }
                } else {
                    Kind::String
                }
            }
            SchemaType::Array(items) => Kind::Array(self.schema(items, None)?),
            SchemaType::Map(keys, values) => {
                common.connect_type = Some("map");
                if matches!(keys.kind, SchemaType::String) && !keys.optional {
                    Kind::Object {
                        closed: false,
                        values: Some(self.schema(values, None)?),
                        properties: Vec::new(),
                    }
                } else {
                    let entry = Kind::Object {
                        closed: false,
                        values: None,
                        properties: vec![
                            ("key".into(), self.schema(keys, Some(0))?),
                            ("value".into(), self.schema(values, Some(1))?),
                        ],
                    };
                    Kind::Array(render(entry, &Common::default()))
                }
            }
            SchemaType::Struct(_) if schema.optional => {
                let mut required = schema.clone();
                required.optional = false;
                let inner = self.schema(&required, None)?;
                common.index = index;
                return Ok(render(
                    Kind::OneOf(vec![NULL_SCHEMA.into(), inner]),
                    &common,
                ));
            }
            SchemaType::Struct(fields) => Kind::Object {
                closed: !self.additional_properties,
                values: None,
                properties: fields
                    .iter()
                    .enumerate()
                    .map(|(i, (name, field))| Ok((name.to_string(), self.schema(field, Some(i))?)))
                    .collect::<Result<_, String>>()?,
            },
        };
        common.title = schema.name.as_deref().map(str::to_owned);
        common.version = schema.version;
        common.description = schema.doc.as_deref().map(str::to_owned);
        let parameters: Vec<(String, &str)> = schema
            .parameters
            .iter()
            .filter(|(k, _)| !k.starts_with(NAMESPACE))
            .map(|(k, v)| (k.to_string(), &**v))
            .collect();
        if !parameters.is_empty() {
            common.parameters = Some(parameters_json(parameters));
        }
        if let Some(default) = &schema.default {
            common.default = default_json(schema, default)?;
        }
        if schema.optional {
            let inner = render(kind, &common);
            let wrapper = Common {
                index,
                ..Common::default()
            };
            return Ok(render(
                Kind::OneOf(vec![NULL_SCHEMA.into(), inner]),
                &wrapper,
            ));
        }
        common.index = index;
        Ok(render(kind, &common))
    }
}

fn integer(common: &mut Common, connect_type: &'static str) -> Kind {
    common.connect_type = Some(connect_type);
    Kind::Number { integer: true }
}

/// `connect.parameters`: `Collectors.toMap` (a `HashMap`) of the parameters, written by
/// org.json as `new JSONObject(map)`, a `HashMap` sized for them: `new HashMap<>(n)` grown
/// while it holds more than 3/4 of its buckets.
fn parameters_json(parameters: Vec<(String, &str)>) -> String {
    let n = parameters.len();
    let mut capacity = n.max(1).next_power_of_two();
    while n > capacity * 3 / 4 {
        capacity *= 2;
    }
    let ordered = java_hash_map_order_in(java_hash_map_order(parameters), capacity);
    object(ordered.into_iter().map(|(k, v)| (k, text(v))).collect())
}

/// `toJsonSchemaValue(fromConnectData(schema, default))` as written in the text: bytes as
/// their base64 text, numbers as org.json prints them and Jackson reads them back; `None`
/// for a null. Defaults of arrays, maps and structs are refused.
fn default_json(schema: &Schema, value: &Value) -> Result<Option<String>, String> {
    let unsupported = || {
        format!(
            "a {} schema's default value is not written by outbox-relay's JSON Schema converter",
            schema.kind.type_name()
        )
    };
    Ok(Some(match value {
        Value::Null => return Ok(None),
        Value::Boolean(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => float_text(*f).ok_or_else(unsupported)?,
        Value::String(s) => {
            text(std::str::from_utf8(s).map_err(|_| "a default is not valid UTF-8".to_owned())?)
        }
        Value::Bytes(b) => format!("\"{}\"", base64(b)),
        Value::Decimal(d) if schema.name.as_deref() == Some(DECIMAL) => format!(
            "\"{}\"",
            base64(&d.unscaled_bytes().ok_or_else(unsupported)?)
        ),
        Value::Decimal(_) => return Err(unsupported()),
        Value::Array(_) | Value::Map(_) | Value::Struct(_) => return Err(unsupported()),
    }))
}

/// A float default: `Double.toString`, then org.json's `numberToString` (trailing zeros and
/// point dropped from plain notation), then Jackson's reading (an integer, or an exact
/// `BigDecimal` written with `toString()`). `None` for what has no such text (non-finite,
/// positive exponents: `1.0E10` becomes `1.0E+10`).
fn float_text(f: f64) -> Option<String> {
    if !f.is_finite() {
        return None;
    }
    let mut out = Vec::new();
    write_double(&mut out, f);
    let java = String::from_utf8(out).ok()?;
    if let Some((mantissa, exponent)) = java.split_once('E') {
        let exponent: i64 = exponent.parse().ok()?;
        if exponent > 0 {
            return None;
        }
        let (negative, mantissa) = match mantissa.strip_prefix('-') {
            Some(m) => (true, m),
            None => (false, mantissa),
        };
        let (int, fraction) = mantissa.split_once('.')?;
        let scale = u32::try_from(fraction.len() as i64 - exponent).ok()?;
        let sign = if negative { "-" } else { "" };
        return Some(
            Numeric::Finite {
                unscaled: format!("{sign}{int}{fraction}"),
                scale,
            }
            .java_string(),
        );
    }
    let trimmed = java.trim_end_matches('0').trim_end_matches('.');
    // "-0" is read back as the integer 0.
    Some(if trimmed == "-0" {
        "0".into()
    } else {
        trimmed.into()
    })
}

fn base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect::registry::fixed::FixedRegistry;
    use crate::connect::registry::SubjectNameStrategy;

    fn converter(id: u64) -> (JsonSchemaConverter, Arc<FixedRegistry>) {
        let (serde, registry) = FixedRegistry::serde(id);
        (JsonSchemaConverter::new(serde), registry)
    }

    fn s(kind: SchemaType, optional: bool) -> Schema {
        Schema::new(kind, optional)
    }

    /// Writes `value` with a registry answering `id`: the framing's hex, the JSON after it,
    /// the subject and the schema registered.
    fn write(
        id: u64,
        topic: &str,
        schema: &Schema,
        value: &Value,
    ) -> (String, String, String, String) {
        let (c, registry) = converter(id);
        let bytes = c.encode(topic, Some(schema), value).unwrap().unwrap();
        let asked = registry.last().unwrap();
        assert_eq!((asked.format, asked.references), (SchemaFormat::Json, 0));
        let framing: String = bytes[..5].iter().map(|x| format!("{x:02x}")).collect();
        (
            framing,
            String::from_utf8(bytes[5..].to_vec()).unwrap(),
            asked.subject,
            asked.text,
        )
    }

    // The expected documents and bytes below are read off Confluent's source, since its
    // JSON Schema converter jars are not available here: confluentinc/schema-registry at tag
    // v7.0.16 (8206983ebbe16e8906b6eb436dd81d19470a69e9), json-schema-converter's
    // JsonSchemaData.java (rawSchemaFromConnectSchema, fromConnectData, toJsonSchemaValue)
    // and JsonSchemaConverter.java, json-schema-provider's JsonSchema.java (the canonical
    // string: Jackson's compact rewrite of everit's toString) and the serializer's
    // AbstractKafkaJsonSchemaSerializer.serializeImpl; everit-org/json-schema at tag 1.14.3
    // (30f43360f903d4af6554ee853946acc64abe0fd2): ToStringVisitor.java and Visitor.java (the
    // key order of each schema kind), Schema.java and ObjectSchema.java (HashMaps),
    // CombinedSchema.java; stleary/JSON-java 20231013: JSONObject(Map), numberToString.
    // Key orders in HashMaps are Java's String.hashCode buckets, computed by hand.

    #[test]
    fn a_struct_with_an_optional_field() {
        let schema = s(
            SchemaType::Struct(vec![
                ("id".into(), s(SchemaType::Int64, false)),
                ("note".into(), s(SchemaType::String, true)),
            ]),
            false,
        )
        .named("t.Order", None);
        let value = Value::Struct(vec![Value::Int(42), Value::text("hi")]);
        let (framing, json, subject, registered) = write(1, "orders", &schema, &value);
        assert_eq!(framing, "0000000001");
        assert_eq!(json, r#"{"id":42,"note":"hi"}"#);
        assert_eq!(subject, "orders-value");
        assert_eq!(
            registered,
            r#"{"type":"object","title":"t.Order","properties":{"note":{"connect.index":1,"oneOf":[{"type":"null"},{"type":"string"}]},"id":{"type":"integer","connect.index":0,"connect.type":"int64"}}}"#
        );
    }

    #[test]
    fn every_connect_type() {
        let decimal = |scale: &str, precision: Option<&str>, optional| {
            let mut d = s(SchemaType::Bytes, optional).named(DECIMAL, Some(1));
            d.parameters.push(("scale".into(), scale.into()));
            if let Some(p) = precision {
                d.parameters
                    .push(("connect.decimal.precision".into(), p.into()));
            }
            d
        };
        let nested = s(
            SchemaType::Struct(vec![
                ("sku".into(), s(SchemaType::String, false)),
                ("qty".into(), s(SchemaType::Int32, true)),
            ]),
            true,
        );
        let mut region = s(SchemaType::String, true);
        region.default = Some(Value::text("eu"));
        let mut flag = s(SchemaType::Boolean, true);
        flag.default = Some(Value::Boolean(true));
        flag.doc = Some("a flag".into());
        let mut envelope = s(
            SchemaType::Struct(vec![
                ("i8".into(), s(SchemaType::Int8, false)),
                ("i16".into(), s(SchemaType::Int16, false)),
                ("i32".into(), s(SchemaType::Int32, false)),
                ("i64".into(), s(SchemaType::Int64, false)),
                ("f32".into(), s(SchemaType::Float32, false)),
                ("f64".into(), s(SchemaType::Float64, false)),
                ("b".into(), s(SchemaType::Boolean, false)),
                ("s".into(), s(SchemaType::String, false)),
                ("raw".into(), s(SchemaType::Bytes, true)),
                ("amount".into(), decimal("2", Some("10"), true)),
                ("neg".into(), decimal("0", None, false)),
                (
                    "day".into(),
                    s(SchemaType::Int32, false)
                        .named("org.apache.kafka.connect.data.Date", Some(1)),
                ),
                (
                    "tm".into(),
                    s(SchemaType::Int32, false)
                        .named("org.apache.kafka.connect.data.Time", Some(1)),
                ),
                (
                    "ts".into(),
                    s(SchemaType::Int64, false)
                        .named("org.apache.kafka.connect.data.Timestamp", Some(1)),
                ),
                (
                    "tags".into(),
                    s(
                        SchemaType::Array(Box::new(s(SchemaType::String, false))),
                        true,
                    ),
                ),
                (
                    "attrs".into(),
                    s(
                        SchemaType::Map(
                            Box::new(s(SchemaType::String, false)),
                            Box::new(s(SchemaType::Int32, true)),
                        ),
                        false,
                    ),
                ),
                (
                    "byid".into(),
                    s(
                        SchemaType::Map(
                            Box::new(s(SchemaType::Int32, false)),
                            Box::new(s(SchemaType::String, false)),
                        ),
                        false,
                    ),
                ),
                ("item".into(), nested),
                (
                    "payload".into(),
                    s(SchemaType::String, false).named("io.debezium.data.Json", Some(1)),
                ),
                ("region".into(), region),
                ("missing".into(), s(SchemaType::Int64, true)),
                ("flag".into(), flag),
            ]),
            false,
        )
        .named("dbserver1.public.outbox.orders.Value", Some(3));
        envelope.doc = Some("envelope".into());
        let value = Value::Struct(vec![
            Value::Int(-5),
            Value::Int(300),
            Value::Int(-70000),
            Value::Int(1_234_567_890_123),
            Value::Float(1.5),
            Value::Float(-2.25),
            Value::Boolean(true),
            Value::text("héllo"),
            Value::Bytes(Bytes::from_static(&[0, 1, 255])),
            Value::Decimal(Numeric::parse("-123.45").unwrap()),
            Value::Decimal(Numeric::parse("-129").unwrap()),
            Value::Int(20516),
            Value::Int(86_399_999),
            Value::Int(1_772_600_767_120),
            Value::Array(vec![Value::text("x"), Value::text("yz")]),
            Value::Map(vec![
                (Value::text("a"), Value::Int(1)),
                (Value::text("b"), Value::Null),
            ]),
            Value::Map(vec![
                (Value::Int(7), Value::text("seven")),
                (Value::Int(-300), Value::text("x")),
            ]),
            Value::Struct(vec![Value::text("A-1"), Value::Int(3)]),
            Value::text(r#"{"id": 1}"#),
            Value::Null,
            Value::Null,
            Value::Null,
        ]);
        let (framing, json, subject, registered) = write(2, "orders", &envelope, &value);
        assert_eq!(framing, "0000000002");
        assert_eq!(subject, "orders-value");
        assert_eq!(
            json,
            concat!(
                r#"{"i8":-5,"i16":300,"i32":-70000,"i64":1234567890123,"f32":1.5,"f64":-2.25,"b":true,"s":"héllo","#,
                r#""raw":"AAH/","amount":"z8c=","neg":"/38=","day":20516,"tm":86399999,"ts":1772600767120,"#,
                r#""tags":["x","yz"],"attrs":{"a":1,"b":null},"byid":[{"key":7,"value":"seven"},{"key":-300,"value":"x"}],"#,
                r#""item":{"sku":"A-1","qty":3},"payload":"{\"id\": 1}","region":"eu","missing":null,"flag":true}"#
            )
        );
        // Properties in the order of a 32-bucket HashMap of the field names.
        let properties = [
            r#""b":{"connect.index":6,"type":"boolean"}"#,
            r#""amount":{"connect.index":9,"oneOf":[{"type":"null"},{"type":"number","title":"org.apache.kafka.connect.data.Decimal","connect.version":1,"connect.type":"bytes","connect.parameters":{"scale":"2","connect.decimal.precision":"10"}}]}"#,
            r#""item":{"connect.index":17,"oneOf":[{"type":"null"},{"type":"object","properties":{"qty":{"connect.index":1,"oneOf":[{"type":"null"},{"type":"integer","connect.type":"int32"}]},"sku":{"type":"string","connect.index":0}}}]}"#,
            r#""flag":{"connect.index":21,"oneOf":[{"type":"null"},{"description":"a flag","default":true,"type":"boolean"}]}"#,
            r#""f32":{"type":"number","connect.index":4,"connect.type":"float32"}"#,
            r#""f64":{"type":"number","connect.index":5,"connect.type":"float64"}"#,
            r#""i64":{"type":"integer","connect.index":3,"connect.type":"int64"}"#,
            r#""i32":{"type":"integer","connect.index":2,"connect.type":"int32"}"#,
            r#""raw":{"connect.index":8,"oneOf":[{"type":"null"},{"type":"string","connect.type":"bytes"}]}"#,
            r#""i8":{"type":"integer","connect.index":0,"connect.type":"int8"}"#,
            r#""i16":{"type":"integer","connect.index":1,"connect.type":"int16"}"#,
            r#""tags":{"connect.index":14,"oneOf":[{"type":"null"},{"type":"array","items":{"type":"string"}}]}"#,
            r#""attrs":{"type":"object","connect.index":15,"connect.type":"map","additionalProperties":{"oneOf":[{"type":"null"},{"type":"integer","connect.type":"int32"}]}}"#,
            r#""neg":{"type":"number","title":"org.apache.kafka.connect.data.Decimal","connect.index":10,"connect.version":1,"connect.type":"bytes","connect.parameters":{"scale":"0"}}"#,
            r#""s":{"type":"string","connect.index":7}"#,
            r#""payload":{"type":"string","title":"io.debezium.data.Json","connect.index":18,"connect.version":1}"#,
            r#""missing":{"connect.index":20,"oneOf":[{"type":"null"},{"type":"integer","connect.type":"int64"}]}"#,
            r#""tm":{"type":"integer","title":"org.apache.kafka.connect.data.Time","connect.index":12,"connect.version":1,"connect.type":"int32"}"#,
            r#""byid":{"type":"array","connect.index":16,"connect.type":"map","items":{"type":"object","properties":{"value":{"type":"string","connect.index":1},"key":{"type":"integer","connect.index":0,"connect.type":"int32"}}}}"#,
            r#""region":{"connect.index":19,"oneOf":[{"type":"null"},{"type":"string","default":"eu"}]}"#,
            r#""day":{"type":"integer","title":"org.apache.kafka.connect.data.Date","connect.index":11,"connect.version":1,"connect.type":"int32"}"#,
            r#""ts":{"type":"integer","title":"org.apache.kafka.connect.data.Timestamp","connect.index":13,"connect.version":1,"connect.type":"int64"}"#,
        ];
        assert_eq!(
            registered,
            format!(
                r#"{{"type":"object","title":"dbserver1.public.outbox.orders.Value","description":"envelope","connect.version":3,"properties":{{{}}}}}"#,
                properties.join(",")
            )
        );
    }

    #[test]
    fn top_level_primitives_and_nulls() {
        let optional = s(SchemaType::String, true);
        let (framing, json, subject, registered) = write(3, "strs", &optional, &Value::text("x"));
        assert_eq!(
            (framing.as_str(), json.as_str(), registered.as_str()),
            (
                "0000000003",
                r#""x""#,
                r#"{"oneOf":[{"type":"null"},{"type":"string"}]}"#
            )
        );
        assert_eq!(subject, "strs-value");
        // A null for an optional schema is a JSON null (registered); for a required one,
        // Java's null: no value, nothing registered.
        let (_, json, _, _) = write(3, "strs", &optional, &Value::Null);
        assert_eq!(json, "null");
        let (c, registry) = converter(3);
        assert_eq!(
            c.encode("strs", Some(&s(SchemaType::String, false)), &Value::Null),
            Ok(None)
        );
        assert_eq!(c.encode("strs", None, &Value::Null), Ok(None));
        assert!(registry.asked_nothing());
        let (framing, json, _, registered) =
            write(4, "keys", &s(SchemaType::String, false), &Value::text("k1"));
        assert_eq!(
            (framing.as_str(), json.as_str(), registered.as_str()),
            ("0000000004", r#""k1""#, r#"{"type":"string"}"#)
        );
    }

    #[test]
    fn a_required_null_field_is_left_out_and_defaults_replace_nulls() {
        let mut count = s(SchemaType::Int32, false);
        count.default = Some(Value::Int(7));
        let schema = s(
            SchemaType::Struct(vec![
                ("a".into(), s(SchemaType::String, false)),
                ("n".into(), count),
            ]),
            false,
        );
        let (_, json, _, registered) = write(
            5,
            "t",
            &schema,
            &Value::Struct(vec![Value::Null, Value::Null]),
        );
        assert_eq!(json, r#"{"n":7}"#);
        assert_eq!(
            registered,
            r#"{"type":"object","properties":{"a":{"type":"string","connect.index":0},"n":{"type":"integer","default":7,"connect.index":1,"connect.type":"int32"}}}"#
        );
    }

    #[test]
    fn closed_objects_and_record_name_subjects() {
        let inner = s(
            SchemaType::Struct(vec![("x".into(), s(SchemaType::Boolean, false))]),
            true,
        )
        .named("a.Inner", None);
        let schema = s(SchemaType::Struct(vec![("in".into(), inner)]), false).named("a.B", Some(2));
        let doc = json_schema(&schema, false).unwrap();
        assert_eq!(
            doc.json,
            r#"{"type":"object","additionalProperties":false,"title":"a.B","connect.version":2,"properties":{"in":{"connect.index":0,"oneOf":[{"type":"null"},{"type":"object","additionalProperties":false,"title":"a.Inner","properties":{"x":{"connect.index":0,"type":"boolean"}}}]}}}"#
        );
        let (mut c, _) = converter(6);
        assert_eq!(c.subject("t", &doc).unwrap(), "t-value");
        c.serde.is_key = true;
        assert_eq!(c.subject("t", &doc).unwrap(), "t-key");
        c.serde.strategy = SubjectNameStrategy::Record;
        assert_eq!(c.subject("t", &doc).unwrap(), "a.B");
        c.serde.strategy = SubjectNameStrategy::TopicRecord;
        assert_eq!(c.subject("t", &doc).unwrap(), "t-a.B");
        // A schema without a title under a record name strategy: RecordNameStrategy's
        // SerializationException (its text as Confluent's Avro and Protobuf jars 7.0.16 throw
        // it), wrapped by JsonSchemaConverter's DataException; a named string has a title.
        let nameless = s(SchemaType::String, false);
        assert_eq!(
            c.encode("t", Some(&nameless), &Value::text("x")),
            Err(SerdeError::Record(
                "Converting Kafka Connect data to byte[] failed due to serialization error of \
                 topic t: In configuration key.subject.name.strategy = \
                 io.confluent.kafka.serializers.subject.TopicRecordNameStrategy, the message key \
                 must only be a record schema"
                    .into()
            ))
        );
        c.serde.is_key = false;
        c.serde.strategy = SubjectNameStrategy::Record;
        assert_eq!(
            c.subject(
                "t",
                &json_schema(&s(SchemaType::Int32, true), true).unwrap()
            ),
            Err("In configuration value.subject.name.strategy = \
                 io.confluent.kafka.serializers.subject.RecordNameStrategy, the message value \
                 must only be a record schema"
                .into())
        );
        let json = s(SchemaType::String, false).named("io.debezium.data.Json", Some(1));
        assert_eq!(
            c.subject("t", &json_schema(&json, true).unwrap()).unwrap(),
            "io.debezium.data.Json"
        );
        // JsonSchema.name() is the document's title: an optional schema's oneOf has none.
        let optional =
            json_schema(&s(SchemaType::Int16, true).named("x.Y", Some(1)), true).unwrap();
        assert_eq!(
            optional.json,
            r#"{"oneOf":[{"type":"null"},{"type":"integer","title":"x.Y","connect.version":1,"connect.type":"int16"}]}"#
        );
        assert_eq!(optional.title, None);
    }

    #[test]
    fn float_defaults_as_org_json_and_jackson_print_them() {
        assert_eq!(float_text(1.0).as_deref(), Some("1"));
        assert_eq!(float_text(100.0).as_deref(), Some("100"));
        assert_eq!(float_text(1.5).as_deref(), Some("1.5"));
        assert_eq!(float_text(-0.0).as_deref(), Some("0"));
        assert_eq!(float_text(0.001).as_deref(), Some("0.001"));
        // Double.toString "1.0E-5" is read as BigDecimal 10 × 10^-6.
        assert_eq!(float_text(1e-5).as_deref(), Some("0.000010"));
        assert_eq!(float_text(-2.5e-10).as_deref(), Some("-2.5E-10"));
        assert_eq!(float_text(1e10), None);
        assert_eq!(float_text(f64::NAN), None);
        let mut composite = s(
            SchemaType::Array(Box::new(s(SchemaType::Int32, false))),
            false,
        );
        composite.default = Some(Value::Array(vec![]));
        assert!(json_schema(&composite, true).is_err());
    }
}
