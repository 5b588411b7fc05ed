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
