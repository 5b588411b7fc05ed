//! `Cast$Key` / `$Value`: top-level fields of a struct or map (`spec` `field:type,...`), or
//! the whole key/value (`spec` one type), cast to int8, int16, int32, int64, float32,
//! float64, boolean or string as Java narrows, widens and parses (`300.7` to int8 is 44,
//! `0.5` to boolean false, bytes to string base64). A null key/value is left alone. A cast
//! field gets a fresh schema (optional as it was, its default cast); a whole-value cast keeps
//! the source schema's name, version, doc and parameters (a Timestamp cast to int64 is still
//! named Timestamp); the struct keeps its name and its optionality.

use super::fields::{
    check_null, copy_schema_basics, field_value, java_class, java_map_copy, map_get, map_put, part,
    require_map, require_struct, type_name,
};
use super::{Entry, Options, Side, Transformation};
use crate::connect::{
    ConnectRecord, Converter, Data, HeaderConverter, Numeric, Schema, SchemaType, Value,
};
use base64::Engine;
use std::sync::Arc;

pub(super) const ENTRY: Entry = Entry {
    class: "org.apache.kafka.connect.transforms.Cast",
    sides: true,
    parse,
    doc: "fields (`spec` field:type,...) or the whole key or value (`spec` type) cast to another primitive type",
};

const PURPOSE: &str = "cast types";

const INPUT_TYPES: &str = "[INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING, BYTES]";
const OUTPUT_TYPES: &str = "[INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING]";

/// A type Cast casts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Int8,
    Int16,
    Int32,
    Int64,
    Float32,
    Float64,
    Boolean,
    String,
}

impl Target {
    /// `Schema.Type.valueOf(name)`, then Cast's output types: `Err(None)` when `name` is no
    /// Connect type, `Err(Some(type))` for one Cast does not cast to.
    fn of(name: &str) -> Result<Self, Option<&'static str>> {
        Ok(match name {
            "INT8" => Target::Int8,
            "INT16" => Target::Int16,
            "INT32" => Target::Int32,
            "INT64" => Target::Int64,
            "FLOAT32" => Target::Float32,
            "FLOAT64" => Target::Float64,
            "BOOLEAN" => Target::Boolean,
            "STRING" => Target::String,
            "BYTES" => return Err(Some("BYTES")),
            "ARRAY" => return Err(Some("ARRAY")),
            "MAP" => return Err(Some("MAP")),
            "STRUCT" => return Err(Some("STRUCT")),
            _ => return Err(None),
        })
    }

    fn kind(self) -> SchemaType {
        match self {
            Target::Int8 => SchemaType::Int8,
            Target::Int16 => SchemaType::Int16,
            Target::Int32 => SchemaType::Int32,
            Target::Int64 => SchemaType::Int64,
            Target::Float32 => SchemaType::Float32,
            Target::Float64 => SchemaType::Float64,
            Target::Boolean => SchemaType::Boolean,
            Target::String => SchemaType::String,
        }
    }
}

#[derive(Debug)]
struct Cast {
    side: Side,
    /// Field casts in the iteration order of Kafka's `HashMap` of them (the order their
    /// absent fields are added to a schemaless map in).
    casts: Vec<(String, Target)>,
    whole: Option<Target>,
    replace_null_with_default: bool,
}

/// `String.trim()`: every character up to the space.
fn java_trim(text: &str) -> &str {
    text.trim_matches(|c: char| c <= ' ')
}

fn parse(o: &Options<'_>, side: Option<Side>) -> Result<Arc<dyn Transformation>, String> {
    let key = o.key("spec");
    let spec = o.required("spec")?;
    // ConfigDef's LIST: the trimmed text split at commas and the blanks around them, empty
    // items kept.
    let spec = java_trim(&spec);
    let mappings: Vec<&str> = if spec.is_empty() {
        Vec::new()
    } else {
        spec.split(',').map(java_trim).collect()
    };
    if mappings.is_empty() {
        return Err(format!("{key}: Must specify at least one field to cast."));
    }
    // Schema.Type.valueOf: an IllegalArgumentException that ConfigException(String,
    // Throwable), which is ConfigException(name, value), wraps.
    let target = |text: &str| {
        let text = java_trim(text);
        let name = text.to_uppercase();
        Target::of(&name).map_err(|kind| match kind {
            Some(kind) => format!(
                "{key}: Cast transformation does not support casting to {kind}; supported types are {OUTPUT_TYPES}"
            ),
            None => format!(
                "{key}: Invalid value java.lang.IllegalArgumentException: No enum constant \
                 org.apache.kafka.connect.data.Schema.Type.{name} for configuration Invalid type \
                 found in casting spec: {text}"
            ),
        })
    };
    let mut casts: Vec<(String, Target)> = Vec::new();
    let mut whole = None;
    for mapping in &mappings {
        // String.split(":"): trailing empty parts dropped.
        let mut parts: Vec<&str> = mapping.split(':').collect();
        while parts.len() > 1 && parts.last() == Some(&"") {
            parts.pop();
        }
        if parts == [""] && !mapping.is_empty() {
            parts.clear();
        }
        match parts[..] {
            [kind] => whole = Some(target(kind)?),
            [field, kind] => {
                let kind = target(kind)?;
                let field = java_trim(field);
                match casts.iter_mut().find(|(f, _)| f == field) {
                    Some((_, t)) => *t = kind,
                    None => casts.push((field.to_owned(), kind)),
                }
            }
            [] => return Err(format!("{key}: Index 1 out of bounds for length 0")),
            _ => {
                // Kafka names ReplaceField's option here.
                return Err(format!(
                    "{key}: Invalid value [{}] for configuration renames: Invalid rename mapping: {mapping}",
                    mappings.join(", ")
                ));
            }
        }
    }
    if whole.is_some() && mappings.len() > 1 {
        return Err(format!(
            "{key}: Cast transformations that specify a type to cast the entire value to may only specify a single cast in their spec"
        ));
    }
    Ok(Arc::new(Cast {
        side: side.unwrap_or(Side::Value),
        casts: crate::connect::java_hash_map_order(casts),
        whole,
        replace_null_with_default: o.flag("replace.null.with.default", true)?,
    }))
}

impl Cast {
    fn target(&self, field: &str) -> Option<Target> {
        self.casts.iter().find(|(f, _)| f == field).map(|(_, t)| *t)
    }
}

impl Transformation for Cast {
    fn apply(&self, mut record: ConnectRecord, _: i64) -> Result<Option<ConnectRecord>, String> {
        let data = part(&mut record, self.side);
        if data.value.is_null() {
            return Ok(Some(record));
        }
        let updated = match (&data.schema, self.whole) {
            (None, Some(target)) => Data {
                schema: None,
                value: cast(None, &data.value, target)?,
            },
            (None, None) => {
                let source = require_map(data, PURPOSE)?;
                let mut entries = source.to_vec();
                let copied = entries.len();
                for (field, target) in &self.casts {
                    let value = map_get(source, field).unwrap_or(&Value::Null);
                    map_put(&mut entries, field, cast(None, value, *target)?);
                }
                Data {
                    schema: None,
                    value: java_map_copy(entries, copied),
                }
            }
            (Some(schema), Some(target)) => {
                let mut updated = copy_schema_basics(schema, target.kind());
                updated.optional = schema.optional;
                if let Some(default) = &schema.default {
                    let default = cast(Some(schema), default, target)?;
                    // SchemaBuilder.defaultValue checks the default against the logical type
                    // the schema is still named after: a cast one is no longer its class.
                    if logical_type(schema).is_some() {
                        return Err("Invalid default value".into());
                    }
                    updated.default = Some(default);
                }
                let value = cast(Some(schema), &data.value, target)?;
                Data::new(updated, value)
            }
            (Some(schema), None) => {
                let SchemaType::Struct(fields) = &schema.kind else {
                    return Err("Cannot list fields on non-struct type".into());
                };
                let mut new_fields = Vec::with_capacity(fields.len());
                for (name, field_schema) in fields {
                    let Some(target) = self.target(name) else {
                        new_fields.push((name.clone(), field_schema.clone()));
                        continue;
                    };
                    let mut cast_schema = Schema::new(target.kind(), field_schema.optional);
                    if let Some(default) = &field_schema.default {
                        cast_schema.default = Some(cast(Some(field_schema), default, target)?);
                    }
                    new_fields.push((name.clone(), cast_schema));
                }
                if schema.default.is_some() {
                    return Err(format!(
                        "Cast transformation does not support casting from STRUCT; supported types are {INPUT_TYPES}"
                    ));
                }
                let (_, fields, values) = require_struct(data, PURPOSE)?;
                let mut new_values = Vec::with_capacity(values.len());
                for (((name, field_schema), value), (_, new_schema)) in
                    fields.iter().zip(values).zip(&new_fields)
                {
                    let value = field_value(field_schema, value, self.replace_null_with_default);
                    let value = match self.target(name) {
                        Some(target) => cast(Some(field_schema), &value, target)?,
                        None => value,
                    };
                    check_null(name, new_schema, &value)?;
                    new_values.push(value);
                }
                let mut updated = copy_schema_basics(schema, SchemaType::Struct(new_fields));
                updated.optional = schema.optional;
                Data::new(updated, Value::Struct(new_values))
            }
        };
        *data = updated;
        Ok(Some(record))
    }
}

/// The Connect logical type a schema is named after, if any.
fn logical_type(schema: &Schema) -> Option<&'static str> {
    match schema.name.as_deref()? {
        "org.apache.kafka.connect.data.Date" => Some("Date"),
        "org.apache.kafka.connect.data.Time" => Some("Time"),
        "org.apache.kafka.connect.data.Timestamp" => Some("Timestamp"),
        "org.apache.kafka.connect.data.Decimal" => Some("Decimal"),
        _ => None,
    }
}

/// A value as the Java object Cast sees.
enum Java<'a> {
    /// `Byte`, `Short`, `Integer` or `Long`.
    Integer(i64),
    Float(f32),
    Double(f64),
    /// `BigDecimal` (a Decimal).
    Decimal(&'a Numeric),
    Boolean(bool),
    String(std::borrow::Cow<'a, str>),
    /// `byte[]`.
    Bytes(&'a [u8]),
    /// `java.util.Date` (a Date, Time or Timestamp), only ever cast to a string.
    Date,
}

/// `Cast.castValueToType`: `value` (of `schema`, or schemaless) as `target`.
fn cast(schema: Option<&Schema>, value: &Value, target: Target) -> Result<Value, String> {
    if value.is_null() {
        return Ok(Value::Null);
    }
    // The value's Connect type: its schema's, or what ConnectSchema.schemaType says of its
    // class.
    let input = match (schema, value) {
        (Some(schema), _) => type_name(&schema.kind),
        (None, Value::Boolean(_)) => "BOOLEAN",
        (None, Value::Int(_)) => "INT64",
        (None, Value::Float(_)) => "FLOAT64",
        (None, Value::String(_)) => "STRING",
        (None, Value::Bytes(_)) => "BYTES",
        (None, Value::Array(_)) => "ARRAY",
        (None, Value::Map(_)) => "MAP",
        (None, Value::Struct(_)) => "STRUCT",
        (None, other) => {
            return Err(format!(
                "Cast transformation was passed a value of type class {} which is not supported by Connect's data API",
                java_class(None, other)
            ))
        }
    };
    if matches!(input, "ARRAY" | "MAP" | "STRUCT") {
        return Err(format!(
            "Cast transformation does not support casting from {input}; supported types are {INPUT_TYPES}"
        ));
    }
    let logical = schema.and_then(logical_type);
    let java = match (value, schema.map(|s| &s.kind)) {
        (Value::Int(v), _) if matches!(logical, Some("Date" | "Time" | "Timestamp")) => {
            if target == Target::String {
                Java::Date
            } else {
                // Date.fromLogical, Time.fromLogical, Timestamp.fromLogical: the number.
                if logical == Some("Time") && !(0..=86_400_000).contains(v) {
                    return Err(
                        "Kafka Connect Time type should not have any date fields set to non-zero values."
                            .into(),
                    );
                }
                Java::Integer(*v)
            }
        }
        (Value::Int(v), _) => Java::Integer(*v),
        (Value::Float(v), Some(SchemaType::Float32)) => Java::Float(*v as f32),
        (Value::Float(v), _) => Java::Double(*v),
        (Value::Decimal(d), _) => Java::Decimal(d),
        (Value::Boolean(b), _) => Java::Boolean(*b),
        (Value::String(s), _) => Java::String(String::from_utf8_lossy(s)),
        (Value::Bytes(b), _) => Java::Bytes(b),
        (other, _) => {
            return Err(format!(
                "Unexpected type in Cast transformation: class {}",
                java_class(schema, other)
            ))
        }
    };
    let out_of_range =
        |text: &str| format!("Value ({text}) was out of range for requested data type");
    let unexpected = |java: &Java<'_>| {
        format!(
            "Unexpected type in Cast transformation: class {}",
            match java {
                // Debezium hands bytea values over as ByteBuffers.
                Java::Bytes(_) => "java.nio.HeapByteBuffer",
                _ => "java.util.Date",
            }
        )
    };
    Ok(match target {
        Target::Int8 | Target::Int16 | Target::Int32 | Target::Int64 => {
            let (bits, wide) = match target {
                Target::Int8 => (8, false),
                Target::Int16 => (16, false),
                Target::Int32 => (32, false),
                _ => (64, true),
            };
            let whole = match &java {
                Java::Integer(v) => *v,
                // (byte) (int) f: saturated to an int, then wrapped; (long) f saturates.
                Java::Float(f) if wide => *f as i64,
                Java::Float(f) => i64::from(*f as i32),
                Java::Double(d) if wide => *d as i64,
                Java::Double(d) => i64::from(*d as i32),
                Java::Decimal(d) => decimal_long_value(d),
                Java::Boolean(b) => i64::from(*b),
                Java::String(s) => {
                    let parsed = java_parse_long(s).ok_or_else(|| out_of_range(s))?;
                    let fits =
                        bits == 64 || (parsed >> (bits - 1)) == 0 || (parsed >> (bits - 1)) == -1;
                    if !fits {
                        return Err(out_of_range(s));
                    }
                    parsed
                }
                other => return Err(unexpected(other)),
            };
            Value::Int(match bits {
                8 => i64::from(whole as i8),
                16 => i64::from(whole as i16),
                32 => i64::from(whole as i32),
                _ => whole,
            })
        }
        Target::Float32 => Value::Float(float32(match &java {
            Java::Integer(v) => *v as f32,
            Java::Float(f) => *f,
            Java::Double(d) => *d as f32,
            Java::Decimal(d) => decimal_f32(d),
            Java::Boolean(b) => f32::from(u8::from(*b)),
            Java::String(s) => java_parse_f32(s).ok_or_else(|| out_of_range(s))?,
            other => return Err(unexpected(other)),
        })),
        Target::Float64 => Value::Float(match &java {
            Java::Integer(v) => *v as f64,
            Java::Float(f) => f64::from(*f),
            Java::Double(d) => *d,
            Java::Decimal(d) => d.to_f64(),
            Java::Boolean(b) => f64::from(u8::from(*b)),
            Java::String(s) => java_parse_float(s).ok_or_else(|| out_of_range(s))?,
            other => return Err(unexpected(other)),
        }),
        // Number.longValue() != 0: 0.5 is false.
        Target::Boolean => Value::Boolean(match &java {
            Java::Integer(v) => *v != 0,
            Java::Float(f) => *f as i64 != 0,
            Java::Double(d) => *d as i64 != 0,
            Java::Decimal(d) => decimal_long_value(d) != 0,
            Java::Boolean(b) => *b,
            Java::String(s) => s.eq_ignore_ascii_case("true"),
            other => return Err(unexpected(other)),
        }),
        Target::String => Value::text(&match &java {
            Java::String(s) => s.to_string(),
            Java::Bytes(b) => base64::engine::general_purpose::STANDARD.encode(b),
            Java::Date => {
                let schema = schema.expect("a date has a schema");
                date_text(schema, value)
            }
            Java::Integer(v) => v.to_string(),
            Java::Boolean(b) => b.to_string(),
            Java::Decimal(d) => d.java_string(),
            Java::Float(f) => java_text(&Value::Float(float32(*f))),
            Java::Double(d) => java_text(&Value::Float(*d)),
        }),
    })
}

/// `Values.dateFormatFor(date).format(date)` in UTC (a Kafka Connect worker's time zone in
/// the reference set-up; Kafka uses the JVM's default zone): under a day since the epoch
/// (any negative time too) `HH:mm:ss.SSS'Z'`, a whole day `yyyy-MM-dd`, else
/// `yyyy-MM-dd'T'HH:mm:ss.SSS'Z'` (the text SimpleHeaderConverter writes for a date header).
fn date_text(schema: &Schema, value: &Value) -> String {
    HeaderConverter::Simple
        .encode(schema, value)
        .ok()
        .flatten()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// Java's `toString()` of a number: `Double.toString` (and `Float.toString`, through
/// [`float32`]) as the shortest text that reads back as the same number, which is what JDK
/// 19+ prints; JDK 17's older algorithm prints more digits for a few numbers (`1.0E23` as
/// `9.999999999999999E22`), not followed here.
fn java_text(value: &Value) -> String {
    Converter::String
        .encode(None, value)
        .ok()
        .flatten()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// A `float` as outbox-relay holds one: the double its shortest decimal text reads as, so
/// that the converters write it as Java's `Float.toString` does (`0.1`, not the widened
/// `0.10000000149011612`).
fn float32(f: f32) -> f64 {
    if !f.is_finite() {
        return f64::from(f);
    }
    format!("{f:e}").parse().unwrap_or(f64::from(f))
}

/// `BigDecimal.longValue()`: the integer part, its low 64 bits (`intValue()` and
/// `byteValue()` keep fewer of the same bits).
fn decimal_long_value(d: &Numeric) -> i64 {
    let Numeric::Finite { unscaled, scale } = d else {
        return d.to_f64() as i64;
    };
    let (negative, digits) = match unscaled.strip_prefix('-') {
        Some(digits) => (true, digits),
        None => (false, unscaled.as_str()),
    };
    let int = &digits[..digits.len().saturating_sub(*scale as usize)];
    let wrapped = int.bytes().fold(0i64, |n, d| {
        n.wrapping_mul(10).wrapping_add(i64::from(d - b'0'))
    });
    if negative {
        wrapped.wrapping_neg()
    } else {
        wrapped
    }
}

/// `BigDecimal.floatValue()`: the nearest float.
fn decimal_f32(d: &Numeric) -> f32 {
    match d {
        Numeric::Finite { unscaled, scale } => {
            format!("{unscaled}e-{scale}").parse().unwrap_or(f32::NAN)
        }
        other => other.to_f64() as f32,
    }
}

/// `Long.parseLong(text)`: an optional sign and decimal digits, nothing else.
fn java_parse_long(text: &str) -> Option<i64> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// The text `Double.parseDouble` / `Float.parseFloat` read, checked against Java's grammar
/// (`FloatingDecimal`): trimmed, an optional sign, `NaN`, `Infinity`, decimal digits with an
/// optional point and exponent, or a hexadecimal float (`0x1.8p1`), and an optional `f`,
/// `F`, `d` or `D` suffix. Decimal: the text to read, without the suffix; hexadecimal: the
/// value.
enum FloatText {
    Decimal(String),
    Value(f64),
}

fn java_float_text(text: &str) -> Option<FloatText> {
    let text = java_trim(text);
    let (negative, body) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let sign = if negative { -1.0 } else { 1.0 };
    match body {
        "NaN" => return Some(FloatText::Value(f64::NAN)),
        "Infinity" => return Some(FloatText::Value(sign * f64::INFINITY)),
        _ => {}
    }
    let body = body.strip_suffix(['f', 'F', 'd', 'D']).unwrap_or(body);
    if let Some(hex) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        return hex_float(hex).map(|v| FloatText::Value(sign * v));
    }
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let (int, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() && fraction.is_empty() || !digits(int) || !digits(fraction) {
        return None;
    }
    if let Some(exponent) = exponent {
        let e = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
        if e.is_empty() || !digits(e) {
            return None;
        }
    }
    Some(FloatText::Decimal(format!(
        "{}{body}",
        if negative { "-" } else { "" }
    )))
}

/// A hexadecimal float's digits after `0x`: `h.hhhp±d` (the binary exponent required).
/// Mantissas of up to 15 hexadecimal digits are exact; longer ones are rounded twice.
fn hex_float(hex: &str) -> Option<f64> {
    let (mantissa, exponent) = hex.split_once(['p', 'P'])?;
    let (int, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int.is_empty() && fraction.is_empty()
        || !int
            .bytes()
            .chain(fraction.bytes())
            .all(|b| b.is_ascii_hexdigit())
    {
        return None;
    }
    let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let magnitude: i64 = digits.parse().unwrap_or(100_000).min(100_000);
    let exponent = if exponent.starts_with('-') {
        -magnitude
    } else {
        magnitude
    };
    let mut value: u64 = 0;
    let mut shift = 0i64;
    let mut sticky = false;
    for (i, c) in int.chars().chain(fraction.chars()).enumerate() {
        let digit = u64::from(c.to_digit(16)?);
        if value >> 56 == 0 {
            value = value * 16 + digit;
            if i >= int.len() {
                shift -= 4;
            }
        } else {
            sticky |= digit != 0;
            if i < int.len() {
                shift += 4;
            }
        }
    }
    let mut value = (value | u64::from(sticky)) as f64;
    // In steps, so that a subnormal or huge result is not lost to an infinite power of two.
    let mut power = exponent + shift;
    while power != 0 && value != 0.0 && value.is_finite() {
        let step = power.clamp(-1000, 1000);
        value *= 2f64.powi(step as i32);
        power -= step;
    }
    Some(value)
}

/// `Double.parseDouble(text)`.
fn java_parse_float(text: &str) -> Option<f64> {
    match java_float_text(text)? {
        FloatText::Value(v) => Some(v),
        FloatText::Decimal(text) => text.parse().ok(),
    }
}

/// `Float.parseFloat(text)`: a decimal text rounded once, to the nearest float.
fn java_parse_f32(text: &str) -> Option<f32> {
    match java_float_text(text)? {
        FloatText::Value(v) => Some(v as f32),
        FloatText::Decimal(text) => text.parse().ok(),
    }
}
