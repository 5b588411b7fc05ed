//! `check`: can `run` work here with these settings, and if not, what fixes it.

use crate::config::{ClientRole, Settings};
use crate::source::preflight::{self, Concern, Finding};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use std::time::Duration;

/// Runs every check, prints them, returns whether `run` can work.
pub async fn check(settings: &Settings) -> bool {
    let mut findings = vec![Finding::holds("configuration is valid")];
    if let Some(debezium) = &settings.preset {
        findings.extend(
            debezium
                .notes
                .iter()
                .map(|n| Finding::holds(format!("Debezium configuration: {n}"))),
        );
        // Each option given, as the option catalog describes it (never its value).
        findings.extend(
            debezium
                .described
                .iter()
                .map(|d| Finding::holds(format!("option {d}"))),
        );
        if !debezium.unknown_options.is_empty() {
            println!(
                "warn unknown connector options, ignored: {}",
                debezium.unknown_options.join(", ")
            );
        }
    }
    findings.extend(preflight::postgres(settings).await);
    findings.extend(check_kafka(settings).await);
    let mut all_ok = true;
    for f in &findings {
        match f {
            Finding::Holds(what) => println!("ok   {what}"),
            Finding::Fails(_, problem) => {
                println!("FAIL {}", problem.what);
                for line in problem.fix.lines() {
                    println!("       fix: {line}");
                }
            }
        }
        all_ok &= f.is_ok();
    }
    println!(
        "{}",
        if all_ok {
            "outbox-relay run can start with these settings."
        } else {
            "outbox-relay run cannot work until the failures above are fixed."
        }
    );
    all_ok
}

async fn check_kafka(s: &Settings) -> Vec<Finding> {
    let config = s.kafka.client_config(ClientRole::Admin);
    let admin: AdminClient<DefaultClientContext> = match config.create() {
        Ok(a) => a,
        Err(e) => {
            return vec![Finding::fails(
                Concern::Kafka,
                format!(
                    "Kafka client settings rejected: {}",
                    crate::config::client_config_error(&e)
                ),
                "fix the --producer-property values",
            )]
        }
    };
    let bootstrap = s.kafka.bootstrap_servers.clone();
    let metadata = {
        let config = config.clone();
        tokio::task::spawn_blocking(move || {
            let consumer: rdkafka::consumer::BaseConsumer = config.create()?;
            use rdkafka::consumer::Consumer;
            consumer
                .fetch_metadata(None, Duration::from_secs(10))
                .map(|m| m.brokers().len())
        })
        .await
    };
    let mut out = Vec::new();
    match metadata {
        Ok(Ok(brokers)) => out.push(Finding::holds(format!(
            "Kafka at {bootstrap} answers ({brokers} broker(s))"
        ))),
        Ok(Err(e)) => {
            out.push(Finding::fails(
                Concern::Kafka,
                format!("Kafka at {bootstrap} does not answer: {e}"),
                "check --bootstrap-servers and the security.* / sasl.* / ssl.* producer properties",
            ));
            return out;
        }
        Err(e) => {
            out.push(Finding::fails(
                Concern::Kafka,
                format!("Kafka metadata request failed: {e}"),
                "retry",
            ));
            return out;
        }
    }
    // validate_only: the broker checks the request (authorisation, settings) without creating anything.
    let probe = NewTopic::new(
        "outbox-relay-check-probe",
        s.kafka.topic_partitions,
        TopicReplication::Fixed(s.kafka.topic_replication_factor),
    );
    let options = AdminOptions::new()
        .validate_only(true)
        .operation_timeout(Some(Duration::from_secs(10)));
    use rdkafka::types::RDKafkaErrorCode as Code;
    let (partitions, replication) = (s.kafka.topic_partitions, s.kafka.topic_replication_factor);
    out.push(match admin.create_topics(&[probe], &options).await {
        Ok(results) => match results.into_iter().next() {
            Some(Err((_, code @ (Code::TopicAuthorizationFailed | Code::ClusterAuthorizationFailed)))) => {
                Finding::fails(
                    Concern::Kafka,
                    format!("not allowed to create topics ({code})"),
                    "grant CREATE on the cluster, or create the <type>.events topics and the dead-letter topic beforehand",
                )
            }
            Some(Err((_, Code::TopicAlreadyExists))) => Finding::holds("topics can be created"),
            Some(Err((_, code))) => Finding::fails(
                Concern::Kafka,
                format!(
                    "a topic with {partitions} partition(s) and replication factor {replication} would be refused: {code}"
                ),
                "adjust --topic-partitions / --topic-replication-factor to what the cluster allows",
            ),
            _ => Finding::holds(format!(
                "topics can be created ({partitions} partition(s), replication factor {replication})"
            )),
        },
        Err(e) => Finding::fails(
            Concern::Kafka,
            format!("cannot ask Kafka to create topics: {e}"),
            "check the broker's version and permissions",
        ),
    });
    out
}
