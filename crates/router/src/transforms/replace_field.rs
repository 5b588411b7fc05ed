//! `ReplaceField$Key` / `$Value`: top-level fields kept (`include`), dropped (`exclude`) and
//! renamed (`renames`, `old:new`). A null key/value is left alone; a struct's schema keeps its
//! name, version, doc and parameters and becomes required.

use super::fields::{
    add_field, copy_schema_basics, field_value, java_map_presized, part, require_map,
    require_struct,
};
use super::{Entry, Options, Side, Transformation};
use crate::connect::{ConnectRecord, Data, SchemaType, Value};
use std::sync::Arc;

pub(super) const ENTRY: Entry = Entry {
    class: "org.apache.kafka.connect.transforms.ReplaceField",
    sides: true,
    parse,
    doc: "fields kept (`include`), dropped (`exclude`) and renamed (`renames`)",
};

const PURPOSE: &str = "field replacement";

#[derive(Debug)]
struct ReplaceField {
    side: Side,
    exclude: Vec<String>,
    include: Vec<String>,
    /// old → new; a later mapping of the same field wins.
    renames: Vec<(String, String)>,
    replace_null_with_default: bool,
}

fn parse(o: &Options<'_>, side: Option<Side>) -> Result<Arc<dyn Transformation>, String> {
    let mut renames: Vec<(String, String)> = Vec::new();
    let list = o.list("renames");
    for mapping in &list {
        // String.split(":"): trailing empty parts dropped, nothing trimmed.
        let mut parts: Vec<&str> = mapping.split(':').collect();
        while parts.last() == Some(&"") {
            parts.pop();
        }
        let [from, to] = parts[..] else {
            return Err(format!(
                "Invalid value [{}] for configuration {}: Invalid rename mapping: {mapping}",
                list.join(", "),
                o.key("renames")
            ));
        };
        renames.retain(|(f, _)| f != from);
        renames.push((from.to_owned(), to.to_owned()));
    }
    Ok(Arc::new(ReplaceField {
        side: side.unwrap_or(Side::Value),
        exclude: o.list("exclude"),
        include: o.list("include"),
        renames,
        replace_null_with_default: o.flag("replace.null.with.default", true)?,
    }))
}

impl ReplaceField {
    fn keeps(&self, name: &str) -> bool {
        !self.exclude.iter().any(|e| e == name)
            && (self.include.is_empty() || self.include.iter().any(|i| i == name))
    }

    fn renamed<'a>(&'a self, name: &'a str) -> &'a str {
        self.renames
            .iter()
            .find(|(from, _)| from == name)
            .map_or(name, |(_, to)| to)
    }
}

impl Transformation for ReplaceField {
    fn apply(&self, mut record: ConnectRecord, _: i64) -> Result<Option<ConnectRecord>, String> {
        let data = part(&mut record, self.side);
        if data.value.is_null() {
            return Ok(Some(record));
        }
        let updated = match &data.schema {
            None => {
                let mut entries: Vec<(Value, Value)> = Vec::new();
                let source = require_map(data, PURPOSE)?;
                for (k, v) in source {
                    let Some(name) = k.as_str() else { continue };
                    if !self.keeps(name) {
                        continue;
                    }
                    let name = self.renamed(name);
                    entries.retain(|(k, _)| k.as_str() != Some(name));
                    entries.push((Value::text(name), v.clone()));
                }
                Data {
                    schema: None,
                    value: java_map_presized(entries, source.len()),
                }
            }
            Some(_) => {
                let (schema, fields, values) = require_struct(data, PURPOSE)?;
                let mut new_fields = Vec::new();
                let mut new_values = Vec::new();
                for ((name, field_schema), value) in fields.iter().zip(values) {
                    if !self.keeps(name) {
                        continue;
                    }
                    add_field(&mut new_fields, self.renamed(name), field_schema.clone())?;
                    new_values.push(field_value(
                        field_schema,
                        value,
                        self.replace_null_with_default,
                    ));
                }
                Data::new(
                    copy_schema_basics(schema, SchemaType::Struct(new_fields)),
                    Value::Struct(new_values),
                )
            }
        };
        *data = updated;
        Ok(Some(record))
    }
}
