//! Debezium's notifications (`notification.enabled.channels`): what `NotificationService`
//! tells its channels, as `Notification` holds it, written as the `sink` channel
//! (`SinkNotificationChannel`) writes records to `notification.sink.topic.name`: key
//! `NotificationKey{id}`, value `Notification{id, type, aggregate_type, additional_data,
//! timestamp}` (`SchemaFactory`), no Kafka partition of its own, no headers; and as the `log`
//! channel logs it (`Notification.toString`). Debezium's transforms pass them unchanged.

use super::Router;
use crate::config::Output;
use crate::connect::{ConnectRecord, Data, Schema, SchemaType, Value};
use crate::kafka_record::RouteOutcome;

/// One notification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    pub id: String,
    /// `aggregate_type`: "Initial Snapshot", …
    pub aggregate_type: String,
    /// `type`: STARTED, IN_PROGRESS, TABLE_SCAN_COMPLETED, COMPLETED, ABORTED, SKIPPED, …
    pub kind: String,
    /// `additional_data`, in the order Debezium's `HashMap` iterates it.
    pub additional: Vec<(String, String)>,
    pub timestamp_ms: i64,
}

impl Notification {
    /// `additional_data` as Debezium builds it: `new HashMap<>(Map.of(…))` (its capacity
    /// sized for the entries given), then `connector_name` put.
    pub fn with_connector(
        id: String,
        aggregate_type: &str,
        kind: &str,
        data: Vec<(&str, String)>,
        connector: &str,
        timestamp_ms: i64,
    ) -> Self {
        // HashMap(Map): threshold tableSizeFor(n / 0.75 + 1); the first put makes a table of
        // that size (16 when the map given is empty).
        let capacity = if data.is_empty() {
            16
        } else {
            ((data.len() as f32 / 0.75 + 1.0) as usize).next_power_of_two()
        };
        let mut pairs: Vec<(String, String)> =
            data.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        pairs.push(("connector_name".to_owned(), connector.to_owned()));
        Self {
            id,
            aggregate_type: aggregate_type.to_owned(),
            kind: kind.to_owned(),
            additional: crate::connect::java_hash_map_order_in(pairs, capacity),
            timestamp_ms,
        }
    }

    /// `Notification.toString()`, as the log channel writes it.
    pub fn to_java_string(&self) -> String {
        let data: Vec<String> = self
            .additional
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        format!(
            "{{id='{}', aggregateType='{}', type='{}', additionalData={{{}}}, timestamp={}}}",
            self.id,
            self.aggregate_type,
            self.kind,
            data.join(", "),
            self.timestamp_ms
        )
    }
}

/// The iteration order of a `java.util.HashSet<String>` made of `items`
/// (`new HashSet<>(collection)`: at least 16 buckets), as Debezium joins a set of table ids.
pub fn java_hash_set_order(items: Vec<String>) -> Vec<String> {
    crate::connect::java_hash_map_order(items.into_iter().map(|i| (i, ())).collect())
        .into_iter()
        .map(|(i, ())| i)
        .collect()
}

impl Router {
    /// The notification channels on, and the connector's name (`topic.prefix`) they carry.
    pub fn notification_channels(&self) -> Option<(&crate::config::Notifications, &str)> {
        match &self.config.output {
            Output::Connect(f) => Some((f.notifications.as_ref()?, f.topic_prefix.as_str())),
            Output::Raw => None,
        }
    }

    /// Whether notification records are written (the `sink` channel, with Connect output).
    pub fn writes_notifications(&self) -> bool {
        matches!(&self.config.output, Output::Connect(f)
            if f.notifications.as_ref().is_some_and(|n| n.sink_topic.is_some()))
    }

    /// The notification's record, transformed and converted, or `None` when the sink
    /// channel is off.
    pub fn notification(&mut self, n: &Notification) -> Option<RouteOutcome> {
        let Output::Connect(format) = &self.config.output else {
            return None;
        };
        let topic = format.notifications.as_ref()?.sink_topic.clone()?;
        let text = |required: bool| Schema::new(SchemaType::String, !required);
        let key_schema = Schema::new(SchemaType::Struct(vec![("id".into(), text(true))]), false)
            .named("io.debezium.connector.common.NotificationKey", Some(1));
        let value_schema = Schema::new(
            SchemaType::Struct(vec![
                ("id".into(), text(true)),
                ("type".into(), text(true)),
                ("aggregate_type".into(), text(true)),
                (
                    "additional_data".into(),
                    Schema::new(
                        SchemaType::Map(Box::new(text(true)), Box::new(text(true))),
                        true,
                    ),
                ),
                ("timestamp".into(), Schema::new(SchemaType::Int64, false)),
            ]),
            false,
        )
        .named("io.debezium.connector.common.Notification", Some(1));
        let record = ConnectRecord {
            topic,
            partition: None,
            key: Data::new(key_schema, Value::Struct(vec![Value::text(&n.id)])),
            value: Data::new(
                value_schema,
                Value::Struct(vec![
                    Value::text(&n.id),
                    Value::text(&n.kind),
                    Value::text(&n.aggregate_type),
                    Value::Map(
                        n.additional
                            .iter()
                            .map(|(k, v)| (Value::text(k), Value::text(v)))
                            .collect(),
                    ),
                    Value::Int(n.timestamp_ms),
                ]),
            ),
            headers: Vec::new(),
            timestamp_ms: None,
        };
        let outcome = self.connect_record(record, "notification");
        Some(self.finish(outcome))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The orders Debezium's HashMaps give (measured over JVM runs: STARTED
    /// `{connector_name}`, IN_PROGRESS `{current_collection_in_progress, connector_name,
    /// data_collections}`, TABLE_SCAN_COMPLETED `{scanned_collection, connector_name,
    /// total_rows_scanned, status, data_collections}` with the last two in either order), and
    /// `toString`.
    #[test]
    fn additional_data_in_debeziums_order() {
        let n = |kind: &str, data: Vec<(&str, String)>| {
            Notification::with_connector("i".into(), "Initial Snapshot", kind, data, "app", 7)
        };
        let keys = |n: &Notification| -> Vec<String> {
            n.additional.iter().map(|(k, _)| k.clone()).collect()
        };
        assert_eq!(keys(&n("STARTED", vec![])), ["connector_name"]);
        let progress = n(
            "IN_PROGRESS",
            vec![
                ("current_collection_in_progress", "public.outbox".into()),
                ("data_collections", "public.outbox".into()),
            ],
        );
        assert_eq!(
            keys(&progress),
            [
                "current_collection_in_progress",
                "connector_name",
                "data_collections"
            ]
        );
        let done = n(
            "TABLE_SCAN_COMPLETED",
            vec![
                ("scanned_collection", "public.outbox".into()),
                ("data_collections", "public.outbox".into()),
                ("total_rows_scanned", "3".into()),
                ("status", "SUCCEEDED".into()),
            ],
        );
        let keys = keys(&done);
        assert_eq!(
            keys[..3],
            ["scanned_collection", "connector_name", "total_rows_scanned"]
        );
        assert_eq!(keys.len(), 5);
        assert_eq!(
            n("STARTED", vec![]).to_java_string(),
            "{id='i', aggregateType='Initial Snapshot', type='STARTED', additionalData={connector_name=app}, timestamp=7}"
        );
    }
}
