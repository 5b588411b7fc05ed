//! `MaskField$Key` / `$Value`: the `fields` named replaced by their type's empty value (0,
//! false, "", an empty array or map, the epoch for dates) or by `replacement`. A null
//! key/value is refused, as Kafka Connect refuses it; bytes and structs cannot be masked.

use super::fields::{
    field_value, java_class, java_map_copy, map_get, map_put, part, require_map, require_struct,
};
use super::{Entry, Options, Side, Transformation};
use crate::connect::{ConnectRecord, Data, Numeric, Schema, SchemaType, Value};
use std::sync::Arc;

pub(super) const ENTRY: Entry = Entry {
    class: "org.apache.kafka.connect.transforms.MaskField",
    sides: true,
    parse,
    doc: "the `fields` named masked: their type's empty value, or `replacement`",
};

const PURPOSE: &str = "mask fields";

#[derive(Debug)]
struct MaskField {
    side: Side,
    fields: Vec<String>,
    replacement: Option<String>,
    replace_null_with_default: bool,
}

fn parse(o: &Options<'_>, side: Option<Side>) -> Result<Arc<dyn Transformation>, String> {
    let fields = super::fields::required_list(o, "fields")?;
    let replacement = o.get("replacement");
    if replacement.as_deref() == Some("") {
        return Err(format!(
            "Invalid value  for configuration {}: String must be non-empty",
            o.key("replacement")
        ));
    }
    Ok(Arc::new(MaskField {
        side: side.unwrap_or(Side::Value),
        fields,
        replacement,
        replace_null_with_default: o.flag("replace.null.with.default", true)?,
    }))
}

impl MaskField {
    fn masked(&self, schema: Option<&Schema>, value: &Value) -> Result<Value, String> {
        if value.is_null() {
            return Ok(Value::Null);
        }
        let class = java_class(schema, value);
        let Some(replacement) = &self.replacement else {
            return Ok(match value {
                Value::Boolean(_) => Value::Boolean(false),
                Value::Int(_) => Value::Int(0),
                Value::Float(_) => Value::Float(0.0),
                Value::String(_) => Value::text(""),
                Value::Array(_) => Value::Array(Vec::new()),
                Value::Map(_) => Value::Map(Vec::new()),
                // BigDecimal.ZERO, scale 0: the Decimal schema's scale must be 0 for a
                // converter to write it.
                Value::Decimal(_) => {
                    let scale = decimal_scale(schema);
                    if scale != 0 {
                        return Err(format!(
                            "Decimal value has mismatching scale for given Decimal schema. Schema has scale {scale}, value has scale 0."
                        ));
                    }
                    Value::Decimal(Numeric::parse("0").expect("zero"))
                }
                Value::Bytes(_) | Value::Struct(_) | Value::Null => {
                    return Err(format!("Cannot mask value of type: class {class}"))
                }
            });
        };
        let not_a_number =
            || format!("Unable to convert {replacement} (class java.lang.String) to a number");
        match (value, schema.map(|s| &s.kind)) {
            (Value::String(_), _) => Ok(Value::text(replacement)),
            (Value::Int(_), _) if class != "java.util.Date" => {
                let whole = java_long_value(replacement).ok_or_else(not_a_number)?;
                let kind = schema.map(|s| &s.kind);
                Ok(Value::Int(match kind {
                    Some(SchemaType::Int8) => i64::from(whole as i8),
                    Some(SchemaType::Int16) => i64::from(whole as i16),
                    Some(SchemaType::Int32) => i64::from(whole as i32),
                    _ => whole,
                }))
            }
            (Value::Float(_), kind) => {
                let f: f64 = java_decimal(replacement).ok_or_else(not_a_number)?;
                Ok(Value::Float(if kind == Some(&SchemaType::Float32) {
                    f64::from(f as f32)
                } else {
                    f
                }))
            }
            (Value::Decimal(_), _) => {
                Numeric::parse(replacement)
                    .map(Value::Decimal)
                    .ok_or_else(|| {
                        format!(
                            "Unable to convert {replacement} (class java.lang.String) to number"
                        )
                    })
            }
            _ => Err(format!(
                "Cannot mask value of type class {class} with custom replacement."
            )),
        }
    }
}

fn decimal_scale(schema: Option<&Schema>) -> i64 {
    schema
        .and_then(|s| s.parameters.iter().find(|(k, _)| &**k == "scale"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

/// `new BigDecimal(text).doubleValue()`: a decimal number with an optional exponent.
fn java_decimal(text: &str) -> Option<f64> {
    let body = text.strip_prefix(['+', '-']).unwrap_or(text);
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let digits_ok = !mantissa.is_empty()
        && mantissa != "."
        && mantissa.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && mantissa.bytes().filter(|b| *b == b'.').count() <= 1;
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        !e.is_empty() && e.bytes().all(|b| b.is_ascii_digit())
    });
    if !digits_ok || !exponent_ok {
        return None;
    }
    text.parse().ok()
}

/// `new BigDecimal(text).longValue()`: truncated toward zero, the low 64 bits kept.
fn java_long_value(text: &str) -> Option<i64> {
    let f = java_decimal(text)?;
    // Exact for the whole numbers an i64 holds; a fraction is dropped toward zero.
    let negative = text.starts_with('-');
    let body = text.trim_start_matches(['+', '-']);
    if !body.contains(['e', 'E']) {
        let int = body.split('.').next().unwrap_or("");
        let int = if int.is_empty() { "0" } else { int };
        let wrapped = int.bytes().fold(0i64, |n, d| {
            n.wrapping_mul(10).wrapping_add(i64::from(d - b'0'))
        });
        return Some(if negative {
            wrapped.wrapping_neg()
        } else {
            wrapped
        });
    }
    Some(f.trunc() as i64)
}

impl Transformation for MaskField {
    fn apply(&self, mut record: ConnectRecord, _: i64) -> Result<Option<ConnectRecord>, String> {
        let data = part(&mut record, self.side);
        let updated = match &data.schema {
            None => {
                let mut entries = require_map(data, PURPOSE)?.to_vec();
                let copied = entries.len();
                for name in &self.fields {
                    let value = map_get(&entries, name).cloned().unwrap_or(Value::Null);
                    let masked = self.masked(None, &value)?;
                    map_put(&mut entries, name, masked);
                }
                Data {
                    schema: None,
                    value: java_map_copy(entries, copied),
                }
            }
            Some(_) => {
                let (schema, fields, values) = require_struct(data, PURPOSE)?;
                let values = fields
                    .iter()
                    .zip(values)
                    .map(|((name, field_schema), value)| {
                        let value =
                            field_value(field_schema, value, self.replace_null_with_default);
                        if self.fields.iter().any(|f| **f == **name) {
                            self.masked(Some(field_schema), &value)
                        } else {
                            Ok(value)
                        }
                    })
                    .collect::<Result<Vec<_>, String>>()?;
                Data::new(schema.clone(), Value::Struct(values))
            }
        };
        *data = updated;
        Ok(Some(record))
    }
}
