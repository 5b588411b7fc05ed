//! `SetSchemaMetadata$Key` / `$Value`: the key's or value's schema renamed (`schema.name`)
//! and versioned (`schema.version`); a struct keeps its fields. Only struct schemas, as in
//! Kafka Connect (which lists the fields of any schema it rebuilds).

use super::fields::{field_value, part};
use super::{Entry, Options, Side, Transformation};
use crate::connect::{ConnectRecord, SchemaType, Value};
use std::sync::Arc;

pub(super) const ENTRY: Entry = Entry {
    class: "org.apache.kafka.connect.transforms.SetSchemaMetadata",
    sides: true,
    parse,
    doc: "the schema's name (`schema.name`) and version (`schema.version`) set",
};

#[derive(Debug)]
struct SetSchemaMetadata {
    side: Side,
    name: Option<String>,
    version: Option<i32>,
    replace_null_with_default: bool,
}

fn parse(o: &Options<'_>, side: Option<Side>) -> Result<Arc<dyn Transformation>, String> {
    let version = match o.get("schema.version") {
        None => None,
        Some(v) => Some(v.parse::<i32>().map_err(|_| {
            format!(
                "Invalid value {v} for configuration {}: Not a number of type INT",
                o.key("schema.version")
            )
        })?),
    };
    let name = o.get("schema.name");
    if name.is_none() && version.is_none() {
        return Err(format!(
            "transforms.{}: Neither schema name nor version configured (schema.name, schema.version)",
            o.alias
        ));
    }
    Ok(Arc::new(SetSchemaMetadata {
        side: side.unwrap_or(Side::Value),
        name,
        version,
        replace_null_with_default: o.flag("replace.null.with.default", true)?,
    }))
}

impl Transformation for SetSchemaMetadata {
    fn apply(&self, mut record: ConnectRecord, _: i64) -> Result<Option<ConnectRecord>, String> {
        let data = part(&mut record, self.side);
        let Some(schema) = &mut data.schema else {
            return Ok(Some(record));
        };
        let SchemaType::Struct(fields) = &schema.kind else {
            return Err("Cannot list fields on non-struct type".into());
        };
        if let Value::Struct(values) = &mut data.value {
            for ((_, field_schema), value) in fields.iter().zip(values.iter_mut()) {
                *value = field_value(field_schema, value, self.replace_null_with_default);
            }
        }
        if let Some(name) = &self.name {
            schema.name = Some(name.as_str().into());
        }
        if let Some(version) = self.version {
            schema.version = Some(version);
        }
        Ok(Some(record))
    }
}
