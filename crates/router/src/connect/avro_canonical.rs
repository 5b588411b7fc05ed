//! Avro's Parsing Canonical Form (the Avro specification's "Parsing Canonical Form for
//! Schemas"): two schemas with the same form write every datum to the same bytes.
//!
//! Confluent's serializer under `use.latest.version` and Apicurio's under `find-latest` write a
//! record with the subject's latest schema, not the record's own (`GenericDatumWriter` over
//! the latest schema, reading the record's fields by position). Where the two schemas have
//! the same form, what they write is the record's own bytes under the latest version's id; the
//! relay then writes just that. A schema differing only in docs, defaults, aliases, field
//! order hints, logical types or other properties has the same form.
//!
//! Hand-written over serde_json: the transformation is the specification's six short rules,
//! where the `apache-avro` crate would bring a second Avro model for this one function.

use serde_json::{Map, Value};
use std::collections::HashSet;

const PRIMITIVES: [&str; 8] = [
    "null", "boolean", "int", "long", "float", "double", "bytes", "string",
];

/// The Parsing Canonical Form of the Avro schema `text`, or why `text` is not an Avro schema.
pub fn parsing_canonical_form(text: &str) -> Result<String, String> {
    let schema: Value =
        serde_json::from_str(text).map_err(|e| format!("not an Avro schema: {e}"))?;
    let mut out = String::new();
    Canonical::default().write(&mut out, &schema, "")?;
    Ok(out)
}

/// The named types already written: a later use is their full name alone ([FULLNAMES]).
#[derive(Default)]
struct Canonical {
    named: HashSet<String>,
}

impl Canonical {
    fn write(&mut self, out: &mut String, schema: &Value, namespace: &str) -> Result<(), String> {
        match schema {
            Value::String(name) => {
                push_string(out, &full_name(name, None, namespace));
                Ok(())
            }
            Value::Array(branches) => list(out, branches, |out, branch| {
                self.write(out, branch, namespace)
            }),
            Value::Object(object) => self.write_object(out, object, namespace),
            other => Err(format!("not an Avro schema: {other}")),
        }
    }

    fn write_object(
        &mut self,
        out: &mut String,
        object: &Map<String, Value>,
        namespace: &str,
    ) -> Result<(), String> {
        let kind = object
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("an Avro schema without a type name: {object:?}"))?;
        match kind {
            // [PRIMITIVES]: {"type": "int", …} is "int".
            _ if PRIMITIVES.contains(&kind) => {
                push_string(out, kind);
                Ok(())
            }
            "array" | "map" => {
                let (attribute, inner) = if kind == "array" {
                    ("items", object.get("items"))
                } else {
                    ("values", object.get("values"))
                };
                let inner = inner.ok_or_else(|| format!("an Avro {kind} without {attribute}"))?;
                out.push_str(&format!("{{\"type\":\"{kind}\",\"{attribute}\":"));
                self.write(out, inner, namespace)?;
                out.push('}');
                Ok(())
            }
            "record" | "error" | "enum" | "fixed" => {
                let name = object
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| format!("an Avro {kind} without a name"))?;
                let own_namespace = object.get("namespace").and_then(Value::as_str);
                let full = full_name(name, own_namespace, namespace);
                if !self.named.insert(full.clone()) {
                    push_string(out, &full);
                    return Ok(());
                }
                // [ORDER]: name, type, fields, symbols, items, values, size.
                out.push_str("{\"name\":");
                push_string(out, &full);
                out.push_str(",\"type\":");
                push_string(out, kind);
                match kind {
                    "enum" => {
                        out.push_str(",\"symbols\":");
                        let symbols = array(object, "symbols", "an Avro enum without symbols")?;
                        list(out, symbols, |out, symbol| {
                            let symbol = symbol
                                .as_str()
                                .ok_or("an Avro enum symbol that is not a string")?;
                            push_string(out, symbol);
                            Ok(())
                        })?;
                    }
                    "fixed" => {
                        // [INTEGERS]: no leading zeros, no sign, no fraction.
                        let size = object
                            .get("size")
                            .and_then(Value::as_u64)
                            .ok_or("an Avro fixed without a size")?;
                        out.push_str(&format!(",\"size\":{size}"));
                    }
                    _ => {
                        // Nested names resolve in the record's own namespace.
                        let inner = full.rsplit_once('.').map_or("", |(ns, _)| ns).to_owned();
                        out.push_str(",\"fields\":");
                        let fields = array(object, "fields", "an Avro record without fields")?;
                        list(out, fields, |out, field| {
                            let field_name = field
                                .get("name")
                                .and_then(Value::as_str)
                                .ok_or("an Avro field without a name")?;
                            let field_type =
                                field.get("type").ok_or("an Avro field without a type")?;
                            out.push_str("{\"name\":");
                            push_string(out, field_name);
                            out.push_str(",\"type\":");
                            self.write(out, field_type, &inner)?;
                            out.push('}');
                            Ok(())
                        })?;
                    }
                }
                out.push('}');
                Ok(())
            }
            // {"type": "a.Named"}: a use of a named type.
            name => {
                push_string(out, &full_name(name, None, namespace));
                Ok(())
            }
        }
    }
}

/// The array `object` holds under `key`, or the error `missing`.
fn array<'a>(
    object: &'a Map<String, Value>,
    key: &str,
    missing: &str,
) -> Result<&'a [Value], String> {
    object
        .get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .ok_or_else(|| missing.to_owned())
}

/// A JSON array of `items`, each written by `write`.
fn list(
    out: &mut String,
    items: &[Value],
    mut write: impl FnMut(&mut String, &Value) -> Result<(), String>,
) -> Result<(), String> {
    out.push('[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write(out, item)?;
    }
    out.push(']');
    Ok(())
}

/// [FULLNAMES]: a name with a dot is full; otherwise its own namespace, else the enclosing
/// one, goes before it. Primitive names stay as they are.
fn full_name(name: &str, own_namespace: Option<&str>, enclosing: &str) -> String {
    if name.contains('.') || PRIMITIVES.contains(&name) {
        return name.to_owned();
    }
    match own_namespace.unwrap_or(enclosing) {
        "" => name.to_owned(),
        namespace => format!("{namespace}.{name}"),
    }
}

/// [STRINGS]: a JSON string with only the escapes JSON needs.
fn push_string(out: &mut String, s: &str) {
    out.push_str(&Value::from(s).to_string());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(text: &str) -> String {
        parsing_canonical_form(text).unwrap()
    }

    #[test]
    fn the_specifications_rules_give_one_text() {
        // [PRIMITIVES], [STRIP], [WHITESPACE].
        assert_eq!(
            form(r#"{"type": "long", "logicalType": "timestamp-millis"}"#),
            r#""long""#
        );
        assert_eq!(
            form(r#"["null", {"type":"string","connect.version":1}]"#),
            r#"["null","string"]"#
        );
        // [FULLNAMES], [ORDER], [STRIP] of docs, defaults, aliases, order and properties;
        // a named type used again is its full name.
        assert_eq!(
            form(
                r#"{"fields": [
                    {"name": "a", "type": {"type": "fixed", "size": 16, "name": "F", "aliases": ["G"]}, "doc": "x"},
                    {"name": "b", "type": "F", "default": "\u0000", "order": "descending"},
                    {"name": "c", "type": {"type": "enum", "name": "other.E", "symbols": ["X", "Y"], "default": "X"}},
                    {"name": "d", "type": {"type": "array", "items": {"type": "map", "values": "other.E"}}},
                    {"name": "e", "type": {"type": "record", "name": "R", "namespace": "", "fields": []}}
                ], "type": "record", "name": "V", "namespace": "ns", "doc": "d", "connect.name": "ns.V"}"#
            ),
            concat!(
                r#"{"name":"ns.V","type":"record","fields":["#,
                r#"{"name":"a","type":{"name":"ns.F","type":"fixed","size":16}},"#,
                r#"{"name":"b","type":"ns.F"},"#,
                r#"{"name":"c","type":{"name":"other.E","type":"enum","symbols":["X","Y"]}},"#,
                r#"{"name":"d","type":{"type":"array","items":{"type":"map","values":"other.E"}}},"#,
                r#"{"name":"e","type":{"name":"R","type":"record","fields":[]}}]}"#
            )
        );
    }

    #[test]
    fn schemas_that_encode_alike_have_one_form_and_others_do_not() {
        let ours = r#"{"type":"record","name":"V","namespace":"ns","fields":[{"name":"a","type":["null","string"],"default":null}],"connect.name":"ns.V"}"#;
        let documented = r#"{"type":"record","name":"V","namespace":"ns","doc":"the value","fields":[{"name":"a","type":["null",{"type":"string","avro.java.string":"String"}],"doc":"a"}]}"#;
        assert_eq!(form(ours), form(documented));
        for other in [
            // Another field type, another field name, the union's branches swapped, another
            // record name: other bytes, or bytes read otherwise.
            r#"{"type":"record","name":"V","namespace":"ns","fields":[{"name":"a","type":["null","bytes"]}]}"#,
            r#"{"type":"record","name":"V","namespace":"ns","fields":[{"name":"b","type":["null","string"]}]}"#,
            r#"{"type":"record","name":"V","namespace":"ns","fields":[{"name":"a","type":["string","null"]}]}"#,
            r#"{"type":"record","name":"W","namespace":"ns","fields":[{"name":"a","type":["null","string"]}]}"#,
        ] {
            assert_ne!(form(ours), form(other), "{other}");
        }
        assert!(parsing_canonical_form("{").is_err());
        assert!(parsing_canonical_form(r#"{"type":"record","name":"V"}"#).is_err());
    }
}
