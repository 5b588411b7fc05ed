//! Kafka Connect's converters, byte for byte: what a Connect worker writes for a record's
//! key, value and headers under `org.apache.kafka.connect.json.JsonConverter` (with and
//! without `schemas.enable`), `...storage.StringConverter`, `...converters.ByteArrayConverter`
//! and the default header converter `...storage.SimpleHeaderConverter`.

use super::avro::AvroConverter;
use super::data::{Schema, SchemaType, Value};
use super::java_text::{
    connect_date_millis, java_string, kafka_date_string, kafka_values_string, to_java_string,
};
use super::json::write_string;
use super::json_schema::{JsonSchemaConverter, JSON_SCHEMA_CONVERTER};
use super::json_value::{write_schemaless, JsonConverter};
use super::protobuf::ProtobufConverter;
use base64::Engine;
use bytes::Bytes;
use std::sync::Arc;

/// A key or value converter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Converter {
    Json(JsonConverter),
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delegate {
    Json(JsonConverter),
    String,
    ByteArray,
    /// A schema-registry converter (Avro, JSON Schema, Protobuf), as Debezium's outbox
    /// documentation shows it: it writes for the record's topic (see
    /// [`super::Data::encode_to`]).
    Registry(Box<Converter>),
}

impl Delegate {
    pub fn converter(&self) -> Converter {
        match self {
            Delegate::Json(json) => Converter::Json(*json),
            Delegate::String => Converter::String,
            Delegate::ByteArray => Converter::ByteArray,
            Delegate::Registry(converter) => (**converter).clone(),
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
            Converter::Json(_) => "org.apache.kafka.connect.json.JsonConverter",
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
            Converter::Json(json) => json.encode(schema, value),
            Converter::String => Ok(to_java_string(schema, value)),
            // Kafka Connect refuses non-bytes values here and the task dies; outbox-relay
            // writes the value's text instead (documented in docs/debezium-compatibility.md).
            Converter::ByteArray => Ok(match value {
                Value::Bytes(b) => Some(b.clone()),
                other => to_java_string(schema, other),
            }),
            Converter::BinaryData { delegate } => {
                if !binary_data_delegates(schema, value) {
                    return Ok(match value {
                        Value::Bytes(b) => Some(b.clone()),
                        _ => None,
                    });
                }
                binary_delegate(delegate.as_ref(), value)?.encode(schema, value)
            }
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
            Converter::Json(JsonConverter { schemas_enable, .. }) => {
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
            Converter::Json(JsonConverter { schemas_enable, .. }) => {
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
                other => binary_delegate(delegate.as_ref(), other)?.encode_schemaless(other),
            },
            Converter::Avro(_) | Converter::Protobuf(_) => Err(AVRO_NEEDS_TOPIC.into()),
            // No schema: a Kafka null.
            Converter::CloudEvents(_) => Ok(None),
            Converter::JsonSchema(_) => Err(JSON_SCHEMA_NEEDS_TOPIC.into()),
        }
    }
}

/// Whether `BinaryDataConverter` hands the value to its delegate: a value whose schema is not
/// BYTES, or a schemaless one that is neither bytes nor null (which it writes as they are).
pub(super) fn binary_data_delegates(schema: Option<&Schema>, value: &Value) -> bool {
    match (schema, value) {
        (Some(s), _) if s.kind != SchemaType::Bytes => true,
        (_, Value::Bytes(_) | Value::Null) => false,
        _ => true,
    }
}

/// `BinaryDataConverter`'s delegate for a value that is not bytes, or its refusal.
pub(super) fn binary_delegate(
    delegate: Option<&Delegate>,
    value: &Value,
) -> Result<Converter, String> {
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
    pub fn encode_data(&self, data: &super::data::Data) -> Result<Option<Bytes>, String> {
        match (&data.schema, &data.value) {
            (Some(schema), value) => self.encode(schema, value),
            (None, Value::Null) => Ok(None),
            (None, value) => match self {
                HeaderConverter::Simple => match value {
                    // A Connect Struct always has its schema.
                    Value::Struct(_) => Err("a struct header without a schema".into()),
                    Value::Array(_) | Value::Map(_) => {
                        let mut out = Vec::new();
                        kafka_values_string(&mut out, None, value, false);
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
                    kafka_values_string(&mut out, Some(schema), value, false);
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

#[cfg(test)]
mod tests {
    use super::super::java_text::struct_to_java_string;
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
        let off = Converter::Json(JsonConverter {
            schemas_enable: false,
            replace_null_with_default: true,
        });
        let on = Converter::Json(JsonConverter {
            schemas_enable: true,
            replace_null_with_default: true,
        });
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
        let off = Converter::Json(JsonConverter {
            schemas_enable: false,
            replace_null_with_default: true,
        });
        let on = Converter::Json(JsonConverter {
            schemas_enable: true,
            replace_null_with_default: true,
        });
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
        let json = |replace_null_with_default| {
            Converter::Json(JsonConverter {
                schemas_enable: false,
                replace_null_with_default,
            })
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
        let on = Converter::Json(JsonConverter {
            schemas_enable: true,
            replace_null_with_default: true,
        });
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
                &HeaderConverter::Other(Converter::Json(JsonConverter {
                    schemas_enable: false,
                    replace_null_with_default: true
                }))
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
            delegate: Some(Delegate::Json(JsonConverter {
                schemas_enable: false,
                replace_null_with_default: true,
            })),
        };
        assert_eq!(
            delegating
                .encode(Some(&text), &Value::text("x"))
                .unwrap()
                .as_deref(),
            Some(&b"\"x\""[..])
        );
    }

    /// Debezium's outbox documentation delegates to a schema-registry Avro converter: what is
    /// not bytes (a heartbeat's struct) is written by it for the record's topic, bytes as
    /// they are, and nothing is registered for them.
    #[test]
    fn a_schema_registry_delegate_writes_for_the_records_topic() {
        use super::super::avro::{AvroClass, AvroConverter, Framing};
        use super::super::registry::fixed::FixedRegistry;
        use super::super::Data;
        let (serde, registry) = FixedRegistry::serde(7);
        let avro = Converter::Avro(Arc::new(AvroConverter::new(
            AvroClass::Confluent,
            serde,
            Framing::Confluent,
        )));
        let binary = Converter::BinaryData {
            delegate: Some(Delegate::Registry(Box::new(avro.clone()))),
        };
        let mut headers = Vec::new();
        let raw = Data::new(
            Schema::new(SchemaType::Bytes, true),
            Value::Bytes(Bytes::from_static(b"\x00\xffraw")),
        );
        assert_eq!(
            raw.encode_to(&binary, "Order.events", &mut headers)
                .unwrap()
                .as_deref(),
            Some(&b"\x00\xffraw"[..])
        );
        assert!(registry.asked_nothing());
        let heartbeat = Data::new(
            Schema::new(
                SchemaType::Struct(vec![(
                    "serverName".into(),
                    Schema::new(SchemaType::String, false),
                )]),
                false,
            )
            .named("io.debezium.connector.common.ServerNameValue", None),
            Value::Struct(vec![Value::text("app")]),
        );
        let delegated = heartbeat
            .encode_to(&binary, "__debezium-heartbeat.app", &mut headers)
            .unwrap();
        assert_eq!(
            delegated,
            heartbeat
                .encode_to(&avro, "__debezium-heartbeat.app", &mut headers)
                .unwrap()
        );
        assert_eq!(&delegated.unwrap()[..5], &[0, 0, 0, 0, 7]);
        assert_eq!(
            registry.last().unwrap().subject,
            "__debezium-heartbeat.app-value"
        );
    }
}
