//! `ExtractField$Key` / `$Value`: the key/value replaced by one of its fields (`field`), with
//! that field's schema; `field.syntax.version=V2` reads `field` as a dotted path into nested
//! structs (backticks quote a name with dots, KIP-821).

use super::fields::{field_value, java_class, map_get, part};
use super::{Entry, Options, Side, Transformation};
use crate::connect::{ConnectRecord, Data, Schema, SchemaType, Value};
use std::sync::Arc;

pub(super) const ENTRY: Entry = Entry {
    class: "org.apache.kafka.connect.transforms.ExtractField",
    sides: true,
    parse,
    doc: "the key or value replaced by its `field` (a path with field.syntax.version=V2)",
};

const PURPOSE: &str = "field extraction";

#[derive(Debug)]
struct ExtractField {
    side: Side,
    /// As configured, for messages.
    field: String,
    path: Vec<String>,
    replace_null_with_default: bool,
}

fn parse(o: &Options<'_>, side: Option<Side>) -> Result<Arc<dyn Transformation>, String> {
    let field = o.required("field")?;
    let version = o.get("field.syntax.version").unwrap_or_else(|| "V1".into());
    let path = match version.to_ascii_uppercase().as_str() {
        "V1" => vec![field.clone()],
        "V2" => path_v2(&field).map_err(|e| format!("{}: {e}", o.key("field")))?,
        _ => {
            return Err(format!(
                "Invalid value {version} for configuration {}: String must be one of (case insensitive): V1, V2",
                o.key("field.syntax.version")
            ))
        }
    };
    if path.is_empty() {
        return Err(format!("{}: an empty path names no field", o.key("field")));
    }
    Ok(Arc::new(ExtractField {
        side: side.unwrap_or(Side::Value),
        field,
        path,
        replace_null_with_default: o.flag("replace.null.with.default", true)?,
    }))
}

/// `SingleFieldPath` with `FieldSyntaxVersion.V2`: steps separated by dots; a step that starts
/// with a backtick runs to a backtick followed by a dot or the end (`\`` before a dot is a
/// backtick of the name).
fn path_v2(path: &str) -> Result<Vec<String>, String> {
    let chars: Vec<char> = path.chars().collect();
    let mut steps = Vec::new();
    if chars.is_empty() {
        return Ok(steps);
    }
    let mut i = 0;
    loop {
        if chars.get(i) == Some(&'`') {
            let open = i;
            let mut step = String::new();
            let mut j = i + 1;
            let closed = loop {
                match chars.get(j) {
                    None => break None,
                    Some('\\') if chars.get(j + 1) == Some(&'`') => {
                        if j + 2 == chars.len() {
                            return Err(format!(
                                "Incomplete backtick pair in path: [{path}], consider adding a backslash before backtick at position {open} to escape it"
                            ));
                        }
                        if chars.get(j + 2) == Some(&'.') {
                            step.push('`');
                            j += 2;
                        } else {
                            step.push('\\');
                            j += 1;
                        }
                    }
                    Some('`') if j + 1 == chars.len() || chars[j + 1] == '.' => break Some(j),
                    Some(c) => {
                        step.push(*c);
                        j += 1;
                    }
                }
            };
            let Some(close) = closed else {
                return Err(format!(
                    "Incomplete backtick pair in path: [{path}], consider adding a backslash before backtick at position {open} to escape it"
                ));
            };
            steps.push(step);
            i = close + 1;
        } else {
            let end = chars[i..].iter().position(|c| *c == '.').map(|p| i + p);
            let end = end.unwrap_or(chars.len());
            steps.push(chars[i..end].iter().collect());
            i = end;
        }
        // At a dot (or the end).
        if i >= chars.len() {
            break;
        }
        i += 1;
        if i == chars.len() {
            steps.push(String::new());
            break;
        }
    }
    Ok(steps)
}

impl ExtractField {
    /// `SingleFieldPath.fieldFrom`: the field's schema, or why there is none.
    fn schema_of<'a>(&self, schema: &'a Schema) -> Result<&'a Schema, String> {
        let mut current = schema;
        for step in &self.path {
            let SchemaType::Struct(fields) = &current.kind else {
                return Err("Cannot look up fields on non-struct type".into());
            };
            current = match fields.iter().find(|(n, _)| **n == **step) {
                Some((_, s)) => s,
                None => return Err(format!("Unknown field: {}", self.field)),
            };
        }
        Ok(current)
    }

    /// `SingleFieldPath.valueFrom(Struct)`.
    fn value_of(&self, schema: &Schema, value: &Value) -> Result<Value, String> {
        let (mut schema, mut value) = (schema, value.clone());
        for (i, step) in self.path.iter().enumerate() {
            let last = i + 1 == self.path.len();
            let (SchemaType::Struct(fields), Value::Struct(values)) = (&schema.kind, &value) else {
                return Ok(Value::Null);
            };
            let Some(at) = fields.iter().position(|(n, _)| **n == **step) else {
                return Ok(Value::Null);
            };
            let field_schema = &fields[at].1;
            let next = if last {
                field_value(field_schema, &values[at], self.replace_null_with_default)
            } else {
                field_value(field_schema, &values[at], true)
            };
            if last {
                return Ok(next);
            }
            match next {
                Value::Null => return Ok(Value::Null),
                Value::Struct(_) => {}
                other => {
                    return Err(format!(
                        "Only Struct objects supported for [nested field access], found: {}",
                        java_class(Some(field_schema), &other)
                    ))
                }
            }
            schema = field_schema;
            value = next;
        }
        Ok(value)
    }

    /// `SingleFieldPath.valueFrom(Map)`.
    fn map_value_of(&self, value: &Value) -> Result<Value, String> {
        let mut current = value.clone();
        for (i, step) in self.path.iter().enumerate() {
            let Value::Map(entries) = &current else {
                return Err(format!(
                    "Only Map objects supported in absence of schema for [{}], found: {}",
                    if i == 0 {
                        PURPOSE
                    } else {
                        "nested field access"
                    },
                    java_class(None, &current)
                ));
            };
            match map_get(entries, step) {
                None | Some(Value::Null) => return Ok(Value::Null),
                Some(v) => current = v.clone(),
            }
        }
        Ok(current)
    }
}

impl Transformation for ExtractField {
    fn apply(&self, mut record: ConnectRecord, _: i64) -> Result<Option<ConnectRecord>, String> {
        let data = part(&mut record, self.side);
        let updated = match &data.schema {
            None => Data {
                schema: None,
                value: match &data.value {
                    Value::Null => Value::Null,
                    other => self.map_value_of(other)?,
                },
            },
            Some(schema) => {
                if !matches!(data.value, Value::Null | Value::Struct(_)) {
                    return Err(format!(
                        "Only Struct objects supported for [{PURPOSE}], found: {}",
                        java_class(Some(schema), &data.value)
                    ));
                }
                let field_schema = self.schema_of(schema)?.clone();
                let value = match &data.value {
                    Value::Null => Value::Null,
                    struct_value => self.value_of(schema, struct_value)?,
                };
                Data::new(field_schema, value)
            }
        };
        *data = updated;
        Ok(Some(record))
    }
}

#[cfg(test)]
mod tests {
    use super::path_v2;

    #[test]
    fn v2_paths_split_on_dots_and_backticks_quote_names() {
        let p = |s: &str| path_v2(s).unwrap();
        assert_eq!(p("a.b"), ["a", "b"]);
        assert_eq!(p("a."), ["a", ""]);
        assert_eq!(p("a..b"), ["a", "", "b"]);
        assert_eq!(p(".a"), ["", "a"]);
        assert_eq!(p("`a.b`.c"), ["a.b", "c"]);
        assert_eq!(p("a`b.c"), ["a`b", "c"]);
        assert_eq!(p("`a\\`.b`"), ["a`.b"]);
        assert_eq!(p("`a`b`.c"), ["a`b", "c"]);
        assert!(path_v2("`a.b")
            .unwrap_err()
            .contains("Incomplete backtick pair in path: [`a.b], consider adding a backslash before backtick at position 0"));
    }
}
