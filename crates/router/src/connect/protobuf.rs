//! Confluent's schema-registry Protobuf converter, byte for byte: what
//! `io.confluent.connect.protobuf.ProtobufConverter` (kafka-connect-protobuf-converter 7.0.x,
//! `ProtobufData`, with kafka-protobuf-provider's `ProtobufSchema`) writes for a Connect schema
//! and value.
//!
//! - The schema: a struct becomes a proto3 file whose package is the Connect name's namespace
//!   and whose one top-level message is its last part (`ConnectDefault1` without a name);
//!   fields are numbered in order, nested structs and map entries are nested messages,
//!   Connect's Decimal, Date, Time and Timestamp are `confluent.type.Decimal`,
//!   `google.type.Date`, `google.type.TimeOfDay` and `google.protobuf.Timestamp` (imported,
//!   and, being known types, registered without references), INT8/INT16 carry a
//!   `(confluent.field_meta)` `connect.type` parameter and decimals their precision and scale.
//!   A schema that is not a struct is one of `google/protobuf/wrappers.proto`'s messages.
//!   Connect's names, versions and docs are otherwise not kept.
//! - The record: magic byte 0, the four-byte id, the message indexes (Kafka's zigzag
//!   varints; one 0 for the first message), then the message in Protobuf's binary encoding
//!   (proto3: a field equal to its type's zero value is not written unless it has presence).
//!
//! Options: `optional.for.nullables` (optional fields as proto3 `optional`),
//! `wrapper.for.nullables` (optional primitives as `google.protobuf.*Value` messages) and
//! `scrub.invalid.names`. What `ProtobufData` does with Protobuf-specific Connect parameters
//! (unions, enums, tags, unsigned types) is not written here: such schemas are refused.
//!
//! The router does no I/O: the registry is a
//! [`SchemaRegistry`](super::registry::SchemaRegistry) the relay provides.

use super::data::{java_class, Schema, SchemaType, Value};
use super::pg_text::{civil_from_days, Numeric};
use super::registry::{
    confluent_prefix, RegistrySerde, SchemaCache, SchemaFormat, SchemaText, SerdeError,
};
use bytes::Bytes;
use std::sync::Arc;

const CLASS: &str = "io.confluent.connect.protobuf.ProtobufConverter";
const DECIMAL: &str = "org.apache.kafka.connect.data.Decimal";
const DATE: &str = "org.apache.kafka.connect.data.Date";
const TIME: &str = "org.apache.kafka.connect.data.Time";
const TIMESTAMP: &str = "org.apache.kafka.connect.data.Timestamp";
/// ProtobufData's parameters for Protobuf types Connect has not (written by its
/// `toConnectSchema`, never by Debezium): refused.
const PROTOBUF_PARAMS: [&str; 3] = [
    "io.confluent.connect.protobuf.Tag",
    "io.confluent.connect.protobuf.Type",
    "io.confluent.connect.protobuf.Enum",
];
const UNION_PREFIX: &str = "io.confluent.connect.protobuf.Union.";

/// `google/protobuf/wrappers.proto` as protobuf-java 3.25.5 describes it and
/// `ProtobufSchema.canonicalString()` writes it: the schema of a key or value that is not a
/// struct.
const WRAPPERS: &str = r#"syntax = "proto3";
package google.protobuf;

option java_package = "com.google.protobuf";
option java_outer_classname = "WrappersProto";
option java_multiple_files = true;
option go_package = "google.golang.org/protobuf/types/known/wrapperspb";
option cc_enable_arenas = true;
option objc_class_prefix = "GPB";
option csharp_namespace = "Google.Protobuf.WellKnownTypes";

message DoubleValue {
  double value = 1 [json_name = "value"];
}
message FloatValue {
  float value = 1 [json_name = "value"];
}
message Int64Value {
  int64 value = 1 [json_name = "value"];
}
message UInt64Value {
  uint64 value = 1 [json_name = "value"];
}
message Int32Value {
  int32 value = 1 [json_name = "value"];
}
message UInt32Value {
  uint32 value = 1 [json_name = "value"];
}
message BoolValue {
  bool value = 1 [json_name = "value"];
}
message StringValue {
  string value = 1 [json_name = "value"];
}
message BytesValue {
  bytes value = 1 [json_name = "value"];
}
"#;

/// `ProtobufDataConfig`'s options that change what is written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProtobufOptions {
    /// `optional.for.nullables`: optional fields are proto3 `optional` (they have presence).
    pub optional_for_nullables: bool,
    /// `wrapper.for.nullables`: optional primitives are `google.protobuf.*Value` messages.
    pub wrapper_for_nullables: bool,
    /// `scrub.invalid.names`: names made valid Protobuf identifiers.
    pub scrub_invalid_names: bool,
}

/// A configured Protobuf converter (one for keys, one for values).
#[derive(Debug, PartialEq, Eq)]
pub struct ProtobufConverter {
    pub serde: RegistrySerde,
    pub options: ProtobufOptions,
    /// The schemas translated lately (ProtobufData's schema cache).
    translated: SchemaCache<Result<ProtobufSchema, String>>,
}

/// Connect's schema in Protobuf: the text registered, the full name of the message written
/// (what RecordNameStrategy names the subject after) and its message indexes as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtobufSchema {
    pub text: String,
    pub full_name: String,
    pub indexes: Vec<u8>,
}

impl ProtobufConverter {
    pub fn new(serde: RegistrySerde, options: ProtobufOptions) -> Self {
        Self {
            serde,
            options,
            translated: SchemaCache::new(),
        }
    }

    /// Kafka Connect's name of this converter.
    pub fn class(&self) -> &'static str {
        CLASS
    }

    fn translate(&self, schema: &Schema) -> Arc<Result<ProtobufSchema, String>> {
        self.translated
            .get(schema, || protobuf_schema(schema, self.options))
    }

    /// The subject the schema is registered under (its message always has a name: the
    /// record name strategies name the subject after it).
    pub fn subject(&self, topic: &str, schema: &ProtobufSchema) -> Result<String, String> {
        self.serde.subject(topic, Some(&schema.full_name))
    }

    /// The bytes of a key or value written to `topic`; `None` for a null (Kafka null).
    pub fn encode(
        &self,
        topic: &str,
        schema: Option<&Schema>,
        value: &Value,
    ) -> Result<Option<Bytes>, SerdeError> {
        // ProtobufData ignores a null whatever its schema says.
        if value.is_null() {
            return Ok(None);
        }
        let Some(schema) = schema else {
            return Err(SerdeError::Record(
                "a value without a schema is not written by outbox-relay's Protobuf converter"
                    .into(),
            ));
        };
        let translated = self.translate(schema);
        let proto = translated
            .as_ref()
            .as_ref()
            .map_err(|e| SerdeError::Record(e.clone()))?;
        let mut body = Vec::with_capacity(64);
        Writer {
            options: self.options,
        }
        .top(&mut body, schema, value)
        .map_err(SerdeError::Record)?;
        let failed = |m: String| {
            SerdeError::Record(format!(
                "Failed to serialize Protobuf data from topic {topic} : {m}"
            ))
        };
        let text = SchemaText {
            format: SchemaFormat::Protobuf,
            text: &proto.text,
            references: &[],
        };
        let id = self
            .serde
            .id(topic, Some(&proto.full_name), &text, failed)?;
        let mut out = Vec::with_capacity(body.len() + 5 + proto.indexes.len());
        out.extend_from_slice(&confluent_prefix(id).map_err(SerdeError::Record)?);
        out.extend_from_slice(&proto.indexes);
        out.extend_from_slice(&body);
        Ok(Some(out.into()))
    }
}

// ---------------------------------------------------------------------------------------
// ProtobufData.fromConnectSchema + ProtobufSchema.canonicalString
// ---------------------------------------------------------------------------------------

/// A message as `ProtobufData` defines it.
#[derive(Debug)]
struct Message {
    name: String,
    fields: Vec<Field>,
    nested: Vec<Message>,
    /// Struct types defined here (`FromConnectContext`), with the schema defining them.
    children: Vec<(String, Schema)>,
}

#[derive(Debug)]
struct Field {
    /// `repeated`, proto3 `optional`, or none.
    label: Option<&'static str>,
    ty: String,
    name: String,
    tag: usize,
    /// `(confluent.field_meta)` params, in the order `ProtobufSchema` writes them.
    params: Vec<(&'static str, String)>,
}

/// Connect's schema in Protobuf, as `ProtobufData.fromConnectSchema` builds it; an error for
/// what Confluent's converter refuses, or for what outbox-relay does not write.
pub fn protobuf_schema(
    schema: &Schema,
    options: ProtobufOptions,
) -> Result<ProtobufSchema, String> {
    let mut ctx = FromConnect {
        options,
        default_names: 0,
        imports: Vec::new(),
    };
    let wrapper = |message: &str, index: u8| ProtobufSchema {
        text: WRAPPERS.to_owned(),
        full_name: format!("google.protobuf.{message}"),
        indexes: if index == 0 {
            vec![0]
        } else {
            // One index, zigzag-encoded.
            vec![2, index * 2]
        },
    };
    let logical = matches!(
        schema.name.as_deref(),
        Some(DECIMAL | DATE | TIME | TIMESTAMP)
    );
    let (message, index) = match &schema.kind {
        SchemaType::Int8 | SchemaType::Int16 | SchemaType::Int32 => ("Int32Value", 4),
        SchemaType::Int64 => ("Int64Value", 2),
        SchemaType::Float32 => ("FloatValue", 1),
        SchemaType::Float64 => ("DoubleValue", 0),
        SchemaType::Boolean => ("BoolValue", 6),
        SchemaType::String => ("StringValue", 7),
        SchemaType::Bytes => ("BytesValue", 8),
        SchemaType::Array(_) | SchemaType::Map(..) => {
            return Err(format!(
                "Unsupported root schema of type {}",
                schema.kind.type_name()
            ))
        }
        SchemaType::Struct(_) => {
            let full = ctx.name_or_default(schema.name.as_deref());
            let (namespace, name) = ctx.split_name(&full);
            let root = ctx.message(&name, schema)?;
            let mut text = String::from("syntax = \"proto3\";\n");
            if let Some(ns) = &namespace {
                text.push_str(&format!("package {ns};\n"));
            }
            if !ctx.imports.is_empty() {
                text.push('\n');
                for file in &ctx.imports {
                    text.push_str(&format!("import \"{file}\";\n"));
                }
            }
            text.push('\n');
            text.push_str(&render_message(&root));
            let full_name = match &namespace {
                Some(ns) => format!("{ns}.{name}"),
                None => name.clone(),
            };
            let indexes = message_indexes(&full_name, &root);
            return Ok(ProtobufSchema {
                text,
                full_name,
                indexes,
            });
        }
    };
    let mut proto = wrapper(message, index);
    if logical {
        // The value is a Decimal, Date, TimeOfDay or Timestamp message, which the wrappers'
        // file has not: no message index.
        proto.indexes = vec![0];
    }
    Ok(proto)
}

/// `ProtobufSchema.toMessageIndexes`: the full name's parts looked up among the messages,
/// outermost first (the package's parts find none); `[0]` written as one 0.
fn message_indexes(full_name: &str, root: &Message) -> Vec<u8> {
    let mut indexes: Vec<usize> = Vec::new();
    let roots = std::slice::from_ref(root);
    let mut types: &[Message] = roots;
    for part in java_split(full_name) {
        if let Some(i) = types.iter().position(|m| m.name == part) {
            indexes.push(i);
            types = &types[i].nested;
        }
    }
    if indexes == [0] {
        return vec![0];
    }
    let mut out = Vec::new();
    write_varint(&mut out, (indexes.len() as u64) << 1);
    for i in indexes {
        write_varint(&mut out, (i as u64) << 1);
    }
    out
}

/// Java's `split("\\.")`: trailing empty parts dropped.
fn java_split(name: &str) -> Vec<&str> {
    let mut parts: Vec<&str> = name.split('.').collect();
    while parts.len() > 1 && parts.last() == Some(&"") {
        parts.pop();
    }
    if parts == [""] {
        parts.clear();
    }
    parts
}

struct FromConnect {
    options: ProtobufOptions,
    /// `ConnectDefault1`, `ConnectDefault2`, ... (one count for the whole schema).
    default_names: u32,
    /// Files imported, in the order first needed.
    imports: Vec<&'static str>,
}

impl FromConnect {
    fn scrub(&self, name: &str) -> String {
        if self.options.scrub_invalid_names {
            scrub_name(name)
        } else {
            name.to_owned()
        }
    }

    fn name_or_default(&mut self, name: Option<&str>) -> String {
        match name {
            Some(n) if !n.is_empty() => n.to_owned(),
            _ => {
                self.default_names += 1;
                format!("ConnectDefault{}", self.default_names)
            }
        }
    }

    /// `splitName`: the namespace (its parts scrubbed) and the last part.
    fn split_name(&self, full: &str) -> (Option<String>, String) {
        let parts: Vec<String> = java_split(full).iter().map(|p| self.scrub(p)).collect();
        match parts.len() {
            0 => (None, String::new()),
            1 => (None, parts[0].clone()),
            n => (Some(parts[..n - 1].join(".")), parts[n - 1].clone()),
        }
    }

    /// `getUnqualifiedName`.
    fn unqualified(&mut self, name: Option<&str>) -> String {
        let full = self.name_or_default(name);
        let last = full.rsplit('.').next().unwrap_or(&full);
        self.scrub(last)
    }

    fn message(&mut self, name: &str, schema: &Schema) -> Result<Message, String> {
        let SchemaType::Struct(fields) = &schema.kind else {
            unreachable!("messages are structs")
        };
        check_identifier(name)?;
        let mut message = Message {
            name: name.to_owned(),
            fields: Vec::new(),
            nested: Vec::new(),
            children: Vec::new(),
        };
        for (i, (field_name, field_schema)) in fields.iter().enumerate() {
            let field_name = self.scrub(field_name);
            let field = self.field(&mut message, field_schema, field_name, i + 1, false)?;
            message.fields.push(field);
        }
        check_unique(&message)?;
        Ok(message)
    }

    /// `fieldDefinitionFromConnectSchema`; `in_entry` for a map entry's key and value (which
    /// are added without their label's `optional` and without params).
    fn field(
        &mut self,
        parent: &mut Message,
        schema: &Schema,
        name: String,
        tag: usize,
        in_entry: bool,
    ) -> Result<Field, String> {
        check_identifier(&name)?;
        let (label, schema) = match &schema.kind {
            SchemaType::Array(items) => (Some("repeated"), &**items),
            SchemaType::Map(..) => (Some("repeated"), schema),
            _ if self.options.optional_for_nullables && schema.optional && !in_entry => {
                (Some("optional"), schema)
            }
            _ => (None, schema),
        };
        if let Some(p) = schema.parameters.iter().find(|(k, _)| {
            PROTOBUF_PARAMS.contains(&&**k) || k.starts_with("io.confluent.connect.protobuf.Enum.")
        }) {
            return Err(format!(
                "the Connect parameter {} (a Protobuf tag, type or enum) is not written by outbox-relay's Protobuf converter",
                p.0
            ));
        }
        let mut params = Vec::new();
        let ty = self.data_type(schema, &name, &mut params)?;
        match &schema.kind {
            SchemaType::Struct(_) => {
                if schema
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with(UNION_PREFIX))
                {
                    return Err(format!(
                        "the Protobuf union {} is not written by outbox-relay's Protobuf converter",
                        schema.name.as_deref().unwrap_or_default()
                    ));
                }
                if parent.name == ty {
                    return Err(format!(
                        "field {name}'s struct is named like the message it is in ({ty}): Confluent's converter writes it as that message"
                    ));
                }
                let mut required = schema.clone();
                required.optional = false;
                match parent.children.iter().find(|(n, _)| *n == ty) {
                    Some((_, defined)) if *defined == required => {}
                    Some(_) => {
                        return Err(format!(
                            "two different structs are both named {ty} in message {}: Confluent's converter writes the second as the first",
                            parent.name
                        ))
                    }
                    None => {
                        parent.children.push((ty.clone(), required));
                        let nested = self.message(&ty, schema)?;
                        parent.nested.push(nested);
                    }
                }
            }
            SchemaType::Map(keys, values) => {
                check_identifier(&ty)?;
                let mut entry = Message {
                    name: ty.clone(),
                    fields: Vec::new(),
                    nested: Vec::new(),
                    children: Vec::new(),
                };
                let key = self.field(&mut entry, keys, "key".into(), 1, true)?;
                entry.fields.push(key);
                let value = self.field(&mut entry, values, "value".into(), 2, true)?;
                entry.fields.push(value);
                check_unique(&entry)?;
                parent.nested.push(entry);
            }
            _ => {
                if let Some(file) = import_of(&ty) {
                    if !self.imports.contains(&file) {
                        self.imports.push(file);
                    }
                }
            }
        }
        let (label, params) = if in_entry {
            (label.filter(|l| *l == "repeated"), Vec::new())
        } else {
            (label, params)
        };
        Ok(Field {
            label,
            ty,
            name,
            tag,
            params,
        })
    }

    /// `dataTypeFromConnectSchema`.
    fn data_type(
        &mut self,
        schema: &Schema,
        field_name: &str,
        params: &mut Vec<(&'static str, String)>,
    ) -> Result<String, String> {
        match schema.name.as_deref() {
            Some(DECIMAL) => {
                // A HashMap of "precision" and "scale": written in this order.
                if let Some(p) = param(schema, "connect.decimal.precision") {
                    params.push(("precision", p.to_owned()));
                }
                if let Some(s) = param(schema, "scale") {
                    params.push(("scale", s.to_owned()));
                }
                return Ok("confluent.type.Decimal".into());
            }
            Some(DATE) => return Ok("google.type.Date".into()),
            Some(TIME) => return Ok("google.type.TimeOfDay".into()),
            Some(TIMESTAMP) => return Ok("google.protobuf.Timestamp".into()),
            _ => {}
        }
        let wrap = self.options.wrapper_for_nullables && schema.optional;
        let pick = |wrapper: &str, plain: &str| {
            if wrap {
                format!("google.protobuf.{wrapper}")
            } else {
                plain.to_owned()
            }
        };
        Ok(match &schema.kind {
            SchemaType::Int8 => {
                params.push(("connect.type", "int8".into()));
                pick("Int32Value", "int32")
            }
            SchemaType::Int16 => {
                params.push(("connect.type", "int16".into()));
                pick("Int32Value", "int32")
            }
            SchemaType::Int32 => pick("Int32Value", "int32"),
            SchemaType::Int64 => pick("Int64Value", "int64"),
            SchemaType::Float32 => pick("FloatValue", "float"),
            SchemaType::Float64 => pick("DoubleValue", "double"),
            SchemaType::Boolean => pick("BoolValue", "bool"),
            SchemaType::String => pick("StringValue", "string"),
            SchemaType::Bytes => pick("BytesValue", "bytes"),
            SchemaType::Array(_) => return Err("Array cannot be nested".into()),
            SchemaType::Map(..) => to_map_entry(&self.unqualified(schema.name.as_deref())),
            SchemaType::Struct(_) => {
                let name = self.unqualified(schema.name.as_deref());
                if name == field_name {
                    format!("{name}Message")
                } else {
                    name
                }
            }
        })
    }
}

fn param<'a>(schema: &'a Schema, key: &str) -> Option<&'a str> {
    schema
        .parameters
        .iter()
        .find(|(k, _)| &**k == key)
        .map(|(_, v)| &**v)
}

fn import_of(ty: &str) -> Option<&'static str> {
    Some(match ty {
        "confluent.type.Decimal" => "confluent/type/decimal.proto",
        "google.type.Date" => "google/type/date.proto",
        "google.type.TimeOfDay" => "google/type/timeofday.proto",
        "google.protobuf.Timestamp" => "google/protobuf/timestamp.proto",
        t if t.starts_with("google.protobuf.") && t.ends_with("Value") => {
            "google/protobuf/wrappers.proto"
        }
        _ => return None,
    })
}

/// `ProtobufSchema.toMapEntry`: a name with underscores in UpperCamel (Guava's
/// LOWER_UNDERSCORE to UPPER_CAMEL), then `Entry`.
fn to_map_entry(name: &str) -> String {
    let mut out = String::new();
    if name.contains('_') {
        for word in name.split('_') {
            let mut chars = word.chars();
            if let Some(first) = chars.next() {
                out.push(first.to_ascii_uppercase());
                out.extend(chars.map(|c| c.to_ascii_lowercase()));
            }
        }
    } else {
        out.push_str(name);
    }
    out.push_str("Entry");
    out
}

/// protobuf-java's `validateSymbolName`: a letter or `_`, then letters, digits or `_`.
fn check_identifier(name: &str) -> Result<(), String> {
    let valid = !name.is_empty()
        && name
            .char_indices()
            .all(|(i, c)| c.is_ascii_alphabetic() || c == '_' || (i > 0 && c.is_ascii_digit()));
    if valid {
        Ok(())
    } else {
        Err(format!(
            "\"{name}\" is not a valid identifier (Confluent's converter refuses it; scrub.invalid.names=true makes names valid)"
        ))
    }
}

/// protobuf-java's "is already defined": the names of a message's fields and nested
/// messages are one scope (proto3 optionals' synthetic oneofs are not in it).
fn check_unique(message: &Message) -> Result<(), String> {
    let mut names: Vec<&str> = Vec::new();
    for name in message
        .fields
        .iter()
        .map(|f| f.name.as_str())
        .chain(message.nested.iter().map(|m| m.name.as_str()))
    {
        if names.contains(&name) {
            return Err(format!(
                "\"{name}\" is already defined in message {}",
                message.name
            ));
        }
        names.push(name);
    }
    Ok(())
}

/// `ProtobufData.doScrubName`: a valid name as it is; else URL-encoded (UTF-8), prefixed
/// with `x` when it starts with a digit or `_`, and anything but letters, digits and `_`
/// replaced by `_`.
fn scrub_name(name: &str) -> String {
    let valid_char = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let Some(first) = name.chars().next() else {
        return String::new();
    };
    if name.chars().all(valid_char) && !first.is_ascii_digit() && first != '_' {
        return name.to_owned();
    }
    let mut encoded = String::new();
    for b in name.bytes() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'-' | b'*' | b'_' => {
                encoded.push(char::from(b))
            }
            b' ' => encoded.push('+'),
            _ => encoded.push_str(&format!("%{b:02X}")),
        }
    }
    if encoded.starts_with(|c: char| c.is_ascii_digit() || c == '_') {
        encoded.insert(0, 'x');
    }
    encoded
        .chars()
        .map(|c| if valid_char(c) { c } else { '_' })
        .collect()
}

/// `ProtobufSchemaUtils.toString` of a message: fields, then nested messages, each indented.
fn render_message(message: &Message) -> String {
    let mut out = format!("message {} {{", message.name);
    if !message.fields.is_empty() {
        out.push('\n');
        for field in &message.fields {
            append_indented(&mut out, &render_field(field));
        }
    }
    if !message.nested.is_empty() {
        out.push('\n');
        for nested in &message.nested {
            append_indented(&mut out, &render_message(nested));
        }
    }
    out.push_str("}\n");
    out
}

/// An option's value as `formatOptionMapOrListValue` writes it.
enum OptionValue {
    Text(String),
    List(Vec<OptionValue>),
    Map(Vec<(&'static str, OptionValue)>),
}

fn render_field(field: &Field) -> String {
    let mut out = String::new();
    if let Some(label) = field.label {
        out.push_str(label);
        out.push(' ');
    }
    out.push_str(&format!("{} {} = {}", field.ty, field.name, field.tag));
    let mut options: Vec<String> = Vec::new();
    if field.label == Some("optional") {
        options.push("deprecated = false".into());
    }
    if !field.params.is_empty() {
        let params = field
            .params
            .iter()
            .map(|(k, v)| {
                let key = ("key", OptionValue::Text((*k).to_owned()));
                let value = ("value", OptionValue::Text(v.clone()));
                // "For backward compatibility, we emit the value first"
                OptionValue::Map(if *k == "precision" || *k == "scale" {
                    vec![value, key]
                } else {
                    vec![key, value]
                })
            })
            .collect();
        let mut meta = String::from("(confluent.field_meta) = {\n");
        format_option_map(&mut meta, &[("params", OptionValue::List(params))]);
        meta.push('}');
        options.push(meta);
    }
    match options.len() {
        0 => {}
        1 => {
            out.push_str(" [");
            out.push_str(&options[0]);
            out.push(']');
        }
        n => {
            out.push_str(" [\n");
            for (i, option) in options.iter().enumerate() {
                let endl = if i < n - 1 { "," } else { "" };
                append_indented(&mut out, &format!("{option}{endl}"));
            }
            out.push(']');
        }
    }
    out.push_str(";\n");
    out
}

fn format_option_map(out: &mut String, entries: &[(&'static str, OptionValue)]) {
    let last = entries.len().saturating_sub(1);
    for (i, (key, value)) in entries.iter().enumerate() {
        let endl = if i != last { "," } else { "" };
        append_indented(out, &format!("{key}: {}{endl}", format_option_value(value)));
    }
}

fn format_option_value(value: &OptionValue) -> String {
    match value {
        OptionValue::Text(s) => format!("\"{}\"", escape_chars(s)),
        OptionValue::Map(entries) => {
            let mut out = String::from("{\n");
            format_option_map(&mut out, entries);
            out.push('}');
            out
        }
        OptionValue::List(items) => {
            let mut out = String::from("[\n");
            let last = items.len().saturating_sub(1);
            for (i, item) in items.iter().enumerate() {
                let endl = if i != last { "," } else { "" };
                append_indented(&mut out, &format!("{}{endl}", format_option_value(item)));
            }
            out.push(']');
            out
        }
    }
}

/// `ProtobufSchemaUtils.escapeChars`.
fn escape_chars(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x0b' => out.push_str("\\v"),
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '"' => out.push_str("\\\""),
            c => out.push(c),
        }
    }
    out
}

/// `appendIndented`: each line (Java's `split("\n")`, trailing empty lines dropped) after
/// two spaces.
fn append_indented(out: &mut String, value: &str) {
    let mut lines: Vec<&str> = value.split('\n').collect();
    while lines.last() == Some(&"") {
        lines.pop();
    }
    for line in lines {
        out.push_str("  ");
        out.push_str(line);
        out.push('\n');
    }
}

// ---------------------------------------------------------------------------------------
// ProtobufData.fromConnectData + Protobuf's binary encoding
// ---------------------------------------------------------------------------------------

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;
const FIXED32: u8 = 5;

/// A base-128 varint, least significant group first (Protobuf's, and Avro's after zigzag).
pub(super) fn write_varint(out: &mut Vec<u8>, mut n: u64) {
    loop {
        if n & !0x7F == 0 {
            out.push(n as u8);
            return;
        }
        out.push((n as u8 & 0x7F) | 0x80);
        n >>= 7;
    }
}

fn write_tag(out: &mut Vec<u8>, tag: usize, wire: u8) {
    write_varint(out, ((tag as u64) << 3) | u64::from(wire));
}

fn write_len(out: &mut Vec<u8>, tag: usize, body: &[u8]) {
    write_tag(out, tag, LEN);
    write_varint(out, body.len() as u64);
    out.extend_from_slice(body);
}

/// Where a field is: in a message (proto3 `optional` applies) or a map entry (it does not).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    Message,
    Entry,
}

struct Writer {
    options: ProtobufOptions,
}

fn mismatch(schema: &Schema, value: &Value) -> String {
    format!(
        "Invalid type for {}: class {}",
        schema.kind.type_name(),
        java_class(Some(schema), value)
    )
}

fn is_logical(schema: &Schema) -> bool {
    matches!(
        schema.name.as_deref(),
        Some(DECIMAL | DATE | TIME | TIMESTAMP)
    )
}

impl Writer {
    /// The message of a key or value: a struct's, a logical type's, or a wrapper's.
    fn top(&self, out: &mut Vec<u8>, schema: &Schema, value: &Value) -> Result<(), String> {
        if is_logical(schema) {
            return logical(out, schema, value);
        }
        match (&schema.kind, value) {
            (SchemaType::Struct(_), Value::Struct(_)) => self.message(out, schema, value),
            (SchemaType::Array(_) | SchemaType::Map(..), _) => Err(format!(
                "Unsupported root schema of type {}",
                schema.kind.type_name()
            )),
            (SchemaType::Struct(_), _) => Err(mismatch(schema, value)),
            // The wrapper message's one field.
            _ => scalar_unless_zero(out, 1, schema, value),
        }
    }

    fn message(&self, out: &mut Vec<u8>, schema: &Schema, value: &Value) -> Result<(), String> {
        let (SchemaType::Struct(fields), Value::Struct(values)) = (&schema.kind, value) else {
            return Err(mismatch(schema, value));
        };
        for (i, (_, field_schema)) in fields.iter().enumerate() {
            let v = values.get(i).unwrap_or(&Value::Null);
            // `Struct.get` gives a null field its default.
            let v = match (v, &field_schema.default) {
                (Value::Null, Some(d)) => d,
                _ => v,
            };
            self.field(out, i + 1, field_schema, v, Place::Message)?;
        }
        Ok(())
    }

    /// A field of a message or map entry; a null is not written.
    fn field(
        &self,
        out: &mut Vec<u8>,
        tag: usize,
        schema: &Schema,
        value: &Value,
        place: Place,
    ) -> Result<(), String> {
        if value.is_null() {
            return Ok(());
        }
        if is_logical(schema) {
            let mut body = Vec::new();
            logical(&mut body, schema, value)?;
            write_len(out, tag, &body);
            return Ok(());
        }
        match (&schema.kind, value) {
            (SchemaType::Array(items), Value::Array(values)) => {
                if values.is_empty() {
                    return Ok(());
                }
                if values.iter().any(Value::is_null) {
                    return Err(format!(
                        "a null in an array is not written by Confluent's Protobuf converter (NullPointerException) (field {tag})"
                    ));
                }
                let wrapped = self.options.wrapper_for_nullables && items.optional;
                let packed = !(is_logical(items) || wrapped)
                    && matches!(
                        items.kind,
                        SchemaType::Int8
                            | SchemaType::Int16
                            | SchemaType::Int32
                            | SchemaType::Int64
                            | SchemaType::Float32
                            | SchemaType::Float64
                            | SchemaType::Boolean
                    );
                if packed {
                    let mut body = Vec::new();
                    for v in values {
                        scalar(&mut body, items, v)?;
                    }
                    write_len(out, tag, &body);
                } else {
                    for v in values {
                        self.element(out, tag, items, v)?;
                    }
                }
                Ok(())
            }
            (SchemaType::Map(keys, vals), Value::Map(entries)) => {
                for (k, v) in entries {
                    let mut entry = Vec::new();
                    self.field(&mut entry, 1, keys, k, Place::Entry)?;
                    self.field(&mut entry, 2, vals, v, Place::Entry)?;
                    write_len(out, tag, &entry);
                }
                Ok(())
            }
            (SchemaType::Struct(_), Value::Struct(_)) => {
                let mut body = Vec::new();
                self.message(&mut body, schema, value)?;
                write_len(out, tag, &body);
                Ok(())
            }
            (SchemaType::Array(_) | SchemaType::Map(..) | SchemaType::Struct(_), _) => {
                Err(mismatch(schema, value))
            }
            _ => {
                let presence = place == Place::Message
                    && self.options.optional_for_nullables
                    && schema.optional;
                self.scalar_field(out, tag, schema, value, presence)
            }
        }
    }

    /// An element of a repeated field that is not packed.
    fn element(
        &self,
        out: &mut Vec<u8>,
        tag: usize,
        schema: &Schema,
        value: &Value,
    ) -> Result<(), String> {
        match (&schema.kind, value) {
            (SchemaType::Struct(_), _) => {
                let mut body = Vec::new();
                self.message(&mut body, schema, value)?;
                write_len(out, tag, &body);
                Ok(())
            }
            (SchemaType::Map(..) | SchemaType::Array(_), _) => Err(format!(
                "an array of {} is not written by Confluent's Protobuf converter",
                schema.kind.type_name()
            )),
            _ if is_logical(schema) => self.field(out, tag, schema, value, Place::Entry),
            _ if self.options.wrapper_for_nullables && schema.optional => {
                self.scalar_field(out, tag, schema, value, false)
            }
            // Strings and bytes: each written, empty or not.
            _ => {
                write_tag(out, tag, LEN);
                scalar(out, schema, value)
            }
        }
    }

    /// A primitive field: in a wrapper message (`wrapper.for.nullables`, and keys and
    /// values that are not structs), or as itself, left out when it is its type's zero
    /// value unless it has presence.
    fn scalar_field(
        &self,
        out: &mut Vec<u8>,
        tag: usize,
        schema: &Schema,
        value: &Value,
        presence: bool,
    ) -> Result<(), String> {
        let wrapped = self.options.wrapper_for_nullables && schema.optional;
        if wrapped {
            let mut body = Vec::new();
            scalar_unless_zero(&mut body, 1, schema, value)?;
            write_len(out, tag, &body);
            return Ok(());
        }
        if presence {
            write_scalar_tag(out, tag, schema);
            return scalar(out, schema, value);
        }
        scalar_unless_zero(out, tag, schema, value)
    }
}

fn write_scalar_tag(out: &mut Vec<u8>, tag: usize, schema: &Schema) {
    let wire = match schema.kind {
        SchemaType::Float32 => FIXED32,
        SchemaType::Float64 => FIXED64,
        SchemaType::String | SchemaType::Bytes => LEN,
        _ => VARINT,
    };
    write_tag(out, tag, wire);
}

/// A field without presence: not written when it equals its type's default (Java's
/// `equals`: -0.0 and NaN are written).
fn scalar_unless_zero(
    out: &mut Vec<u8>,
    tag: usize,
    schema: &Schema,
    value: &Value,
) -> Result<(), String> {
    let zero = match (&schema.kind, value) {
        (SchemaType::Float32, Value::Float(f)) => (*f as f32).to_bits() == 0,
        (SchemaType::Float64, Value::Float(f)) => f.to_bits() == 0,
        (SchemaType::Int8 | SchemaType::Int16 | SchemaType::Int32, Value::Int(i)) => *i as i32 == 0,
        (SchemaType::Int64, Value::Int(i)) => *i == 0,
        (SchemaType::Boolean, Value::Boolean(b)) => !*b,
        (SchemaType::String, Value::String(s)) => s.is_empty(),
        (SchemaType::Bytes, Value::Bytes(b)) => b.is_empty(),
        _ => return Err(mismatch(schema, value)),
    };
    if zero {
        return Ok(());
    }
    write_scalar_tag(out, tag, schema);
    scalar(out, schema, value)
}

/// A primitive's value without its tag.
fn scalar(out: &mut Vec<u8>, schema: &Schema, value: &Value) -> Result<(), String> {
    match (&schema.kind, value) {
        (SchemaType::Int8 | SchemaType::Int16 | SchemaType::Int32, Value::Int(i)) => {
            // int32: sign-extended to ten bytes when negative.
            write_varint(out, i64::from(*i as i32) as u64)
        }
        (SchemaType::Int64, Value::Int(i)) => write_varint(out, *i as u64),
        (SchemaType::Float32, Value::Float(f)) => out.extend_from_slice(&(*f as f32).to_le_bytes()),
        (SchemaType::Float64, Value::Float(f)) => out.extend_from_slice(&f.to_le_bytes()),
        (SchemaType::Boolean, Value::Boolean(b)) => out.push(u8::from(*b)),
        (SchemaType::String, Value::String(s)) => {
            if std::str::from_utf8(s).is_err() {
                return Err("text value is not valid UTF-8".into());
            }
            write_varint(out, s.len() as u64);
            out.extend_from_slice(s);
        }
        (SchemaType::Bytes, Value::Bytes(b)) => {
            write_varint(out, b.len() as u64);
            out.extend_from_slice(b);
        }
        _ => return Err(mismatch(schema, value)),
    }
    Ok(())
}

/// A varint field of a logical type's message, left out when zero.
fn int_field(out: &mut Vec<u8>, tag: usize, v: i64) {
    if v != 0 {
        write_tag(out, tag, VARINT);
        write_varint(out, v as u64);
    }
}

/// Connect's Decimal, Date, Time and Timestamp as `confluent.type.Decimal`,
/// `google.type.Date`, `google.type.TimeOfDay` and `google.protobuf.Timestamp` (the
/// message's fields, without its tag).
fn logical(out: &mut Vec<u8>, schema: &Schema, value: &Value) -> Result<(), String> {
    let name = schema.name.as_deref().unwrap_or_default();
    match (name, value) {
        (DECIMAL, Value::Decimal(d)) => {
            let Numeric::Finite { unscaled, scale } = d else {
                return Err(format!("{} is not a BigDecimal", d.java_string()));
            };
            let bytes = d
                .unscaled_bytes()
                .ok_or_else(|| format!("{} is not a BigDecimal", d.java_string()))?;
            // BigDecimal.precision(): the unscaled value's digits (1 for zero).
            let digits = unscaled
                .trim_start_matches('-')
                .trim_start_matches('0')
                .len();
            write_len(out, 1, &bytes);
            int_field(out, 2, digits.max(1) as i64);
            int_field(out, 3, i64::from(*scale as i32));
            Ok(())
        }
        (DECIMAL, _) => Err(format!(
            "Invalid type for Decimal, expected BigDecimal but was class {}",
            java_class(Some(schema), value)
        )),
        (DATE, Value::Int(days)) => {
            let (year, month, day) = calendar_date(*days);
            int_field(out, 1, year);
            int_field(out, 2, month);
            int_field(out, 3, day);
            Ok(())
        }
        (TIME, Value::Int(millis)) => {
            let millis = i64::from(*millis as i32);
            if !(0..=86_400_000).contains(&millis) {
                return Err(
                    "Time values must use number of millis greater than 0 and less than 86400000"
                        .into(),
                );
            }
            int_field(out, 1, (millis / 3_600_000) % 24);
            int_field(out, 2, (millis / 60_000) % 60);
            int_field(out, 3, (millis / 1000) % 60);
            int_field(out, 4, (millis % 1000) * 1_000_000);
            Ok(())
        }
        (TIMESTAMP, Value::Int(millis)) => {
            let seconds = millis.div_euclid(1000);
            let nanos = millis.rem_euclid(1000) * 1_000_000;
            if !(-62_135_596_800..=253_402_300_799).contains(&seconds) {
                return Err(format!(
                    "Timestamp is not valid. See proto definition for valid values. Seconds ({seconds}) must be in range [-62,135,596,800, +253,402,300,799]. Nanos ({nanos}) must be in range [0, +999,999,999]."
                ));
            }
            int_field(out, 1, seconds);
            int_field(out, 2, nanos);
            Ok(())
        }
        _ => Err(format!(
            "Invalid type for {}, expected Date but was class {}",
            name.rsplit('.').next().unwrap_or(name),
            java_class(Some(schema), value)
        )),
    }
}

/// The days since 1970-01-01 as `java.util.GregorianCalendar` in UTC reads them: Julian
/// before 1582-10-15, the year of its era (1 BC is year 1).
fn calendar_date(days: i64) -> (i64, i64, i64) {
    const GREGORIAN_START: i64 = -141_427;
    let (year, month, day) = if days >= GREGORIAN_START {
        civil_from_days(days)
    } else {
        // Julian calendar from the Julian day number.
        let c = days + 2_440_588 + 32_082;
        let d = (4 * c + 3).div_euclid(1461);
        let e = c - (1461 * d).div_euclid(4);
        let m = (5 * e + 2).div_euclid(153);
        let day = e - (153 * m + 2).div_euclid(5) + 1;
        let month = m + 3 - 12 * m.div_euclid(10);
        let year = d - 4800 + m.div_euclid(10);
        (year, month, day)
    };
    (if year <= 0 { 1 - year } else { year }, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect::registry::fixed::FixedRegistry;
    use crate::connect::registry::SubjectNameStrategy;

    // The expected bytes and schema texts below are what Confluent's ProtobufConverter 7.0.16
    // (kafka-connect-protobuf-converter, kafka-protobuf-provider and -serializer 7.0.16,
    // protobuf-java 3.25.5, proto-google-common-protos 2.22.1, Kafka Connect API 4.3) wrote
    // for the same Connect schemas and values. A Java harness (not in the repository) built
    // each schema and value with Connect's SchemaBuilder and Struct, called
    // `new ProtobufConverter(client).configure(options, isKey)` then
    // `fromConnectData(topic, schema, value)`, `client` being a MockSchemaRegistryClient whose
    // `register(subject, schema, normalize)` printed the subject, `schema.references()` (always
    // empty) and `schema.canonicalString()` and answered id 1. `registered_with_a_real_registry`
    // ran the same converter against Apicurio Registry 2.6.13's ccompat API.

    fn s(kind: SchemaType, optional: bool) -> Schema {
        Schema::new(kind, optional)
    }

    fn st(fields: Vec<(&str, Schema)>, optional: bool) -> Schema {
        s(
            SchemaType::Struct(fields.into_iter().map(|(n, s)| (n.into(), s)).collect()),
            optional,
        )
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    fn opts(optional: bool, wrapper: bool) -> ProtobufOptions {
        ProtobufOptions {
            optional_for_nullables: optional,
            wrapper_for_nullables: wrapper,
            scrub_invalid_names: false,
        }
    }

    struct Case {
        options: ProtobufOptions,
        is_key: bool,
        strategy: SubjectNameStrategy,
    }

    impl Default for Case {
        fn default() -> Self {
            Self {
                options: ProtobufOptions::default(),
                is_key: false,
                strategy: SubjectNameStrategy::Topic,
            }
        }
    }

    impl Case {
        /// The bytes written (hex), the subject and the text registered.
        fn write(
            &self,
            topic: &str,
            schema: &Schema,
            value: &Value,
        ) -> Result<(String, String, String), SerdeError> {
            let (serde, registry) = FixedRegistry::serde_for(1, self.is_key, self.strategy);
            let c = ProtobufConverter::new(serde, self.options);
            let bytes = c.encode(topic, Some(schema), value)?;
            let Some(bytes) = bytes else {
                assert!(registry.asked_nothing());
                return Ok(("null".into(), String::new(), String::new()));
            };
            let asked = registry.last().unwrap();
            assert_eq!(
                (asked.format, asked.references),
                (SchemaFormat::Protobuf, 0)
            );
            Ok((hex(&bytes), asked.subject, asked.text))
        }
    }

    fn write(topic: &str, schema: &Schema, value: &Value) -> (String, String, String) {
        Case::default().write(topic, schema, value).unwrap()
    }

    const ORDER: &str = r#"syntax = "proto3";
package t;

message Order {
  int64 id = 1;
  string note = 2;
}
"#;
    const ENVELOPE: &str = r#"syntax = "proto3";
package dbserver1.public.outbox.orders;

import "confluent/type/decimal.proto";
import "google/type/date.proto";
import "google/type/timeofday.proto";
import "google/protobuf/timestamp.proto";

message Value {
  int32 i8 = 1 [(confluent.field_meta) = {
    params: [
      {
        key: "connect.type",
        value: "int8"
      }
    ]
  }];
  int32 i16 = 2 [(confluent.field_meta) = {
    params: [
      {
        key: "connect.type",
        value: "int16"
      }
    ]
  }];
  int32 i32 = 3;
  int64 i64 = 4;
  float f32 = 5;
  double f64 = 6;
  bool b = 7;
  string s = 8;
  bytes raw = 9;
  confluent.type.Decimal amount = 10 [(confluent.field_meta) = {
    params: [
      {
        value: "10",
        key: "precision"
      },
      {
        value: "2",
        key: "scale"
      }
    ]
  }];
  confluent.type.Decimal neg = 11 [(confluent.field_meta) = {
    params: [
      {
        value: "0",
        key: "scale"
      }
    ]
  }];
  google.type.Date day = 12;
  google.type.TimeOfDay tm = 13;
  google.protobuf.Timestamp ts = 14;
  repeated string tags = 15;
  repeated ConnectDefault1Entry attrs = 16;
  repeated ConnectDefault2Entry byid = 17;
  ConnectDefault3 item = 18;
  ConnectDefault4 item2 = 19;
  string payload = 20;
  string region = 21;
  int64 missing = 22;
  int64 micros = 23;
  int32 dday = 24;
  int32 cnt = 25;

  message ConnectDefault1Entry {
    string key = 1;
    int32 value = 2;
  }
  message ConnectDefault2Entry {
    int32 key = 1;
    string value = 2;
  }
  message ConnectDefault3 {
    string sku = 1;
    int32 qty = 2;
  }
  message ConnectDefault4 {
    string sku = 1;
    int32 qty = 2;
  }
}
"#;
    const ENVELOPE_OPTIONAL: &str = r#"syntax = "proto3";
package dbserver1.public.outbox.orders;

import "confluent/type/decimal.proto";
import "google/type/date.proto";
import "google/type/timeofday.proto";
import "google/protobuf/timestamp.proto";

message Value {
  int32 i8 = 1 [(confluent.field_meta) = {
    params: [
      {
        key: "connect.type",
        value: "int8"
      }
    ]
  }];
  int32 i16 = 2 [(confluent.field_meta) = {
    params: [
      {
        key: "connect.type",
        value: "int16"
      }
    ]
  }];
  int32 i32 = 3;
  int64 i64 = 4;
  float f32 = 5;
  double f64 = 6;
  bool b = 7;
  string s = 8;
  optional bytes raw = 9 [deprecated = false];
  optional confluent.type.Decimal amount = 10 [
    deprecated = false,
    (confluent.field_meta) = {
      params: [
        {
          value: "10",
          key: "precision"
        },
        {
          value: "2",
          key: "scale"
        }
      ]
    }
  ];
  confluent.type.Decimal neg = 11 [(confluent.field_meta) = {
    params: [
      {
        value: "0",
        key: "scale"
      }
    ]
  }];
  google.type.Date day = 12;
  google.type.TimeOfDay tm = 13;
  google.protobuf.Timestamp ts = 14;
  repeated string tags = 15;
  repeated ConnectDefault1Entry attrs = 16;
  repeated ConnectDefault2Entry byid = 17;
  optional ConnectDefault3 item = 18 [deprecated = false];
  optional ConnectDefault4 item2 = 19 [deprecated = false];
  string payload = 20;
  optional string region = 21 [deprecated = false];
  optional int64 missing = 22 [deprecated = false];
  int64 micros = 23;
  optional int32 dday = 24 [deprecated = false];
  int32 cnt = 25;

  message ConnectDefault1Entry {
    string key = 1;
    int32 value = 2;
  }
  message ConnectDefault2Entry {
    int32 key = 1;
    string value = 2;
  }
  message ConnectDefault3 {
    string sku = 1;
    optional int32 qty = 2 [deprecated = false];
  }
  message ConnectDefault4 {
    string sku = 1;
    optional int32 qty = 2 [deprecated = false];
  }
}
"#;
    const ENVELOPE_WRAPPER: &str = r#"syntax = "proto3";
package dbserver1.public.outbox.orders;

import "google/protobuf/wrappers.proto";
import "confluent/type/decimal.proto";
import "google/type/date.proto";
import "google/type/timeofday.proto";
import "google/protobuf/timestamp.proto";

message Value {
  int32 i8 = 1 [(confluent.field_meta) = {
    params: [
      {
        key: "connect.type",
        value: "int8"
      }
    ]
  }];
  int32 i16 = 2 [(confluent.field_meta) = {
    params: [
      {
        key: "connect.type",
        value: "int16"
      }
    ]
  }];
  int32 i32 = 3;
  int64 i64 = 4;
  float f32 = 5;
  double f64 = 6;
  bool b = 7;
  string s = 8;
  google.protobuf.BytesValue raw = 9;
  confluent.type.Decimal amount = 10 [(confluent.field_meta) = {
    params: [
      {
        value: "10",
        key: "precision"
      },
      {
        value: "2",
        key: "scale"
      }
    ]
  }];
  confluent.type.Decimal neg = 11 [(confluent.field_meta) = {
    params: [
      {
        value: "0",
        key: "scale"
      }
    ]
  }];
  google.type.Date day = 12;
  google.type.TimeOfDay tm = 13;
  google.protobuf.Timestamp ts = 14;
  repeated string tags = 15;
  repeated ConnectDefault1Entry attrs = 16;
  repeated ConnectDefault2Entry byid = 17;
  ConnectDefault3 item = 18;
  ConnectDefault4 item2 = 19;
  string payload = 20;
  google.protobuf.StringValue region = 21;
  google.protobuf.Int64Value missing = 22;
  int64 micros = 23;
  google.protobuf.Int32Value dday = 24;
  int32 cnt = 25;

  message ConnectDefault1Entry {
    string key = 1;
    google.protobuf.Int32Value value = 2;
  }
  message ConnectDefault2Entry {
    int32 key = 1;
    string value = 2;
  }
  message ConnectDefault3 {
    string sku = 1;
    google.protobuf.Int32Value qty = 2;
  }
  message ConnectDefault4 {
    string sku = 1;
    google.protobuf.Int32Value qty = 2;
  }
}
"#;
    const ENVELOPE_OPTIONAL_WRAPPER: &str = r#"syntax = "proto3";
package dbserver1.public.outbox.orders;

import "google/protobuf/wrappers.proto";
import "confluent/type/decimal.proto";
import "google/type/date.proto";
import "google/type/timeofday.proto";
import "google/protobuf/timestamp.proto";

message Value {
  int32 i8 = 1 [(confluent.field_meta) = {
    params: [
      {
        key: "connect.type",
        value: "int8"
      }
    ]
  }];
  int32 i16 = 2 [(confluent.field_meta) = {
    params: [
      {
        key: "connect.type",
        value: "int16"
      }
    ]
  }];
  int32 i32 = 3;
  int64 i64 = 4;
  float f32 = 5;
  double f64 = 6;
  bool b = 7;
  string s = 8;
  optional google.protobuf.BytesValue raw = 9 [deprecated = false];
  optional confluent.type.Decimal amount = 10 [
    deprecated = false,
    (confluent.field_meta) = {
      params: [
        {
          value: "10",
          key: "precision"
        },
        {
          value: "2",
          key: "scale"
        }
      ]
    }
  ];
  confluent.type.Decimal neg = 11 [(confluent.field_meta) = {
    params: [
      {
        value: "0",
        key: "scale"
      }
    ]
  }];
  google.type.Date day = 12;
  google.type.TimeOfDay tm = 13;
  google.protobuf.Timestamp ts = 14;
  repeated string tags = 15;
  repeated ConnectDefault1Entry attrs = 16;
  repeated ConnectDefault2Entry byid = 17;
  optional ConnectDefault3 item = 18 [deprecated = false];
  optional ConnectDefault4 item2 = 19 [deprecated = false];
  string payload = 20;
  optional google.protobuf.StringValue region = 21 [deprecated = false];
  optional google.protobuf.Int64Value missing = 22 [deprecated = false];
  int64 micros = 23;
  optional google.protobuf.Int32Value dday = 24 [deprecated = false];
  int32 cnt = 25;

  message ConnectDefault1Entry {
    string key = 1;
    google.protobuf.Int32Value value = 2;
  }
  message ConnectDefault2Entry {
    int32 key = 1;
    string value = 2;
  }
  message ConnectDefault3 {
    string sku = 1;
    optional google.protobuf.Int32Value qty = 2 [deprecated = false];
  }
  message ConnectDefault4 {
    string sku = 1;
    optional google.protobuf.Int32Value qty = 2 [deprecated = false];
  }
}
"#;
    const ANONYMOUS: &str = r#"syntax = "proto3";

message ConnectDefault1 {
  ConnectDefault2 a = 1;
  ConnectDefault3 b = 2;
  repeated ConnectDefault4Entry m = 3;

  message ConnectDefault2 {
    int32 x = 1;
  }
  message ConnectDefault3 {
    string y = 1;
  }
  message ConnectDefault4Entry {
    string key = 1;
    string value = 2;
  }
}
"#;
    const NAMES: &str = r#"syntax = "proto3";
package shop;

import "google/type/date.proto";

message Cart {
  item thing = 1;
  repeated item items = 2;
  Row before = 3;
  Row after = 4;
  repeated MyMapEntry hstore = 5;
  repeated int32 ints = 6;
  repeated google.type.Date dates = 7;

  message item {
    int32 n = 1;
  }
  message Row {
    int32 id = 1;
  }
  message MyMapEntry {
    string key = 1;
    string value = 2;
  }
}
"#;
    const SCRUBBED: &str = r#"syntax = "proto3";
package x;

message Bad_Name {
  int32 a_b = 1;
  string x1st = 2;
  bool x_u = 3;
  int32 _C3_A9 = 4;
}
"#;
    const SELF_NAMED: &str = r#"syntax = "proto3";
package shop;

message item {
  itemMessage item = 1;

  message itemMessage {
    int32 n = 1;
  }
}
"#;
    const HYPHEN: &str = r#"syntax = "proto3";
package db-1.public;

message T {
  int32 a = 1;
}
"#;
    const DIGIT: &str = r#"syntax = "proto3";
package 1db;

message T {
  int32 a = 1;
}
"#;
    const REPEATED: &str = "syntax = \"proto3\";\npackage o;\n\nmessage O {\n  repeated float a = 1;\n  repeated bool b = 2;\n  repeated int64 c = 3;\n  repeated bytes d = 4;\n}\n";
    const REPEATED_WRAPPED: &str = "syntax = \"proto3\";\npackage o;\n\nimport \"google/protobuf/wrappers.proto\";\n\nmessage O {\n  repeated float a = 1;\n  repeated bool b = 2;\n  repeated google.protobuf.Int64Value c = 3;\n  repeated bytes d = 4;\n}\n";
    const OPTIONAL_AND_UNDERSCORE: &str = "syntax = \"proto3\";\npackage o;\n\nmessage O {\n  optional int32 id = 1 [deprecated = false];\n  int32 _id = 2;\n}\n";
    const MAP_ENTRIES: &str = "syntax = \"proto3\";\npackage m;\n\nimport \"confluent/type/decimal.proto\";\n\nmessage M {\n  repeated ConnectDefault1Entry mp = 1;\n  repeated ConnectDefault2Entry md = 2;\n\n  message ConnectDefault1Entry {\n    int32 key = 1;\n    valueMessage value = 2;\n  \n    message valueMessage {\n      int32 n = 1;\n    }\n  }\n  message ConnectDefault2Entry {\n    string key = 1;\n    confluent.type.Decimal value = 2;\n  }\n}\n";
    const DATES: &str = r#"syntax = "proto3";
package t;

import "google/type/date.proto";
import "confluent/type/decimal.proto";
import "google/protobuf/timestamp.proto";

message Dates {
  google.type.Date day = 1;
  confluent.type.Decimal amount = 2 [(confluent.field_meta) = {
    params: [
      {
        value: "2",
        key: "scale"
      }
    ]
  }];
  google.protobuf.Timestamp ts = 3;
}
"#;
    const DEFAULTS: &str = r#"syntax = "proto3";
package d;

message D {
  double f = 1;
  bool g = 2;
  bytes by = 3;
}
"#;

    fn order() -> Schema {
        st(
            vec![
                ("id", s(SchemaType::Int64, false)),
                ("note", s(SchemaType::String, true)),
            ],
            false,
        )
        .named("t.Order", None)
    }

    #[test]
    fn a_struct_with_an_optional_field() {
        let schema = order();
        let (bytes, subject, text) = write(
            "orders",
            &schema,
            &Value::Struct(vec![Value::Int(42), Value::text("hi")]),
        );
        assert_eq!(bytes, "000000000100082a12026869");
        assert_eq!(subject, "orders-value");
        assert_eq!(text, ORDER);
        // Zero values are not written; nor is a null.
        let (bytes, ..) = write(
            "orders",
            &schema,
            &Value::Struct(vec![Value::Int(0), Value::text("")]),
        );
        assert_eq!(bytes, "000000000100");
        let (bytes, ..) = write(
            "orders",
            &schema,
            &Value::Struct(vec![Value::Int(7), Value::Null]),
        );
        assert_eq!(bytes, "0000000001000807");
        // A tombstone is a Kafka null, whatever the schema says.
        assert_eq!(write("orders", &schema, &Value::Null).0, "null");
    }

    fn decimal(scale: &str, precision: Option<&str>, optional: bool) -> Schema {
        let mut d = s(SchemaType::Bytes, optional).named(DECIMAL, Some(1));
        d.parameters.push(("scale".into(), scale.into()));
        if let Some(p) = precision {
            d.parameters
                .push(("connect.decimal.precision".into(), p.into()));
        }
        d
    }

    /// Every Connect type Debezium writes, in one struct.
    fn envelope() -> Schema {
        let nested = st(
            vec![
                ("sku", s(SchemaType::String, false)),
                ("qty", s(SchemaType::Int32, true)),
            ],
            true,
        );
        let mut region = s(SchemaType::String, true);
        region.default = Some(Value::text("eu"));
        let mut cnt = s(SchemaType::Int32, false);
        cnt.default = Some(Value::Int(5));
        let mut envelope = st(
            vec![
                ("i8", s(SchemaType::Int8, false)),
                ("i16", s(SchemaType::Int16, false)),
                ("i32", s(SchemaType::Int32, false)),
                ("i64", s(SchemaType::Int64, false)),
                ("f32", s(SchemaType::Float32, false)),
                ("f64", s(SchemaType::Float64, false)),
                ("b", s(SchemaType::Boolean, false)),
                ("s", s(SchemaType::String, false)),
                ("raw", s(SchemaType::Bytes, true)),
                ("amount", decimal("2", Some("10"), true)),
                ("neg", decimal("0", None, false)),
                ("day", s(SchemaType::Int32, false).named(DATE, Some(1))),
                ("tm", s(SchemaType::Int32, false).named(TIME, Some(1))),
                ("ts", s(SchemaType::Int64, false).named(TIMESTAMP, Some(1))),
                (
                    "tags",
                    s(
                        SchemaType::Array(Box::new(s(SchemaType::String, false))),
                        true,
                    ),
                ),
                (
                    "attrs",
                    s(
                        SchemaType::Map(
                            Box::new(s(SchemaType::String, false)),
                            Box::new(s(SchemaType::Int32, true)),
                        ),
                        false,
                    ),
                ),
                (
                    "byid",
                    s(
                        SchemaType::Map(
                            Box::new(s(SchemaType::Int32, false)),
                            Box::new(s(SchemaType::String, false)),
                        ),
                        false,
                    ),
                ),
                ("item", nested.clone()),
                ("item2", nested),
                (
                    "payload",
                    s(SchemaType::String, false).named("io.debezium.data.Json", Some(1)),
                ),
                ("region", region),
                ("missing", s(SchemaType::Int64, true)),
                (
                    "micros",
                    s(SchemaType::Int64, false).named("io.debezium.time.MicroTimestamp", Some(1)),
                ),
                (
                    "dday",
                    s(SchemaType::Int32, true).named("io.debezium.time.Date", Some(1)),
                ),
                ("cnt", cnt),
            ],
            false,
        )
        .named("dbserver1.public.outbox.orders.Value", Some(3));
        envelope.doc = Some("envelope".into());
        envelope
    }

    fn maps() -> (Value, Value) {
        (
            Value::Map(vec![
                (Value::text("a"), Value::Int(1)),
                (Value::text("b"), Value::Null),
            ]),
            Value::Map(vec![
                (Value::Int(7), Value::text("seven")),
                (Value::Int(-300), Value::text("x")),
            ]),
        )
    }

    fn envelope_value(s: &str, raw: &[u8], payload: &str, micros: i64) -> Value {
        let (attrs, byid) = maps();
        Value::Struct(vec![
            Value::Int(-5),
            Value::Int(300),
            Value::Int(-70000),
            Value::Int(1_234_567_890_123),
            Value::Float(1.5),
            Value::Float(-2.25),
            Value::Boolean(true),
            Value::text(s),
            Value::Bytes(Bytes::copy_from_slice(raw)),
            Value::Decimal(Numeric::parse("-123.45").unwrap()),
            Value::Decimal(Numeric::parse("-129").unwrap()),
            Value::Int(20516),
            Value::Int(86_399_999),
            Value::Int(1_772_600_767_120),
            Value::Array(vec![Value::text("x"), Value::text("yz")]),
            attrs,
            byid,
            Value::Struct(vec![Value::text("A-1"), Value::Int(3)]),
            Value::Null,
            Value::text(payload),
            Value::Null,
            Value::Null,
            Value::Int(micros),
            Value::Int(20516),
            Value::Int(9),
        ])
    }

    fn zeros() -> Value {
        Value::Struct(vec![
            Value::Int(0),
            Value::Int(0),
            Value::Int(0),
            Value::Int(0),
            Value::Float(-0.0),
            Value::Float(0.0),
            Value::Boolean(false),
            Value::text(""),
            Value::Bytes(Bytes::new()),
            Value::Decimal(Numeric::parse("0.00").unwrap()),
            Value::Decimal(Numeric::parse("0").unwrap()),
            Value::Int(0),
            Value::Int(0),
            Value::Int(-1),
            Value::Array(vec![]),
            Value::Map(vec![]),
            Value::Map(vec![]),
            Value::Struct(vec![Value::text(""), Value::Null]),
            Value::Struct(vec![Value::text("z"), Value::Int(0)]),
            Value::text(""),
            Value::text(""),
            Value::Null,
            Value::Int(-1),
            Value::Int(0),
            Value::Int(0),
        ])
    }

    /// The envelope's schema and a value under each option: the text registered, the bytes,
    /// and the bytes of the zero values (-0.0 is written, empty bytes, strings, arrays and
    /// maps are not, messages, an empty struct or a Timestamp at the epoch, are; optional
    /// fields have presence under `optional.for.nullables`).
    #[test]
    fn every_connect_type_under_each_option() {
        let schema = envelope();
        let hello =
            |raw: &[u8]| envelope_value("héllo", raw, r#"{"id": 1}"#, 1_772_600_767_120_123);
        for (options, value, text, bytes, zero_bytes) in [
            (
                opts(false, false),
                hello(&[0, 1, 255]),
                ENVELOPE,
                "00000000010008fbffffffffffffffff0110ac021890ddfbffffffffffff0120cb89ec8ff7232d0000c03f3100000000000002c03801420668c3a96c6c6f4a030001ff52080a02cfc7100518025a060a02ff7f1003620708ea0f100318046a0c0817103b183b20c08faedc03720b08bffb9ecd0610809c9c397a01787a02797a8201050a016110018201030a01628a010908071205736576656e8a010e08d4fdffffffffffffff011201789201070a03412d311003a201097b226964223a20317daa01026575b801fb85b6b8bc859303c001a4a001c80109",
                Some("0000000001002d0000008052070a0100100118025a050a01001001620708b20f100118016a00721108ffffffffffffffffff0110c08faedc039201009a01030a017ab801ffffffffffffffffff01"),
            ),
            (
                opts(true, false),
                hello(&[]),
                ENVELOPE_OPTIONAL,
                "00000000010008fbffffffffffffffff0110ac021890ddfbffffffffffff0120cb89ec8ff7232d0000c03f3100000000000002c03801420668c3a96c6c6f4a0052080a02cfc7100518025a060a02ff7f1003620708ea0f100318046a0c0817103b183b20c08faedc03720b08bffb9ecd0610809c9c397a01787a02797a8201050a016110018201030a01628a010908071205736576656e8a010e08d4fdffffffffffffff011201789201070a03412d311003a201097b226964223a20317daa01026575b801fb85b6b8bc859303c001a4a001c80109",
                Some("0000000001002d000000804a0052070a0100100118025a050a01001001620708b20f100118016a00721108ffffffffffffffffff0110c08faedc039201009a01050a017a1000aa0100b801ffffffffffffffffff01c00100"),
            ),
            (
                opts(false, true),
                hello(&[]),
                ENVELOPE_WRAPPER,
                "00000000010008fbffffffffffffffff0110ac021890ddfbffffffffffff0120cb89ec8ff7232d0000c03f3100000000000002c03801420668c3a96c6c6f4a0052080a02cfc7100518025a060a02ff7f1003620708ea0f100318046a0c0817103b183b20c08faedc03720b08bffb9ecd0610809c9c397a01787a02797a8201070a0161120208018201030a01628a010908071205736576656e8a010e08d4fdffffffffffffff011201789201090a03412d3112020803a201097b226964223a20317daa01040a026575b801fb85b6b8bc859303c2010408a4a001c80109",
                Some("0000000001002d000000804a0052070a0100100118025a050a01001001620708b20f100118016a00721108ffffffffffffffffff0110c08faedc039201009a01050a017a1200aa0100b801ffffffffffffffffff01c20100"),
            ),
            (
                opts(true, true),
                envelope_value("h", &[0, 1, 255], "{}", 1),
                ENVELOPE_OPTIONAL_WRAPPER,
                "00000000010008fbffffffffffffffff0110ac021890ddfbffffffffffff0120cb89ec8ff7232d0000c03f3100000000000002c038014201684a050a030001ff52080a02cfc7100518025a060a02ff7f1003620708ea0f100318046a0c0817103b183b20c08faedc03720b08bffb9ecd0610809c9c397a01787a02797a8201070a0161120208018201030a01628a010908071205736576656e8a010e08d4fdffffffffffffff011201789201090a03412d3112020803a201027b7daa01040a026575b80101c2010408a4a001c80109",
                None,
            ),
        ] {
            let case = Case {
                options,
                ..Case::default()
            };
            let written = case.write("orders", &schema, &value).unwrap();
            assert_eq!(
                (written.0.as_str(), written.1.as_str(), written.2.as_str()),
                (bytes, "orders-value", text),
                "{options:?}"
            );
            if let Some(zero_bytes) = zero_bytes {
                let (bytes, ..) = case.write("orders", &schema, &zeros()).unwrap();
                assert_eq!(bytes, zero_bytes, "{options:?}");
            }
        }
    }

    #[test]
    fn defaults_and_the_calendar_limits() {
        let schema = envelope();
        // Defaults for nulls; a Julian date before 1582-10-15; Timestamp's least second.
        let (attrs, byid) = maps();
        let defaults = Value::Struct(vec![
            Value::Int(1),
            Value::Int(1),
            Value::Int(1),
            Value::Int(1),
            Value::Float(1.0),
            Value::Float(1.0),
            Value::Boolean(true),
            Value::text("s"),
            Value::Null,
            Value::Null,
            Value::Decimal(Numeric::parse("12345678901234567890").unwrap()),
            Value::Int(-141_428),
            Value::Int(3_723_004),
            Value::Int(-62_135_596_800_000),
            Value::Null,
            attrs,
            byid,
            Value::Null,
            Value::Null,
            Value::text("p"),
            Value::text("eu"),
            Value::Null,
            Value::Int(1),
            Value::Null,
            Value::Int(5),
        ]);
        let (bytes, ..) = write("orders", &schema, &defaults);
        assert_eq!(
            bytes,
            "00000000010008011001180120012d0000803f31000000000000f03f38014201735a0d0a0900ab54a98ceb1f0ad21014620708ae0c100a18046a0b080110021803208092f401720b088092b8c398feffffff018201050a016110018201030a01628a010908071205736576656e8a010e08d4fdffffffffffffff01120178a2010170aa01026575b80101c80105"
        );
        // A Timestamp before year 1 is refused, as protobuf-java's Timestamps does.
        let Value::Struct(mut early) = defaults else {
            unreachable!()
        };
        early[13] = Value::Int(-62_135_596_800_001);
        assert!(matches!(
            Case::default().write("orders", &schema, &Value::Struct(early)),
            Err(SerdeError::Record(m)) if m.starts_with("Timestamp is not valid")
        ));
    }

    #[test]
    fn keys_and_values_that_are_not_structs_are_wrappers() {
        let json = s(SchemaType::String, true).named("io.debezium.data.Json", Some(1));
        let uuid = s(SchemaType::String, false).named("io.debezium.data.Uuid", Some(1));
        let mut date = s(SchemaType::Int32, false).named(DATE, Some(1));
        date.optional = false;
        let ts = s(SchemaType::Int64, false).named(TIMESTAMP, Some(1));
        for (is_key, topic, schema, v, expected) in [
            (
                false,
                "strs",
                s(SchemaType::String, true),
                Value::text("x"),
                "0000000001020e0a0178",
            ),
            (
                false,
                "strs",
                s(SchemaType::String, true),
                Value::text(""),
                "0000000001020e",
            ),
            (
                true,
                "keys",
                s(SchemaType::String, false),
                Value::text("k1"),
                "0000000001020e0a026b31",
            ),
            (
                false,
                "j",
                json,
                Value::text(r#"{"a":1}"#),
                "0000000001020e0a077b2261223a317d",
            ),
            (
                false,
                "b",
                s(SchemaType::Bytes, true),
                Value::Bytes(Bytes::from_static(&[1, 2])),
                "000000000102100a020102",
            ),
            (
                true,
                "k",
                s(SchemaType::Int64, false),
                Value::Int(5),
                "000000000102040805",
            ),
            (
                true,
                "k",
                s(SchemaType::Int32, false),
                Value::Int(-1),
                "0000000001020808ffffffffffffffffff01",
            ),
            (
                true,
                "k",
                s(SchemaType::Int16, false),
                Value::Int(2),
                "000000000102080802",
            ),
            (
                false,
                "k",
                s(SchemaType::Boolean, false),
                Value::Boolean(true),
                "0000000001020c0801",
            ),
            (
                false,
                "k",
                s(SchemaType::Float32, false),
                Value::Float(2.5),
                "000000000102020d00002040",
            ),
            (
                false,
                "k",
                s(SchemaType::Float64, false),
                Value::Float(2.5),
                "000000000100090000000000000440",
            ),
            (
                true,
                "k",
                uuid,
                Value::text("3f6c"),
                "0000000001020e0a0433663663",
            ),
            // Logical types: their message after the wrappers' schema, with no index.
            (
                false,
                "k",
                decimal("2", None, false),
                Value::Decimal(Numeric::parse("1.50").unwrap()),
                "0000000001000a02009610031802",
            ),
            (
                false,
                "k",
                date,
                Value::Int(1),
                "00000000010008b20f10011802",
            ),
            (
                false,
                "k",
                ts,
                Value::Int(1500),
                "00000000010008011080cab5ee01",
            ),
        ] {
            let case = Case {
                is_key,
                ..Case::default()
            };
            let (bytes, subject, text) = case.write(topic, &schema, &v).unwrap();
            assert_eq!(bytes, expected, "{schema:?}");
            assert_eq!(text, WRAPPERS);
            assert_eq!(
                subject,
                format!("{topic}-{}", if is_key { "key" } else { "value" })
            );
        }
        assert_eq!(
            write("strs", &s(SchemaType::String, true), &Value::Null).0,
            "null"
        );
    }

    #[test]
    fn subjects_by_strategy() {
        let record = Case {
            strategy: SubjectNameStrategy::Record,
            ..Case::default()
        };
        let one = Value::Struct(vec![Value::Int(1), Value::Null]);
        let (bytes, subject, text) = record.write("orders", &order(), &one).unwrap();
        assert_eq!(
            (bytes.as_str(), subject.as_str(), text.as_str()),
            ("0000000001000801", "t.Order", ORDER)
        );
        let topic_record = Case {
            strategy: SubjectNameStrategy::TopicRecord,
            ..Case::default()
        };
        let (_, subject, _) = topic_record.write("orders", &order(), &one).unwrap();
        assert_eq!(subject, "orders-t.Order");
        let (bytes, subject, _) = record
            .write("orders", &s(SchemaType::String, false), &Value::text("a"))
            .unwrap();
        assert_eq!(
            (bytes.as_str(), subject.as_str()),
            ("0000000001020e0a0161", "google.protobuf.StringValue")
        );
    }

    /// A key or value that is not a struct is a message too: the record name strategies name
    /// its subject after the wrapper message (a Decimal, Date, Time or Timestamp after the
    /// wrapper of its Connect type, although the message written is another), a nameless
    /// struct after `ConnectDefault1`, an optional struct after its message. Observed with
    /// the harness above (configured with `{key|value}.subject.name.strategy`, topic "tp",
    /// the id 1) for keys and values alike.
    #[test]
    fn record_name_strategies_name_wrappers_and_nameless_structs() {
        let named = st(vec![("x", s(SchemaType::Int32, false))], true).named("a.B", None);
        let cases = [
            (
                s(SchemaType::String, true),
                Value::text("x"),
                "google.protobuf.StringValue",
                "0000000001020e0a0178",
            ),
            (
                s(SchemaType::String, false).named("io.debezium.data.Json", Some(1)),
                Value::text("{}"),
                "google.protobuf.StringValue",
                "0000000001020e0a027b7d",
            ),
            (
                s(SchemaType::Bytes, false),
                Value::Bytes(Bytes::from_static(&[1])),
                "google.protobuf.BytesValue",
                "000000000102100a0101",
            ),
            (
                s(SchemaType::Int8, false),
                Value::Int(1),
                "google.protobuf.Int32Value",
                "000000000102080801",
            ),
            (
                s(SchemaType::Int64, false),
                Value::Int(5),
                "google.protobuf.Int64Value",
                "000000000102040805",
            ),
            (
                s(SchemaType::Boolean, false),
                Value::Boolean(true),
                "google.protobuf.BoolValue",
                "0000000001020c0801",
            ),
            (
                s(SchemaType::Float32, false),
                Value::Float(1.5),
                "google.protobuf.FloatValue",
                "000000000102020d0000c03f",
            ),
            (
                s(SchemaType::Float64, false),
                Value::Float(1.5),
                "google.protobuf.DoubleValue",
                "00000000010009000000000000f83f",
            ),
            (
                decimal("2", None, false),
                Value::Decimal(Numeric::parse("1.23").unwrap()),
                "google.protobuf.BytesValue",
                "0000000001000a017b10031802",
            ),
            (
                s(SchemaType::Int32, false).named(DATE, Some(1)),
                Value::Int(1),
                "google.protobuf.Int32Value",
                "00000000010008b20f10011802",
            ),
            (
                s(SchemaType::Int32, false).named(TIME, Some(1)),
                Value::Int(1000),
                "google.protobuf.Int32Value",
                "0000000001001801",
            ),
            (
                s(SchemaType::Int64, false).named(TIMESTAMP, Some(1)),
                Value::Int(1000),
                "google.protobuf.Int64Value",
                "0000000001000801",
            ),
            (
                st(vec![("x", s(SchemaType::Int32, false))], false),
                Value::Struct(vec![Value::Int(1)]),
                "ConnectDefault1",
                "0000000001000801",
            ),
            (
                named,
                Value::Struct(vec![Value::Int(1)]),
                "a.B",
                "0000000001000801",
            ),
        ];
        for (strategy, prefix) in [
            (SubjectNameStrategy::Record, ""),
            (SubjectNameStrategy::TopicRecord, "tp-"),
        ] {
            for is_key in [false, true] {
                let case = Case {
                    strategy,
                    is_key,
                    ..Case::default()
                };
                for (schema, value, name, expected) in &cases {
                    let (bytes, subject, _) = case.write("tp", schema, value).unwrap();
                    assert_eq!(
                        (bytes.as_str(), subject),
                        (*expected, format!("{prefix}{name}")),
                        "{schema:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn nameless_structs_and_maps_are_connect_defaults() {
        let schema = st(
            vec![
                ("a", st(vec![("x", s(SchemaType::Int32, false))], false)),
                ("b", st(vec![("y", s(SchemaType::String, false))], false)),
                (
                    "m",
                    s(
                        SchemaType::Map(
                            Box::new(s(SchemaType::String, false)),
                            Box::new(s(SchemaType::String, false)),
                        ),
                        true,
                    ),
                ),
            ],
            false,
        );
        let value = Value::Struct(vec![
            Value::Struct(vec![Value::Int(1)]),
            Value::Struct(vec![Value::text("z")]),
            Value::Map(vec![(Value::text("k"), Value::text("v"))]),
        ]);
        let (bytes, _, text) = write("anon", &schema, &value);
        assert_eq!(text, ANONYMOUS);
        assert_eq!(bytes, "0000000001000a02080112030a017a1a060a016b120176");
    }

    #[test]
    fn named_structs_maps_and_arrays() {
        let item = st(vec![("n", s(SchemaType::Int32, false))], false).named("shop.item", None);
        let row = st(vec![("id", s(SchemaType::Int32, false))], true).named("shop.Row", None);
        let schema = st(
            vec![
                ("thing", item.clone()),
                ("items", s(SchemaType::Array(Box::new(item)), false)),
                ("before", row.clone()),
                ("after", row),
                (
                    "hstore",
                    s(
                        SchemaType::Map(
                            Box::new(s(SchemaType::String, false)),
                            Box::new(s(SchemaType::String, true)),
                        ),
                        true,
                    )
                    .named("my_map", None),
                ),
                (
                    "ints",
                    s(
                        SchemaType::Array(Box::new(s(SchemaType::Int32, false))),
                        false,
                    ),
                ),
                (
                    "dates",
                    s(
                        SchemaType::Array(Box::new(
                            s(SchemaType::Int32, false).named(DATE, Some(1)),
                        )),
                        true,
                    ),
                ),
            ],
            false,
        )
        .named("shop.Cart", None);
        let n = |n| Value::Struct(vec![Value::Int(n)]);
        let value = Value::Struct(vec![
            n(1),
            Value::Array(vec![n(2), n(3)]),
            Value::Null,
            n(4),
            Value::Map(vec![
                (Value::text("z"), Value::Null),
                (Value::text("a"), Value::text("1")),
            ]),
            Value::Array(vec![Value::Int(1), Value::Int(-1), Value::Int(300)]),
            Value::Array(vec![Value::Int(0), Value::Int(1)]),
        ]);
        let (bytes, _, text) = write("cart", &schema, &value);
        assert_eq!(text, NAMES);
        assert_eq!(
            bytes,
            "0000000001000a0208011202080212020803220208042a030a017a2a060a0161120131320d01ffffffffffffffffff01ac023a0708b20f100118013a0708b20f10011802"
        );
        // A struct named like its field is `<name>Message`.
        let inner = st(vec![("n", s(SchemaType::Int32, false))], true).named("shop.item", None);
        let schema = st(vec![("item", inner)], false).named("shop.item", None);
        let (bytes, _, text) = write(
            "k",
            &schema,
            &Value::Struct(vec![Value::Struct(vec![Value::Int(2)])]),
        );
        assert_eq!(
            (bytes.as_str(), text.as_str()),
            ("0000000001000a020802", SELF_NAMED)
        );
        // Packages are not checked.
        for (name, expected) in [("db-1.public.T", HYPHEN), ("1db.T", DIGIT)] {
            let schema = st(vec![("a", s(SchemaType::Int32, false))], false).named(name, None);
            let (bytes, _, text) = write("k", &schema, &Value::Struct(vec![Value::Int(1)]));
            assert_eq!(
                (bytes.as_str(), text.as_str()),
                ("0000000001000801", expected)
            );
        }
    }

    #[test]
    fn defaults_are_not_in_the_schema() {
        let mut f = s(SchemaType::Float64, false);
        f.default = Some(Value::Float(1.5));
        let mut g = s(SchemaType::Boolean, false);
        g.default = Some(Value::Boolean(true));
        let mut by = s(SchemaType::Bytes, true);
        by.default = Some(Value::Bytes(Bytes::from_static(&[1])));
        let schema = st(vec![("f", f), ("g", g), ("by", by)], false).named("d.D", None);
        let (bytes, _, text) = write(
            "d",
            &schema,
            &Value::Struct(vec![Value::Float(0.0), Value::Boolean(false), Value::Null]),
        );
        assert_eq!(
            (bytes.as_str(), text.as_str()),
            ("0000000001001a0101", DEFAULTS)
        );
        let (bytes, ..) = write(
            "d",
            &schema,
            &Value::Struct(vec![
                Value::Float(1.5),
                Value::Boolean(true),
                Value::Bytes(Bytes::from_static(&[1])),
            ]),
        );
        assert_eq!(bytes, "00000000010009000000000000f83f10011a0101");
    }

    #[test]
    fn invalid_names_are_refused_or_scrubbed() {
        let schema = st(
            vec![
                ("a-b", s(SchemaType::Int32, false)),
                ("1st", s(SchemaType::String, false)),
                ("_u", s(SchemaType::Boolean, false)),
                ("é", s(SchemaType::Int32, false)),
            ],
            false,
        )
        .named("x.Bad-Name", None);
        let value = Value::Struct(vec![
            Value::Int(1),
            Value::text("s"),
            Value::Boolean(true),
            Value::Int(2),
        ]);
        assert!(matches!(
            Case::default().write("x", &schema, &value),
            Err(SerdeError::Record(m)) if m.contains("is not a valid identifier")
        ));
        let scrub = Case {
            options: ProtobufOptions {
                scrub_invalid_names: true,
                ..ProtobufOptions::default()
            },
            ..Case::default()
        };
        let (bytes, _, text) = scrub.write("x", &schema, &value).unwrap();
        assert_eq!(
            (bytes.as_str(), text.as_str()),
            ("000000000100080112017318012002", SCRUBBED)
        );
    }

    #[test]
    fn what_confluents_converter_refuses() {
        let item = st(vec![("n", s(SchemaType::Int32, false))], false).named("shop.item", None);
        // A nested message named like another field.
        let clash = st(
            vec![
                ("item", item.clone()),
                ("items", s(SchemaType::Array(Box::new(item.clone())), false)),
            ],
            false,
        )
        .named("shop.Cart", None);
        let n = Value::Struct(vec![Value::Int(1)]);
        assert!(matches!(
            Case::default().write("c", &clash, &Value::Struct(vec![n.clone(), Value::Array(vec![n])])),
            Err(SerdeError::Record(m)) if m.contains("\"item\" is already defined")
        ));
        // A null in an array (a NullPointerException in Java).
        let nulls = st(
            vec![(
                "a",
                s(
                    SchemaType::Array(Box::new(s(SchemaType::String, true))),
                    false,
                ),
            )],
            false,
        )
        .named("n.N", None);
        assert!(Case::default()
            .write(
                "n",
                &nulls,
                &Value::Struct(vec![Value::Array(vec![Value::text("x"), Value::Null])])
            )
            .is_err());
        // Arrays of arrays, top-level arrays and maps.
        let nested = st(
            vec![(
                "x",
                s(
                    SchemaType::Array(Box::new(s(
                        SchemaType::Array(Box::new(s(SchemaType::Int32, false))),
                        false,
                    ))),
                    false,
                ),
            )],
            false,
        )
        .named("a.A", None);
        assert_eq!(
            protobuf_schema(&nested, ProtobufOptions::default()),
            Err("Array cannot be nested".into())
        );
        let array = s(
            SchemaType::Array(Box::new(s(SchemaType::Int32, false))),
            false,
        );
        assert!(protobuf_schema(&array, ProtobufOptions::default()).is_err());
        // Protobuf's own parameters (what ProtobufData reads back from Protobuf schemas).
        let mut tagged = s(SchemaType::Int32, false);
        tagged
            .parameters
            .push(("io.confluent.connect.protobuf.Tag".into(), "7".into()));
        let schema = st(vec![("a", tagged)], false).named("t.T", None);
        assert!(protobuf_schema(&schema, ProtobufOptions::default()).is_err());
    }

    #[test]
    fn message_indexes_and_calendar() {
        let root = Message {
            name: "A".into(),
            fields: Vec::new(),
            nested: vec![
                Message {
                    name: "B".into(),
                    fields: Vec::new(),
                    nested: Vec::new(),
                    children: Vec::new(),
                },
                Message {
                    name: "C".into(),
                    fields: Vec::new(),
                    nested: Vec::new(),
                    children: Vec::new(),
                },
            ],
            children: Vec::new(),
        };
        assert_eq!(message_indexes("p.A", &root), vec![0]);
        // [0, 1]: a count of 2, then 0 and 1, zigzag-encoded.
        assert_eq!(message_indexes("p.A.C", &root), vec![4, 0, 2]);
        assert_eq!(calendar_date(0), (1970, 1, 1));
        assert_eq!(calendar_date(-141_427), (1582, 10, 15));
        assert_eq!(calendar_date(-141_428), (1582, 10, 4));
        // 0001-01-01 (Julian) and the day before it, 1 BC.
        assert_eq!(calendar_date(-719_164), (1, 1, 1));
        assert_eq!(calendar_date(-719_165), (1, 12, 31));
    }

    /// Against Apicurio Registry 2.6.13's ccompat API (not a mock): Confluent's converter
    /// 7.0.16 registered this text (no references: its imports are known types) and wrote
    /// `0000000003` then these bytes; the same text sent again got the same id.
    #[test]
    fn registered_with_a_real_registry() {
        let schema = st(
            vec![
                ("day", s(SchemaType::Int32, false).named(DATE, Some(1))),
                ("amount", {
                    let mut d = s(SchemaType::Bytes, true).named(DECIMAL, Some(1));
                    d.parameters.push(("scale".into(), "2".into()));
                    d
                }),
                ("ts", s(SchemaType::Int64, false).named(TIMESTAMP, Some(1))),
            ],
            false,
        )
        .named("t.Dates", None);
        let value = Value::Struct(vec![
            Value::Int(0),
            Value::Decimal(Numeric::parse("1.25").unwrap()),
            Value::Int(1000),
        ]);
        let (bytes, subject, text) = write("dates", &schema, &value);
        assert_eq!(subject, "dates-value");
        assert_eq!(text, DATES);
        assert_eq!(
            &bytes[10..],
            "000a0708b20f1001180112070a017d100318021a020801"
        );
    }

    #[test]
    fn repeated_fields() {
        let array = |kind, optional| s(SchemaType::Array(Box::new(s(kind, optional))), false);
        let mut b = array(SchemaType::Boolean, false);
        b.optional = true;
        let schema = st(
            vec![
                ("a", array(SchemaType::Float32, false)),
                ("b", b),
                ("c", array(SchemaType::Int64, true)),
                ("d", array(SchemaType::Bytes, false)),
            ],
            false,
        )
        .named("o.O", None);
        let value = Value::Struct(vec![
            Value::Array(vec![Value::Float(1.5), Value::Float(0.0)]),
            Value::Array(vec![Value::Boolean(true), Value::Boolean(false)]),
            Value::Array(vec![Value::Int(0), Value::Int(5)]),
            Value::Array(vec![
                Value::Bytes(Bytes::new()),
                Value::Bytes(Bytes::from_static(&[9])),
            ]),
        ]);
        // Numbers packed, zeros included; bytes one by one, empty ones too.
        let (bytes, _, text) = write("o", &schema, &value);
        assert_eq!(
            bytes,
            "0000000001000a080000c03f00000000120201001a0200052200220109"
        );
        assert_eq!(text, REPEATED);
        let wrapped = Case {
            options: opts(false, true),
            ..Case::default()
        };
        let (bytes, _, text) = wrapped.write("o", &schema, &value).unwrap();
        assert_eq!(
            bytes,
            "0000000001000a080000c03f00000000120201001a001a0208052200220109"
        );
        assert_eq!(text, REPEATED_WRAPPED);
        // A proto3 optional's synthetic oneof `_id` is not a name a field `_id` clashes with.
        let schema = st(
            vec![
                ("id", s(SchemaType::Int32, true)),
                ("_id", s(SchemaType::Int32, false)),
            ],
            false,
        )
        .named("o.O", None);
        let optional = Case {
            options: opts(true, false),
            ..Case::default()
        };
        let (bytes, _, text) = optional
            .write(
                "o",
                &schema,
                &Value::Struct(vec![Value::Int(1), Value::Int(2)]),
            )
            .unwrap();
        assert_eq!(bytes, "00000000010008011002");
        assert_eq!(text, OPTIONAL_AND_UNDERSCORE);
    }

    #[test]
    fn map_entries() {
        let mut item = st(vec![("n", s(SchemaType::Int32, false))], true).named("m.value", None);
        item.optional = true;
        let schema = st(
            vec![
                (
                    "mp",
                    s(
                        SchemaType::Map(Box::new(s(SchemaType::Int8, false)), Box::new(item)),
                        false,
                    ),
                ),
                (
                    "md",
                    s(
                        SchemaType::Map(
                            Box::new(s(SchemaType::String, false)),
                            Box::new(decimal("2", None, true)),
                        ),
                        true,
                    ),
                ),
            ],
            false,
        )
        .named("m.M", None);
        let value = Value::Struct(vec![
            Value::Map(vec![
                (Value::Int(-1), Value::Struct(vec![Value::Int(3)])),
                (Value::Int(0), Value::Null),
            ]),
            Value::Map(vec![(
                Value::text(""),
                Value::Decimal(Numeric::parse("0.10").unwrap()),
            )]),
        ]);
        // In an entry, no `optional` label, no params; a struct named `value` is
        // `valueMessage`, nested in the entry; a blank line indented keeps its two spaces.
        let case = Case {
            options: opts(true, false),
            ..Case::default()
        };
        let (bytes, _, text) = case.write("m", &schema, &value).unwrap();
        assert_eq!(text, MAP_ENTRIES);
        assert_eq!(
            bytes,
            "0000000001000a0f08ffffffffffffffffff01120208030a00120912070a010a10021802"
        );
    }
}
