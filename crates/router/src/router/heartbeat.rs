//! Debezium's heartbeat records (`heartbeat.interval.ms`): `HeartbeatImpl` writes one to
//! `__debezium-heartbeat.<topic.prefix>` every interval while the connector streams, key
//! `ServerNameKey{serverName}` and value `Heartbeat{ts_ms}` (`SchemaFactory`), Kafka
//! partition 0, no headers. The EventRouter passes them through unchanged (their value
//! schema is not an `.Envelope`).

use super::Router;
use crate::config::Output;
use crate::connect::{ConnectRecord, Data, Schema, SchemaType, Value};
use crate::kafka_record::RouteOutcome;

impl Router {
    /// Whether heartbeat records are written (`heartbeat.interval.ms` with Connect output).
    pub fn writes_heartbeats(&self) -> bool {
        matches!(&self.config.output, Output::Connect(f) if f.heartbeat_topic.is_some())
    }

    /// The heartbeat record at `ts_ms`, transformed and converted, or `None` when heartbeat
    /// records are not written.
    pub fn heartbeat(&mut self, ts_ms: i64) -> Option<RouteOutcome> {
        let outcome = self.heartbeat_unfinished(ts_ms)?;
        Some(self.finish(outcome))
    }

    fn heartbeat_unfinished(&self, ts_ms: i64) -> Option<RouteOutcome> {
        let Output::Connect(format) = &self.config.output else {
            return None;
        };
        let topic = format.heartbeat_topic.clone()?;
        let key_schema = Schema::new(
            SchemaType::Struct(vec![(
                "serverName".into(),
                Schema::new(SchemaType::String, false),
            )]),
            false,
        )
        .named("io.debezium.connector.common.ServerNameKey", Some(1));
        let value_schema = Schema::new(
            SchemaType::Struct(vec![(
                "ts_ms".into(),
                Schema::new(SchemaType::Int64, false),
            )]),
            false,
        )
        .named("io.debezium.connector.common.Heartbeat", Some(1));
        let record = ConnectRecord {
            topic,
            partition: Some(0),
            key: Data::new(
                key_schema,
                Value::Struct(vec![Value::text(&format.topic_prefix)]),
            ),
            value: Data::new(value_schema, Value::Struct(vec![Value::Int(ts_ms)])),
            headers: Vec::new(),
            timestamp_ms: None,
        };
        Some(self.connect_record(record, "heartbeat"))
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{ConnectFormat, Output, RouterConfig};
    use crate::connect::Converter;
    use crate::Router;

    fn router(converter: Converter, heartbeat_topic: Option<&str>) -> Router {
        Router::new(RouterConfig {
            output: Output::Connect(ConnectFormat {
                heartbeat_topic: heartbeat_topic.map(Into::into),
                ..ConnectFormat::new(converter.clone(), converter, "dbserver1")
            }),
            ..RouterConfig::default()
        })
    }

    /// `SchemaFactory.heartbeatKeySchema` / `heartbeatValueSchema` through JsonConverter.
    #[test]
    fn heartbeat_records_carry_debeziums_schemas() {
        let json = Converter::Json(crate::connect::JsonConverter {
            schemas_enable: true,
            replace_null_with_default: true,
        });
        let mut hb = router(json.clone(), Some("__debezium-heartbeat.dbserver1"));
        let r = crate::Router::converted(hb.heartbeat(1_700_000_000_000));
        assert_eq!(&*r.topic, "__debezium-heartbeat.dbserver1");
        assert_eq!(r.partition, Some(0));
        assert!(r.headers.is_empty());
        assert_eq!(
            std::str::from_utf8(r.key.as_deref().unwrap()).unwrap(),
            r#"{"schema":{"type":"struct","fields":[{"type":"string","optional":false,"field":"serverName"}],"optional":false,"name":"io.debezium.connector.common.ServerNameKey","version":1},"payload":{"serverName":"dbserver1"}}"#
        );
        assert_eq!(
            std::str::from_utf8(r.value.as_deref().unwrap()).unwrap(),
            r#"{"schema":{"type":"struct","fields":[{"type":"int64","optional":false,"field":"ts_ms"}],"optional":false,"name":"io.debezium.connector.common.Heartbeat","version":1},"payload":{"ts_ms":1700000000000}}"#
        );
        let mut hb = router(Converter::String, Some("hb"));
        let r = crate::Router::converted(hb.heartbeat(5));
        assert_eq!(r.key.as_deref(), Some(&b"Struct{serverName=dbserver1}"[..]));
        assert_eq!(r.value.as_deref(), Some(&b"Struct{ts_ms=5}"[..]));
        assert!(router(json, None).heartbeat(5).is_none());
        assert!(Router::new(RouterConfig::default()).heartbeat(5).is_none());
    }
}
