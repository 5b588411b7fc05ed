//! Kafka settings, and the one place that builds a librdkafka client configuration from
//! them: the producer, the admin client that creates topics, and `check` all use
//! [`KafkaSettings::client_config`].

use super::{defaults, invalid, ConfigError, Preset, RunOptions};
use rdkafka::ClientConfig;

#[derive(Debug, Clone)]
pub struct KafkaSettings {
    pub bootstrap_servers: String,
    /// librdkafka properties from the user (command line, file, Debezium's producer.*),
    /// applied after the relay's own.
    pub properties: Vec<(String, String)>,
    pub topic_partitions: i32,
    pub topic_replication_factor: i32,
    /// Events produced and not yet acknowledged before reading pauses.
    pub max_in_flight: usize,
    /// Bytes of records produced and not yet acknowledged (librdkafka's queue).
    pub max_in_flight_bytes: usize,
    /// A partition whose oldest record waits this long for Kafka is reported stuck.
    pub stuck_partition_after: std::time::Duration,
    pub dead_letter_topic: String,
    /// Topic configs for the topics the relay creates (Kafka Connect's `topic.creation.*`).
    pub topic_creation: TopicCreation,
}

/// Kafka Connect's `topic.creation.default.*` and `topic.creation.groups` (KIP-158): the
/// configs (`cleanup.policy`, `compression.type`, `retention.ms`, ...) of the topics the
/// relay creates for its records. Not applied to the dead-letter topic.
#[derive(Debug, Clone, Default)]
pub struct TopicCreation {
    /// The default group's topic configs.
    pub configs: Vec<(String, String)>,
    /// The groups in `topic.creation.groups` order; the first that includes a topic wins.
    pub groups: Vec<TopicGroup>,
}

#[derive(Debug, Clone)]
pub struct TopicGroup {
    pub name: String,
    /// Whole-name regular expressions (Java `matches()`).
    pub include: Vec<regex::Regex>,
    pub exclude: Vec<regex::Regex>,
    /// Unset: the default group's.
    pub partitions: Option<i32>,
    pub replication_factor: Option<i32>,
    pub configs: Vec<(String, String)>,
}

impl TopicCreation {
    /// Partitions, replication factor and configs for a new `topic`, given the default
    /// group's partitions and replication factor.
    pub fn for_topic(
        &self,
        topic: &str,
        partitions: i32,
        replication_factor: i32,
    ) -> (i32, i32, &[(String, String)]) {
        let matches = |list: &[regex::Regex]| list.iter().any(|r| r.is_match(topic));
        match self
            .groups
            .iter()
            .find(|g| matches(&g.include) && !matches(&g.exclude))
        {
            Some(g) => (
                g.partitions.unwrap_or(partitions),
                g.replication_factor.unwrap_or(replication_factor),
                &g.configs,
            ),
            None => (partitions, replication_factor, &self.configs),
        }
    }
}

/// Which client a configuration is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientRole {
    /// The relay's producer: idempotent, acks=all, murmur2 partitioning, every user property.
    Producer,
    /// Topic creation, metadata and `check`: how to reach and authenticate only.
    Admin,
}

impl KafkaSettings {
    /// The producer's `request.timeout.ms` (librdkafka's default 30 s unless set): how long
    /// a produce request already sent may still be answered.
    pub fn request_timeout(&self) -> std::time::Duration {
        let ms = self
            .property(&["request.timeout.ms"])
            .and_then(|v| v.parse().ok())
            .unwrap_or(30_000);
        std::time::Duration::from_millis(ms)
    }

    /// Whether the clients authenticate with GSSAPI (Kerberos): SASL (`security.protocol`
    /// SASL_PLAINTEXT or SASL_SSL) with `sasl.mechanism`/`sasl.mechanisms` GSSAPI, which is
    /// also librdkafka's default mechanism. The one mechanism librdkafka takes from Cyrus SASL
    /// (PLAIN, SCRAM and OAUTHBEARER are its own).
    pub fn uses_gssapi(&self) -> bool {
        let sasl = self
            .property(&["security.protocol"])
            .is_some_and(|p| p.trim().to_ascii_lowercase().starts_with("sasl_"));
        sasl && self
            .property(&["sasl.mechanism", "sasl.mechanisms"])
            .is_none_or(|m| m.trim().eq_ignore_ascii_case("GSSAPI"))
    }

    /// The user's value of a property named by any of `keys` (aliases): the last one set wins,
    /// as when librdkafka applies them in order.
    pub(crate) fn property(&self, keys: &[&str]) -> Option<&str> {
        self.properties
            .iter()
            .rev()
            .find(|(k, _)| keys.contains(&k.as_str()))
            .map(|(_, v)| v.as_str())
    }

    /// librdkafka's `queue.buffering.max.kbytes`: the in-flight bytes, and at least one
    /// record of `message.max.bytes` (and 1 MiB) more.
    fn queue_kbytes(&self) -> usize {
        let message_max = self
            .property(&["message.max.bytes"])
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(1_000_000);
        (self.max_in_flight_bytes.max(message_max + (1 << 20)) / 1024).max(1)
    }

    pub fn client_config(&self, role: ClientRole) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.bootstrap_servers);
        match role {
            ClientRole::Producer => {
                config
                    .set("client.id", "outbox-relay")
                    // Idempotence implies acks=all, in-order retries and no duplicates from retries.
                    .set("enable.idempotence", "true")
                    .set("acks", "all")
                    // Same partitions as Java clients (Kafka Connect / Debezium) for the same key.
                    .set("partitioner", "murmur2_random")
                    // The relay creates topics itself, with the configured partitions.
                    .set("allow.auto.create.topics", "false")
                    // Against the latency target (benches/README.md): what a live event waits
                    // for others to share its produce request. Late events are grouped by the
                    // delivery stage (deliver/linger.rs), so catch-up does not pay for a short
                    // linger in requests; librdkafka's 5 ms doubled the commit → consumer tail.
                    .set("linger.ms", "1")
                    // TCP_NODELAY, as Java clients always set it: with Nagle's algorithm a
                    // small produce request behind an unacknowledged one waits for the
                    // broker's delayed ACK (40 ms on Linux), which was the 1,000 events/s
                    // p99.9 (benches/README.md).
                    .set("socket.nagle.disable", "true")
                    .set(
                        "queue.buffering.max.messages",
                        self.max_in_flight.clamp(1, 10_000_000).to_string(),
                    )
                    // Memory bounded in bytes as well as records; always room for one
                    // record as large as the producer takes.
                    .set(
                        "queue.buffering.max.kbytes",
                        self.queue_kbytes().to_string(),
                    )
                    // A record never times out: one that did could let a later record of
                    // the same key be sent before it. While the broker is away, records
                    // wait (bounded by the in-flight limit) and nothing is confirmed.
                    .set("message.timeout.ms", "0");
                for (k, v) in &self.properties {
                    config.set(k, v);
                }
                // rdkafka sets the client's level after creating it (from the `log` crate's,
                // which the relay does not use), over the `log_level` property: warnings, and
                // librdkafka's debug lines when `debug` asks for them (see ReportContext).
                config.set_log_level(if self.property(&["debug"]).is_some() {
                    rdkafka::config::RDKafkaLogLevel::Debug
                } else {
                    rdkafka::config::RDKafkaLogLevel::Warning
                });
            }
            ClientRole::Admin => {
                config.set("log_level", "0");
                for (k, v) in self.security_properties() {
                    config.set(k, v);
                }
            }
        }
        config
    }

    /// The properties that say how to reach and authenticate to the cluster (security.*,
    /// sasl.*, ssl.*): what every client of the relay needs, not only the producer.
    fn security_properties(&self) -> impl Iterator<Item = (&str, &str)> {
        self.properties
            .iter()
            .filter(|(k, _)| {
                k.starts_with("security.") || k.starts_with("sasl.") || k.starts_with("ssl.")
            })
            .map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

/// `KEY=VALUE`, refusing values that would break the relay's guarantees.
/// The properties of one `--producer-property` value (or `OUTBOX_RELAY_PRODUCER_PROPERTIES`):
/// a comma-separated list. A comma is part of the value before it when what follows is not
/// `KEY=…` with a KEY librdkafka knows (`debug=msg,topic`, `ssl.cipher.suites=A,B`, a password
/// with `,x=y` in it), and always when written `\,` (`\\` is a backslash).
pub fn split_property_list(list: &str) -> Vec<String> {
    // The pieces between unescaped commas, escapes resolved.
    let mut pieces: Vec<String> = vec![String::new()];
    let mut chars = list.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(next @ (',' | '\\')) => pieces.last_mut().expect("one piece").push(next),
                Some(next) => {
                    let piece = pieces.last_mut().expect("one piece");
                    piece.push('\\');
                    piece.push(next);
                }
                None => pieces.last_mut().expect("one piece").push('\\'),
            },
            ',' => pieces.push(String::new()),
            c => pieces.last_mut().expect("one piece").push(c),
        }
    }
    let mut properties: Vec<String> = Vec::new();
    // An empty piece (a trailing or doubled comma) is nothing.
    for piece in pieces.into_iter().filter(|p| !p.trim().is_empty()) {
        let starts_a_property = piece
            .split_once('=')
            .is_some_and(|(key, _)| librdkafka_knows(key.trim()));
        match properties.last_mut() {
            Some(previous) if !starts_a_property => {
                previous.push(',');
                previous.push_str(&piece);
            }
            _ if piece.trim().is_empty() => {}
            _ => properties.push(piece),
        }
    }
    properties
}

/// Whether `key` is one of librdkafka's configuration properties.
fn librdkafka_knows(key: &str) -> bool {
    !matches!(
        rdkafka::ClientConfig::new()
            .set(key, "")
            .create_native_config(),
        Err(rdkafka::error::KafkaError::ClientConfig(
            rdkafka::types::RDKafkaConfRes::RD_KAFKA_CONF_UNKNOWN,
            ..
        ))
    )
}

/// librdkafka takes `key=value`, or the error names the key and why, and shows the value only
/// where it is no secret.
pub fn librdkafka_accepts(key: &str, value: &str) -> Result<(), ConfigError> {
    match rdkafka::ClientConfig::new()
        .set(key, value)
        .create_native_config()
    {
        Ok(_) => Ok(()),
        Err(e) => Err(super::invalid("producer-property", client_config_error(&e))),
    }
}

/// What librdkafka said of a configuration it refused, without the value of a secret property
/// (rdkafka's own text quotes every value).
pub fn client_config_error(e: &rdkafka::error::KafkaError) -> String {
    match e {
        rdkafka::error::KafkaError::ClientConfig(code, description, key, value) => {
            // An unknown key may be a misspelt secret one: its value is not shown either.
            if *code == rdkafka::types::RDKafkaConfRes::RD_KAFKA_CONF_UNKNOWN {
                format!("librdkafka has no property {key:?} (the value is not shown)")
            } else if crate::secret::is_secret_key(key) {
                format!("librdkafka refuses the value of {key} (not shown)")
            } else {
                format!("librdkafka refuses {key}={value}: {description}")
            }
        }
        other => other.to_string(),
    }
}

pub fn parse_producer_property(text: &str) -> Result<(String, String), ConfigError> {
    let (key, value) = text
        .split_once('=')
        .ok_or_else(|| super::invalid("producer-property", format!("{text:?} is not KEY=VALUE")))?;
    let (key, value) = (key.trim().to_owned(), value.trim().to_owned());
    let breaks_guarantee = match key.as_str() {
        "enable.idempotence" => value != "true",
        "acks" | "request.required.acks" => value != "all" && value != "-1",
        "message.timeout.ms" | "delivery.timeout.ms" => value != "0",
        _ => false,
    };
    if key == "partitioner" && value != "murmur2_random" {
        return Err(super::invalid(
            "producer-property",
            format!(
                "partitioner={value}: outbox-relay names each record's partition itself (Kafka's murmur2 of the key, \
                 the partition a Java producer chooses; librdkafka's murmur2_random)"
            ),
        ));
    }
    if breaks_guarantee {
        return Err(super::invalid(
            "producer-property",
            format!(
                "{key}={value} would allow lost or reordered events (a record that times out lets a later one of its key \
                 be sent first); outbox-relay always uses enable.idempotence=true, acks=all and message.timeout.ms=0"
            ),
        ));
    }
    Ok((key, value))
}

pub(super) fn resolve_kafka(
    o: &RunOptions,
    preset: Option<&Preset>,
) -> Result<KafkaSettings, ConfigError> {
    let bootstrap_servers = o.bootstrap_servers.clone().ok_or(ConfigError::Missing {
        key: "bootstrap-servers",
        flag: "--bootstrap-servers",
        env: "OUTBOX_RELAY_BOOTSTRAP_SERVERS",
    })?;
    if bootstrap_servers.trim().is_empty() {
        return Err(invalid(
            "bootstrap-servers",
            "is empty; expected HOST:PORT[,HOST:PORT...]",
        ));
    }
    let dead_letter_topic = o
        .dead_letter_topic
        .clone()
        .unwrap_or_else(|| defaults::DEAD_LETTER_TOPIC.into());
    outbox_router::validate_topic_name(&dead_letter_topic)
        .map_err(|m| invalid("dead-letter-topic", m))?;
    let topic_partitions = o.topic_partitions.unwrap_or(defaults::TOPIC_PARTITIONS);
    if topic_partitions < 1 {
        return Err(invalid(
            "topic-partitions",
            format!("{topic_partitions} is not a partition count; expected 1 or more"),
        ));
    }
    let topic_replication_factor = o
        .topic_replication_factor
        .unwrap_or(defaults::TOPIC_REPLICATION_FACTOR);
    if topic_replication_factor == 0 || topic_replication_factor < -1 {
        return Err(invalid(
            "topic-replication-factor",
            format!("{topic_replication_factor}; expected -1 (broker default) or 1 or more"),
        ));
    }
    let max_in_flight = o.max_in_flight.unwrap_or(defaults::MAX_IN_FLIGHT);
    if max_in_flight == 0 {
        return Err(invalid("max-in-flight", "must be at least 1"));
    }
    let stuck_partition_after = o
        .stuck_partition_after
        .unwrap_or(defaults::STUCK_PARTITION_AFTER_S);
    if stuck_partition_after == 0 {
        return Err(invalid(
            "stuck-partition-after",
            "must be at least 1 second",
        ));
    }
    let max_in_flight_bytes = o
        .max_in_flight_bytes
        .unwrap_or(defaults::MAX_IN_FLIGHT_BYTES);
    if max_in_flight_bytes < 1024 {
        return Err(invalid(
            "max-in-flight-bytes",
            format!("{max_in_flight_bytes}: must be at least 1024"),
        ));
    }
    // Lowest precedence first: the preset's producer.*, the properties file, the options.
    let mut lines: Vec<String> = preset
        .iter()
        .flat_map(|p| {
            p.producer_properties
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
        })
        .collect();
    if let Some(path) = &o.producer_properties_file {
        let text = std::fs::read_to_string(path).map_err(|e| {
            invalid(
                "producer-properties-file",
                format!("{}: {e}", path.display()),
            )
        })?;
        lines.extend(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(str::to_owned),
        );
    }
    let given: Vec<String> = if o.producer_property_from_file {
        o.producer_property.clone()
    } else {
        o.producer_property
            .iter()
            .flat_map(|list| split_property_list(list))
            .collect()
    };
    lines.extend(given);
    let properties = lines
        .iter()
        .map(|p| parse_producer_property(p))
        .collect::<Result<Vec<_>, _>>()?;
    for (key, value) in &properties {
        librdkafka_accepts(key, value)?;
    }
    Ok(KafkaSettings {
        bootstrap_servers,
        properties,
        topic_partitions,
        topic_replication_factor,
        max_in_flight,
        max_in_flight_bytes,
        stuck_partition_after: std::time::Duration::from_secs(stuck_partition_after),
        dead_letter_topic,
        topic_creation: preset.map(|p| p.topic_creation.clone()).unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(properties: &[(&str, &str)]) -> KafkaSettings {
        KafkaSettings {
            bootstrap_servers: "k:9092".into(),
            properties: properties
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            topic_partitions: 1,
            topic_replication_factor: -1,
            max_in_flight: 10,
            max_in_flight_bytes: 64 << 20,
            stuck_partition_after: std::time::Duration::from_secs(180),
            dead_letter_topic: "dlq".into(),
            topic_creation: TopicCreation::default(),
        }
    }

    /// librdkafka's queue is bounded by the in-flight bytes, with room for one record as
    /// large as the producer takes; the user's own value wins.
    #[test]
    fn the_producer_queue_is_bounded_in_bytes() {
        let kbytes = |s: &KafkaSettings| {
            s.client_config(ClientRole::Producer)
                .get("queue.buffering.max.kbytes")
                .map(str::to_owned)
        };
        assert_eq!(kbytes(&settings(&[])).as_deref(), Some("65536"));
        let big = settings(&[("message.max.bytes", "200000000")]);
        assert_eq!(kbytes(&big).as_deref(), Some("196336"));
        let own = settings(&[("queue.buffering.max.kbytes", "1024")]);
        assert_eq!(kbytes(&own).as_deref(), Some("1024"));
    }

    #[test]
    fn every_client_gets_the_security_settings_and_only_the_producer_the_rest() {
        let s = settings(&[("sasl.username", "u"), ("compression.codec", "lz4")]);
        let producer = s.client_config(ClientRole::Producer);
        let admin = s.client_config(ClientRole::Admin);
        assert_eq!(producer.get("sasl.username"), Some("u"));
        assert_eq!(admin.get("sasl.username"), Some("u"));
        assert_eq!(producer.get("compression.codec"), Some("lz4"));
        assert_eq!(admin.get("compression.codec"), None);
        assert_eq!(producer.get("enable.idempotence"), Some("true"));
        assert_eq!(producer.get("acks"), Some("all"));
        assert_eq!(
            producer.get("message.timeout.ms"),
            Some("0"),
            "records never time out"
        );
        assert!(parse_producer_property("delivery.timeout.ms=120000").is_err());
        assert!(parse_producer_property("message.timeout.ms=0").is_ok());
        assert_eq!(admin.get("bootstrap.servers"), Some("k:9092"));
    }

    /// The relay names every record's partition (first_writes.rs needs it): another
    /// partitioner would have no effect, so it is refused by name.
    #[test]
    fn a_partitioner_other_than_murmur2_random_is_refused_by_name() {
        assert!(parse_producer_property("partitioner=murmur2_random").is_ok());
        let error = parse_producer_property("partitioner=consistent_random")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("producer-property") && error.contains("partitioner=consistent_random"),
            "{error}"
        );
    }
}
