//! `HoistField$Key` / `$Value`: the key/value wrapped in a struct (or map) of one `field`;
//! the new struct schema has no name and is required.

use super::fields::{check_null, part};
use super::{Entry, Options, Side, Transformation};
use crate::connect::{ConnectRecord, Data, Schema, SchemaType, Value};
use std::sync::Arc;

pub(super) const ENTRY: Entry = Entry {
    class: "org.apache.kafka.connect.transforms.HoistField",
    sides: true,
    parse,
    doc: "the key or value wrapped in a struct of one `field`",
};

#[derive(Debug)]
struct HoistField {
    side: Side,
    field: String,
}

fn parse(o: &Options<'_>, side: Option<Side>) -> Result<Arc<dyn Transformation>, String> {
    Ok(Arc::new(HoistField {
        side: side.unwrap_or(Side::Value),
        field: o.required("field")?,
    }))
}

impl Transformation for HoistField {
    fn apply(&self, mut record: ConnectRecord, _: i64) -> Result<Option<ConnectRecord>, String> {
        let data = part(&mut record, self.side);
        let value = std::mem::replace(&mut data.value, Value::Null);
        *data = match data.schema.take() {
            None => Data {
                schema: None,
                value: Value::Map(vec![(Value::text(&self.field), value)]),
            },
            Some(schema) => {
                if self.field.is_empty() {
                    return Err("fieldName cannot be null.".into());
                }
                check_null(&self.field, &schema, &value)?;
                Data::new(
                    Schema::new(
                        SchemaType::Struct(vec![(self.field.as_str().into(), schema)]),
                        false,
                    ),
                    Value::Struct(vec![value]),
                )
            }
        };
        Ok(Some(record))
    }
}
