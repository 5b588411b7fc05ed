//! Connect schemas and values as JSON, byte for byte: JsonConverter's schema (`asJsonSchema`)
//! and values (`convertToJson`, with a schema or without), and the tree Confluent's JSON
//! Schema converter writes (the same writer in its other dialect).

use super::data::{Schema, SchemaType, Value};
use super::json::{write_double, write_string};
use base64::Engine;
use bytes::Bytes;

/// Connect's Decimal logical type.
const DECIMAL: &str = "org.apache.kafka.connect.data.Decimal";

/// Kafka's JsonConverter: `{"schema":…,"payload":…}` with `schemas.enable`, else the bare
/// JSON; `replace.null.with.default`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonConverter {
    pub schemas_enable: bool,
    /// `replace.null.with.default` (Kafka 3.7+, KIP-581): a null field is written as its
    /// schema's default (true, the default) or as null (false).
    pub replace_null_with_default: bool,
}

impl JsonConverter {
    /// The bytes of a record key or value; `None` for a value without a schema (the
    /// EventRouter's tombstones).
    pub fn encode(&self, schema: Option<&Schema>, value: &Value) -> Result<Option<Bytes>, String> {
        let Some(schema) = schema else {
            return Ok(None);
        };
        let json = Json {
            replace_null_with_default: self.replace_null_with_default,
            dialect: Dialect::Kafka,
        };
        // Room for the usual record at once: a schema and a text value (the payload) grow it
        // a few bytes at a time otherwise.
        let text = match value {
            Value::String(t) | Value::Bytes(t) => t.len() + t.len() / 8,
            _ => 0,
        };
        let mut out = Vec::with_capacity(if self.schemas_enable { 160 } else { 16 } + text);
        if self.schemas_enable {
            out.extend_from_slice(b"{\"schema\":");
            write_schema_again(&mut out, schema);
            out.extend_from_slice(b",\"payload\":");
            json.write(&mut out, schema, value)?;
            out.push(b'}');
        } else {
            json.write(&mut out, schema, value)?;
        }
        Ok(Some(out.into()))
    }
}

/// A text value as a JSON string.
pub(super) fn write_text(out: &mut Vec<u8>, text: &[u8]) -> Result<(), String> {
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

/// JsonConverter.convertToJson with a null schema: the JSON type from the value (a map with
/// string keys an object, any other map an array of pairs).
pub(super) fn write_schemaless(out: &mut Vec<u8>, value: &Value) -> Result<(), String> {
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

thread_local! {
    /// The JSON of the schemas written last on this thread: a record's key and value
    /// schemas repeat from record to record, and comparing one costs less than writing it.
    static WRITTEN: std::cell::RefCell<Vec<(Schema, Vec<u8>)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// [`write_schema`], copied from the last eight schemas written when it is one of them. A
/// schema with a floating-point default is written each time: `==` takes 0.0 for -0.0, and
/// they are written apart.
fn write_schema_again(out: &mut Vec<u8>, schema: &Schema) {
    fn float_default(schema: &Schema) -> bool {
        matches!(schema.default, Some(Value::Float(_)))
            || match &schema.kind {
                SchemaType::Array(item) => float_default(item),
                SchemaType::Map(key, value) => float_default(key) || float_default(value),
                SchemaType::Struct(fields) => fields.iter().any(|(_, s)| float_default(s)),
                _ => false,
            }
    }
    if float_default(schema) {
        write_schema(out, schema);
        return;
    }
    WRITTEN.with_borrow_mut(|written| {
        if let Some((_, json)) = written.iter().find(|(s, _)| s == schema) {
            out.extend_from_slice(json);
            return;
        }
        let start = out.len();
        write_schema(out, schema);
        if written.len() == 8 {
            written.remove(0);
        }
        written.push((schema.clone(), out[start..].to_vec()));
    });
}

/// JsonConverter.asJsonSchema: type, items/fields, optional, name, version, parameters,
/// default, in that order.
pub fn write_schema(out: &mut Vec<u8>, schema: &Schema) {
    write_schema_with_field(out, schema, None);
}

pub(super) fn write_schema_with_field(out: &mut Vec<u8>, schema: &Schema, field: Option<&str>) {
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
pub(super) enum Dialect {
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
