//! Kafka Connect's data model, as far as outbox records need it: a schema and a value,
//! written by the converters in `converter.rs`.

use bytes::Bytes;
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq)]
pub enum SchemaType {
    Boolean,
    Int16,
    Int32,
    Int64,
    Float32,
    Float64,
    String,
    Bytes,
    Array(Box<Schema>),
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
    Struct(Vec<Value>),
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
