//! Docker cannot run here, so the compose stack is checked against the relay itself: every
//! OUTBOX_RELAY_* variable is a real option, ports and service names line up, the files it
//! mounts exist, and the dashboard queries metrics the relay really exports.

mod common;

use serde_norway::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn compose() -> Value {
    let text = std::fs::read_to_string(format!("{ROOT}/docker/docker-compose.yml")).unwrap();
    serde_norway::from_str(&text).expect("docker-compose.yml is valid YAML")
}

fn env<'a>(service: &'a Value, key: &str) -> &'a str {
    service["environment"][key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} missing or not a string"))
}

#[test]
fn every_relay_variable_in_the_compose_file_is_a_real_option() {
    let c = compose();
    let relay = &c["services"]["outbox-relay"];
    let help = Command::new(common::RELAY)
        .args(["run", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    let vars: Vec<&str> = relay["environment"]
        .as_mapping()
        .unwrap()
        .keys()
        .map(|k| k.as_str().unwrap())
        .collect();
    assert!(
        vars.contains(&"OUTBOX_RELAY_POSTGRES_URL")
            && vars.contains(&"OUTBOX_RELAY_BOOTSTRAP_SERVERS")
    );
    for var in vars {
        assert!(
            help.contains(&format!("[env: {var}")),
            "{var} is not an option of `outbox-relay run`"
        );
    }
}

#[test]
fn services_ports_and_files_line_up() {
    let c = compose();
    let s = &c["services"];
    let relay = &s["outbox-relay"];
    let pg = &s["postgres"];
    let kafka = &s["kafka"];

    assert!(pg["image"].as_str().unwrap().starts_with("postgres:15"));
    let pg_command: Vec<&str> = pg["command"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(pg_command.contains(&"wal_level=logical"));
    assert!(kafka["image"]
        .as_str()
        .unwrap()
        .starts_with("apache/kafka:"));
    assert!(
        env(kafka, "KAFKA_PROCESS_ROLES").contains("controller"),
        "KRaft mode"
    );

    let url = env(relay, "OUTBOX_RELAY_POSTGRES_URL");
    let expected = format!(
        "postgres://{}:{}@postgres:5432/{}",
        env(pg, "POSTGRES_USER"),
        env(pg, "POSTGRES_PASSWORD"),
        env(pg, "POSTGRES_DB")
    );
    assert_eq!(url, expected);
    let advertised = env(kafka, "KAFKA_ADVERTISED_LISTENERS");
    assert_eq!(
        format!(
            "PLAINTEXT://{}",
            env(relay, "OUTBOX_RELAY_BOOTSTRAP_SERVERS")
        ),
        advertised,
        "the relay connects where Kafka advertises"
    );
    assert_eq!(
        env(kafka, "KAFKA_AUTO_CREATE_TOPICS_ENABLE"),
        "false",
        "the relay creates its topics"
    );

    let metrics_port = env(relay, "OUTBOX_RELAY_METRICS_ADDRESS")
        .rsplit(':')
        .next()
        .unwrap()
        .to_owned();
    let published: Vec<&str> = relay["ports"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert_eq!(published, [format!("{metrics_port}:{metrics_port}")]);
    let prometheus = std::fs::read_to_string(format!("{ROOT}/docker/prometheus.yml")).unwrap();
    assert!(
        prometheus.contains(&format!("outbox-relay:{metrics_port}")),
        "Prometheus scrapes the relay"
    );
    let dockerfile = std::fs::read_to_string(format!("{ROOT}/docker/Dockerfile")).unwrap();
    assert!(dockerfile.contains(&format!("EXPOSE {metrics_port}")));
    // A build stage, the example consumer's stage, and the relay's as the default (last) one.
    let stages: Vec<&str> = dockerfile
        .lines()
        .filter(|l| l.starts_with("FROM "))
        .collect();
    assert_eq!(stages.len(), 3, "multi-stage: {stages:?}");
    assert!(
        stages[0].ends_with("AS build") && stages[2] == "FROM debian:bookworm-slim",
        "{stages:?}"
    );
    let consumer = &c["services"]["idempotent-consumer"]["build"];
    let target = consumer["target"].as_str().unwrap();
    assert!(
        stages.iter().any(|s| s.ends_with(&format!("AS {target}"))),
        "compose builds stage {target}"
    );
    assert!(dockerfile.contains("USER 10001"), "runs as a non-root user");
    let build = &relay["build"];
    assert!(Path::new(&format!(
        "{ROOT}/docker/{}/{}",
        build["context"].as_str().unwrap(),
        build["dockerfile"].as_str().unwrap()
    ))
    .exists());

    for (name, service) in s.as_mapping().unwrap() {
        for volume in service["volumes"].as_sequence().into_iter().flatten() {
            let host = volume.as_str().unwrap().split(':').next().unwrap();
            assert!(
                Path::new(&format!("{ROOT}/docker/{host}")).exists(),
                "{} mounts missing {host}",
                name.as_str().unwrap()
            );
        }
    }
}

#[test]
fn the_dashboard_queries_metrics_the_relay_exports() {
    let metrics = outbox_relay_core::metrics::Metrics::new();
    // A labelled family is exported once it has a series.
    metrics
        .events
        .get_or_create(&outbox_relay_core::metrics::TopicLabels {
            topic: "Order.events".into(),
        })
        .inc();
    let exported = metrics.encode();
    let names: BTreeSet<&str> = exported
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    let dashboard = std::fs::read_to_string(format!(
        "{ROOT}/docker/grafana/dashboards/outbox-relay.json"
    ))
    .unwrap();
    let dashboard: serde_json::Value = serde_json::from_str(&dashboard).unwrap();
    let mut used = 0;
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            for token in expr
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .filter(|t| t.starts_with("outbox_relay_"))
            {
                let base = ["_total", "_bucket", "_count", "_sum"]
                    .iter()
                    .fold(token, |t, suffix| t.strip_suffix(suffix).unwrap_or(t));
                assert!(
                    names.contains(base),
                    "dashboard uses {token}, the relay exports {names:?}"
                );
                used += 1;
            }
        }
    }
    assert!(used >= 6);
    // Works with any Prometheus data source and any job/instance names.
    let variables: Vec<&str> = dashboard["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(variables, ["datasource", "job", "instance"]);
    for panel in dashboard["panels"].as_array().unwrap() {
        assert_eq!(panel["datasource"]["uid"], "${datasource}");
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            assert!(expr.contains("job=~\"$job\""), "{expr}");
            if expr.contains("histogram_quantile") {
                assert!(
                    expr.contains("sum by (le)"),
                    "quantiles across instances: {expr}"
                );
            }
        }
    }

    // The alert rules Prometheus loads beside its config query exported metrics too.
    let rules: serde_norway::Value = serde_norway::from_str(
        &std::fs::read_to_string(format!("{ROOT}/docker/alerts.yml")).unwrap(),
    )
    .unwrap();
    let prometheus = std::fs::read_to_string(format!("{ROOT}/docker/prometheus.yml")).unwrap();
    assert!(prometheus.contains("/etc/prometheus/alerts.yml"));
    let mut alerts = Vec::new();
    for rule in rules["groups"][0]["rules"].as_sequence().unwrap() {
        alerts.push(rule["alert"].as_str().unwrap().to_owned());
        let expr = rule["expr"].as_str().unwrap();
        for token in expr
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|t| t.starts_with("outbox_relay_"))
        {
            let base = token.strip_suffix("_total").unwrap_or(token);
            assert!(names.contains(base), "alert {expr} uses {token}");
        }
    }
    for wanted in [
        "OutboxRelayNoActiveInstance",
        "OutboxRelayNotStreaming",
        "OutboxRelayLagBytes",
        "OutboxRelayLagSeconds",
        "OutboxRelayDeadLetters",
    ] {
        assert!(
            alerts.iter().any(|a| a == wanted),
            "{wanted} missing: {alerts:?}"
        );
    }
}
