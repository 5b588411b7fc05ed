//! Debezium's `io.debezium.converters.CloudEventsConverter` as a value converter, in its
//! JSON form (`serializer.type=json`, `data.serializer.type=json`), byte for byte: a
//! structured-mode CloudEvent whose context attributes come from the change event's
//! metadata (`source`, `op`, `transaction`) and whose `data` is the record's value.
//!
//! With the Outbox EventRouter the metadata is gone from the value, so Debezium's recipe
//! copies it into headers before the router (`HeaderFrom`) and sets `metadata.source=header`.
//! Debezium reads those headers back with a JsonConverter (schemas enabled); the relay reads
//! the Connect header values they were written from, which is the same data when the header
//! converter is that JsonConverter (the configuration requires it).
//!
//! Semantics as in Debezium 3.6's `CloudEventsConverter`, `CloudEventsMaker`,
//! `PostgresCloudEventsMaker` and `RecordAndMetadataHeaderImpl`:
//! - no schema or a null value: a Kafka null;
//! - `metadata.source=value` (the default): a value whose schema is not a change-event
//!   envelope (`….Envelope`) is written as null (the EventRouter's records are not);
//! - `metadata.source=header`: a record without a `source` or `op` header is written as null;
//! - a value that is not a struct fails ("Mismatching schema");
//! - attributes in order: `id`, `source`, `specversion`, `type`, `time`, `datacontenttype`,
//!   `traceparent` (with `opentelemetry.tracing.attributes.enable`), then the extension
//!   attributes (`extension.attributes.enable`, the default): `iodebeziumop`, one per field
//!   of the source block (`iodebezium` + the name without characters other than ASCII
//!   letters and digits; INT64 as text), the transaction block's three (`iodebeziumtx…`),
//!   then `data`: the value as a struct named `io.debezium.connector.postgresql.Data`
//!   written by a JsonConverter (`json.schemas.enable`, default true).

use super::data::Header;
use super::data::{Schema, SchemaType, Value};
use super::json::write_string;
use super::json_value::JsonConverter;
use bytes::Bytes;

pub const CLASS: &str = "io.debezium.converters.CloudEventsConverter";

/// Where a piece of metadata comes from (`metadata.source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The change event's envelope (the global default).
    Value,
    /// The record's headers.
    Header,
    /// Made by the converter (`id`, `type`, `dataSchemaName`).
    Generate,
}

/// A configured CloudEventsConverter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloudEvents {
    pub global: Source,
    pub id: Source,
    pub kind: Source,
    /// `Some` with `opentelemetry.tracing.attributes.enable=true`: where `traceparent` comes from.
    pub trace_parent: Option<Source>,
    pub data_schema_name: Source,
    pub extension_attributes: bool,
    /// The JsonConverter that writes `data` (`json.schemas.enable`,
    /// `json.replace.null.with.default`).
    pub data: JsonConverter,
    /// The payload column and `table.expand.json.payload`'s behaviour, when payloads are
    /// expanded: a payload the EventRouter kept as a string under the struct schema it
    /// inferred fails as Debezium's converter fails on it (see [`super::payload_struct::botched`]).
    pub expanded_payload: Option<(String, super::ExpandBehaviour)>,
}

impl CloudEvents {
    /// Parses `metadata.source` as `CloudEventsConverterConfig.metadataSource` does.
    pub fn metadata_source(
        list: &str,
        trace_enabled: bool,
        data_schema_name_from_header: bool,
    ) -> Result<(Source, Source, Source, Source, Source), String> {
        let parse = |word: &str| match word.trim().to_ascii_lowercase().as_str() {
            "value" => Some(Source::Value),
            "header" => Some(Source::Header),
            "generate" => Some(Source::Generate),
            _ => None,
        };
        let mut entries = list.split(',').map(str::trim);
        let first = entries.next().unwrap_or_default();
        let global = match parse(first) {
            Some(s @ (Source::Value | Source::Header)) => s,
            Some(_) => return Err("Global metadata source can't be GENERATE".into()),
            None => return Err(format!("global metadata source {first:?} is not valid")),
        };
        let (mut id, mut kind, mut trace, mut name) = (None, None, None, None);
        for entry in entries {
            let (field, source) = entry
                .split_once(':')
                .ok_or_else(|| format!("{entry:?} is not field:source"))?;
            let source = match parse(source) {
                Some(Source::Value) => {
                    return Err("Field metadata source can't be VALUE".into());
                }
                Some(s) => s,
                None => return Err(format!("Field source `{source}` is not valid")),
            };
            match field {
                "id" => id = Some(source),
                "type" => kind = Some(source),
                "traceparent" => trace = Some(source),
                "dataSchemaName" => name = Some(source),
                other => {
                    return Err(format!(
                        "Field `{other}` is not allowed to set custom source"
                    ))
                }
            }
        }
        let mut trace = trace.unwrap_or(global);
        if trace == Source::Header && !trace_enabled {
            trace = Source::Generate;
        }
        let mut name = name.unwrap_or(global);
        if name == Source::Header && !data_schema_name_from_header {
            name = Source::Generate;
        }
        Ok((
            global,
            id.unwrap_or(global),
            kind.unwrap_or(global),
            trace,
            name,
        ))
    }

    /// Whether any metadata is read from headers (the header converter must then be a
    /// JsonConverter with schemas, as the converter reads them back with one).
    pub fn reads_headers(&self) -> bool {
        [self.global, self.id, self.kind, self.data_schema_name]
            .into_iter()
            .chain(self.trace_parent)
            .any(|s| s == Source::Header)
    }

    /// The record's value as a CloudEvent; `None` is a Kafka null.
    pub fn encode(
        &self,
        schema: Option<&Schema>,
        value: &Value,
        headers: &[Header],
    ) -> Result<Option<Bytes>, String> {
        let Some(schema) = schema else {
            return Ok(None);
        };
        if value.is_null() {
            return Ok(None);
        }
        let header = |name: &str| headers.iter().rev().find(|h| &*h.name == name);
        if self.global == Source::Value {
            if !schema
                .name
                .as_deref()
                .is_some_and(|n| n.ends_with(".Envelope"))
            {
                return Ok(None);
            }
        } else if header("source").is_none() || header("op").is_none() {
            return Ok(None);
        }
        let (SchemaType::Struct(fields), Value::Struct(values)) = (&schema.kind, value) else {
            if let (Some((field, behaviour)), Value::String(text)) = (&self.expanded_payload, value)
            {
                if super::payload_struct::botched(field, text, *behaviour) {
                    return Err(
                        "Only Struct objects supported for [CloudEvents converter], found: java.lang.String"
                            .into(),
                    );
                }
            }
            return Err("Mismatching schema".into());
        };
        let field = |name: &str| {
            fields
                .iter()
                .position(|(n, _)| &**n == name)
                .map(|i| (&fields[i].1, values.get(i).unwrap_or(&Value::Null)))
        };
        // The metadata, from the envelope or from headers.
        let from = |source: Source,
                    name: &str,
                    optional: bool|
         -> Result<Option<(&Schema, &Value)>, String> {
            if source == Source::Header {
                return match header(name) {
                    Some(h) => Ok(h.data.schema.as_ref().map(|s| (s, &h.data.value))),
                    None if optional => Ok(None),
                    None => Err(format!("Header `{name}` was not provided")),
                };
            }
            Ok(field(name))
        };
        let (source_schema, source) = match from(self.global, "source", false)? {
            Some((s, v @ Value::Struct(_))) => (s, v),
            _ => return Err("the change event has no source block".into()),
        };
        let source_fields = match &source_schema.kind {
            SchemaType::Struct(f) => f,
            _ => return Err("the source block is not a struct".into()),
        };
        let Value::Struct(source_values) = source else {
            unreachable!("matched above")
        };
        let source_field = |name: &str| -> Result<&Value, String> {
            source_fields
                .iter()
                .position(|(n, _)| &**n == name)
                .map(|i| source_values.get(i).unwrap_or(&Value::Null))
                .ok_or_else(|| {
                    format!(
                        "No such field \"{name}\" in the \"source\" field of events from {} connector",
                        java_text(source_values.get(1).unwrap_or(&Value::Null))
                    )
                })
        };
        let op = from(self.global, "op", false)?.map_or(&Value::Null, |(_, v)| v);
        let transaction = from(self.global, "transaction", true)?.map(|(_, v)| v);
        let text_of = |source: Source,
                       name: &str,
                       generated: &dyn Fn() -> Result<String, String>| {
            if source == Source::Generate {
                return generated().map(Some);
            }
            match from(source, name, false)? {
                Some((_, Value::String(s))) => Ok(Some(String::from_utf8_lossy(s).into_owned())),
                Some((_, Value::Null)) | None => Ok(None),
                Some((schema, v)) => Err(format!(
                    "class {} cannot be cast to class java.lang.String",
                    super::data::java_class(Some(schema), v)
                )),
            }
        };
        let connector = java_text(source_field("connector")?);
        let name = java_text(source_field("name")?);
        let id = text_of(self.id, "id", &|| {
            Ok(format!(
                "name:{};lsn:{};txId:{};sequence:{}",
                name,
                java_text(source_field("lsn")?),
                java_text(source_field("txId")?),
                java_text(source_field("sequence")?)
            ))
        })?;
        let kind = text_of(self.kind, "type", &|| {
            Ok(format!("io.debezium.connector.{connector}.DataChangeEvent"))
        })?;
        let required = |name: &str, text: Option<String>| {
            text.ok_or_else(|| {
                format!(
                    "Invalid value: null used for required field: \"{name}\", schema type: STRING"
                )
            })
        };
        let id = required("id", id)?;
        let kind = required("type", kind)?;
        let time = match source_field("ts_ms")? {
            Value::Int(ms) => rfc3339_millis(*ms),
            _ => return Err("the source block has no ts_ms".into()),
        };
        let data_name = match self.data_schema_name {
            Source::Header => text_of(Source::Header, "dataSchemaName", &|| unreachable!())?,
            _ => Some(format!("io.debezium.connector.{connector}.Data")),
        };

        let mut out = Vec::with_capacity(256);
        let attribute = |out: &mut Vec<u8>, key: &str| {
            out.push(if out.is_empty() { b'{' } else { b',' });
            write_string(out, key);
            out.push(b':');
        };
        let write_text = |out: &mut Vec<u8>, text: Option<&str>| match text {
            Some(t) => write_string(out, t),
            None => out.extend_from_slice(b"null"),
        };
        attribute(&mut out, "id");
        write_string(&mut out, &id);
        attribute(&mut out, "source");
        write_string(&mut out, &format!("/debezium/{connector}/{name}"));
        attribute(&mut out, "specversion");
        write_string(&mut out, "1.0");
        attribute(&mut out, "type");
        write_string(&mut out, &kind);
        attribute(&mut out, "time");
        write_string(&mut out, &time);
        attribute(&mut out, "datacontenttype");
        write_string(&mut out, "application/json");
        if let Some(trace) = self.trace_parent {
            let value = match trace {
                Source::Header => text_of(Source::Header, "traceparent", &|| unreachable!())
                    .or_else(|e| {
                        if e.starts_with("Header `") {
                            Ok(None)
                        } else {
                            Err(e)
                        }
                    })?,
                _ => return Err(
                    "Value for `traceparent` CloudEvents field currently can't be obtained from a record value and can only be obtained from a record header"
                        .into(),
                ),
            };
            attribute(&mut out, "traceparent");
            write_text(&mut out, value.as_deref());
        }
        if self.extension_attributes {
            attribute(&mut out, "iodebeziumop");
            write_text(&mut out, op.as_str());
            for ((field_name, field_schema), value) in source_fields.iter().zip(source_values) {
                extension_kind(field_schema)?;
                attribute(&mut out, &extension_name(field_name));
                write_extension(&mut out, field_schema, value);
            }
            let tx_values = match transaction {
                Some(Value::Struct(v)) => Some(v),
                _ => None,
            };
            for (i, (field_name, field_schema)) in transaction_fields().iter().enumerate() {
                attribute(&mut out, &extension_name(&format!("tx{field_name}")));
                let value = tx_values.and_then(|v| v.get(i)).unwrap_or(&Value::Null);
                write_extension(&mut out, field_schema, value);
            }
        }
        attribute(&mut out, "data");
        let mut data_schema = Schema::new(SchemaType::Struct(fields.clone()), false);
        data_schema.name = data_name.map(Into::into);
        match self.data.encode(Some(&data_schema), value)? {
            Some(bytes) => out.extend_from_slice(&bytes),
            None => out.extend_from_slice(b"null"),
        }
        out.push(b'}');
        Ok(Some(out.into()))
    }
}

/// `TransactionMonitor.TRANSACTION_BLOCK_SCHEMA`'s fields.
fn transaction_fields() -> [(&'static str, Schema); 3] {
    [
        ("id", Schema::new(SchemaType::String, true)),
        ("total_order", Schema::new(SchemaType::Int64, true)),
        (
            "data_collection_order",
            Schema::new(SchemaType::Int64, true),
        ),
    ]
}

/// A source field's CloudEvents extension type (`convertToCeExtensionSchema`).
fn extension_kind(schema: &Schema) -> Result<(), String> {
    match schema.kind {
        SchemaType::Boolean
        | SchemaType::Int8
        | SchemaType::Int16
        | SchemaType::Int32
        | SchemaType::Int64
        | SchemaType::String => Ok(()),
        ref other => Err(format!(
            "Source field of type {} cannot be converted into CloudEvents extension attribute.",
            other.type_name()
        )),
    }
}

/// An extension attribute's value: INT64 as its decimal text, the others as they are.
fn write_extension(out: &mut Vec<u8>, schema: &Schema, value: &Value) {
    match (value, &schema.kind) {
        (Value::Null, _) => out.extend_from_slice(b"null"),
        (Value::Int(n), SchemaType::Int64) => write_string(out, &n.to_string()),
        (Value::Int(n), _) => out.extend_from_slice(n.to_string().as_bytes()),
        (Value::Boolean(b), _) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        (Value::String(s), _) => write_string(out, &String::from_utf8_lossy(s)),
        (other, _) => write_string(out, &java_text(other)),
    }
}

/// `iodebezium` and the name's ASCII letters and digits (`adjustExtensionName`).
fn extension_name(name: &str) -> String {
    let mut out = String::from("iodebezium");
    out.extend(name.chars().filter(char::is_ascii_alphanumeric));
    out
}

/// A value as Java's string concatenation shows it (`null` for null).
fn java_text(value: &Value) -> String {
    let mut out = Vec::new();
    super::java_text::java_string(&mut out, None, value);
    String::from_utf8_lossy(&out).into_owned()
}

/// `SimpleDateFormat("yyyy-MM-dd'T'HH:mm:ss.SSSXXX")` in UTC: `2026-11-26T10:15:21.123Z`.
fn rfc3339_millis(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let in_day = ms.rem_euclid(86_400_000);
    let (y, m, d) = super::civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000
    )
}
