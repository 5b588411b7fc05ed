//! Kafka Connect's data model, as far as outbox records need it: a schema and a value,
//! written by the converters in `converter.rs`.

use super::pg_text::Numeric;
use bytes::Bytes;
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq)]
pub enum SchemaType {
    Boolean,
    Int8,
    Int16,
    Int32,
    Int64,
    Float32,
    Float64,
    String,
    Bytes,
    Array(Box<Schema>),
    /// Keys, values.
    Map(Box<Schema>, Box<Schema>),
    Struct(Vec<(Arc<str>, Schema)>),
}

impl SchemaType {
    /// Connect's `Schema.Type` name.
    pub fn type_name(&self) -> &'static str {
        match self {
            SchemaType::Boolean => "BOOLEAN",
            SchemaType::Int8 => "INT8",
            SchemaType::Int16 => "INT16",
            SchemaType::Int32 => "INT32",
            SchemaType::Int64 => "INT64",
            SchemaType::Float32 => "FLOAT32",
            SchemaType::Float64 => "FLOAT64",
            SchemaType::String => "STRING",
            SchemaType::Bytes => "BYTES",
            SchemaType::Array(_) => "ARRAY",
            SchemaType::Map(..) => "MAP",
            SchemaType::Struct(_) => "STRUCT",
        }
    }
}

/// A Connect schema: type plus the optional, name, version and default attributes that
/// JsonConverter writes when `schemas.enable=true`.
#[derive(Debug, Clone, PartialEq)]
pub struct Schema {
    pub kind: SchemaType,
    pub optional: bool,
    pub name: Option<Arc<str>>,
    pub version: Option<i32>,
    pub doc: Option<Arc<str>>,
    pub parameters: Vec<(Arc<str>, Arc<str>)>,
    pub default: Option<Value>,
}

impl Schema {
    pub fn new(kind: SchemaType, optional: bool) -> Self {
        Self {
            kind,
            optional,
            name: None,
            version: None,
            doc: None,
            parameters: Vec::new(),
            default: None,
        }
    }

    pub fn named(mut self, name: &str, version: Option<i32>) -> Self {
        self.name = Some(name.into());
        self.version = version;
        self
    }
}

/// A Connect value. Struct values are aligned with their schema's fields.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Boolean(bool),
    Int(i64),
    Float(f64),
    /// UTF-8 text (shares the replication message's buffer when it comes from a column).
    String(Bytes),
    Bytes(Bytes),
    Array(Vec<Value>),
    /// Entries in the order they are written.
    Map(Vec<(Value, Value)>),
    Struct(Vec<Value>),
    /// `java.math.BigDecimal`, the logical value of Kafka's Decimal schema (written as the
    /// unscaled two's-complement bytes by JsonConverter, as `toString()` in text).
    Decimal(Numeric),
}

impl Value {
    pub fn text(text: &str) -> Self {
        Value::String(Bytes::copy_from_slice(text.as_bytes()))
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(b) => std::str::from_utf8(b).ok(),
            _ => None,
        }
    }
}

/// The Java class Connect names in its messages for a value of `schema`.
pub fn java_class(schema: Option<&Schema>, value: &Value) -> &'static str {
    match (value, schema.map(|s| &s.kind)) {
        (Value::Null, _) => "null",
        (Value::Boolean(_), _) => "java.lang.Boolean",
        (Value::Int(_), Some(SchemaType::Int8)) => "java.lang.Byte",
        (Value::Int(_), Some(SchemaType::Int16)) => "java.lang.Short",
        (Value::Int(_), Some(SchemaType::Int32)) => match schema.and_then(|s| s.name.as_deref()) {
            Some("org.apache.kafka.connect.data.Date" | "org.apache.kafka.connect.data.Time") => {
                "java.util.Date"
            }
            _ => "java.lang.Integer",
        },
        (Value::Int(_), _) => match schema.and_then(|s| s.name.as_deref()) {
            Some("org.apache.kafka.connect.data.Timestamp") => "java.util.Date",
            _ => "java.lang.Long",
        },
        (Value::Float(_), Some(SchemaType::Float32)) => "java.lang.Float",
        (Value::Float(_), _) => "java.lang.Double",
        (Value::String(_), _) => "java.lang.String",
        // Debezium hands bytea values to the transforms as ByteBuffers.
        (Value::Bytes(_), _) => "java.nio.HeapByteBuffer",
        (Value::Decimal(_), _) => "java.math.BigDecimal",
        (Value::Array(_), _) => "java.util.ArrayList",
        (Value::Map(_), _) => "java.util.HashMap",
        (Value::Struct(_), _) => "org.apache.kafka.connect.data.Struct",
    }
}

/// A schema and a value (Connect's `SchemaAndValue`). A `None` schema is a schemaless value:
/// the EventRouter's tombstones (null) and payloads expanded without a schema (a string).
#[derive(Debug, Clone, PartialEq)]
pub struct Data {
    pub schema: Option<Schema>,
    pub value: Value,
}

impl Data {
    pub fn new(schema: Schema, value: Value) -> Self {
        Self {
            schema: Some(schema),
            value,
        }
    }

    /// A null without a schema: what a tombstone's value is.
    pub fn null() -> Self {
        Self {
            schema: None,
            value: Value::Null,
        }
    }

    /// A required string.
    pub fn text(text: &str) -> Self {
        Self::new(Schema::new(SchemaType::String, false), Value::text(text))
    }
}

/// A record header: its name, its schema and value, and, when they are known already, the
/// bytes the header converter writes for them (Debezium's context headers, converted once).
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    pub name: Arc<str>,
    pub data: Data,
    pub encoded: Option<Option<Bytes>>,
}

impl Header {
    pub fn new(name: impl Into<Arc<str>>, data: Data) -> Self {
        Self {
            name: name.into(),
            data,
            encoded: None,
        }
    }
}
