//! Reading what a Debezium user already has: the connector JSON they POST to Kafka Connect
//! (`{"name": ..., "config": {...}}` or the bare config object) or a `.properties` file,
//! and a Kafka Connect worker's `.properties`.

use std::collections::BTreeMap;
use std::path::Path;

/// A flat `key -> value` configuration, with the connector's name when the file had one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RawConfig {
    pub name: Option<String>,
    pub entries: BTreeMap<String, String>,
}

pub fn read_file(path: &Path) -> Result<RawConfig, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// JSON when the text starts with `{`, Java properties otherwise.
pub fn parse(text: &str) -> Result<RawConfig, String> {
    if text.trim_start().starts_with('{') {
        parse_json(text)
    } else {
        Ok(RawConfig {
            name: None,
            entries: parse_properties(text),
        })
    }
}

fn parse_json(text: &str) -> Result<RawConfig, String> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
    let object = value
        .as_object()
        .ok_or("expected a JSON object: {\"name\": ..., \"config\": {...}} or the config object")?;
    let (name, config) = match object.get("config") {
        Some(serde_json::Value::Object(config)) => (
            object
                .get("name")
                .and_then(|n| n.as_str())
                .map(str::to_owned),
            config,
        ),
        Some(_) => return Err("\"config\" must be an object of connector options".into()),
        None => (
            object
                .get("name")
                .and_then(|n| n.as_str())
                .map(str::to_owned),
            object,
        ),
    };
    let mut entries = BTreeMap::new();
    for (key, value) in config {
        let text = match value {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Number(n) => n.to_string(),
            serde_json::Value::Bool(b) => b.to_string(),
            serde_json::Value::Null => continue,
            _ => {
                return Err(format!(
                    "option {key:?} must be a string, number or boolean"
                ))
            }
        };
        entries.insert(key.clone(), text);
    }
    // Kafka Connect's `name` is the connector's name, also valid inside the config object.
    entries.remove("name");
    Ok(RawConfig { name, entries })
}

/// `java.util.Properties` text: `key=value`, `key: value` or `key value`; `#`/`!`
/// comments; a trailing backslash continues the line; `\t \n \r \f \uXXXX` and escaped
/// separators.
pub fn parse_properties(text: &str) -> BTreeMap<String, String> {
    let mut entries = BTreeMap::new();
    let mut logical = String::new();
    for line in text.lines() {
        let piece = line.trim_start();
        if logical.is_empty()
            && (piece.is_empty() || piece.starts_with('#') || piece.starts_with('!'))
        {
            continue;
        }
        let trailing = piece.chars().rev().take_while(|c| *c == '\\').count();
        if trailing % 2 == 1 {
            logical.push_str(&piece[..piece.len() - 1]);
            continue;
        }
        logical.push_str(piece);
        let (key, value) = split_entry(&logical);
        entries.insert(key, value);
        logical.clear();
    }
    if !logical.is_empty() {
        let (key, value) = split_entry(&logical);
        entries.insert(key, value);
    }
    entries
}

fn split_entry(line: &str) -> (String, String) {
    let mut key = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(next) = chars.next() {
                    key.push(unescape(next, &mut chars));
                }
            }
            '=' | ':' => break,
            c if c.is_whitespace() => {
                while chars.peek().is_some_and(|c| c.is_whitespace()) {
                    chars.next();
                }
                if matches!(chars.peek(), Some('=') | Some(':')) {
                    chars.next();
                }
                break;
            }
            c => key.push(c),
        }
    }
    while chars.peek().is_some_and(|c| c.is_whitespace()) {
        chars.next();
    }
    let mut value = String::new();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(next) = chars.next() {
                value.push(unescape(next, &mut chars));
            }
        } else {
            value.push(c);
        }
    }
    (key, value)
}

fn unescape(c: char, rest: &mut std::iter::Peekable<std::str::Chars<'_>>) -> char {
    match c {
        't' => '\t',
        'n' => '\n',
        'r' => '\r',
        'f' => '\u{c}',
        'u' => {
            let hex: String = (0..4).filter_map(|_| rest.next()).collect();
            u32::from_str_radix(&hex, 16)
                .ok()
                .and_then(char::from_u32)
                .unwrap_or('\u{fffd}')
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connector_json_with_or_without_the_wrapper() {
        let wrapped =
            parse(r#"{"name": "outbox-connector", "config": {"tasks.max": 1, "slot.name": "s"}}"#)
                .unwrap();
        assert_eq!(wrapped.name.as_deref(), Some("outbox-connector"));
        assert_eq!(wrapped.entries["tasks.max"], "1");
        let bare = parse(r#"{"slot.name": "s", "snapshot.mode": "no_data"}"#).unwrap();
        assert_eq!(bare.name, None);
        assert_eq!(bare.entries["snapshot.mode"], "no_data");
        assert!(parse(r#"{"config": "x"}"#).is_err());
    }

    #[test]
    fn java_properties_syntax() {
        let p = parse_properties(
            "# comment\n! also\nbootstrap.servers=kafka:9092\nkey.converter : org.apache.kafka.connect.storage.StringConverter\n\
             route.topic.replacement ${routedByValue}.events\nlong=a,\\\n   b\nescaped\\=key=x\\u0041\n",
        );
        assert_eq!(p["bootstrap.servers"], "kafka:9092");
        assert_eq!(
            p["key.converter"],
            "org.apache.kafka.connect.storage.StringConverter"
        );
        assert_eq!(p["route.topic.replacement"], "${routedByValue}.events");
        assert_eq!(p["long"], "a,b");
        assert_eq!(p["escaped=key"], "xA");
    }
}
