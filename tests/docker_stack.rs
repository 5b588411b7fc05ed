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
    let advertised: Vec<&str> = env(kafka, "KAFKA_ADVERTISED_LISTENERS")
        .split(',')
        .collect();
    assert!(
        advertised.contains(
            &format!(
                "PLAINTEXT://{}",
                env(relay, "OUTBOX_RELAY_BOOTSTRAP_SERVERS")
            )
            .as_str()
        ),
        "the relay connects where Kafka advertises: {advertised:?}"
    );
    // A developer's own client on the host reaches Kafka through a listener that
    // advertises localhost on a published port.
    let host = advertised
        .iter()
        .find_map(|l| l.split_once("://localhost:"))
        .expect("a listener advertised as localhost");
    let listeners = env(kafka, "KAFKA_LISTENERS");
    assert!(
        listeners.contains(&format!("{}://:{}", host.0, host.1)),
        "{listeners}"
    );
    assert!(env(kafka, "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP").contains(&format!("{}:", host.0)));
    assert!(kafka["ports"]
        .as_sequence()
        .unwrap()
        .iter()
        .any(|p| p.as_str() == Some(&format!("{0}:{0}", host.1))));
    // Every long-running service has a health check, and every depends_on waits for one.
    for (name, service) in s.as_mapping().unwrap() {
        let name = name.as_str().unwrap();
        if let Some(deps) = service["depends_on"].as_mapping() {
            for (dep, how) in deps {
                let dep = dep.as_str().unwrap();
                assert_eq!(
                    how["condition"], "service_healthy",
                    "{name} waits for {dep}"
                );
                assert!(
                    s[dep]["healthcheck"]["test"].is_sequence(),
                    "{dep} has a health check"
                );
            }
        } else {
            assert!(
                service["depends_on"].is_null(),
                "{name}: depends_on with conditions"
            );
        }
    }
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
    // Build stages, a runtime base, the example consumer's stage, and the relay's as the
    // default (last) one.
    let stages: Vec<&str> = dockerfile
        .lines()
        .filter(|l| l.starts_with("FROM "))
        .collect();
    assert!(
        stages.iter().any(|s| s.ends_with("AS build")) && stages.last() == Some(&"FROM runtime"),
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
    metrics.topic_events("Order.events").inc();
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

/// The images: base images pinned to exact releases, a dependency-caching stage, OCI labels,
/// a HEALTHCHECK that is a real subcommand, and a runtime stage that carries every shared
/// library both binaries load (the consumer image used to lack libssl).
#[test]
fn the_images_are_pinned_labelled_and_carry_what_the_binaries_load() {
    let dockerfile = std::fs::read_to_string(format!("{ROOT}/docker/Dockerfile")).unwrap();
    let arg = |name: &str| {
        dockerfile
            .lines()
            .find_map(|l| l.strip_prefix(&format!("ARG {name}=")))
            .unwrap_or_else(|| panic!("ARG {name}"))
            .to_owned()
    };
    for image in [arg("RUST_IMAGE"), arg("RUNTIME_IMAGE")] {
        let tag = image.split(':').nth(1).unwrap_or("");
        assert!(
            tag.split(['-', '.'])
                .filter(|p| p.parse::<u32>().is_ok())
                .count()
                >= 2,
            "{image} is pinned to an exact release"
        );
    }
    for line in dockerfile.lines().filter(|l| l.starts_with("FROM ")) {
        let image = line.split_whitespace().nth(1).unwrap();
        assert!(
            image.starts_with("${") || ["chef", "runtime"].contains(&image),
            "{line}: bases come from the pinned ARGs"
        );
    }
    // Dependencies are built in a layer of their own, before the sources are copied.
    let cook = dockerfile
        .find("cargo chef cook")
        .expect("a dependency-caching stage");
    let build = dockerfile.find("cargo build --release").unwrap();
    assert!(cook < build);
    for label in [
        "source",
        "version",
        "revision",
        "licenses",
        "title",
        "description",
    ] {
        assert!(
            dockerfile.contains(&format!("org.opencontainers.image.{label}=")),
            "OCI label {label}"
        );
    }
    let healthcheck = dockerfile
        .lines()
        .find(|l| l.starts_with("HEALTHCHECK"))
        .expect("a HEALTHCHECK");
    assert!(healthcheck.contains(r#"CMD ["outbox-relay", "health"]"#));
    let health = Command::new(common::RELAY)
        .args(["health", "--address", "127.0.0.1:1"])
        .output()
        .unwrap();
    assert_eq!(health.status.code(), Some(1), "health is a real subcommand");

    // Every final stage is FROM runtime; the runtime stage's packages (plus what
    // debian:*-slim has) provide every library the binaries load.
    let runtime = &dockerfile[dockerfile.find("AS runtime").unwrap()..];
    let runtime = &runtime[..runtime.find("\nFROM ").unwrap()];
    let installed: String = runtime
        .split("apt-get install")
        .nth(1)
        .unwrap()
        .split("&&")
        .next()
        .unwrap()
        .to_owned();
    let mut packages: BTreeSet<&str> = installed
        .split_whitespace()
        .filter(|w| !w.starts_with('-') && *w != "\\")
        .collect();
    packages.extend(["libc6", "libgcc-s1", "zlib1g"]); // in debian:12-slim
    let bin_dir = Path::new(common::RELAY).parent().unwrap();
    for binary in ["outbox-relay", "idempotent-consumer"] {
        let path = bin_dir.join(binary);
        assert!(path.exists(), "{} is built", path.display());
        let ldd = Command::new("ldd").arg(&path).output().unwrap();
        for line in String::from_utf8_lossy(&ldd.stdout).lines() {
            let Some(library) = line.split("=> ").nth(1).and_then(|r| r.split(' ').next()) else {
                continue;
            };
            let real = std::fs::canonicalize(library).unwrap();
            let owner = [library.to_owned(), real.display().to_string()]
                .iter()
                .find_map(|p| {
                    let out = Command::new("dpkg").args(["-S", p]).output().ok()?;
                    let text = String::from_utf8_lossy(&out.stdout).into_owned();
                    out.status
                        .success()
                        .then(|| text.split(':').next().unwrap().to_owned())
                })
                .unwrap_or_else(|| panic!("no Debian package owns {library}"));
            assert!(
                packages.contains(owner.as_str()),
                "{binary} loads {library} from {owner}, which the runtime stage does not install: {packages:?}"
            );
        }
    }
}
