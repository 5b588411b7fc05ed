//! `Flatten$Key` / `$Value`: nested structs (or maps) flattened into one level, each leaf
//! named by its path joined with `delimiter` (`.`). A null key/value is left alone. The
//! flat struct keeps the original's name, version, doc and parameters and becomes required;
//! a leaf keeps its schema (logical name, parameters, array items) and its default (or the
//! one its parent struct's default gives it), and is optional when it or any struct above
//! it, the root included, is optional. Maps within a struct are refused; arrays are leaves.
//! Schemaless maps keep their entries' order (Kafka builds a `LinkedHashMap`).

use super::fields::{
    add_field, check_null, copy_schema_basics, field_value, java_class, map_put, part, require_map,
    require_struct,
};
use super::{Entry, Options, Side, Transformation};
use crate::connect::{ConnectRecord, Data, Schema, SchemaType, Value};
use std::sync::Arc;

pub(super) const ENTRY: Entry = Entry {
    class: "org.apache.kafka.connect.transforms.Flatten",
    sides: true,
    parse,
    doc: "nested structs and maps flattened, fields named by their path joined with `delimiter`",
};

const PURPOSE: &str = "flattening";

#[derive(Debug)]
struct Flatten {
    side: Side,
    delimiter: String,
}

fn parse(o: &Options<'_>, side: Option<Side>) -> Result<Arc<dyn Transformation>, String> {
    Ok(Arc::new(Flatten {
        side: side.unwrap_or(Side::Value),
        // Connect trims STRING options: a blank delimiter is an empty one.
        delimiter: o.get("delimiter").map_or_else(
            || ".".to_owned(),
            |d| d.trim_matches(|c: char| c <= ' ').to_owned(),
        ),
    }))
}

impl Flatten {
    fn name(&self, prefix: &str, name: &str) -> String {
        if prefix.is_empty() {
            name.to_owned()
        } else {
            format!("{prefix}{}{name}", self.delimiter)
        }
    }

    /// A schemaless map's entries, flattened into `out` (in order; a name met again keeps
    /// its place and takes the later value).
    fn flatten_map(
        &self,
        entries: &[(Value, Value)],
        prefix: &str,
        out: &mut Vec<(Value, Value)>,
    ) -> Result<(), String> {
        for (key, value) in entries {
            let Some(key) = key.as_str() else {
                let class = java_class(None, key);
                return Err(format!(
                    "class {class} cannot be cast to class java.lang.String ({class} and java.lang.String are in module java.base of loader 'bootstrap')"
                ));
            };
            let name = self.name(prefix, key);
            match value {
                Value::Map(inner) => self.flatten_map(inner, &name, out)?,
                Value::Null
                | Value::Boolean(_)
                | Value::Int(_)
                | Value::Float(_)
                | Value::String(_)
                | Value::Bytes(_)
                | Value::Array(_) => map_put(out, &name, value.clone()),
                Value::Struct(_) => {
                    return Err(format!(
                        "Flatten transformation does not support class org.apache.kafka.connect.data.Struct \
                         for record without schemas (for field {name})."
                    ))
                }
                Value::Decimal(_) => {
                    return Err(format!(
                        "Flatten transformation was passed a value of type class {} which is not supported by Connect's data API",
                        java_class(None, value)
                    ))
                }
            }
        }
        Ok(())
    }

    /// `buildUpdatedSchema`: the leaves of a struct schema's `fields`, appended to `out`.
    /// `optional`: whether a struct above is optional; `parent_default`: the default of the
    /// struct these fields are in, if any.
    fn flatten_schema(
        &self,
        fields: &[(Arc<str>, Schema)],
        prefix: &str,
        optional: bool,
        parent_default: Option<&[Value]>,
        out: &mut Vec<(Arc<str>, Schema)>,
    ) -> Result<(), String> {
        for (i, (name, field_schema)) in fields.iter().enumerate() {
            let name = self.name(prefix, name);
            let optional = optional || field_schema.optional;
            let default = field_schema
                .default
                .as_ref()
                .or_else(|| parent_default.and_then(|d| d.get(i)))
                .filter(|d| !d.is_null());
            match &field_schema.kind {
                SchemaType::Struct(inner) => {
                    let default = match default {
                        Some(Value::Struct(values)) => Some(values.as_slice()),
                        _ => None,
                    };
                    self.flatten_schema(inner, &name, optional, default, out)?;
                }
                SchemaType::Map(..) => {
                    return Err(format!(
                        "Flatten transformation does not support MAP for record with schemas (for field {name})."
                    ))
                }
                kind => {
                    let mut leaf = copy_schema_basics(field_schema, kind.clone());
                    leaf.optional = optional;
                    leaf.default = default.cloned();
                    add_field(out, &name, leaf)?;
                }
            }
        }
        Ok(())
    }

    /// `buildWithSchema`: a struct's leaves put into the flat struct's `values` (a null
    /// nested struct leaves its leaves null).
    fn flatten_values(
        &self,
        fields: &[(Arc<str>, Schema)],
        values: &[Value],
        prefix: &str,
        flat: &[(Arc<str>, Schema)],
        out: &mut [Value],
    ) -> Result<(), String> {
        for ((name, field_schema), value) in fields.iter().zip(values) {
            let name = self.name(prefix, name);
            match (&field_schema.kind, value) {
                (SchemaType::Struct(inner), Value::Struct(inner_values)) => {
                    self.flatten_values(inner, inner_values, &name, flat, out)?;
                }
                (SchemaType::Struct(_), _) => {}
                _ => {
                    // Struct.get: a null is the field's default.
                    let value = field_value(field_schema, value, true);
                    let at = flat
                        .iter()
                        .position(|(n, _)| **n == *name)
                        .ok_or_else(|| format!("{name} is not a valid field name"))?;
                    check_null(&name, &flat[at].1, &value)?;
                    out[at] = value;
                }
            }
        }
        Ok(())
    }
}

impl Transformation for Flatten {
    fn apply(&self, mut record: ConnectRecord, _: i64) -> Result<Option<ConnectRecord>, String> {
        let data = part(&mut record, self.side);
        if data.value.is_null() {
            return Ok(Some(record));
        }
        let updated = match &data.schema {
            None => {
                let mut entries = Vec::new();
                self.flatten_map(require_map(data, PURPOSE)?, "", &mut entries)?;
                Data {
                    schema: None,
                    value: Value::Map(entries),
                }
            }
            Some(schema) => {
                let (_, fields, values) = require_struct(data, PURPOSE)?;
                let default = match &schema.default {
                    Some(Value::Struct(values)) => Some(values.as_slice()),
                    _ => None,
                };
                let mut flat = Vec::new();
                self.flatten_schema(fields, "", schema.optional, default, &mut flat)?;
                let mut flat_values = vec![Value::Null; flat.len()];
                self.flatten_values(fields, values, "", &flat, &mut flat_values)?;
                Data::new(
                    copy_schema_basics(schema, SchemaType::Struct(flat)),
                    Value::Struct(flat_values),
                )
            }
        };
        *data = updated;
        Ok(Some(record))
    }
}
