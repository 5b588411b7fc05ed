//! JSON payload expansion (Debezium's `table.expand.json.payload` with its default
//! `ignore` behaviours for null fields and empty arrays): the payload text is parsed and
//! written back compactly, fields in document order, without nulls and empty arrays.

use bytes::Bytes;
use serde_json::Value;

pub fn expand_json(payload: &[u8]) -> Result<Bytes, String> {
    let mut value: Value = serde_json::from_slice(payload).map_err(|e| e.to_string())?;
    prune(&mut value);
    Ok(Bytes::from(
        serde_json::to_vec(&value).expect("a JSON value serialises"),
    ))
}

fn prune(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !(v.is_null() || v.as_array().is_some_and(|a| a.is_empty())));
            map.values_mut().for_each(prune);
        }
        Value::Array(items) => items.iter_mut().for_each(prune),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_in_document_order_without_nulls_and_empty_arrays() {
        let out = expand_json(br#"{"total": 42.5, "orderId": "o-1", "note": null, "lines": [], "items": [{"sku": "a", "x": null}]}"#).unwrap();
        assert_eq!(
            &out[..],
            br#"{"total":42.5,"orderId":"o-1","items":[{"sku":"a"}]}"#
        );
    }

    #[test]
    fn text_that_is_not_json_is_an_error() {
        assert!(expand_json(b"not json").unwrap_err().contains("expected"));
        assert!(expand_json(b"{\"a\": 1").is_err());
    }
}
