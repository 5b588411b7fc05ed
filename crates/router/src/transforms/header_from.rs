//! `HeaderFrom$Key` / `$Value`: the `fields` named copied (`operation=copy`) or moved
//! (`move`) into headers named `headers`, appended in that order with the fields' schemas;
//! a move drops the fields (the struct's schema keeps its name, version, doc and parameters
//! and becomes required). A null key/value is refused, as Kafka Connect refuses it.

use super::fields::{
    copy_schema_basics, field_value, java_map_copy, map_get, part, require_map, require_struct,
    schema_string,
};
use super::{Entry, Options, Side, Transformation};
use crate::connect::{ConnectRecord, Data, Header, SchemaType, Value};
use std::sync::Arc;

pub(super) const ENTRY: Entry = Entry {
    class: "org.apache.kafka.connect.transforms.HeaderFrom",
    sides: true,
    parse,
    doc: "the `fields` named copied or moved (`operation`) into headers named `headers`",
};

#[derive(Debug)]
struct HeaderFrom {
    side: Side,
    fields: Vec<String>,
    headers: Vec<String>,
    moves: bool,
    replace_null_with_default: bool,
}

fn parse(o: &Options<'_>, side: Option<Side>) -> Result<Arc<dyn Transformation>, String> {
    let list = |name: &str| -> Result<Vec<String>, String> {
        o.required(name)?;
        let list = o.list(name);
        if list.is_empty() {
            return Err(format!(
                "Invalid value [] for configuration {}: Empty list",
                o.key(name)
            ));
        }
        Ok(list)
    };
    let fields = list("fields")?;
    let headers = list("headers")?;
    let operation = o.required("operation")?;
    let moves = match operation.as_str() {
        "move" => true,
        "copy" => false,
        other => {
            return Err(format!(
                "Invalid value {other} for configuration {}: String must be one of: move, copy",
                o.key("operation")
            ))
        }
    };
    if fields.len() != headers.len() {
        return Err(format!(
            "transforms.{}: 'fields' config must have the same number of elements as 'headers' config.",
            o.alias
        ));
    }
    Ok(Arc::new(HeaderFrom {
        side: side.unwrap_or(Side::Value),
        fields,
        headers,
        moves,
        replace_null_with_default: o.flag("replace.null.with.default", true)?,
    }))
}

impl Transformation for HeaderFrom {
    fn apply(&self, mut record: ConnectRecord, _: i64) -> Result<Option<ConnectRecord>, String> {
        let purpose = if self.moves {
            "header move"
        } else {
            "header copy"
        };
        let mut added = Vec::with_capacity(self.headers.len());
        let data = part(&mut record, self.side);
        match &data.schema {
            None => {
                let mut entries = require_map(data, purpose)?.to_vec();
                let copied = entries.len();
                for (field, header) in self.fields.iter().zip(&self.headers) {
                    let value = map_get(&entries, field).cloned().unwrap_or(Value::Null);
                    if self.moves {
                        entries.retain(|(k, _)| k.as_str() != Some(field));
                    }
                    added.push(Header::new(
                        header.as_str(),
                        Data {
                            schema: None,
                            value,
                        },
                    ));
                }
                if self.moves {
                    *data = Data {
                        schema: None,
                        value: java_map_copy(entries, copied),
                    };
                }
            }
            Some(_) => {
                let (schema, fields, values) = require_struct(data, purpose)?;
                for (field, header) in self.fields.iter().zip(&self.headers) {
                    let Some(at) = fields.iter().position(|(n, _)| **n == **field) else {
                        return Err(
                            "Cannot invoke \"org.apache.kafka.connect.data.Field.schema()\" because the return value of \
                             \"org.apache.kafka.connect.data.Schema.field(String)\" is null"
                                .into(),
                        );
                    };
                    let field_schema = &fields[at].1;
                    let value =
                        field_value(field_schema, &values[at], self.replace_null_with_default);
                    // ConnectHeaders.add checks the value against its schema.
                    if value.is_null() && !field_schema.optional {
                        return Err(format!(
                            "A null value requires an optional schema but was {}",
                            schema_string(field_schema)
                        ));
                    }
                    added.push(Header::new(
                        header.as_str(),
                        Data::new(field_schema.clone(), value),
                    ));
                }
                if self.moves {
                    let (kept_fields, kept_values): (Vec<_>, Vec<_>) = fields
                        .iter()
                        .zip(values)
                        .filter(|((name, _), _)| !self.fields.iter().any(|f| **f == **name))
                        .map(|((name, s), v)| {
                            (
                                (name.clone(), s.clone()),
                                field_value(s, v, self.replace_null_with_default),
                            )
                        })
                        .unzip();
                    *data = Data::new(
                        copy_schema_basics(schema, SchemaType::Struct(kept_fields)),
                        Value::Struct(kept_values),
                    );
                }
            }
        }
        record.headers.extend(added);
        Ok(Some(record))
    }
}
