//! Kafka Connect's `producer.*` / `producer.override.*` (Java client names) as librdkafka
//! properties. Most names are shared; Java-only ones (JKS stores, JAAS) are translated
//! when they can be and refused with the librdkafka equivalent otherwise.

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
    "ssl.endpoint.identification.algorithm",
    "ssl.key.password",
    "client.dns.lookup",
    "acks",
    "enable.idempotence",
];

/// Java-only settings with no effect on what is written (serialisers are the converters'
/// job, buffer sizes are librdkafka's own).
///
/// `delivery.timeout.ms` is ignored too: outbox-relay never lets a record time out (one that
/// did could be overtaken by a later record of its key); Kafka Connect's own default is
/// effectively infinite as well.
const IGNORED: &[&str] = &[
    "delivery.timeout.ms",
    "key.serializer",
    "value.serializer",
    "buffer.memory",
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
        "sasl.jaas.config" => {
            let (user, password) = jaas_credentials(value).ok_or_else(|| {
                "producer sasl.jaas.config: only PlainLoginModule / ScramLoginModule with username and password \
                 can be translated; pass sasl.username / sasl.password with --producer-property"
                    .to_owned()
            })?;
            out.push(("sasl.username".into(), user));
            out.push(("sasl.password".into(), password));
        }
        k if k.starts_with("ssl.truststore.") || k.starts_with("ssl.keystore.") => {
            return Err(format!(
                "producer {k}: Java key stores cannot be read by librdkafka; convert them to PEM and pass \
                 ssl.ca.location / ssl.certificate.location / ssl.key.location with --producer-property"
            ))
        }
        k => unknown.push(format!("producer.{k}")),
    }
    Ok(())
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
        translate("buffer.memory", "1000", &mut out, &mut unknown).unwrap();
        translate("frobnicate", "1", &mut out, &mut unknown).unwrap();
        assert_eq!(
            out,
            [
                ("compression.type".into(), "lz4".into()),
                ("sasl.username".into(), "relay".into()),
                ("sasl.password".into(), "s3cret".into())
            ]
        );
        assert_eq!(unknown, ["producer.frobnicate"]);
        assert!(
            translate("ssl.truststore.location", "/x.jks", &mut out, &mut unknown)
                .unwrap_err()
                .contains("PEM")
        );
    }
}
