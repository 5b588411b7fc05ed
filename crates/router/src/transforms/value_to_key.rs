//! `ValueToKey`: the key replaced by a struct of the value's `fields` (no name, required,
//! the fields' own schemas, in the order configured). A null value is refused.

use super::fields::{field_value, java_map_presized, map_get, require_map, require_struct};
use super::{Entry, Options, Side, Transformation};
use crate::connect::{ConnectRecord, Data, Schema, SchemaType, Value};
use std::sync::Arc;

pub(super) const ENTRY: Entry = Entry {
    class: "org.apache.kafka.connect.transforms.ValueToKey",
    sides: false,
    parse,
    doc: "the key made of the value's `fields`",
};

const PURPOSE: &str = "copying fields from value to key";

#[derive(Debug)]
struct ValueToKey {
    fields: Vec<String>,
    replace_null_with_default: bool,
}

fn parse(o: &Options<'_>, _: Option<Side>) -> Result<Arc<dyn Transformation>, String> {
    let fields = super::fields::required_list(o, "fields")?;
    Ok(Arc::new(ValueToKey {
        fields,
        replace_null_with_default: o.flag("replace.null.with.default", true)?,
    }))
}

impl Transformation for ValueToKey {
    fn apply(&self, mut record: ConnectRecord, _: i64) -> Result<Option<ConnectRecord>, String> {
        record.key = match &record.value.schema {
            None => {
                let entries = require_map(&record.value, PURPOSE)?;
                Data {
                    schema: None,
                    value: java_map_presized(
                        self.fields
                            .iter()
                            .map(|f| {
                                (
                                    Value::text(f),
                                    map_get(entries, f).cloned().unwrap_or(Value::Null),
                                )
                            })
                            .collect(),
                        self.fields.len(),
                    ),
                }
            }
            Some(_) => {
                let (_, fields, values) = require_struct(&record.value, PURPOSE)?;
                let mut key_fields = Vec::with_capacity(self.fields.len());
                let mut key_values = Vec::with_capacity(self.fields.len());
                for name in &self.fields {
                    let i = fields
                        .iter()
                        .position(|(n, _)| **n == **name)
                        .ok_or_else(|| format!("Field does not exist: {name}"))?;
                    let (field_name, field_schema) = &fields[i];
                    key_fields.push((field_name.clone(), field_schema.clone()));
                    key_values.push(field_value(
                        field_schema,
                        &values[i],
                        self.replace_null_with_default,
                    ));
                }
                Data::new(
                    Schema::new(SchemaType::Struct(key_fields), false),
                    Value::Struct(key_values),
                )
            }
        };
        Ok(Some(record))
    }
}
