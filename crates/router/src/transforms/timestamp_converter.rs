//! `TimestampConverter$Key` / `$Value`: a timestamp (the whole key/value, or its top-level
//! `field`) converted between a string in `format` (Java's `SimpleDateFormat`, UTC), Unix
//! time (`unix.precision`, seconds to nanoseconds, truncated toward zero), and Connect's
//! Date, Time and Timestamp (`target.type`: string, unix, Date, Time, Timestamp). The source
//! kind comes from the schema (its logical name, else string or int64) or, schemaless, from
//! the value (a string or a long). The converted field's schema is the target's, optional
//! as the source was; the struct keeps its name, optionality and (converted) default.

use super::fields::{
    check_null, copy_schema_basics, field_value, java_class, java_map_copy, map_get, map_put, part,
    require_map, require_struct, schema_string, timestamp_schema,
};
use super::{DateFormat, Entry, Options, Side, Transformation};
use crate::connect::{ConnectRecord, Data, Schema, SchemaType, Value};
use std::sync::Arc;

use super::date_format::PatternError;

pub(super) const ENTRY: Entry = Entry {
    class: "org.apache.kafka.connect.transforms.TimestampConverter",
    sides: true,
    parse,
    doc: "a timestamp (the key, value or a `field`) converted to a string, Unix time, Date, Time or Timestamp (`target.type`)",
};

const PURPOSE: &str = "converting timestamp formats";

const DAY: i64 = 86_400_000;

/// A timestamp's representation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Text in `format`.
    String,
    /// A long: time since the epoch in `unix.precision`.
    Unix,
    /// Connect's Date: days.
    Date,
    /// Connect's Time: milliseconds of the day.
    Time,
    /// Connect's Timestamp: milliseconds.
    Timestamp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Precision {
    Nanoseconds,
    Microseconds,
    Milliseconds,
    Seconds,
}

#[derive(Debug)]
struct TimestampConverter {
    side: Side,
    /// Empty: the whole key/value.
    field: String,
    target: Kind,
    /// `None`: no `format` (a string can then be neither read nor written).
    format: Option<DateFormat>,
    /// As configured, for messages.
    pattern: String,
    precision: Precision,
    replace_null_with_default: bool,
}

/// `String.trim()`, as Connect trims every STRING option.
fn java_trim(text: &str) -> &str {
    text.trim_matches(|c: char| c <= ' ')
}

fn parse(o: &Options<'_>, side: Option<Side>) -> Result<Arc<dyn Transformation>, String> {
    let string = |name: &str, default: &str| {
        o.get(name)
            .map_or_else(|| default.to_owned(), |v| java_trim(&v).to_owned())
    };
    let field = string("field", "");
    let target_text = java_trim(&o.required("target.type")?).to_owned();
    let target = match target_text.as_str() {
        "string" => Kind::String,
        "unix" => Kind::Unix,
        "Date" => Kind::Date,
        "Time" => Kind::Time,
        "Timestamp" => Kind::Timestamp,
        other => {
            return Err(format!(
                "Invalid value {other} for configuration {}: String must be one of: string, unix, Date, Time, Timestamp",
                o.key("target.type")
            ))
        }
    };
    let pattern = string("format", "");
    let precision = match string("unix.precision", "milliseconds").as_str() {
        "nanoseconds" => Precision::Nanoseconds,
        "microseconds" => Precision::Microseconds,
        "milliseconds" => Precision::Milliseconds,
        "seconds" => Precision::Seconds,
        other => {
            return Err(format!(
                "Invalid value {other} for configuration {}: String must be one of: nanoseconds, microseconds, milliseconds, seconds",
                o.key("unix.precision")
            ))
        }
    };
    let replace_null_with_default = o.flag("replace.null.with.default", true)?;
    if target == Kind::String && pattern.is_empty() {
        return Err(format!(
            "{}: TimestampConverter requires format option to be specified when using string timestamps",
            o.key("format")
        ));
    }
    let format = if pattern.is_empty() {
        None
    } else {
        Some(DateFormat::compile(&pattern).map_err(|e| match e {
            // ConfigException(String, Throwable) is ConfigException(name, value).
            PatternError::Java(message) => format!(
                "{}: Invalid value java.lang.IllegalArgumentException: {message} for configuration \
                 TimestampConverter requires a SimpleDateFormat-compatible pattern for string timestamps: {pattern}",
                o.key("format")
            ),
            PatternError::Unsupported(message) => format!("{}: {message}", o.key("format")),
        })?)
    };
    Ok(Arc::new(TimestampConverter {
        side: side.unwrap_or(Side::Value),
        field,
        target,
        format,
        pattern,
        precision,
        replace_null_with_default,
    }))
}

/// `timestampTypeFromSchema`: by logical name first, then a string or an int64.
fn kind_of(schema: &Schema) -> Result<Kind, String> {
    Ok(match (schema.name.as_deref(), &schema.kind) {
        (Some("org.apache.kafka.connect.data.Timestamp"), _) => Kind::Timestamp,
        (Some("org.apache.kafka.connect.data.Date"), _) => Kind::Date,
        (Some("org.apache.kafka.connect.data.Time"), _) => Kind::Time,
        (_, SchemaType::String) => Kind::String,
        (_, SchemaType::Int64) => Kind::Unix,
        _ => {
            return Err(format!(
                "Schema {} does not correspond to a known timestamp type format",
                schema_string(schema)
            ))
        }
    })
}

impl TimestampConverter {
    /// The target's schema (`typeSchema`), without name, default or doc of the source.
    fn target_schema(&self, optional: bool) -> Schema {
        let logical = |name: &str| Schema::new(SchemaType::Int32, optional).named(name, Some(1));
        match self.target {
            Kind::String => Schema::new(SchemaType::String, optional),
            Kind::Unix => Schema::new(SchemaType::Int64, optional),
            Kind::Date => logical("org.apache.kafka.connect.data.Date"),
            Kind::Time => logical("org.apache.kafka.connect.data.Time"),
            Kind::Timestamp => timestamp_schema(optional),
        }
    }

    /// `convertTimestamp`: `value` (of `schema`, whose kind is `kind`; schemaless: `None`,
    /// the kind inferred from the value) as the target.
    fn convert(
        &self,
        kind: Option<Kind>,
        schema: Option<&Schema>,
        value: &Value,
        now_ms: i64,
    ) -> Result<Value, String> {
        if value.is_null() {
            return Ok(Value::Null);
        }
        let class = java_class(schema, value);
        let kind = match kind {
            Some(kind) => kind,
            None => match class {
                "java.util.Date" => Kind::Timestamp,
                "java.lang.Long" => Kind::Unix,
                "java.lang.String" => Kind::String,
                other => {
                    return Err(format!(
                        "TimestampConverter does not support class {other} objects as timestamps"
                    ))
                }
            },
        };
        let millis = match (kind, value) {
            (Kind::String, Value::String(_)) => {
                let text = value.as_str().unwrap_or_default();
                let Some(format) = &self.format else {
                    return Err(
                        "Cannot invoke \"java.text.SimpleDateFormat.parse(String)\" because \"config.format\" is null"
                            .into(),
                    );
                };
                format.parse_lenient(text, now_ms).ok_or_else(|| {
                    format!(
                        "Could not parse timestamp: value ({text}) does not match pattern ({})",
                        self.pattern
                    )
                })?
            }
            (Kind::String, _) => {
                return Err(format!(
                    "Expected string timestamp to be a String, but found class {class}"
                ))
            }
            (Kind::Unix, Value::Int(v)) if class == "java.lang.Long" => match self.precision {
                Precision::Seconds => v.saturating_mul(1000),
                Precision::Milliseconds => *v,
                // TimeUnit conversions down truncate toward zero.
                Precision::Microseconds => v / 1000,
                Precision::Nanoseconds => v / 1_000_000,
            },
            (Kind::Unix, _) => {
                return Err(format!(
                    "Expected Unix timestamp to be a Long, but found class {class}"
                ))
            }
            (_, Value::Int(v)) if class == "java.util.Date" => {
                match schema.and_then(|s| s.name.as_deref()) {
                    Some("org.apache.kafka.connect.data.Date") => v.saturating_mul(DAY),
                    _ => *v,
                }
            }
            (kind, _) => {
                return Err(format!(
                    "Expected {} to be a java.util.Date, but found class {class}",
                    match kind {
                        Kind::Date => "Date",
                        Kind::Time => "Time",
                        _ => "Timestamp",
                    }
                ))
            }
        };
        Ok(match self.target {
            Kind::String => {
                let format = self.format.as_ref().expect("a string target has a format");
                Value::text(&format.format(millis))
            }
            Kind::Unix => Value::Int(match self.precision {
                Precision::Seconds => millis / 1000,
                Precision::Milliseconds => millis,
                Precision::Microseconds => millis.saturating_mul(1000),
                Precision::Nanoseconds => millis.saturating_mul(1_000_000),
            }),
            Kind::Date => Value::Int(millis.div_euclid(DAY)),
            Kind::Time => Value::Int(millis.rem_euclid(DAY)),
            Kind::Timestamp => Value::Int(millis),
        })
    }

    /// `applyValueWithSchema`: a struct with `field` converted, checked against the new
    /// fields as `Struct.put` checks it.
    fn convert_struct(
        &self,
        fields: &[(Arc<str>, Schema)],
        values: &[Value],
        new_fields: &[(Arc<str>, Schema)],
        now_ms: i64,
    ) -> Result<Value, String> {
        let mut converted = Vec::with_capacity(values.len());
        for (((name, field_schema), value), (_, new_schema)) in
            fields.iter().zip(values).zip(new_fields)
        {
            let value = field_value(field_schema, value, self.replace_null_with_default);
            let value = if **name == *self.field {
                let kind = kind_of(field_schema)?;
                self.convert(Some(kind), Some(field_schema), &value, now_ms)?
            } else {
                value
            };
            check_null(name, new_schema, &value)?;
            converted.push(value);
        }
        Ok(Value::Struct(converted))
    }
}

impl Transformation for TimestampConverter {
    fn apply(
        &self,
        mut record: ConnectRecord,
        now_ms: i64,
    ) -> Result<Option<ConnectRecord>, String> {
        let data = part(&mut record, self.side);
        let updated = match &data.schema {
            None if data.value.is_null() || self.field.is_empty() => Data {
                schema: None,
                value: self.convert(None, None, &data.value, now_ms)?,
            },
            None => {
                let mut entries = require_map(data, PURPOSE)?.to_vec();
                let copied = entries.len();
                let value = map_get(&entries, &self.field)
                    .cloned()
                    .unwrap_or(Value::Null);
                let converted = self.convert(None, None, &value, now_ms)?;
                map_put(&mut entries, &self.field, converted);
                Data {
                    schema: None,
                    value: java_map_copy(entries, copied),
                }
            }
            Some(schema) if self.field.is_empty() => {
                let kind = kind_of(schema)?;
                let value = self.convert(Some(kind), Some(schema), &data.value, now_ms)?;
                Data::new(self.target_schema(schema.optional), value)
            }
            Some(schema) => {
                // requireStructOrNull, then the schema.
                let values = if data.value.is_null() {
                    None
                } else {
                    Some(require_struct(data, PURPOSE)?.2)
                };
                let SchemaType::Struct(fields) = &schema.kind else {
                    return Err("Cannot list fields on non-struct type".into());
                };
                let new_fields: Vec<(Arc<str>, Schema)> = fields
                    .iter()
                    .map(|(name, field_schema)| {
                        let field_schema = if **name == *self.field {
                            self.target_schema(field_schema.optional)
                        } else {
                            field_schema.clone()
                        };
                        (name.clone(), field_schema)
                    })
                    .collect();
                let default = match &schema.default {
                    Some(Value::Struct(default)) => {
                        Some(self.convert_struct(fields, default, &new_fields, now_ms)?)
                    }
                    other => other.clone(),
                };
                let value = match values {
                    Some(values) => self.convert_struct(fields, values, &new_fields, now_ms)?,
                    None => Value::Null,
                };
                let mut updated = copy_schema_basics(schema, SchemaType::Struct(new_fields));
                updated.optional = schema.optional;
                updated.default = default;
                Data::new(updated, value)
            }
        };
        *data = updated;
        Ok(Some(record))
    }
}
