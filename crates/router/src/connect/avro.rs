//! Schema-registry Avro converters, byte for byte: what Confluent's
//! `io.confluent.connect.avro.AvroConverter` (kafka-connect-avro-data 7.x, `AvroData`) and
//! Apicurio's `io.apicurio.registry.utils.converter.AvroConverter` write for a Connect schema
//! and value: the schema translated to Avro (Connect's names, versions, docs and parameters
//! as `connect.*` properties, optional schemas as unions with null, Connect's logical types as
//! Avro's), registered with (or looked up in) a schema registry, and the value in Avro's
//! binary encoding after the registry's framing (Confluent's magic byte 0 and four-byte
//! schema id, or Apicurio's eight-byte global id).
//!
//! The router does no I/O: the registry is a
//! [`SchemaRegistry`](super::registry::SchemaRegistry) the relay provides.

use super::data::{Schema, SchemaType, Value};
use super::json::{write_double, write_string};
use super::postgres_types::java_hash_map_order;
use super::protobuf::write_varint;
use super::registry::{confluent_prefix, RegistrySerde, SchemaCache, SchemaText, SerdeError};
use bytes::Bytes;
use std::sync::Arc;

/// AvroData's namespace for nameless records (`ConnectDefault`, `MapEntry`).
const NAMESPACE: &str = "io.confluent.connect.avro";
const DECIMAL: &str = "org.apache.kafka.connect.data.Decimal";
const DATE: &str = "org.apache.kafka.connect.data.Date";
const TIME: &str = "org.apache.kafka.connect.data.Time";
const TIMESTAMP: &str = "org.apache.kafka.connect.data.Timestamp";
/// Connect's Decimal precision parameter (Debezium sets it) and AvroData's default.
const PRECISION_PARAM: &str = "connect.decimal.precision";
const DEFAULT_PRECISION: u32 = 64;

/// `name` as a valid Avro full name, the way Debezium's `SchemaNameAdjuster` (`avro` mode)
/// makes it: a first character other than a letter or `_` becomes `_` (a digit is kept after
/// it), any later one other than a letter, digit, `_` or `.` becomes `_`.
pub fn avro_fullname(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 1);
    for (i, c) in name.chars().enumerate() {
        let letter = c.is_ascii_alphabetic() || c == '_';
        if i == 0 {
            if letter {
                out.push(c);
            } else {
                out.push('_');
                if c.is_ascii_digit() {
                    out.push(c);
                }
            }
        } else if letter || c.is_ascii_digit() || c == '.' {
            out.push(c);
        } else {
            // Java replaces each UTF-16 unit.
            for _ in 0..c.len_utf16() {
                out.push('_');
            }
        }
    }
    out
}

/// The bytes before the Avro body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Magic byte 0 and a four-byte big-endian id (Confluent; Apicurio with
    /// `apicurio.registry.as-confluent=true`).
    Confluent,
    /// Magic byte 0 and an eight-byte big-endian id (Apicurio 2.x's default id handler,
    /// with `apicurio.registry.headers.enabled=false`).
    Long,
    /// The body alone; the id in an eight-byte header `apicurio.{key|value}.globalId` (or
    /// `.contentId`), then `apicurio.{key|value}.encoding: BINARY` (Apicurio 2.x's default).
    Headers { content_id: bool },
}

/// Which converter class this is (what Kafka Connect names in errors and dead letters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AvroClass {
    Confluent,
    Apicurio,
}

impl AvroClass {
    pub fn name(self) -> &'static str {
        match self {
            AvroClass::Confluent => "io.confluent.connect.avro.AvroConverter",
            AvroClass::Apicurio => "io.apicurio.registry.utils.converter.AvroConverter",
        }
    }
}

/// A configured Avro converter (one for keys, one for values).
#[derive(Debug, PartialEq, Eq)]
pub struct AvroConverter {
    pub class: AvroClass,
    pub serde: RegistrySerde,
    /// `connect.meta.data`: the `connect.*` properties in the schema (default true).
    pub connect_meta_data: bool,
    pub framing: Framing,
    /// The schemas translated lately (AvroData's schema cache).
    translated: SchemaCache<AvroSchema>,
}

/// Connect's schema in Avro: its JSON text and, for a record, its full name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AvroSchema {
    pub json: String,
    /// The record's full name (`AvroSchema.name()`, what the record name strategies name the
    /// subject after): none for any other schema, a union with null included.
    pub record_name: Option<String>,
}

impl AvroConverter {
    pub fn new(class: AvroClass, serde: RegistrySerde, framing: Framing) -> Self {
        Self {
            class,
            serde,
            connect_meta_data: true,
            framing,
            translated: SchemaCache::new(),
        }
    }

    fn translate(&self, schema: &Schema) -> Arc<AvroSchema> {
        self.translated
            .get(schema, || avro_schema(schema, self.connect_meta_data))
    }

    /// The subject the schema is registered under; an error for a schema that is not a
    /// record under a record name strategy.
    pub fn subject(&self, topic: &str, schema: &AvroSchema) -> Result<String, String> {
        self.serde.subject(topic, schema.record_name.as_deref())
    }

    /// The bytes of a key or value written to `topic`; `None` for a null (Kafka null).
    /// Apicurio's default framing adds its headers to `headers`.
    pub fn encode(
        &self,
        topic: &str,
        schema: Option<&Schema>,
        value: &Value,
        headers: &mut Vec<(Arc<str>, Option<Bytes>)>,
    ) -> Result<Option<Bytes>, SerdeError> {
        let Some(schema) = schema else {
            return match value {
                Value::Null => Ok(None),
                _ => Err(SerdeError::Record(
                    "a value without a schema is not written by outbox-relay's Avro converter"
                        .into(),
                )),
            };
        };
        if value.is_null() {
            if !schema.optional {
                return Err(SerdeError::Record(
                    "Found null value for non-optional schema".into(),
                ));
            }
            return Ok(None);
        }
        // Apicurio's converter (2.6.13) writes an optional top-level struct as the bare
        // record, where Confluent's writes a union with null (an optional string is a union
        // in both): found by the differential test.
        let required;
        let schema = if self.class == AvroClass::Apicurio
            && schema.optional
            && matches!(schema.kind, SchemaType::Struct(_))
        {
            required = Schema {
                optional: false,
                ..schema.clone()
            };
            &required
        } else {
            schema
        };
        let avro = self.translate(schema);
        let mut body = Vec::with_capacity(64);
        write_value(&mut body, schema, value).map_err(SerdeError::Record)?;
        let failed = |m: String| {
            SerdeError::Record(format!(
                "Failed to serialize Avro data from topic {topic} : {m}"
            ))
        };
        let id = self.serde.id(
            topic,
            avro.record_name.as_deref(),
            &SchemaText::avro(&avro.json),
            failed,
        )?;
        if let Framing::Headers { content_id } = self.framing {
            let part = if self.serde.is_key { "key" } else { "value" };
            let id_name = if content_id { "contentId" } else { "globalId" };
            headers.push((
                format!("apicurio.{part}.{id_name}").into(),
                Some(Bytes::copy_from_slice(&id.to_be_bytes())),
            ));
            headers.push((
                format!("apicurio.{part}.encoding").into(),
                Some(Bytes::from_static(b"BINARY")),
            ));
            return Ok(Some(body.into()));
        }
        let mut out = Vec::with_capacity(body.len() + 9);
        match self.framing {
            Framing::Headers { .. } => unreachable!("returned above"),
            Framing::Confluent => {
                out.extend_from_slice(&confluent_prefix(id).map_err(SerdeError::Record)?)
            }
            Framing::Long => {
                out.push(0);
                out.extend_from_slice(&id.to_be_bytes());
            }
        }
        out.extend_from_slice(&body);
        Ok(Some(out.into()))
    }
}

// ---------------------------------------------------------------------------------------
// AvroData.fromConnectSchema
// ---------------------------------------------------------------------------------------

/// An Avro schema as AvroData builds it (before it is written as JSON).
#[derive(Debug, Clone, PartialEq)]
enum Avro {
    Null,
    Primitive(&'static str, Props),
    Array(Box<Avro>, Props),
    Map(Box<Avro>, Props),
    Record(Arc<Record>),
    Union(Vec<Avro>),
}

#[derive(Debug, PartialEq)]
struct Record {
    namespace: Option<String>,
    name: String,
    fields: Vec<AvroField>,
    props: Props,
}

#[derive(Debug, PartialEq)]
struct AvroField {
    name: String,
    schema: Avro,
    /// The default as JSON text.
    default: Option<String>,
}

/// Schema properties in the order they were added, values as JSON text.
type Props = Vec<(&'static str, String)>;

/// Connect's schema in Avro, as `AvroData.fromConnectSchema` builds it and Avro's
/// `Schema.toString()` writes it.
pub fn avro_schema(schema: &Schema, connect_meta_data: bool) -> AvroSchema {
    let mut ctx = FromConnect {
        meta: connect_meta_data,
        seen: Vec::new(),
        default_names: 0,
    };
    let avro = ctx.schema(schema, false);
    let record_name = match &avro {
        Avro::Record(r) => Some(full_name(r)),
        _ => None,
    };
    let mut out = Vec::new();
    Names::default().write(&mut out, &avro);
    AvroSchema {
        json: String::from_utf8(out).expect("JSON text is UTF-8"),
        record_name,
    }
}

fn full_name(r: &Record) -> String {
    match &r.namespace {
        Some(ns) => format!("{ns}.{}", r.name),
        None => r.name.clone(),
    }
}

struct FromConnect {
    meta: bool,
    /// Required schemas already translated (AvroData's `schemaMap`): the same schema again
    /// is the same Avro schema, written by name.
    seen: Vec<(Schema, Avro)>,
    /// `ConnectDefault`, `ConnectDefault2`, ...
    default_names: u32,
}

/// Java's `splitName`: namespace up to the last dot.
fn split_name(name: &str) -> (Option<String>, String) {
    match name.rfind('.') {
        Some(i) => (Some(name[..i].to_owned()), name[i + 1..].to_owned()),
        None => (None, name.to_owned()),
    }
}

impl FromConnect {
    fn name_or_default(&mut self, name: Option<&str>) -> (Option<String>, String) {
        match name {
            Some(n) => split_name(n),
            None => {
                self.default_names += 1;
                let n = self.default_names;
                (
                    Some(NAMESPACE.into()),
                    if n > 1 {
                        format!("ConnectDefault{n}")
                    } else {
                        "ConnectDefault".into()
                    },
                )
            }
        }
    }

    fn schema(&mut self, schema: &Schema, ignore_optional: bool) -> Avro {
        if !schema.optional {
            if let Some((_, avro)) = self.seen.iter().find(|(s, _)| s == schema) {
                return avro.clone();
            }
        }
        let name = schema.name.as_deref();
        let mut connect_type = None;
        let mut props: Props = Vec::new();
        let base = match &schema.kind {
            SchemaType::Int8 => {
                connect_type = Some("int8");
                Avro::Primitive("int", Vec::new())
            }
            SchemaType::Int16 => {
                connect_type = Some("int16");
                Avro::Primitive("int", Vec::new())
            }
            SchemaType::Int32 => Avro::Primitive("int", Vec::new()),
            SchemaType::Int64 => Avro::Primitive("long", Vec::new()),
            SchemaType::Float32 => Avro::Primitive("float", Vec::new()),
            SchemaType::Float64 => Avro::Primitive("double", Vec::new()),
            SchemaType::Boolean => Avro::Primitive("boolean", Vec::new()),
            SchemaType::String => Avro::Primitive("string", Vec::new()),
            SchemaType::Bytes => {
                if name.is_some_and(|n| n.eq_ignore_ascii_case(DECIMAL)) {
                    let scale = param(schema, "scale").unwrap_or("0");
                    props.push(("scale", scale.parse::<i64>().unwrap_or(0).to_string()));
                    props.push((
                        "precision",
                        param(schema, PRECISION_PARAM)
                            .and_then(|p| p.parse::<u32>().ok())
                            .unwrap_or(DEFAULT_PRECISION)
                            .to_string(),
                    ));
                }
                Avro::Primitive("bytes", Vec::new())
            }
            SchemaType::Array(items) => {
                Avro::Array(Box::new(self.schema(items, false)), Vec::new())
            }
            SchemaType::Map(keys, values)
                if matches!(keys.kind, SchemaType::String) && !keys.optional =>
            {
                Avro::Map(Box::new(self.schema(values, false)), Vec::new())
            }
            SchemaType::Map(keys, values) => {
                let (namespace, entry_name, mut entry_props) = match name {
                    None => (
                        Some(NAMESPACE.to_owned()),
                        "MapEntry".to_owned(),
                        Vec::new(),
                    ),
                    Some(_) => {
                        let (ns, n) = self.name_or_default(name);
                        (
                            ns,
                            n,
                            vec![("connect.internal.type", json_text("MapEntry"))],
                        )
                    }
                };
                let fields = vec![self.field("key", keys), self.field("value", values)];
                entry_props.shrink_to_fit();
                Avro::Array(
                    Box::new(Avro::Record(Arc::new(Record {
                        namespace,
                        name: entry_name,
                        fields,
                        props: entry_props,
                    }))),
                    Vec::new(),
                )
            }
            SchemaType::Struct(_) if schema.optional => {
                let mut required = schema.clone();
                required.optional = false;
                let inner = self.schema(&required, false);
                return Avro::Union(vec![Avro::Null, inner]);
            }
            SchemaType::Struct(fields) => {
                let (namespace, record_name) = self.name_or_default(name);
                let fields = fields
                    .iter()
                    .map(|(field_name, field_schema)| self.field(field_name, field_schema))
                    .collect();
                Avro::Record(Arc::new(Record {
                    namespace,
                    name: record_name,
                    fields,
                    props: Vec::new(),
                }))
            }
        };
        // connect.* properties, then Avro's logical type.
        if self.meta {
            if let Some(doc) = &schema.doc {
                props.push(("connect.doc", json_text(doc)));
            }
            if let Some(version) = schema.version {
                props.push(("connect.version", version.to_string()));
            }
            if !schema.parameters.is_empty() {
                let mut out = Vec::new();
                out.push(b'{');
                for (i, (k, v)) in schema.parameters.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    write_string(&mut out, k);
                    out.push(b':');
                    write_string(&mut out, v);
                }
                out.push(b'}');
                props.push(("connect.parameters", String::from_utf8(out).expect("UTF-8")));
            }
            if let Some(default) = &schema.default {
                if let Some(json) = default_json(schema, default) {
                    props.push(("connect.default", json));
                }
            }
            if let Some(name) = name {
                props.push(("connect.name", json_text(name)));
            }
            if let Some(t) = connect_type {
                props.push(("connect.type", json_text(t)));
            }
        }
        if let Some(name) = name {
            let logical = if name.eq_ignore_ascii_case(DECIMAL) {
                Some("decimal")
            } else if name.eq_ignore_ascii_case(TIME) {
                Some("time-millis")
            } else if name.eq_ignore_ascii_case(TIMESTAMP) {
                Some("timestamp-millis")
            } else if name.eq_ignore_ascii_case(DATE) {
                Some("date")
            } else {
                None
            };
            if let Some(logical) = logical {
                props.push(("logicalType", json_text(logical)));
            }
        }
        let base = match base {
            Avro::Primitive(t, _) => Avro::Primitive(t, props),
            Avro::Array(items, _) => Avro::Array(items, props),
            Avro::Map(values, _) => Avro::Map(values, props),
            Avro::Record(r) => {
                let mut record = Arc::try_unwrap(r).unwrap_or_else(|r| Record {
                    namespace: r.namespace.clone(),
                    name: r.name.clone(),
                    fields: Vec::new(),
                    props: r.props.clone(),
                });
                record.props.extend(props);
                Avro::Record(Arc::new(record))
            }
            other => other,
        };
        let result = if !ignore_optional && schema.optional {
            if schema.default.is_some() {
                Avro::Union(vec![base, Avro::Null])
            } else {
                Avro::Union(vec![Avro::Null, base])
            }
        } else {
            base
        };
        if !schema.optional {
            self.seen.push((schema.clone(), result.clone()));
        }
        result
    }

    /// `addAvroRecordField`: the field's default is its schema's, else null when optional
    /// (none when Avro would refuse it: a default that is not the union's first branch).
    fn field(&mut self, name: &str, schema: &Schema) -> AvroField {
        let avro = self.schema(schema, false);
        let default = match &schema.default {
            Some(d) if !(schema.optional && matches!(schema.kind, SchemaType::Struct(_))) => {
                default_json(schema, d)
            }
            Some(_) => None,
            None if schema.optional => Some("null".into()),
            None => None,
        };
        AvroField {
            name: name.to_owned(),
            schema: avro,
            default,
        }
    }
}

fn param<'a>(schema: &'a Schema, key: &str) -> Option<&'a str> {
    schema
        .parameters
        .iter()
        .find(|(k, _)| &**k == key)
        .map(|(_, v)| &**v)
}

fn json_text(s: &str) -> String {
    let mut out = Vec::new();
    write_string(&mut out, s);
    String::from_utf8(out).expect("UTF-8")
}

/// `defaultValueFromConnect`: a default in Avro's JSON (bytes as ISO-8859-1 text, logical
/// types as their Avro values).
fn default_json(schema: &Schema, value: &Value) -> Option<String> {
    let mut out = Vec::new();
    write_default(&mut out, schema, value).ok()?;
    String::from_utf8(out).ok()
}

fn write_default(out: &mut Vec<u8>, schema: &Schema, value: &Value) -> Result<(), ()> {
    match (value, &schema.kind) {
        (Value::Null, _) => out.extend_from_slice(b"null"),
        (Value::Boolean(b), _) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        (Value::Int(i), _) => out.extend_from_slice(i.to_string().as_bytes()),
        (Value::Float(f), _) => write_double(out, *f),
        (Value::String(s), _) => write_string(out, std::str::from_utf8(s).map_err(|_| ())?),
        (Value::Bytes(b), _) => {
            let latin1: String = b.iter().map(|&c| char::from(c)).collect();
            write_string(out, &latin1);
        }
        (Value::Decimal(d), _) => {
            let latin1: String = d
                .unscaled_bytes()
                .ok_or(())?
                .iter()
                .map(|&c| char::from(c))
                .collect();
            write_string(out, &latin1);
        }
        (Value::Array(items), SchemaType::Array(item)) => {
            out.push(b'[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_default(out, item, v)?;
            }
            out.push(b']');
        }
        (Value::Struct(values), SchemaType::Struct(fields)) => {
            out.push(b'{');
            for (i, ((name, s), v)) in fields.iter().zip(values).enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(out, name);
                out.push(b':');
                let v = match (v, &s.default) {
                    (Value::Null, Some(d)) => d,
                    _ => v,
                };
                write_default(out, s, v)?;
            }
            out.push(b'}');
        }
        _ => return Err(()),
    }
    Ok(())
}

/// Avro's `Schema.toString()`: named schemas defined once, then referred to by name (short
/// within their namespace); `namespace` written when it differs from the enclosing one.
#[derive(Default)]
struct Names {
    defined: Vec<String>,
    space: Option<String>,
}

impl Names {
    fn write(&mut self, out: &mut Vec<u8>, avro: &Avro) {
        match avro {
            Avro::Null => out.extend_from_slice(b"\"null\""),
            Avro::Primitive(t, props) if props.is_empty() => {
                out.push(b'"');
                out.extend_from_slice(t.as_bytes());
                out.push(b'"');
            }
            Avro::Primitive(t, props) => {
                out.extend_from_slice(b"{\"type\":\"");
                out.extend_from_slice(t.as_bytes());
                out.push(b'"');
                write_props(out, props);
                out.push(b'}');
            }
            Avro::Array(items, props) => {
                out.extend_from_slice(b"{\"type\":\"array\",\"items\":");
                self.write(out, items);
                write_props(out, props);
                out.push(b'}');
            }
            Avro::Map(values, props) => {
                out.extend_from_slice(b"{\"type\":\"map\",\"values\":");
                self.write(out, values);
                write_props(out, props);
                out.push(b'}');
            }
            Avro::Union(branches) => {
                out.push(b'[');
                for (i, b) in branches.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    self.write(out, b);
                }
                out.push(b']');
            }
            Avro::Record(r) => {
                let full = full_name(r);
                if self.defined.contains(&full) {
                    let short = if r.namespace == self.space {
                        r.name.clone()
                    } else {
                        full
                    };
                    write_string(out, &short);
                    return;
                }
                self.defined.push(full);
                out.extend_from_slice(b"{\"type\":\"record\",\"name\":");
                write_string(out, &r.name);
                match (&r.namespace, &self.space) {
                    (Some(ns), space) if Some(ns) != space.as_ref() => {
                        out.extend_from_slice(b",\"namespace\":");
                        write_string(out, ns);
                    }
                    (None, Some(_)) => out.extend_from_slice(b",\"namespace\":\"\""),
                    _ => {}
                }
                let saved = std::mem::replace(&mut self.space, r.namespace.clone());
                out.extend_from_slice(b",\"fields\":[");
                for (i, f) in r.fields.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(b"{\"name\":");
                    write_string(out, &f.name);
                    out.extend_from_slice(b",\"type\":");
                    self.write(out, &f.schema);
                    if let Some(d) = &f.default {
                        out.extend_from_slice(b",\"default\":");
                        out.extend_from_slice(d.as_bytes());
                    }
                    out.push(b'}');
                }
                out.push(b']');
                write_props(out, &r.props);
                out.push(b'}');
                self.space = saved;
            }
        }
    }
}

fn write_props(out: &mut Vec<u8>, props: &Props) {
    for (k, v) in props {
        out.push(b',');
        write_string(out, k);
        out.push(b':');
        out.extend_from_slice(v.as_bytes());
    }
}

// ---------------------------------------------------------------------------------------
// AvroData.fromConnectData + Avro's binary encoding
// ---------------------------------------------------------------------------------------

/// Avro's long: zigzag-encoded, then a varint as Protobuf's.
fn write_long(out: &mut Vec<u8>, v: i64) {
    write_varint(out, ((v << 1) ^ (v >> 63)) as u64);
}

fn write_bytes(out: &mut Vec<u8>, b: &[u8]) {
    write_long(out, b.len() as i64);
    out.extend_from_slice(b);
}

/// The union branch index of an optional schema's value: `[null, T]` unless a non-struct
/// schema has a default (`[T, null]`).
fn null_first(schema: &Schema) -> bool {
    matches!(schema.kind, SchemaType::Struct(_)) || schema.default.is_none()
}

/// A value where the schema says: `Struct.get` has already replaced a null field with its
/// default; a null here is a union's null branch or an error.
fn write_value(out: &mut Vec<u8>, schema: &Schema, value: &Value) -> Result<(), String> {
    if schema.optional {
        let first = null_first(schema);
        // Branch 0 or 1, zigzag-encoded.
        let branch = if value.is_null() == first { 0 } else { 2 };
        out.push(branch);
        if value.is_null() {
            return Ok(());
        }
    } else if value.is_null() {
        return Err("Found null value for non-optional schema".into());
    }
    let name = schema.name.as_deref();
    let mismatch = || {
        format!(
            "Invalid Java object for schema with type {}: {}",
            schema.kind.type_name(),
            super::data::java_class(Some(schema), value)
        )
    };
    match (&schema.kind, value) {
        (SchemaType::Boolean, Value::Boolean(b)) => out.push(u8::from(*b)),
        (SchemaType::Int8 | SchemaType::Int16 | SchemaType::Int32, Value::Int(i)) => {
            write_long(out, i64::from(*i as i32))
        }
        (SchemaType::Int64, Value::Int(i)) => write_long(out, *i),
        (SchemaType::Float32, Value::Float(f)) => out.extend_from_slice(&(*f as f32).to_le_bytes()),
        (SchemaType::Float64, Value::Float(f)) => out.extend_from_slice(&f.to_le_bytes()),
        (SchemaType::String, Value::String(s)) => write_bytes(out, s),
        (SchemaType::Bytes, Value::Bytes(b)) => write_bytes(out, b),
        (SchemaType::Bytes, Value::Decimal(d))
            if name.is_some_and(|n| n.eq_ignore_ascii_case(DECIMAL)) =>
        {
            let scale: u32 = param(schema, "scale")
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            let bytes = match d {
                super::pg_text::Numeric::Finite { scale: have, .. } if *have == scale => {
                    d.unscaled_bytes()
                }
                super::pg_text::Numeric::Finite { .. } => {
                    return Err(
                        "BigDecimal has mismatching scale value for given Decimal schema".into(),
                    )
                }
                _ => None,
            }
            .ok_or_else(|| format!("{} is not a BigDecimal", d.java_string()))?;
            write_bytes(out, &bytes);
        }
        (SchemaType::Array(item), Value::Array(items)) => {
            if !items.is_empty() {
                write_long(out, items.len() as i64);
                for v in items {
                    write_field(out, item, v)?;
                }
            }
            out.push(0);
        }
        (SchemaType::Map(k, v), Value::Map(entries)) => {
            if !entries.is_empty() {
                write_long(out, entries.len() as i64);
                if matches!(k.kind, SchemaType::String) && !k.optional {
                    // A java.util.HashMap<String, Object> in AvroData: its order.
                    let pairs = entries
                        .iter()
                        .map(|(key, val)| {
                            let key = match key {
                                Value::String(s) => String::from_utf8_lossy(s).into_owned(),
                                _ => return Err(mismatch()),
                            };
                            Ok((key, val))
                        })
                        .collect::<Result<Vec<_>, String>>()?;
                    for (key, val) in java_hash_map_order(pairs) {
                        write_bytes(out, key.as_bytes());
                        write_field(out, v, val)?;
                    }
                } else {
                    for (key, val) in entries {
                        write_field(out, k, key)?;
                        write_field(out, v, val)?;
                    }
                }
            }
            out.push(0);
        }
        (SchemaType::Struct(fields), Value::Struct(values)) => {
            for (i, (_, field_schema)) in fields.iter().enumerate() {
                write_field(out, field_schema, values.get(i).unwrap_or(&Value::Null))?;
            }
        }
        _ => return Err(mismatch()),
    }
    Ok(())
}

/// A struct field, array item or map entry: `Struct.get` gives a null field its default.
fn write_field(out: &mut Vec<u8>, schema: &Schema, value: &Value) -> Result<(), String> {
    match (value, &schema.default) {
        (Value::Null, Some(default)) => write_value(out, schema, default),
        (Value::Null, None) if !schema.optional => Err(
            "Conversion error: null value for field that is required and has no default value"
                .into(),
        ),
        _ => write_value(out, schema, value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect::registry::fixed::FixedRegistry;
    use crate::connect::registry::{SchemaFormat, SubjectNameStrategy};
    use crate::connect::Numeric;

    fn converter(id: u64) -> (AvroConverter, Arc<FixedRegistry>) {
        let (serde, registry) = FixedRegistry::serde(id);
        let c = AvroConverter::new(AvroClass::Confluent, serde, Framing::Confluent);
        (c, registry)
    }

    fn s(kind: SchemaType, optional: bool) -> Schema {
        Schema::new(kind, optional)
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    /// Writes `value` with a registry answering `id`; the bytes and the schema registered.
    fn write(id: u64, topic: &str, schema: &Schema, value: &Value) -> (String, String, String) {
        let (c, registry) = converter(id);
        let bytes = c
            .encode(topic, Some(schema), value, &mut Vec::new())
            .unwrap();
        let asked = registry.last().unwrap();
        assert_eq!((asked.format, asked.references), (SchemaFormat::Avro, 0));
        (hex(&bytes.unwrap()), asked.subject, asked.text)
    }

    // The expected bytes and schemas below are what Confluent's AvroConverter 7.0.16
    // (kafka-connect-avro-data 7.0.16, Avro 1.11.3) wrote for the same Connect schemas and
    // values against Apicurio Registry 2.6.13's ccompat API, which gave ids 1 to 5; the
    // schemas are `AvroData.fromConnectSchema(...).toString()`.

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
        let (bytes, subject, json) = write(1, "orders", &schema, &value);
        assert_eq!(bytes, "00000000015402046869");
        assert_eq!(subject, "orders-value");
        assert_eq!(
            json,
            r#"{"type":"record","name":"Order","namespace":"t","fields":[{"name":"id","type":"long"},{"name":"note","type":["null","string"],"default":null}],"connect.name":"t.Order"}"#
        );
    }

    #[test]
    fn every_connect_type() {
        let decimal = |scale: &str, precision: Option<&str>, optional| {
            let mut d = s(SchemaType::Bytes, optional).named(DECIMAL, Some(1));
            d.parameters.push(("scale".into(), scale.into()));
            if let Some(p) = precision {
                d.parameters.push((PRECISION_PARAM.into(), p.into()));
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
                    s(SchemaType::Int32, false).named(DATE, Some(1)),
                ),
                (
                    "tm".into(),
                    s(SchemaType::Int32, false).named(TIME, Some(1)),
                ),
                (
                    "ts".into(),
                    s(SchemaType::Int64, false).named(TIMESTAMP, Some(1)),
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
                ("item".into(), nested.clone()),
                ("item2".into(), nested),
                (
                    "payload".into(),
                    s(SchemaType::String, false).named("io.debezium.data.Json", Some(1)),
                ),
                ("region".into(), region),
                ("missing".into(), s(SchemaType::Int64, true)),
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
            Value::Null,
            Value::text(r#"{"id": 1}"#),
            Value::Null,
            Value::Null,
        ]);
        let (bytes, subject, json) = write(2, "orders", &envelope, &value);
        assert_eq!(
            bytes,
            "000000000209d804dfc5089693d89fee470000c03f00000000000002c0010c68c3a96c6c6f02060001ff0204cfc704ff7fc8c002feefb252a0cae9f396670204027804797a00040261020202620000040e0a736576656ed7040278000206412d31020600127b226964223a20317d0004657500"
        );
        assert_eq!(subject, "orders-value");
        assert_eq!(
            json,
            concat!(
                r#"{"type":"record","name":"Value","namespace":"dbserver1.public.outbox.orders","fields":[{"name":"i8","type":{"type":"int","connect.type":"int8"}},{"name":"i16","type":{"type":"int","connect.type":"int16"}},{"name":"i32","type":"int"},{"name":"i64","type":"long"},{"name":"f32","type":"float"},{"name":"f64","type":"double"},{"name":"b","type":"boolean"},{"name":"s","type":"string"},{"name":"raw","type":["null","bytes"],"default":null},"#,
                r#"{"name":"amount","type":["null",{"type":"bytes","scale":2,"precision":10,"connect.version":1,"connect.parameters":{"scale":"2","connect.decimal.precision":"10"},"connect.name":"org.apache.kafka.connect.data.Decimal","logicalType":"decimal"}],"default":null},{"name":"neg","type":{"type":"bytes","scale":0,"precision":64,"connect.version":1,"connect.parameters":{"scale":"0"},"connect.name":"org.apache.kafka.connect.data.Decimal","logicalType":"decimal"}},"#,
                r#"{"name":"day","type":{"type":"int","connect.version":1,"connect.name":"org.apache.kafka.connect.data.Date","logicalType":"date"}},{"name":"tm","type":{"type":"int","connect.version":1,"connect.name":"org.apache.kafka.connect.data.Time","logicalType":"time-millis"}},{"name":"ts","type":{"type":"long","connect.version":1,"connect.name":"org.apache.kafka.connect.data.Timestamp","logicalType":"timestamp-millis"}},"#,
                r#"{"name":"tags","type":["null",{"type":"array","items":"string"}],"default":null},{"name":"attrs","type":{"type":"map","values":["null","int"]}},{"name":"byid","type":{"type":"array","items":{"type":"record","name":"MapEntry","namespace":"io.confluent.connect.avro","fields":[{"name":"key","type":"int"},{"name":"value","type":"string"}]}}},"#,
                r#"{"name":"item","type":["null",{"type":"record","name":"ConnectDefault","namespace":"io.confluent.connect.avro","fields":[{"name":"sku","type":"string"},{"name":"qty","type":["null","int"],"default":null}]}],"default":null},{"name":"item2","type":["null","io.confluent.connect.avro.ConnectDefault"],"default":null},"#,
                r#"{"name":"payload","type":{"type":"string","connect.version":1,"connect.name":"io.debezium.data.Json"}},{"name":"region","type":[{"type":"string","connect.default":"eu"},"null"],"default":"eu"},{"name":"missing","type":["null","long"],"default":null}],"connect.doc":"envelope","connect.version":3,"connect.name":"dbserver1.public.outbox.orders.Value"}"#
            )
        );
    }

    #[test]
    fn top_level_primitives_and_nulls() {
        let optional = s(SchemaType::String, true);
        let (bytes, subject, json) = write(3, "strs", &optional, &Value::text("x"));
        assert_eq!(
            (bytes.as_str(), json.as_str()),
            ("0000000003020278", r#"["null","string"]"#)
        );
        assert_eq!(subject, "strs-value");
        let (c, _) = converter(3);
        assert_eq!(
            c.encode("strs", Some(&optional), &Value::Null, &mut Vec::new()),
            Ok(None)
        );
        assert_eq!(
            c.encode("strs", None, &Value::Null, &mut Vec::new()),
            Ok(None)
        );
        assert!(matches!(
            c.encode(
                "strs",
                Some(&s(SchemaType::String, false)),
                &Value::Null,
                &mut Vec::new()
            ),
            Err(SerdeError::Record(_))
        ));
        let (bytes, _, json) = write(4, "keys", &s(SchemaType::String, false), &Value::text("k1"));
        assert_eq!(
            (bytes.as_str(), json.as_str()),
            ("0000000004046b31", r#""string""#)
        );
    }

    #[test]
    fn nameless_structs_are_connect_defaults() {
        let inner = |name: &str, kind| {
            s(
                SchemaType::Struct(vec![(name.into(), s(kind, false))]),
                false,
            )
        };
        let schema = s(
            SchemaType::Struct(vec![
                ("a".into(), inner("x", SchemaType::Int32)),
                ("b".into(), inner("y", SchemaType::String)),
            ]),
            false,
        );
        let value = Value::Struct(vec![
            Value::Struct(vec![Value::Int(1)]),
            Value::Struct(vec![Value::text("z")]),
        ]);
        let (bytes, _, json) = write(5, "anon", &schema, &value);
        assert_eq!(bytes, "000000000502027a");
        assert_eq!(
            json,
            r#"{"type":"record","name":"ConnectDefault","namespace":"io.confluent.connect.avro","fields":[{"name":"a","type":{"type":"record","name":"ConnectDefault2","fields":[{"name":"x","type":"int"}]}},{"name":"b","type":{"type":"record","name":"ConnectDefault3","fields":[{"name":"y","type":"string"}]}}]}"#
        );
    }

    #[test]
    fn subjects_by_strategy_and_eight_byte_ids() {
        let schema = s(SchemaType::Struct(vec![]), false).named("a.B", None);
        let avro = avro_schema(&schema, true);
        let (mut c, _) = converter(7);
        assert_eq!(c.subject("t", &avro).unwrap(), "t-value");
        c.serde.is_key = true;
        assert_eq!(c.subject("t", &avro).unwrap(), "t-key");
        c.serde.strategy = SubjectNameStrategy::Record;
        assert_eq!(c.subject("t", &avro).unwrap(), "a.B");
        c.serde.strategy = SubjectNameStrategy::TopicRecord;
        assert_eq!(c.subject("t", &avro).unwrap(), "t-a.B");
        c.framing = Framing::Long;
        let mut headers = Vec::new();
        let bytes = c
            .encode("t", Some(&schema), &Value::Struct(vec![]), &mut headers)
            .unwrap()
            .unwrap();
        assert_eq!(hex(&bytes), "000000000000000007");
        assert!(headers.is_empty());
        c.serde.is_key = false;
        c.framing = Framing::Headers { content_id: false };
        let value = Value::Struct(vec![]);
        let bytes = c.encode("t", Some(&schema), &value, &mut headers).unwrap();
        assert_eq!(bytes.as_deref(), Some(&[][..]));
        assert_eq!(
            headers,
            vec![
                (
                    Arc::from("apicurio.value.globalId"),
                    Some(Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0, 7]))
                ),
                (
                    Arc::from("apicurio.value.encoding"),
                    Some(Bytes::from_static(b"BINARY"))
                ),
            ]
        );
    }

    // What Confluent's AvroConverter 7.0.16 does under the record name strategies, observed
    // with a Java harness (not in the repository) running its jars (kafka-connect-avro-converter,
    // kafka-avro-serializer, kafka-schema-serializer 7.0.16, Avro 1.11.3, Connect API 4.3):
    // `new AvroConverter(new MockSchemaRegistryClient())`, configured with
    // `{key|value}.subject.name.strategy`, then `fromConnectData("tp", schema, value)`. A
    // record is registered under its full name (`tp-` before it); any other schema, a union
    // with null (an optional struct) included, fails with a DataException "Failed to
    // serialize Avro data from topic tp :" caused by a SerializationException whose message
    // is pinned here, and registers nothing. A null is written as a Kafka null first.
    #[test]
    fn record_name_strategies_refuse_what_is_not_a_record() {
        let optional_struct = s(
            SchemaType::Struct(vec![("x".into(), s(SchemaType::Int32, false))]),
            true,
        )
        .named("a.B", None);
        let mut decimal = s(SchemaType::Bytes, false).named(DECIMAL, Some(1));
        decimal.parameters.push(("scale".into(), "2".into()));
        let not_records = [
            (s(SchemaType::String, false), Value::text("x")),
            (s(SchemaType::String, true), Value::text("x")),
            (
                s(SchemaType::String, false).named("io.debezium.data.Json", Some(1)),
                Value::text("{}"),
            ),
            (
                s(SchemaType::Bytes, false),
                Value::Bytes(Bytes::from_static(&[1])),
            ),
            (s(SchemaType::Int8, false), Value::Int(1)),
            (s(SchemaType::Int64, false), Value::Int(5)),
            (s(SchemaType::Boolean, false), Value::Boolean(true)),
            (s(SchemaType::Float64, false), Value::Float(1.5)),
            (
                s(SchemaType::Int32, false).named(DATE, Some(1)),
                Value::Int(1),
            ),
            (
                s(SchemaType::Int64, false).named(TIMESTAMP, Some(1)),
                Value::Int(1000),
            ),
            (decimal, Value::Decimal(Numeric::parse("1.23").unwrap())),
            (
                s(
                    SchemaType::Array(Box::new(s(SchemaType::String, false))),
                    false,
                ),
                Value::Array(vec![Value::text("a")]),
            ),
            (
                s(
                    SchemaType::Map(
                        Box::new(s(SchemaType::String, false)),
                        Box::new(s(SchemaType::Int32, false)),
                    ),
                    false,
                ),
                Value::Map(vec![(Value::text("k"), Value::Int(1))]),
            ),
            // An array of MapEntry records: still an array.
            (
                s(
                    SchemaType::Map(
                        Box::new(s(SchemaType::Int32, false)),
                        Box::new(s(SchemaType::String, false)),
                    ),
                    false,
                ),
                Value::Map(vec![(Value::Int(1), Value::text("v"))]),
            ),
            (optional_struct.clone(), Value::Struct(vec![Value::Int(1)])),
        ];
        for (strategy, class) in [
            (SubjectNameStrategy::Record, "RecordNameStrategy"),
            (SubjectNameStrategy::TopicRecord, "TopicRecordNameStrategy"),
        ] {
            for (is_key, part) in [(false, "value"), (true, "key")] {
                let (serde, registry) = FixedRegistry::serde_for(0, is_key, strategy);
                let c = AvroConverter::new(AvroClass::Confluent, serde, Framing::Confluent);
                for (schema, value) in &not_records {
                    assert_eq!(
                        c.encode("tp", Some(schema), value, &mut Vec::new()),
                        Err(SerdeError::Record(format!(
                            "Failed to serialize Avro data from topic tp : In configuration \
                             {part}.subject.name.strategy = io.confluent.kafka.serializers.subject.{class}, \
                             the message {part} must only be a record schema"
                        ))),
                        "{schema:?}"
                    );
                    // A null is a Kafka null, whatever the strategy.
                    if schema.optional {
                        assert_eq!(
                            c.encode("tp", Some(schema), &Value::Null, &mut Vec::new()),
                            Ok(None)
                        );
                    }
                }
                assert!(registry.asked_nothing());
                // A nameless struct is a record: ConnectDefault.
                let anon = s(
                    SchemaType::Struct(vec![("x".into(), s(SchemaType::Int32, false))]),
                    false,
                );
                let bytes = c
                    .encode(
                        "tp",
                        Some(&anon),
                        &Value::Struct(vec![Value::Int(1)]),
                        &mut Vec::new(),
                    )
                    .unwrap()
                    .unwrap();
                assert_eq!(hex(&bytes), "000000000002");
                let subject = registry.last().unwrap().subject;
                let name = "io.confluent.connect.avro.ConnectDefault";
                assert_eq!(
                    subject,
                    match strategy {
                        SubjectNameStrategy::TopicRecord => format!("tp-{name}"),
                        _ => name.to_owned(),
                    }
                );
            }
        }
    }

    #[test]
    fn connect_meta_data_off_leaves_only_avro() {
        let schema = s(SchemaType::Int16, false).named("x.Y", Some(2));
        assert_eq!(avro_schema(&schema, false).json, r#""int""#);
        assert_eq!(
            avro_schema(&schema, true).json,
            r#"{"type":"int","connect.version":2,"connect.name":"x.Y","connect.type":"int16"}"#
        );
    }

    #[test]
    fn schema_names_are_adjusted_as_debeziums_avro_mode_adjusts_them() {
        assert_eq!(
            avro_fullname("orders-server.public.outbox.Value"),
            "orders_server.public.outbox.Value"
        );
        assert_eq!(avro_fullname("1st.public.t"), "_1st.public.t");
        assert_eq!(avro_fullname("-x"), "_x");
        assert_eq!(avro_fullname("a.ü🚀"), "a.___");
        assert_eq!(avro_fullname("fine_Name.v1"), "fine_Name.v1");
    }
}
