//! The expanded payload (`table.expand.json.payload=true`) written straight to the JSON that
//! JsonConverter with `schemas.enable=false` makes of it, in one pass over the payload's text,
//! with no tree, no schema and no allocation per field.
//!
//! The general path ([`expand`](super::expand) then the converter) parses the payload into a
//! tree, infers its schema, builds Connect values and writes them. For the documents most
//! payloads are (objects of strings, numbers, booleans, nested objects and arrays of one
//! scalar type) what it writes is the payload itself made compact, with null fields and empty
//! arrays left out (the default behaviours), numbers in Java's layout and strings escaped as
//! Jackson escapes them. [`expanded`] writes that while serde_json reads the text, and gives
//! up (`None`, the general path decides) on everything else: arrays of objects, of nulls, of
//! mixed types or of arrays, duplicate field names, integers beyond a long, text that is not
//! JSON. A property test holds it to the general path's bytes.

use super::json::{write_double, write_string};
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use std::borrow::Cow;
use std::fmt;

/// The JSON JsonConverter (schemas disabled) writes of `payload` expanded with the default
/// behaviours, or `None` where the general path must decide.
pub fn expanded(payload: &[u8]) -> Option<Vec<u8>> {
    if !payload.starts_with(b"{") {
        return None;
    }
    let mut out = Vec::with_capacity(payload.len());
    let mut de = serde_json::Deserializer::from_slice(payload);
    let kind = Node { out: &mut out }.deserialize(&mut de).ok()?;
    de.end().ok()?;
    (kind == Kind::Object).then_some(out)
}

/// What a node was; arrays hold one scalar kind only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Left out by its parent (a null, an empty array): nothing written.
    Dropped,
    Boolean,
    Int32,
    Int64,
    Float64,
    String,
    Object,
    Array,
}

/// The general path's to decide (see the module's documentation).
#[derive(Debug)]
struct GiveUp;

impl fmt::Display for GiveUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not on the direct path")
    }
}

impl std::error::Error for GiveUp {}

impl serde::de::Error for GiveUp {
    fn custom<T: fmt::Display>(_: T) -> Self {
        GiveUp
    }
}

/// serde_json's errors become "give up": the general path reports what it finds.
fn give_up<E: serde::de::Error>() -> E {
    E::custom(GiveUp)
}

/// One node, written to `out`.
struct Node<'o> {
    out: &'o mut Vec<u8>,
}

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = Kind;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Kind, D::Error> {
        deserializer.deserialize_any(self)
    }
}

/// 2^63: an integral double this large may have been an integer beyond a long in the text
/// (serde_json reads those as doubles), which the general path refuses.
const LONG_RANGE: f64 = 9_223_372_036_854_775_808.0;

impl<'de> Visitor<'de> for Node<'_> {
    type Value = Kind;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON document")
    }

    fn visit_unit<E>(self) -> Result<Kind, E> {
        Ok(Kind::Dropped)
    }

    fn visit_bool<E>(self, v: bool) -> Result<Kind, E> {
        self.out
            .extend_from_slice(if v { b"true" } else { b"false" });
        Ok(Kind::Boolean)
    }

    fn visit_i64<E>(self, v: i64) -> Result<Kind, E> {
        let mut digits = itoa_buffer();
        self.out.extend_from_slice(format_i64(&mut digits, v));
        Ok(if i32::try_from(v).is_ok() {
            Kind::Int32
        } else {
            Kind::Int64
        })
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Kind, E> {
        match i64::try_from(v) {
            Ok(v) => self.visit_i64(v),
            Err(_) => Err(give_up()),
        }
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Kind, E> {
        if !v.is_finite() || (v.fract() == 0.0 && v.abs() >= LONG_RANGE) {
            return Err(give_up());
        }
        write_double(self.out, v);
        Ok(Kind::Float64)
    }

    fn visit_str<E>(self, v: &str) -> Result<Kind, E> {
        write_string(self.out, v);
        Ok(Kind::String)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Kind, A::Error> {
        let out = self.out;
        out.push(b'{');
        let mut names: Vec<Cow<'de, str>> = Vec::new();
        let mut written = false;
        while let Some(name) = map.next_key_seed(Name)? {
            if names.contains(&name) {
                return Err(give_up());
            }
            let mark = out.len();
            if written {
                out.push(b',');
            }
            write_string(out, &name);
            out.push(b':');
            match map.next_value_seed(Node { out: &mut *out })? {
                Kind::Dropped => out.truncate(mark),
                _ => written = true,
            }
            names.push(name);
        }
        out.push(b'}');
        Ok(Kind::Object)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Kind, A::Error> {
        let out = self.out;
        let mark = out.len();
        out.push(b'[');
        let mut first: Option<Kind> = None;
        loop {
            if first.is_some() {
                out.push(b',');
            }
            let Some(kind) = seq.next_element_seed(Element { out: &mut *out })? else {
                if first.is_some() {
                    out.pop();
                }
                break;
            };
            match first {
                None => first = Some(kind),
                Some(k) if k == kind => {}
                Some(_) => return Err(give_up()),
            }
        }
        if first.is_none() {
            out.truncate(mark);
            return Ok(Kind::Dropped);
        }
        out.push(b']');
        Ok(Kind::Array)
    }
}

/// An element of an array: a string, number or boolean, nothing else.
struct Element<'o> {
    out: &'o mut Vec<u8>,
}

impl<'de> DeserializeSeed<'de> for Element<'_> {
    type Value = Kind;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Kind, D::Error> {
        let kind = Node { out: self.out }.deserialize(deserializer)?;
        match kind {
            Kind::Boolean | Kind::Int32 | Kind::Int64 | Kind::Float64 | Kind::String => Ok(kind),
            Kind::Dropped | Kind::Object | Kind::Array => Err(give_up()),
        }
    }
}

/// A field name, borrowed from the text where it has no escape.
struct Name;

impl<'de> DeserializeSeed<'de> for Name {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Name {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }
}

fn itoa_buffer() -> [u8; 20] {
    [0; 20]
}

/// `v` in decimal, as Java's `Long.toString` writes it, in `buf`.
fn format_i64(buf: &mut [u8; 20], v: i64) -> &[u8] {
    let mut n = v.unsigned_abs();
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        // -9223372036854775808 has 19 digits: there is room for the sign.
        i -= 1;
        buf[i] = b'-';
    }
    &buf[i..]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect::{expand, Converter, ExpandBehaviour, JsonConverter};
    use proptest::prelude::*;

    /// What the general path writes: the payload expanded, then JsonConverter without
    /// schemas; `None` where it keeps the payload as a string.
    fn general(payload: &str) -> Option<String> {
        let (schema, value) = expand("payload", payload.as_bytes(), ExpandBehaviour::default())?;
        let bytes = Converter::Json(JsonConverter {
            schemas_enable: false,
            replace_null_with_default: true,
        })
        .encode(Some(&schema), &value)
        .expect("the general path encodes what it expanded")
        .expect("a value");
        Some(String::from_utf8(bytes.to_vec()).unwrap())
    }

    fn direct(payload: &str) -> Option<String> {
        expanded(payload.as_bytes()).map(|b| String::from_utf8(b).unwrap())
    }

    #[test]
    fn writes_what_the_general_path_writes() {
        for payload in [
            r#"{"orderId": "o-1", "total": 42.5, "qty": 3, "note": null, "lines": [], "ok": true}"#,
            r#"{"a": {"b": {"c": [1, 2, 3]}}, "d": ["x", "y\n\"z\""], "e": [1.5, 2.0]}"#,
            r#"{"n": -0, "m": -9223372036854775808, "big": 9223372036854775807, "g": 1.0E-7, "h": 1e3}"#,
            r#"{"é": "\u00e9\ud83d\ude80 rocket", "tab\t": "\u0001", "slash": "a/b"}"#,
            r#"{"a": null}"#,
            r#"{}"#,
            r#"{"a": {}}"#,
            r#"{"a": {"b": null}, "c": []}"#,
            "{\"a\" :\n 1 , \"b\":[ true,false ] }  ",
        ] {
            let direct = direct(payload);
            assert!(direct.is_some(), "{payload}");
            assert_eq!(direct, general(payload), "{payload}");
        }
    }

    #[test]
    fn gives_up_where_the_general_path_decides() {
        for payload in [
            r#"{"items": [{"sku": "a"}, {"sku": "b", "n": 2}]}"#,
            r#"{"a": [1, "x"]}"#,
            r#"{"a": [1, 5000000000]}"#,
            r#"{"a": [null, 1]}"#,
            r#"{"a": [[]]}"#,
            r#"{"a": 1, "a": 2}"#,
            r#"{"n": 1000000000000000000000}"#,
            r#"{"n": 18446744073709551615}"#,
            r#"{"f": 1e21}"#,
            r#"[1, 2]"#,
            r#" {"a": 1}"#,
            r#"{"a": 1} x"#,
            r#"{"a": "\ud800"}"#,
            "not json",
        ] {
            assert_eq!(direct(payload), None, "{payload}");
        }
    }

    fn json() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            any::<i32>().prop_map(serde_json::Value::from),
            (-1e12f64..1e12).prop_map(serde_json::Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(serde_json::Value::from),
            "\\PC{0,12}".prop_map(serde_json::Value::from),
            "[a-c]{0,2}".prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(serde_json::Value::Array),
                prop::collection::vec(("[a-d]{1,2}", inner), 0..6)
                    .prop_map(|fields| { serde_json::Value::Object(fields.into_iter().collect()) }),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// Whatever the document, the direct path writes the general path's bytes or leaves
        /// it to the general path.
        #[test]
        fn never_differs_from_the_general_path(fields in prop::collection::vec(("[a-e]{1,2}", json()), 0..6), pretty in any::<bool>()) {
            let doc = serde_json::Value::Object(fields.into_iter().collect());
            let text = if pretty { serde_json::to_string_pretty(&doc).unwrap() } else { doc.to_string() };
            if let Some(direct) = direct(&text) {
                prop_assert_eq!(Some(direct), general(&text), "{}", text);
            }
        }
    }
}
