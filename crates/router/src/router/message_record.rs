//! Logical decoding messages as outbox events: the table-less outbox. A service writes
//! `pg_logical_emit_message(true, prefix, content)` in its business transaction, the
//! content a JSON object with the outbox columns as fields.
//!
//! With Kafka Connect output the record is what Debezium writes through the chain its
//! documentation gives for these messages: `DecodeLogicalDecodingMessageContent` (the
//! content decoded into an unnamed struct with `JsonSchemaData`: every field optional,
//! objects named by path, null fields left out unless `fields.null.include`) then the
//! EventRouter reading that struct as it reads an outbox row. With native output the
//! fields' text is routed as a row's column text is: a string field is its text, any other
//! field its JSON as written.

use super::{Router, TopicCache};
use crate::config::{ConnectFormat, MessageConfig, Output, Placement, RouterConfig};
use crate::connect::{
    decode_object, expand, expands_to_no_schema, ConnectRecord, Data, ExpandBehaviour, Header,
    Schema, SchemaType, Value,
};
use crate::kafka_record::{InvalidRow, RouteOutcome};
use bytes::Bytes;
use pgoutput::{Column, ColumnValue, Relation, ReplicaIdentity, TupleData};
use std::sync::Arc;

/// The relation id a message's fields are routed under on the native path (PostgreSQL's
/// InvalidOid: never a table's).
const MESSAGE_RELATION_ID: u32 = 0;

impl Router {
    /// Routes one logical decoding message; `Ignored` unless messages are relayed and the
    /// prefix is accepted.
    pub fn route_logical_message(&mut self, prefix: &str, content: &Bytes) -> RouteOutcome {
        let Some(messages) = &self.config.messages else {
            return RouteOutcome::Ignored;
        };
        if !messages.accepts(prefix) {
            return RouteOutcome::Ignored;
        }
        let source = format!("message {prefix}");
        let outcome = match &self.config.output {
            Output::Connect(format) => connect_message(
                content,
                &source,
                messages,
                format,
                &self.config,
                &mut self.topics,
            ),
            Output::Raw => self.native_message(content, source),
        };
        self.finish(outcome)
    }

    /// The message's fields as the columns of a row of a table named after the prefix.
    fn native_message(&mut self, content: &Bytes, source: String) -> RouteOutcome {
        let mut fields = match native_fields(content) {
            Ok(fields) => fields,
            Err(reason) => return invalid_message(reason, source, content, None),
        };
        // An additional header a message leaves out is a NULL column (no header); the
        // columns every event needs (id, key, payload, routing) must be there.
        for field in &self.config.additional {
            if field.placement == Placement::Header
                && !fields.iter().any(|(n, _)| *n == field.column)
            {
                fields.push((field.column.clone(), None));
            }
        }
        let relation = Relation {
            relation_id: MESSAGE_RELATION_ID,
            namespace: String::new(),
            name: source,
            replica_identity: ReplicaIdentity::Nothing,
            columns: fields
                .iter()
                .map(|(name, _)| Column {
                    flags: 0,
                    name: name.clone(),
                    type_oid: crate::connect::oid::TEXT,
                    type_modifier: -1,
                })
                .collect(),
        };
        let mut plan = self.plan(&relation);
        plan.table = relation.name;
        self.relations.insert(MESSAGE_RELATION_ID, Some(plan));
        let row = TupleData {
            columns: fields
                .into_iter()
                .map(|(_, v)| v.map_or(ColumnValue::Null, ColumnValue::Text))
                .collect(),
        };
        let outcome = self.route_raw(MESSAGE_RELATION_ID, &row);
        self.relations.remove(&MESSAGE_RELATION_ID);
        outcome
    }
}

/// A JSON object's fields in order: a string's text, `None` for null, any other value's
/// JSON as written.
fn native_fields(content: &[u8]) -> Result<Vec<(String, Option<Bytes>)>, String> {
    let map: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(content)
        .map_err(|e| format!("the message content is not a JSON object: {e}"))?;
    let raw: std::collections::HashMap<String, &serde_json::value::RawValue> =
        serde_json::from_slice(content).map_err(|e| e.to_string())?;
    Ok(map
        .into_iter()
        .map(|(name, value)| {
            let text = match value {
                serde_json::Value::Null => None,
                serde_json::Value::String(s) => Some(Bytes::from(s)),
                _ => raw
                    .get(&name)
                    .map(|r| Bytes::copy_from_slice(r.get().as_bytes())),
            };
            (name, text)
        })
        .collect())
}

fn invalid_message(
    reason: String,
    source: String,
    content: &Bytes,
    original_topic: Option<String>,
) -> RouteOutcome {
    RouteOutcome::Invalid(InvalidRow {
        reason,
        table: source,
        original_topic,
        key: None,
        value: Some(content.clone()),
        event_id: None,
        row: None,
        connect_dlq: None,
    })
}

/// `DecodeLogicalDecodingMessageContent` then `EventRouterDelegate.apply` on the decoded
/// struct. Where Debezium's task would fail (content that is not a JSON object, a field
/// the EventRouter reads missing, a routing field that is not a string) the message goes
/// to the dead-letter topic instead.
fn connect_message(
    content: &Bytes,
    source: &str,
    messages: &MessageConfig,
    format: &ConnectFormat,
    config: &RouterConfig,
    topics: &mut TopicCache,
) -> RouteOutcome {
    let invalid = |reason: String, topic: Option<String>| {
        invalid_message(reason, source.to_owned(), content, topic)
    };
    let behaviour = ExpandBehaviour {
        keep_nulls: messages.keep_null_fields,
        keep_empty_arrays: false,
    };
    let (schema, value) = match decode_object(content, behaviour) {
        Ok(decoded) => decoded,
        Err(reason) => return invalid(reason, None),
    };
    let (SchemaType::Struct(fields), Value::Struct(values)) = (&schema.kind, &value) else {
        return invalid("the message content is not a JSON object".into(), None);
    };
    // Struct.get: a field the struct lacks is an error ("… is not a valid field name").
    let get = |name: &str| -> Result<(&Value, &Schema), String> {
        fields
            .iter()
            .position(|(n, _)| &**n == name)
            .map(|i| (&values[i], &fields[i].1))
            .ok_or_else(|| format!("{name} is not a valid field name of the message content"))
    };
    macro_rules! or_invalid {
        ($e:expr) => {
            match $e {
                Ok(v) => v,
                Err(reason) => return invalid(reason, None),
            }
        };
    }
    // Struct.getString: the routing field must be a string.
    let routing = match or_invalid!(get(&config.route_by_column)) {
        (Value::String(s), _) => s.clone(),
        (Value::Null, _) => {
            return invalid(
                format!("routing field {:?} is null", config.route_by_column),
                None,
            )
        }
        (other, _) => {
            return invalid(
                format!(
                    "routing field {:?} is not a string ({other:?})",
                    config.route_by_column
                ),
                None,
            )
        }
    };
    let topic = match topics.topic_for(&routing, config) {
        Ok(topic) => topic,
        Err((reason, topic)) => return invalid(reason, topic),
    };
    let with_topic = |reason: String| invalid(reason, Some(topic.to_string()));
    macro_rules! or_dead {
        ($e:expr) => {
            match $e {
                Ok(v) => v,
                Err(reason) => return with_topic(reason),
            }
        };
    }
    // getEventTimestampMs: a timestamp field must carry a logical timestamp type, which a
    // decoded JSON field never has; a null one falls back to ts_ms.
    if let Some(column) = &config.timestamp_column {
        match get(column) {
            Ok((Value::Null, _)) => {}
            Ok(_) => {
                return with_topic(format!(
                    "timestamp field {column:?} of a message has no logical timestamp type (Debezium fails here)"
                ))
            }
            Err(_) => {
                return with_topic(format!(
                    "Unable to find timestamp field {column} in the message"
                ))
            }
        }
    }
    // No context headers: Debezium adds them to change events only, not to messages.
    let mut headers = Vec::with_capacity(1 + config.additional.len());
    let (id, id_schema) = or_dead!(get(&config.id_column));
    headers.push(Header::new("id", Data::new(id_schema.clone(), id.clone())));
    // A null payload is left out of the decoded struct (unless fields.null.include): the
    // EventRouter then finds no payload field, as for a missing one.
    let (payload, payload_schema) = match get(&config.payload_column) {
        Ok((value, schema)) => (value.clone(), schema.clone()),
        Err(_) => {
            return with_topic(format!(
                "Unable to find payload field {} in the message",
                config.payload_column
            ))
        }
    };
    // A string payload expands as a column's does; one that expands to no schema (an empty
    // array) keeps its text with a null schema (found by the differential test).
    let mut schemaless = None;
    let (payload_schema, payload) = match (format.expand, &payload) {
        (Some(b), Value::String(text)) => match expand(&config.payload_column, text, b) {
            Some(expanded) => expanded,
            None => {
                if expands_to_no_schema(text, b) {
                    schemaless = Some(text.clone());
                }
                (payload_schema, payload)
            }
        },
        _ => (payload_schema, payload),
    };
    let mut envelope_fields = vec![(Arc::<str>::from("payload"), payload_schema.clone())];
    let mut envelope_values = vec![payload.clone()];
    let mut partition = None;
    for field in &config.additional {
        let (value, schema) = match get(&field.column) {
            Ok(found) => found,
            Err(_) if config.ignore_missing_additional => continue,
            Err(e) => return with_topic(e),
        };
        match field.placement {
            Placement::Header => headers.push(Header::new(
                field.alias.clone(),
                Data::new(schema.clone(), value.clone()),
            )),
            Placement::Envelope => {
                envelope_fields.push((field.alias.clone(), schema.clone()));
                envelope_values.push(value.clone());
            }
            // Struct.getInt32: an int32 field (a JSON number that fits).
            Placement::Partition => {
                partition = match (value, &schema.kind) {
                    (Value::Int(p), SchemaType::Int32) if *p >= 0 => Some(*p as i32),
                    (Value::Null, _) => None,
                    (other, _) => {
                        return with_topic(format!(
                            "partition field {:?} is not a partition number ({other:?})",
                            field.column
                        ))
                    }
                }
            }
        }
    }
    let envelope = (envelope_fields.len() > 1).then(|| {
        // getSchemaName: the decoded struct has no name, so the envelope is named by the
        // routing value alone.
        let mut schema = Schema::new(SchemaType::Struct(envelope_fields), false);
        schema.name = Some(String::from_utf8_lossy(&routing).into_owned().into());
        if let Some(column) = &format.schema_version_column {
            schema.version = match get(column) {
                Ok((Value::Int(v), _)) => i32::try_from(*v).ok(),
                _ => None,
            };
        }
        (schema, Value::Struct(envelope_values))
    });
    let value = super::connect_record::event_router_value(
        format,
        payload,
        payload_schema,
        schemaless,
        envelope,
    );
    let (key, key_schema) = or_dead!(get(&config.key_column));
    let record = ConnectRecord {
        topic: topic.clone(),
        partition,
        key: Data::new(key_schema.clone(), key.clone()),
        value,
        headers,
        timestamp_ms: None,
    };
    super::connect_record::finish(record, format, config.has_transforms(), || InvalidRow {
        reason: String::new(),
        table: source.to_owned(),
        original_topic: Some(topic.to_string()),
        key: None,
        value: Some(content.clone()),
        event_id: None,
        row: None,
        connect_dlq: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{AdditionalField, ListPattern};
    use crate::connect::Converter;
    use crate::TopicTemplate;

    const ORDER: &str = r#"{"id":"4d47e5a0-0000-4000-8000-000000000001","aggregatetype":"order","aggregateid":"1","type":"OrderCreated","payload":{"orderId":1,"note":null,"lines":[{"sku":"A","qty":2}]}}"#;

    fn json(schemas_enable: bool) -> Converter {
        Converter::Json(crate::connect::JsonConverter {
            schemas_enable,
            replace_null_with_default: true,
        })
    }

    /// Debezium's EventRouter defaults (aggregatetype, aggregateid, payload, id) reading a
    /// message decoded by DecodeLogicalDecodingMessageContent.
    fn debezium(value: Converter, messages: MessageConfig) -> Router {
        Router::new(RouterConfig {
            tables: Vec::new(),
            messages: Some(messages),
            id_column: "id".into(),
            key_column: "aggregateid".into(),
            payload_column: "payload".into(),
            route_by_column: "aggregatetype".into(),
            topic_template: TopicTemplate::with_regex(
                crate::DEFAULT_TOPIC_REGEX,
                "outbox.event.${routedByValue}",
            )
            .unwrap(),
            additional: Vec::new(),
            tombstone_on_null_payload: false,
            output: Output::Connect(ConnectFormat::new(json(true), value, "dbserver1")),
            ..RouterConfig::default()
        })
    }

    fn text(b: &Option<Bytes>) -> &str {
        std::str::from_utf8(b.as_deref().expect("not null")).unwrap()
    }

    fn routed(router: &mut Router, prefix: &str, content: &str) -> crate::OutboxRecord {
        match router.route_logical_message(prefix, &Bytes::copy_from_slice(content.as_bytes())) {
            RouteOutcome::Record(r) => r,
            other => panic!("{other:?}"),
        }
    }

    /// DecodeLogicalDecodingMessageContent (JsonSchemaData.toConnectSchema: an unnamed
    /// struct, nested objects named by path, every field optional, nulls left out) then
    /// EventRouterDelegate.apply: value = the payload struct with its own schema, key = the
    /// aggregateid field with its (optional string) schema, header `id`, no context headers.
    #[test]
    fn a_message_is_routed_as_debezium_routes_the_decoded_content() {
        let mut router = debezium(json(true), MessageConfig::default());
        let r = routed(&mut router, "outbox", ORDER);
        assert_eq!(&*r.topic, "outbox.event.order");
        assert_eq!(
            text(&r.value),
            concat!(
                r#"{"schema":{"type":"struct","fields":[{"type":"int32","optional":true,"field":"orderId"},"#,
                r#"{"type":"array","items":{"type":"struct","fields":[{"type":"string","optional":true,"field":"sku"},"#,
                r#"{"type":"int32","optional":true,"field":"qty"}],"optional":true,"name":"payload.lines"},"optional":true,"field":"lines"}],"#,
                r#""optional":true,"name":"payload"},"payload":{"orderId":1,"lines":[{"sku":"A","qty":2}]}}"#
            )
        );
        assert_eq!(
            text(&r.key),
            r#"{"schema":{"type":"string","optional":true},"payload":"1"}"#
        );
        let headers: Vec<(&str, &str)> = r
            .headers
            .iter()
            .map(|(k, v)| (&**k, std::str::from_utf8(v.as_deref().unwrap()).unwrap()))
            .collect();
        assert_eq!(headers, [("id", "4d47e5a0-0000-4000-8000-000000000001")]);
        let mut plain = debezium(json(false), MessageConfig::default());
        assert_eq!(
            text(&routed(&mut plain, "outbox", ORDER).value),
            r#"{"orderId":1,"lines":[{"sku":"A","qty":2}]}"#
        );
        // fields.null.include=true keeps the null field, as optional bytes.
        let mut nulls = debezium(
            json(false),
            MessageConfig {
                keep_null_fields: true,
                ..MessageConfig::default()
            },
        );
        assert_eq!(
            text(&routed(&mut nulls, "outbox", ORDER).value),
            r#"{"orderId":1,"note":null,"lines":[{"sku":"A","qty":2}]}"#
        );
        // A string payload is an unnamed optional string (not io.debezium.data.Json).
        let string =
            r#"{"id":"e1","aggregatetype":"order","aggregateid":"1","payload":"{\"orderId\":1}"}"#;
        assert_eq!(
            text(&routed(&mut router, "outbox", string).value),
            r#"{"schema":{"type":"string","optional":true},"payload":"{\"orderId\":1}"}"#
        );
    }

    /// An envelope additional field names the value schema by the routing value alone
    /// (getSchemaName of the decoded struct, which has no name).
    #[test]
    fn envelope_fields_of_a_message_name_the_schema_by_the_routing_value() {
        let mut router = debezium(json(true), MessageConfig::default());
        router.config.additional = AdditionalField::parse_list("type:envelope:eventType").unwrap();
        let r = routed(&mut router, "outbox", ORDER);
        let value = text(&r.value);
        assert!(
            value.contains(r#"{"type":"string","optional":true,"field":"eventType"}],"optional":false,"name":"order"}"#),
            "{value}"
        );
        assert!(
            value.ends_with(r#""eventType":"OrderCreated"}}"#),
            "{value}"
        );
    }

    /// `table.expand.json.payload` on a message's string payload: expanded as a column's
    /// text is; an empty array keeps its text with a null schema, as Debezium writes it
    /// (found by the differential test).
    #[test]
    fn a_string_payload_expands_as_a_columns_does() {
        let mut router = debezium(json(true), MessageConfig::default());
        if let Output::Connect(format) = &mut router.config.output {
            format.expand = Some(ExpandBehaviour::default());
        }
        let content = r#"{"id":"e-1","aggregatetype":"order","aggregateid":"1","payload":"[]"}"#;
        let r = routed(&mut router, "outbox", content);
        assert_eq!(text(&r.value), r#"{"schema":null,"payload":"[]"}"#);
        let content =
            r#"{"id":"e-1","aggregatetype":"order","aggregateid":"1","payload":"{\"n\":1}"}"#;
        let r = routed(&mut router, "outbox", content);
        assert_eq!(
            text(&r.value),
            r#"{"schema":{"type":"struct","fields":[{"type":"int32","optional":true,"field":"n"}],"optional":true,"name":"payload"},"payload":{"n":1}}"#
        );
    }

    /// LogicalDecodingMessageFilter: the include list wins; entries match whole, any case.
    #[test]
    fn prefixes_are_filtered_and_bad_content_is_dead_lettered() {
        let mut router = debezium(
            json(false),
            MessageConfig {
                include: vec![ListPattern::new("outbox|orders\\..*").unwrap()],
                ..MessageConfig::default()
            },
        );
        let route = |router: &mut Router, prefix: &str, content: &str| {
            router.route_logical_message(prefix, &Bytes::copy_from_slice(content.as_bytes()))
        };
        assert!(matches!(
            route(&mut router, "OUTBOX", ORDER),
            RouteOutcome::Record(_)
        ));
        assert!(matches!(
            route(&mut router, "orders.v1", ORDER),
            RouteOutcome::Record(_)
        ));
        assert!(matches!(
            route(&mut router, "outbox2", ORDER),
            RouteOutcome::Ignored
        ));
        assert!(matches!(
            route(&mut router, "audit", ORDER),
            RouteOutcome::Ignored
        ));
        for (content, reason) in [
            (" {}", "not a JSON object"),
            ("[1]", "not a JSON object"),
            ("{\"id\":", "not JSON"),
            (
                r#"{"id":"e","aggregatetype":"order","aggregateid":"1"}"#,
                "Unable to find payload field",
            ),
            (
                r#"{"id":"e","aggregatetype":7,"aggregateid":"1","payload":{}}"#,
                "not a string",
            ),
            (
                r#"{"aggregatetype":"order","aggregateid":"1","payload":{}}"#,
                "id is not a valid field",
            ),
        ] {
            match route(&mut router, "outbox", content) {
                RouteOutcome::Invalid(row) => {
                    assert!(row.reason.contains(reason), "{content}: {}", row.reason);
                    assert_eq!(row.table, "message outbox");
                    assert_eq!(row.value.as_deref(), Some(content.as_bytes()));
                }
                other => panic!("{content}: {other:?}"),
            }
        }
        let mut exclude = debezium(
            json(false),
            MessageConfig {
                exclude: vec![ListPattern::new("audit.*").unwrap()],
                ..MessageConfig::default()
            },
        );
        assert!(matches!(
            route(&mut exclude, "Audit-1", ORDER),
            RouteOutcome::Ignored
        ));
        assert!(matches!(
            route(&mut exclude, "anything", ORDER),
            RouteOutcome::Record(_)
        ));
    }

    /// Native output: the fields as column text (strings as they are, other JSON as
    /// written), routed by the native column names.
    #[test]
    fn native_messages_route_like_native_rows() {
        let mut router = Router::new(RouterConfig {
            tables: Vec::new(),
            messages: Some(MessageConfig {
                include: vec![ListPattern::new("outbox").unwrap()],
                ..MessageConfig::default()
            }),
            ..RouterConfig::default()
        });
        let content = r#"{"id":"e-1","aggregate_type":"Order","aggregate_id":"o-1","event_type":"Created","payload":{"n": 1.50,"z":[]}}"#;
        let r = routed(&mut router, "outbox", content);
        assert_eq!(&*r.topic, "Order.events");
        assert_eq!(r.key.as_deref(), Some(&b"o-1"[..]));
        assert_eq!(r.value.as_deref(), Some(&br#"{"n": 1.50,"z":[]}"#[..]));
        let headers: Vec<(&str, &[u8])> = r
            .headers
            .iter()
            .map(|(k, v)| (&**k, v.as_deref().unwrap()))
            .collect();
        assert_eq!(
            headers,
            [("id", &b"e-1"[..]), ("eventType", &b"Created"[..])]
        );
        // A null payload is a tombstone, as for a row.
        let tombstone =
            r#"{"id":"e-2","aggregate_type":"Order","aggregate_id":"o-1","payload":null}"#;
        assert_eq!(routed(&mut router, "outbox", tombstone).value, None);
        match router.route_logical_message("outbox", &Bytes::from_static(b"{\"id\":1}")) {
            RouteOutcome::Invalid(row) => assert!(row.reason.contains("missing"), "{}", row.reason),
            other => panic!("{other:?}"),
        }
    }
}
