//! `table.expand.json.payload` the way Debezium's JsonSchemaData does it: the payload text
//! becomes a Connect struct whose schema is inferred from the document (every field
//! optional, objects named by their path from `payload`), null fields and empty arrays
//! dropped unless the `*.behavior` options keep them.

use super::data::{Schema, SchemaType, Value};
use bytes::Bytes;
use serde_json::Value as Json;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExpandBehaviour {
    /// `table.json.payload.null.behavior=optional_bytes`: keep null fields (as optional bytes).
    pub keep_nulls: bool,
    /// `table.json.payload.empty.array.behavior=optional_string`: keep empty arrays.
    pub keep_empty_arrays: bool,
}

/// The expanded payload, or `None` when Debezium keeps the payload as a string: text that
/// does not start with `{` (arrays included: Debezium cannot expand a top-level array),
/// text that is not JSON, arrays mixing element types, and documents whose values do not
/// fit the schema inferred from them ([`botched`]).
pub fn expand(field: &str, payload: &[u8], behaviour: ExpandBehaviour) -> Option<(Schema, Value)> {
    if !payload.starts_with(b"{") {
        return None;
    }
    let json: Json = serde_json::from_slice(payload).ok()?;
    let schema = infer(Some(field), &json, behaviour).ok()??;
    if !fits(&json, &schema) || has_big_integer(&json, payload) {
        return None;
    }
    let value = to_value(json, &schema);
    Some((schema, value))
}

/// Whether Debezium's EventRouter infers a struct schema for `payload` and then fails to
/// fill it (`JsonSchemaData.toConnectData` puts a value its schema refuses, e.g. a string
/// where an array's first object had a number): it then keeps the payload as a string under
/// that struct schema, which converters refuse.
pub fn botched(field: &str, payload: &[u8], behaviour: ExpandBehaviour) -> bool {
    if !payload.starts_with(b"{") {
        return false;
    }
    let Ok(json) = serde_json::from_slice::<Json>(payload) else {
        return false;
    };
    match infer(Some(field), &json, behaviour) {
        Ok(Some(schema)) => !fits(&json, &schema) || has_big_integer(&json, payload),
        _ => false,
    }
}

/// Whether the JSON text holds an integer beyond a long (jsonb writes `1e21` as
/// `1000000000000000000000`): Jackson reads it as a BigInteger, which JsonSchemaData types
/// FLOAT64 and then puts as a BigDecimal, which no schema takes. serde_json reads such an
/// integer as a u64 or an f64: the text is scanned only when `json` holds one of those.
fn has_big_integer(json: &Json, text: &[u8]) -> bool {
    fn beyond_long(json: &Json) -> bool {
        match json {
            Json::Number(n) => !n.is_i64(),
            Json::Array(items) => items.iter().any(beyond_long),
            Json::Object(fields) => fields.values().any(beyond_long),
            Json::Null | Json::Bool(_) | Json::String(_) => false,
        }
    }
    beyond_long(json) && has_big_integer_text(text)
}

fn has_big_integer_text(text: &[u8]) -> bool {
    let mut i = 0;
    let mut in_string = false;
    while i < text.len() {
        let b = text[i];
        if in_string {
            match b {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < text.len()
                    && matches!(text[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    i += 1;
                }
                let token = &text[start..i];
                let integer = !token.iter().any(|c| matches!(c, b'.' | b'e' | b'E'));
                if integer
                    && std::str::from_utf8(token)
                        .ok()
                        .and_then(|t| t.parse::<i64>().ok())
                        .is_none()
                {
                    return true;
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    false
}

/// Whether Connect's `Struct.put` takes the value `JsonSchemaData` reads from `node` for
/// `schema`: Jackson's int as an Integer (INT32), its long as a Long (INT64), its double as
/// a Double (FLOAT64), a big integer as a BigDecimal (no schema takes it).
fn fits(node: &Json, schema: &Schema) -> bool {
    match (node, &schema.kind) {
        (Json::Null, _) => true,
        (Json::String(_), SchemaType::String) | (Json::Bool(_), SchemaType::Boolean) => true,
        (Json::Number(n), kind) => {
            if n.is_f64() {
                *kind == SchemaType::Float64
            } else {
                match n.as_i64() {
                    Some(i) if i32::try_from(i).is_ok() => *kind == SchemaType::Int32,
                    Some(_) => *kind == SchemaType::Int64,
                    None => false,
                }
            }
        }
        (Json::Array(items), SchemaType::Array(item)) => items.iter().all(|i| fits(i, item)),
        (Json::Object(map), SchemaType::Struct(fields)) => fields
            .iter()
            .all(|(name, s)| map.get(&**name).is_none_or(|v| fits(v, s))),
        _ => false,
    }
}

/// Whether Debezium expands `payload` to no schema at all, keeping the text with a null
/// schema: a top-level empty array (JsonSchemaData infers nothing from it) when empty
/// arrays are dropped, the default `table.json.payload.empty.array.behavior`.
pub fn expands_to_no_schema(payload: &[u8], behaviour: ExpandBehaviour) -> bool {
    !behaviour.keep_empty_arrays
        && payload.starts_with(b"[")
        && serde_json::from_slice::<Json>(payload)
            .is_ok_and(|j| j.as_array().is_some_and(Vec::is_empty))
}

/// A logical decoding message's content as Debezium's `DecodeLogicalDecodingMessageContent`
/// decodes it (with `JsonSchemaData`): a JSON object becomes an unnamed struct, nested
/// objects named by their path (`payload`, `payload.lines`). Text that does not start with
/// `{`, or that is not JSON, is refused as Debezium refuses it (its task fails there).
pub fn decode_object(
    content: &[u8],
    behaviour: ExpandBehaviour,
) -> Result<(Schema, Value), String> {
    if !content.starts_with(b"{") {
        return Err("the message content is not a JSON object".into());
    }
    let json: Json = serde_json::from_slice(content)
        .map_err(|e| format!("the message content is not JSON: {e}"))?;
    let schema = infer(None, &json, behaviour)?.ok_or("the message content is empty")?;
    let value = to_value(json, &schema);
    Ok((schema, value))
}

fn optional(kind: SchemaType) -> Schema {
    Schema::new(kind, true)
}

fn infer(key: Option<&str>, node: &Json, b: ExpandBehaviour) -> Result<Option<Schema>, String> {
    Ok(match node {
        Json::String(_) => Some(optional(SchemaType::String)),
        Json::Bool(_) => Some(optional(SchemaType::Boolean)),
        Json::Number(n) => Some(optional(number_type(n))),
        Json::Array(items) if items.is_empty() => b
            .keep_empty_arrays
            .then(|| optional(SchemaType::Array(Box::new(optional(SchemaType::String))))),
        Json::Array(items) => Some(optional(SchemaType::Array(Box::new(element_schema(
            key, items, b,
        )?)))),
        Json::Object(map) => {
            let mut fields: Vec<(std::sync::Arc<str>, Schema)> = Vec::new();
            for (name, child) in map {
                let path = match key {
                    Some(k) if !k.trim().is_empty() => format!("{k}.{name}"),
                    _ => name.clone(),
                };
                if let Some(schema) = infer(Some(&path), child, b)? {
                    if !fields.iter().any(|(f, _)| &**f == name) {
                        fields.push((name.as_str().into(), schema));
                    }
                }
            }
            let mut schema = optional(SchemaType::Struct(fields));
            schema.name = key.map(Into::into);
            Some(schema)
        }
        Json::Null => b.keep_nulls.then(|| optional(SchemaType::Bytes)),
    })
}

fn number_type(n: &serde_json::Number) -> SchemaType {
    match n.as_i64() {
        Some(i) if i32::try_from(i).is_ok() => SchemaType::Int32,
        Some(_) => SchemaType::Int64,
        None => SchemaType::Float64,
    }
}

fn element_schema(key: Option<&str>, items: &[Json], b: ExpandBehaviour) -> Result<Schema, String> {
    let mut non_null = items.iter().filter(|i| !i.is_null());
    let Some(first) = non_null.next() else {
        return Err("array of nulls".into());
    };
    let same_kind = |a: &Json, c: &Json| match (a, c) {
        (Json::Number(x), Json::Number(y)) => number_type(x) == number_type(y),
        _ => std::mem::discriminant(a) == std::mem::discriminant(c),
    };
    if non_null.any(|i| !same_kind(first, i)) {
        return Err("array elements of different types".into());
    }
    if first.is_object() {
        // Struct elements: the union of their fields, in first-seen order.
        let mut merged: Option<Schema> = None;
        for item in items.iter().filter(|i| i.is_object()) {
            let Some(schema) = infer(key, item, b)? else {
                continue;
            };
            merged = Some(match merged {
                None => schema,
                Some(mut m) => {
                    if let (SchemaType::Struct(into), SchemaType::Struct(from)) =
                        (&mut m.kind, schema.kind)
                    {
                        for (name, s) in from {
                            match into.iter_mut().find(|(n, _)| *n == name) {
                                None => into.push((name, s)),
                                Some((_, old))
                                    if old.kind == SchemaType::Bytes
                                        && s.kind != SchemaType::Bytes =>
                                {
                                    *old = s
                                }
                                Some(_) => {}
                            }
                        }
                    }
                    m
                }
            });
        }
        return merged.ok_or_else(|| "array without objects".into());
    }
    infer(None, first, b)?.ok_or_else(|| "array of unrecognised members".into())
}

fn to_value(node: Json, schema: &Schema) -> Value {
    match (node, &schema.kind) {
        // The parsed string's buffer, not a copy.
        (Json::String(s), _) => Value::String(Bytes::from(s)),
        (Json::Bool(v), _) => Value::Boolean(v),
        (Json::Number(n), _) => match n.as_i64() {
            Some(i) if !matches!(schema.kind, SchemaType::Float64) => Value::Int(i),
            _ => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        (Json::Array(items), SchemaType::Array(item_schema)) => Value::Array(
            items
                .into_iter()
                .map(|i| to_value(i, item_schema))
                .collect(),
        ),
        (Json::Object(mut map), SchemaType::Struct(fields)) => Value::Struct(
            fields
                .iter()
                .map(|(name, s)| map.remove(&**name).map_or(Value::Null, |v| to_value(v, s)))
                .collect(),
        ),
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect::converter::Converter;
    use crate::connect::json_value::write_schema;

    fn expanded(payload: &str, b: ExpandBehaviour) -> (String, String) {
        let (schema, value) = expand("payload", payload.as_bytes(), b).expect("expands");
        let plain = Converter::Json(crate::connect::JsonConverter {
            schemas_enable: false,
            replace_null_with_default: true,
        })
        .encode(Some(&schema), &value)
        .unwrap()
        .unwrap();
        let mut s = Vec::new();
        write_schema(&mut s, &schema);
        (
            String::from_utf8(plain.to_vec()).unwrap(),
            String::from_utf8(s).unwrap(),
        )
    }

    #[test]
    fn drops_nulls_and_empty_arrays_by_default() {
        let (plain, schema) = expanded(
            r#"{"orderId": "o-1", "total": 42.5, "qty": 3, "note": null, "lines": [], "items": [{"sku": "a"}, {"sku": "b", "n": 2}]}"#,
            ExpandBehaviour::default(),
        );
        assert_eq!(
            plain,
            r#"{"orderId":"o-1","total":42.5,"qty":3,"items":[{"sku":"a","n":null},{"sku":"b","n":2}]}"#
        );
        assert_eq!(
            schema,
            concat!(
                r#"{"type":"struct","fields":[{"type":"string","optional":true,"field":"orderId"},"#,
                r#"{"type":"double","optional":true,"field":"total"},{"type":"int32","optional":true,"field":"qty"},"#,
                r#"{"type":"array","items":{"type":"struct","fields":[{"type":"string","optional":true,"field":"sku"},"#,
                r#"{"type":"int32","optional":true,"field":"n"}],"optional":true,"name":"payload.items"},"optional":true,"field":"items"}],"#,
                r#""optional":true,"name":"payload"}"#
            )
        );
    }

    #[test]
    fn behaviours_keep_nulls_and_empty_arrays() {
        let (plain, _) = expanded(
            r#"{"note": null, "lines": []}"#,
            ExpandBehaviour {
                keep_nulls: true,
                keep_empty_arrays: true,
            },
        );
        assert_eq!(plain, r#"{"note":null,"lines":[]}"#);
    }

    #[test]
    fn what_debezium_leaves_as_a_string() {
        let b = ExpandBehaviour::default();
        assert!(expand("payload", b"[1, 2]", b).is_none());
        assert!(expand("payload", b"not json", b).is_none());
        assert!(expand("payload", br#"{"a": [1, "x"]}"#, b).is_none());
        assert!(!botched("payload", br#"{"a": [1, "x"]}"#, b));
    }

    #[test]
    fn a_document_that_does_not_fit_its_own_schema_stays_a_string() {
        let b = ExpandBehaviour::default();
        // The array's first object types `k` as a number; the second's string does not fit.
        let doc = br#"{"items": [{"k": 1}, {"k": "x"}]}"#;
        assert!(expand("payload", doc, b).is_none());
        assert!(botched("payload", doc, b));
        // An int where the first element made the field a long.
        let doc = br#"{"items": [{"k": 5000000000}, {"k": 1}]}"#;
        assert!(botched("payload", doc, b));
        assert!(!botched(
            "payload",
            br#"{"items": [{"k": 1}, {"k": 2}]}"#,
            b
        ));
        // An integer beyond a long (jsonb's text of 1e21); as a double it fits.
        assert!(botched(
            "payload",
            br#"{"n": 1000000000000000000000, "s": "9999999999999999999"}"#,
            b
        ));
        assert!(!botched(
            "payload",
            br#"{"n": 1e21, "s": "9999999999999999999"}"#,
            b
        ));
        assert!(expand("payload", br#"{"n": 1e21}"#, b).is_some());
        // One past a long (serde_json reads it as a u64), in an array of objects.
        assert!(botched(
            "payload",
            br#"{"a": [{"n": 1}, {"n": 9223372036854775808}]}"#,
            b
        ));
        assert!(expand("payload", br#"{"a": [{"n": 9223372036854775807}]}"#, b).is_some());
    }
}
