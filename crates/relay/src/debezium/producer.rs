//! Kafka Connect's `producer.*` / `producer.override.*`, and the worker's own client settings
//! (Java client names) as librdkafka properties. Most names are shared; Java-only ones (key
//! and trust stores, JAAS) are translated when they can be (stores become inline PEM) and
//! refused with the librdkafka equivalent otherwise.

use std::collections::BTreeMap;

/// Java producer properties librdkafka understands under the same name.
const SAME_NAME: &[&str] = &[
    "bootstrap.servers",
    "client.id",
    "compression.type",
    "linger.ms",
    "batch.size",
    "batch.num.messages",
    "request.timeout.ms",
    "retry.backoff.ms",
    "reconnect.backoff.ms",
    "reconnect.backoff.max.ms",
    "max.in.flight.requests.per.connection",
    "message.max.bytes",
    "metadata.max.age.ms",
    "connections.max.idle.ms",
    "socket.connection.setup.timeout.ms",
    "security.protocol",
    "sasl.mechanism",
    "sasl.kerberos.service.name",
    "sasl.oauthbearer.token.endpoint.url",
    "client.dns.lookup",
    "acks",
    "enable.idempotence",
];

/// Java-only settings with no effect on what is written (serialisers are the converters'
/// job, socket buffer sizes are librdkafka's own).
///
/// `delivery.timeout.ms` is ignored too: outbox-relay never lets a record time out (one that
/// did could be overtaken by a later record of its key); Kafka Connect's own default is
/// effectively infinite as well.
const IGNORED: &[&str] = &[
    "delivery.timeout.ms",
    "key.serializer",
    "value.serializer",
    "max.block.ms",
    "max.request.size",
    "send.buffer.bytes",
    "receive.buffer.bytes",
    "interceptor.classes",
    "metric.reporters",
    "partitioner.class",
];

pub fn translate(
    key: &str,
    value: &str,
    out: &mut Vec<(String, String)>,
    unknown: &mut Vec<String>,
) -> Result<(), String> {
    match key {
        k if SAME_NAME.contains(&k) => out.push((k.to_owned(), value.to_owned())),
        k if IGNORED.contains(&k) => {}
        "retries" => out.push(("message.send.max.retries".into(), value.to_owned())),
        // The Java producer's bound on the bytes it buffers: librdkafka's queue.
        "buffer.memory" => {
            let bytes: u64 = value
                .trim()
                .parse()
                .map_err(|_| format!("buffer.memory: {value:?} is not a number of bytes"))?;
            out.push((
                "queue.buffering.max.kbytes".into(),
                bytes.div_ceil(1024).max(1).to_string(),
            ));
        }
        "sasl.jaas.config" => {
            let (user, password) = jaas_credentials(value).ok_or_else(|| {
                "sasl.jaas.config: only PlainLoginModule / ScramLoginModule with username and password \
                 can be translated; pass sasl.username / sasl.password with --producer-property"
                    .to_owned()
            })?;
            out.push(("sasl.username".into(), user));
            out.push(("sasl.password".into(), password));
        }
        k => unknown.push(format!("producer.{k}")),
    }
    Ok(())
}

/// Settings in Java client names, in the order given (the last one of a name wins), as
/// librdkafka properties: `ssl.*` together (stores become inline PEM) when
/// `security.protocol` is SSL or SASL_SSL, the rest one by one.
/// Errors start with the setting's name.
pub fn translate_all<'a>(
    settings: impl IntoIterator<Item = (String, &'a str)>,
    out: &mut Vec<(String, String)>,
    unknown: &mut Vec<String>,
) -> Result<(), String> {
    let mut ssl = BTreeMap::new();
    let mut tls = false;
    for (key, value) in settings {
        if key == "security.protocol" {
            tls = matches!(
                value.trim().to_ascii_uppercase().as_str(),
                "SSL" | "SASL_SSL"
            );
        }
        if key.starts_with("ssl.") {
            ssl.insert(key, value.to_owned());
        } else {
            translate(&key, value, out, unknown)?;
        }
    }
    // As Java clients: ssl.* mean nothing without SSL in security.protocol (a worker's
    // ssl.* may be there for its https listener alone).
    if tls {
        out.extend(crate::keystore::SslSettings::plain(&ssl).librdkafka()?);
    }
    Ok(())
}

/// The client Kafka Connect's worker itself uses (its config topic, the cluster id):
/// `bootstrap.servers` and the worker's `security.protocol`, `sasl.*` and `ssl.*`, as
/// Connect's internal clients take them. `None` without `bootstrap.servers`.
pub fn worker_client(
    worker: &BTreeMap<String, String>,
) -> Result<Option<rdkafka::ClientConfig>, String> {
    let Some(servers) = worker.get("bootstrap.servers") else {
        return Ok(None);
    };
    let mut client = rdkafka::ClientConfig::new();
    client.set("bootstrap.servers", servers.trim());
    let mut properties = Vec::new();
    let mut unknown = Vec::new();
    translate_all(
        worker
            .iter()
            .filter(|(k, _)| {
                k.starts_with("security.") || k.starts_with("sasl.") || k.starts_with("ssl.")
            })
            .map(|(k, v)| (k.clone(), v.trim())),
        &mut properties,
        &mut unknown,
    )?;
    if !unknown.is_empty() {
        tracing::warn!(
            "worker config: {} have no librdkafka equivalent and do not apply to the worker's own clients",
            unknown.iter().map(|u| u.trim_start_matches("producer.")).collect::<Vec<_>>().join(", ")
        );
    }
    for (key, value) in properties {
        client.set(key, value);
    }
    Ok(Some(client))
}

/// `username="u" password="p"` from a JAAS line.
fn jaas_credentials(jaas: &str) -> Option<(String, String)> {
    if !(jaas.contains("PlainLoginModule") || jaas.contains("ScramLoginModule")) {
        return None;
    }
    let field = |name: &str| -> Option<String> {
        let start = jaas.find(&format!("{name}="))? + name.len() + 1;
        let rest = &jaas[start..];
        let rest = rest.strip_prefix('"')?;
        Some(rest[..rest.find('"')?].to_owned())
    };
    Some((field("username")?, field("password")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_producer_settings_become_librdkafka_ones() {
        let mut out = Vec::new();
        let mut unknown = Vec::new();
        translate("compression.type", "lz4", &mut out, &mut unknown).unwrap();
        translate(
            "sasl.jaas.config",
            r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="relay" password="s3cret";"#,
            &mut out,
            &mut unknown,
        )
        .unwrap();
        translate("buffer.memory", "33554432", &mut out, &mut unknown).unwrap();
        translate("frobnicate", "1", &mut out, &mut unknown).unwrap();
        assert_eq!(
            out,
            [
                ("compression.type".into(), "lz4".into()),
                ("sasl.username".into(), "relay".into()),
                ("sasl.password".into(), "s3cret".into()),
                ("queue.buffering.max.kbytes".into(), "32768".into())
            ]
        );
        assert_eq!(unknown, ["producer.frobnicate"]);
    }

    #[test]
    fn the_workers_own_clients_take_its_security_settings() {
        let worker: BTreeMap<String, String> = [
            ("bootstrap.servers", "kafka:9093"),
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            (
                "sasl.jaas.config",
                r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="connect" password="pw";"#,
            ),
            ("ssl.truststore.type", "PEM"),
            ("ssl.truststore.certificates", "not a certificate"),
            ("producer.security.protocol", "PLAINTEXT"),
            ("group.id", "connect-cluster"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let err = worker_client(&worker).err().unwrap();
        assert!(err.starts_with("ssl.truststore.certificates: "), "{err}");
        let mut worker = worker;
        worker.remove("ssl.truststore.type");
        worker.remove("ssl.truststore.certificates");
        worker.insert("ssl.endpoint.identification.algorithm".into(), "".into());
        let client = worker_client(&worker).unwrap().unwrap();
        assert_eq!(client.get("bootstrap.servers"), Some("kafka:9093"));
        assert_eq!(client.get("security.protocol"), Some("SASL_SSL"));
        assert_eq!(client.get("sasl.mechanism"), Some("SCRAM-SHA-512"));
        assert_eq!(client.get("sasl.username"), Some("connect"));
        assert_eq!(client.get("sasl.password"), Some("pw"));
        assert_eq!(
            client.get("ssl.endpoint.identification.algorithm"),
            Some("none")
        );
        assert_eq!(client.get("group.id"), None);
        assert!(worker_client(&BTreeMap::new()).unwrap().is_none());
        // Without SSL in security.protocol, ssl.* are the https listener's, not the clients'.
        worker.insert("security.protocol".into(), "SASL_PLAINTEXT".into());
        worker.insert(
            "ssl.keystore.location".into(),
            "/only/for/the/listener.p12".into(),
        );
        let client = worker_client(&worker).unwrap().unwrap();
        assert_eq!(client.get("ssl.endpoint.identification.algorithm"), None);
    }
}
