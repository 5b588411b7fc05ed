//! Debezium's `io.debezium.transforms.HeaderToValue` (3.6): the record's `headers` named
//! copied (`operation=copy`) or moved (`move`) into the value struct as `fields`, in the
//! order the record carries them, with the headers' schemas. As in Debezium, the value
//! schema a value schema first gets is kept for every later record with that value schema
//! (its cache), defaults are written out, and the struct becomes required. Nested fields
//! (`a.b`) are refused at start.

use super::fields::{copy_schema_basics, java_class, require_struct, type_name};
use super::{Entry, Options, Side, Transformation};
use crate::connect::{ConnectRecord, Data, Schema, SchemaType, Value};
use std::sync::{Arc, Mutex};

pub(super) const ENTRY: Entry = Entry {
    class: "io.debezium.transforms.HeaderToValue",
    sides: false,
    parse,
    doc: "the `headers` named copied or moved (`operation`) into the value as `fields` (Debezium)",
};

/// Debezium's cache of new value schemas, by value schema (a bounded map of 64).
const CACHE: usize = 64;

#[derive(Debug)]
struct HeaderToValue {
    headers: Vec<String>,
    fields: Vec<String>,
    moves: bool,
    schemas: Mutex<Vec<(Schema, Schema)>>,
}

fn parse(o: &Options<'_>, _: Option<Side>) -> Result<Arc<dyn Transformation>, String> {
    // Debezium's Configuration.getList: split on commas, items trimmed, trailing empty ones
    // dropped; its validators refuse empty items and items with spaces.
    let list = |name: &str| -> Result<Vec<String>, String> {
        let key = o.key(name);
        let invalid = |raw: &str, problem: &str| {
            format!("Invalid value {raw} for configuration {key}: The '{key}' value is invalid: {problem}")
        };
        let raw = o.get(name).unwrap_or_default();
        if raw.trim().is_empty() {
            return Err(invalid(
                if o.get(name).is_none() { "null" } else { &raw },
                "A value is required",
            ));
        }
        let mut items: Vec<String> = raw.split(',').map(|s| s.trim().to_owned()).collect();
        while items.last().is_some_and(String::is_empty) {
            items.pop();
        }
        if items.iter().any(String::is_empty) {
            return Err(invalid(&raw, "Empty string element(s) not permitted"));
        }
        if items.iter().any(|i| i.contains(char::is_whitespace)) {
            return Err(invalid(&raw, "Element(s) containing space not permitted"));
        }
        Ok(items)
    };
    let headers = list("headers")?;
    let fields = list("fields")?;
    let operation = o.get("operation").unwrap_or_default();
    let moves = match operation.trim().to_ascii_lowercase().as_str() {
        "move" => true,
        "copy" => false,
        _ => {
            let key = o.key("operation");
            return Err(format!(
                "Invalid value {operation} for configuration {key}: The '{key}' value is invalid: Value must be one of move, copy"
            ));
        }
    };
    if fields.len() != headers.len() {
        return Err(format!(
            "transforms.{}: 'fields' config must have the same number of elements as 'headers' config.",
            o.alias
        ));
    }
    if let Some(nested) = fields.iter().find(|f| f.contains('.')) {
        return Err(format!(
            "{}: {nested:?} is a nested field; outbox-relay's HeaderToValue adds top-level fields only",
            o.key("fields")
        ));
    }
    Ok(Arc::new(HeaderToValue {
        headers,
        fields,
        moves,
        schemas: Mutex::new(Vec::new()),
    }))
}

impl HeaderToValue {
    /// The value schema with the entries' fields, as first built for `schema`.
    fn schema_for(&self, schema: &Schema, entries: &[(String, Data)]) -> Result<Schema, String> {
        let mut cache = self.schemas.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, built)) = cache.iter().find(|(s, _)| s == schema) {
            return Ok(built.clone());
        }
        let SchemaType::Struct(fields) = &schema.kind else {
            unreachable!("a struct value has a struct schema")
        };
        let mut fields = fields.clone();
        for (name, data) in entries {
            if fields.iter().any(|(n, _)| **n == **name) {
                continue;
            }
            let header_schema = data
                .schema
                .clone()
                .ok_or_else(|| format!("fieldSchema for field {name} cannot be null."))?;
            fields.push((name.as_str().into(), header_schema));
        }
        let built = copy_schema_basics(schema, SchemaType::Struct(fields));
        if cache.len() == CACHE {
            cache.remove(0);
        }
        cache.push((schema.clone(), built.clone()));
        Ok(built)
    }
}

impl Transformation for HeaderToValue {
    fn apply(&self, mut record: ConnectRecord, _: i64) -> Result<Option<ConnectRecord>, String> {
        if record.value.value.is_null() {
            return Ok(Some(record));
        }
        let (schema, old_fields, old_values) =
            require_struct(&record.value, "Header field insertion")?;
        let entries: Vec<(String, Data)> = record
            .headers
            .iter()
            .filter_map(|h| {
                let at = self.headers.iter().position(|n| **n == *h.name)?;
                Some((self.fields[at].clone(), h.data.clone()))
            })
            .collect();
        if entries.is_empty() {
            return Ok(Some(record));
        }
        let new_schema = self.schema_for(schema, &entries)?;
        let SchemaType::Struct(new_fields) = &new_schema.kind else {
            unreachable!("built as a struct")
        };
        let mut values = vec![Value::Null; new_fields.len()];
        // The value's fields, defaults written out (Struct.get).
        for ((name, field_schema), value) in old_fields.iter().zip(old_values) {
            let value = match (value, &field_schema.default) {
                (Value::Null, Some(default)) => default.clone(),
                _ => value.clone(),
            };
            let at = new_fields
                .iter()
                .position(|(n, _)| n == name)
                .ok_or_else(|| "Struct schemas do not match.".to_owned())?;
            values[at] = value;
        }
        // Then the headers' values, in the record's header order (the last of a name wins).
        for (name, data) in entries {
            let at = new_fields
                .iter()
                .position(|(n, _)| **n == *name)
                .ok_or_else(|| format!("{name} is not a valid field name"))?;
            let field_schema = &new_fields[at].1;
            if let Some(header_schema) = &data.schema {
                if header_schema.kind != field_schema.kind && !data.value.is_null() {
                    return Err(format!(
                        "Invalid Java object for schema with type {}: class {} for field: \"{name}\"",
                        type_name(&field_schema.kind),
                        java_class(Some(header_schema), &data.value)
                    ));
                }
            }
            values[at] = data.value;
        }
        record.value = Data::new(new_schema, Value::Struct(values));
        if self.moves {
            record
                .headers
                .retain(|h| !self.headers.iter().any(|n| **n == *h.name));
        }
        Ok(Some(record))
    }
}
