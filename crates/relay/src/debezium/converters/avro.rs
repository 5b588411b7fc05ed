//! The schema-registry Avro converters of a Debezium configuration: Confluent's
//! `io.confluent.connect.avro.AvroConverter` and Apicurio 2.x's
//! `io.apicurio.registry.utils.converter.AvroConverter`, with their options as Kafka Connect
//! hands them over (`value.converter.schema.registry.url`, ...).

use super::super::options::{flag, Options};
use crate::registry_client::{Api, Credentials, RegistryClient};
use crate::secret::Secret;
use outbox_router::connect::{
    AvroClass, AvroConverter, Framing, Lookup, RegistrySerde, SubjectNameStrategy,
};
use std::sync::Arc;
use std::time::Duration;

/// The registry options Confluent's schema-registry converters (Avro, JSON Schema,
/// Protobuf) read alike, those of `class` under `key` (`value.converter`, `key.converter`):
/// the registry's URL and credentials, how ids are looked up, the subject name strategy.
pub(in crate::debezium) fn confluent_registry(
    key: &str,
    o: &Options,
    class: &str,
) -> Result<RegistrySerde, String> {
    let is_key = key.starts_with("key.");
    let url_key = format!("{key}.schema.registry.url");
    let url = o
        .get(&url_key)
        .filter(|u| !u.is_empty())
        .ok_or_else(|| format!("{url_key} is required by {class}"))?;
    let credentials = match o
        .get(&format!("{key}.basic.auth.credentials.source"))
        .map(str::to_ascii_uppercase)
        .as_deref()
    {
        None | Some("USER_INFO") if o.get(&format!("{key}.basic.auth.user.info")).is_some() => {
            let option = format!("{key}.basic.auth.user.info");
            Credentials::Basic {
                user_info: Secret::new(o.get(&option).unwrap_or_default()),
                option,
            }
        }
        None | Some("USER_INFO") => Credentials::None,
        Some("URL") => Credentials::Url {
            option: url_key.clone(),
        },
        Some(other) => {
            return Err(format!(
                "{key}.basic.auth.credentials.source={other} is not supported; use USER_INFO with {key}.basic.auth.user.info, or URL"
            ))
        }
    };
    let credentials = match o
        .get(&format!("{key}.bearer.auth.credentials.source"))
        .map(str::to_ascii_uppercase)
        .as_deref()
    {
        None => credentials,
        Some("STATIC_TOKEN") => {
            let option = format!("{key}.bearer.auth.token");
            let token = o
                .get(&option)
                .ok_or_else(|| format!("{option} is required with bearer.auth.credentials.source=STATIC_TOKEN"))?;
            Credentials::Bearer {
                token: Secret::new(token),
                option,
            }
        }
        Some(other) => {
            return Err(format!(
                "{key}.bearer.auth.credentials.source={other} is not supported; use STATIC_TOKEN with {key}.bearer.auth.token"
            ))
        }
    };
    let auto_register = flag(o, &format!("{key}.auto.register.schemas"), true)?;
    let use_latest = flag(o, &format!("{key}.use.latest.version"), false)?;
    // The serializers (7.0.x) register when auto.register.schemas is true, whatever
    // use.latest.version says; the latest version only without it.
    let lookup = match (auto_register, use_latest) {
        (true, _) => Lookup::Register,
        (false, true) => Lookup::Latest,
        (false, false) => Lookup::Find,
    };
    let part = if is_key { "key" } else { "value" };
    let strategy_key = format!("{key}.{part}.subject.name.strategy");
    let strategy = match o.get(&strategy_key) {
        None => SubjectNameStrategy::Topic,
        Some(class) => match class.rsplit('.').next().unwrap_or(class) {
            "TopicNameStrategy" => SubjectNameStrategy::Topic,
            "RecordNameStrategy" => SubjectNameStrategy::Record,
            "TopicRecordNameStrategy" => SubjectNameStrategy::TopicRecord,
            _ => {
                return Err(format!(
                    "{strategy_key}: {class} is not supported; use TopicNameStrategy, RecordNameStrategy or TopicRecordNameStrategy (io.confluent.kafka.serializers.subject)"
                ))
            }
        },
    };
    // The other part's strategy is read (and ignored) as Confluent's converters do.
    o.get(&format!(
        "{key}.{}.subject.name.strategy",
        if is_key { "value" } else { "key" }
    ));
    let registry = RegistryClient::new(Api::Confluent, url, credentials)
        .map_err(|e| format!("{url_key}: {e}"))?;
    Ok(RegistrySerde::new(
        is_key,
        strategy,
        lookup,
        Arc::new(registry),
    ))
}

/// Confluent's AvroConverter under `key` (`value.converter`, `key.converter`).
pub(in crate::debezium) fn confluent(key: &str, o: &Options) -> Result<AvroConverter, String> {
    let serde = confluent_registry(key, o, AvroClass::Confluent.name())?;
    // Debezium's schemas carry no Avro enums or unions: nothing for it to change.
    flag(o, &format!("{key}.enhanced.avro.schema.support"), false)?;
    let meta = flag(o, &format!("{key}.connect.meta.data"), true)?;
    let mut c = AvroConverter::new(AvroClass::Confluent, serde, Framing::Confluent);
    c.connect_meta_data = meta;
    Ok(c)
}

/// Apicurio Registry 2.x's AvroConverter under `key`.
pub(in crate::debezium) fn apicurio(key: &str, o: &Options) -> Result<AvroConverter, String> {
    let is_key = key.starts_with("key.");
    let url_key = format!("{key}.apicurio.registry.url");
    let url = o
        .get(&url_key)
        .filter(|u| !u.is_empty())
        .ok_or_else(|| format!("{url_key} is required by {}", AvroClass::Apicurio.name()))?;
    let credentials = match o.get(&format!("{key}.apicurio.auth.username")) {
        None => Credentials::None,
        Some(user) => {
            let option = format!("{key}.apicurio.auth.password");
            let password = o.get(&option).unwrap_or_default();
            Credentials::Basic {
                user_info: Secret::new(format!("{user}:{password}")),
                option,
            }
        }
    };
    let auto_register = flag(o, &format!("{key}.apicurio.registry.auto-register"), false)?;
    let find_latest = flag(o, &format!("{key}.apicurio.registry.find-latest"), false)?;
    let lookup = match (auto_register, find_latest) {
        (true, _) => Lookup::Register,
        (false, true) => Lookup::Latest,
        (false, false) => Lookup::Find,
    };
    let use_id_key = format!("{key}.apicurio.registry.use-id");
    let content_id = match o.get(&use_id_key) {
        None | Some("globalId") => false,
        Some("contentId") => true,
        Some(other) => {
            return Err(format!(
                "{use_id_key}: {other:?} is not globalId or contentId"
            ))
        }
    };
    let as_confluent = flag(o, &format!("{key}.apicurio.registry.as-confluent"), false)?;
    // Debezium's BinaryDataConverter calls its delegate's fromConnectData(topic, schema,
    // value), without the record's headers: Apicurio's serializer then frames the id in the
    // value (magic byte, id), whatever `headers.enabled` says.
    let delegate = key.ends_with(".delegate.converter.type");
    let headers = flag(o, &format!("{key}.apicurio.registry.headers.enabled"), true)? && !delegate;
    let framing = match (headers, as_confluent) {
        (true, _) => Framing::Headers { content_id },
        (false, true) => Framing::Confluent,
        (false, false) => Framing::Long,
    };
    let strategy_key = format!("{key}.apicurio.registry.artifact-resolver-strategy");
    if let Some(class) = o.get(&strategy_key) {
        if !class.ends_with(".TopicIdStrategy") {
            return Err(format!(
                "{strategy_key}: {class} is not supported; outbox-relay names artifacts <topic>-key / <topic>-value (TopicIdStrategy)"
            ));
        }
    }
    // SerdeConfig.CHECK_PERIOD_MS: how long its cache keeps an id (30 s by default).
    let period_key = format!("{key}.apicurio.registry.check-period-ms");
    let check_period = match o.get(&period_key) {
        None => Duration::from_secs(30),
        Some(ms) => ms
            .trim()
            .parse::<u64>()
            .map(Duration::from_millis)
            .map_err(|_| format!("{period_key}: {ms:?} is not a number of milliseconds"))?,
    };
    let meta = flag(o, &format!("{key}.connect.meta.data"), true)?;
    let api = Api::Apicurio {
        content_id,
        check_period,
    };
    // SerdeConfig.EXPLICIT_ARTIFACT_GROUP_ID: the group artifacts are registered and looked
    // up in. An explicit artifact id or version would name one artifact for every topic.
    for option in ["artifact.artifact-id", "artifact.version"] {
        let option = format!("{key}.apicurio.registry.{option}");
        if let Some(value) = o.get(&option) {
            return Err(format!(
                "{option}={value} is not supported by outbox-relay: artifacts are named <topic>-key / <topic>-value \
                 (TopicIdStrategy), each at its latest version"
            ));
        }
    }
    let mut registry =
        RegistryClient::new(api, url, credentials).map_err(|e| format!("{url_key}: {e}"))?;
    if let Some(group) = o
        .get(&format!("{key}.apicurio.registry.artifact.group-id"))
        .filter(|g| !g.is_empty())
    {
        registry = registry.in_group(group);
    }
    let serde = RegistrySerde::new(
        is_key,
        SubjectNameStrategy::Topic,
        lookup,
        Arc::new(registry),
    );
    let mut c = AvroConverter::new(AvroClass::Apicurio, serde, framing);
    c.connect_meta_data = meta;
    Ok(c)
}

/// What the relay's notes say about the converter (never its credentials).
pub(in crate::debezium) fn describe(c: &AvroConverter) -> String {
    format!(", {:?} ids{}", c.framing, describe_lookup(&c.serde))
}

/// The subjects and how ids are asked for, for the relay's notes.
pub(in crate::debezium) fn describe_lookup(serde: &RegistrySerde) -> String {
    format!(
        ", {:?} subjects, {}",
        serde.strategy,
        match serde.lookup {
            Lookup::Register => "schemas registered automatically",
            Lookup::Find => "schemas looked up",
            Lookup::Latest => "the subject's latest version",
        }
    )
}
