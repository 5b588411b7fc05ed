//! The Kustomize base users apply (`deploy/kubernetes`): rendered by kubectl's own kustomize,
//! its objects wired to each other (probes, ports, selectors, config and secret files the
//! command line names), its alerts the ones `docker/alerts.yml` ships, and its pods' command
//! line run by the real binary against real PostgreSQL and a real broker, with the files the
//! ConfigMap and the Secret would mount: two replicas become active and standby, both ready;
//! the Debezium overlay relays with the connector JSON.

mod common;

use common::*;
use outbox_relay_testkit::http::{get as http_get, metric, wait_status};
use outbox_relay_testkit::{net::free_port, RelayProcess};
use serde::Deserialize;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const PASSWORD: &str = "from-the-kubernetes-secret";

/// `kubectl kustomize <dir>`: every object, by kind.
fn render(dir: &str) -> Vec<Value> {
    let out = Command::new("kubectl")
        .args(["kustomize", &format!("{ROOT}/deploy/kubernetes/{dir}")])
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "kubectl renders the Kustomize base ({e}); install it: apt-get install kubectl \
                 (Kubernetes' apt repository) or put any kubectl ≥ 1.27 on PATH"
            )
        });
    assert!(
        out.status.success(),
        "kubectl kustomize {dir}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    serde_norway::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap())
        .collect()
}

fn one<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    let found: Vec<_> = objects.iter().filter(|o| o["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "one {kind}: {objects:#?}");
    found[0]
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("a list: {v}"))
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

/// `selector` ⊆ `labels`.
fn selects(selector: &Value, labels: &Value) -> bool {
    let selector = selector.as_object().expect("a label map");
    !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// The pod as Kubernetes would start it, in a directory: each volume's files where the
/// container mounts them (mount paths rewritten under `dir`), and the container's arguments
/// and environment with those paths rewritten too.
struct Pod {
    args: Vec<String>,
    env: Vec<(String, String)>,
}

fn materialize(objects: &[Value], dir: &Path) -> Pod {
    let deployment = one(objects, "Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let configmap = one(objects, "ConfigMap");
    let mut mounts = Vec::new();
    for mount in container["volumeMounts"].as_array().unwrap() {
        let name = mount["name"].as_str().unwrap();
        let path = mount["mountPath"].as_str().unwrap().to_owned();
        let volume = pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("volume {name} is declared"));
        let local = dir.join(name);
        std::fs::create_dir_all(&local).unwrap();
        if let Some(cm) = volume.get("configMap") {
            assert_eq!(
                cm["name"], configmap["metadata"]["name"],
                "the pod mounts the generated ConfigMap"
            );
            for (file, text) in configmap["data"].as_object().unwrap() {
                std::fs::write(local.join(file), text.as_str().unwrap()).unwrap();
            }
        } else if let Some(secret) = volume.get("secret") {
            assert_eq!(secret["secretName"], "outbox-relay-secrets");
            // What `kubectl create secret generic outbox-relay-secrets
            // --from-file=postgres-password=...` holds (the README's command).
            std::fs::write(local.join("postgres-password"), format!("{PASSWORD}\n")).unwrap();
            // Kubernetes makes the files root:<fsGroup> with defaultMode: readable by the
            // relay's group alone.
            assert_eq!(secret["defaultMode"].as_u64(), Some(0o440));
            let security = &pod["securityContext"];
            assert!(security["fsGroup"].is_u64() && security["runAsUser"].is_u64());
            assert_eq!(security["fsGroup"], security["runAsGroup"]);
        } else if volume.get("emptyDir").is_some() {
            // Scratch space (the root filesystem is read-only): nothing to provide.
            continue;
        } else {
            panic!("unexpected volume {volume}");
        }
        mounts.push((path, local));
    }
    let rewrite = |arg: &str| {
        let mut arg = arg.to_owned();
        for (path, local) in &mounts {
            arg = arg.replace(path.as_str(), local.to_str().unwrap());
        }
        arg
    };
    let args: Vec<String> = strings(&container["args"])
        .iter()
        .map(|a| rewrite(a))
        .collect();
    // Every file the command line names is one a volume provides.
    for a in &args {
        if a.starts_with(dir.to_str().unwrap()) {
            assert!(
                Path::new(a).is_file(),
                "{a} is mounted from the ConfigMap or the Secret"
            );
        }
    }
    let env = container["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_owned(),
                rewrite(e["value"].as_str().unwrap()),
            )
        })
        .collect();
    Pod { args, env }
}

fn check_wiring(objects: &[Value]) {
    let deployment = one(objects, "Deployment");
    let spec = &deployment["spec"];
    assert_eq!(spec["replicas"], 2, "an active/standby pair");
    assert_eq!(
        spec["strategy"]["rollingUpdate"]["maxUnavailable"], 0,
        "a rolling update starts the new pod before it stops an old one"
    );
    let pod_labels = &spec["template"]["metadata"]["labels"];
    assert!(selects(&spec["selector"]["matchLabels"], pod_labels));
    let container = &spec["template"]["spec"]["containers"][0];
    let port = &container["ports"][0];
    assert_eq!(port["name"], "metrics");
    let metrics_address = container["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "OUTBOX_RELAY_METRICS_ADDRESS")
        .expect("the metrics address is set for both configuration modes")["value"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        metrics_address,
        format!("0.0.0.0:{}", port["containerPort"]),
        "the relay serves on the port the probes and the Service use"
    );
    for (probe, path) in [("livenessProbe", "/health"), ("readinessProbe", "/ready")] {
        assert_eq!(container[probe]["httpGet"]["path"], path, "{probe}");
        assert_eq!(container[probe]["httpGet"]["port"], "metrics", "{probe}");
    }
    let term = spec["template"]["spec"]["terminationGracePeriodSeconds"]
        .as_u64()
        .unwrap();
    assert!(term >= 30, "SIGTERM gets time to confirm what is in flight");

    let service = one(objects, "Service");
    assert!(selects(&service["spec"]["selector"], pod_labels));
    assert_eq!(service["spec"]["ports"][0]["targetPort"], "metrics");
    let monitor = one(objects, "ServiceMonitor");
    assert!(selects(
        &monitor["spec"]["selector"]["matchLabels"],
        &service["metadata"]["labels"]
    ));
    assert_eq!(
        monitor["spec"]["endpoints"][0]["port"],
        service["spec"]["ports"][0]["name"]
    );
    assert_eq!(monitor["spec"]["endpoints"][0]["path"], "/metrics");
    let budget = one(objects, "PodDisruptionBudget");
    assert_eq!(
        budget["spec"]["selector"]["matchLabels"], spec["selector"]["matchLabels"],
        "the budget covers this pair and nothing else"
    );

    // The alerts are docker/alerts.yml's, rule for rule (one source of truth; the
    // docker_stack test checks every metric they use is exported).
    let rules = one(objects, "PrometheusRule");
    let alerts: Value = serde_norway::from_str(
        &std::fs::read_to_string(format!("{ROOT}/docker/alerts.yml")).unwrap(),
    )
    .unwrap();
    assert_eq!(rules["spec"]["groups"], alerts["groups"]);
    let names: Vec<&str> = rules["spec"]["groups"][0]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["alert"].as_str().unwrap())
        .collect();
    for wanted in [
        "OutboxRelayNoActiveInstance",
        "OutboxRelayNotStreaming",
        "OutboxRelayLagBytes",
        "OutboxRelayLagSeconds",
        "OutboxRelayDeadLetters",
    ] {
        assert!(names.contains(&wanted), "{wanted}: {names:?}");
    }
}

/// Starts the pod's command line: the connection endpoints are the test's (the rendered
/// config names in-cluster hosts), the rest is what the manifests say.
fn start_pod(stack: &Stack, pod: &Pod, port: u16) -> RelayProcess {
    let url = format!(
        "postgres://outbox_relay@127.0.0.1:{}/postgres",
        stack.pg.port()
    );
    let bootstrap = stack.broker.bootstrap_servers();
    let address = format!("127.0.0.1:{port}");
    let mut env: Vec<(&str, &str)> = pod
        .env
        .iter()
        .filter(|(k, _)| k != "OUTBOX_RELAY_METRICS_ADDRESS")
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    env.extend([
        ("OUTBOX_RELAY_POSTGRES_URL", url.as_str()),
        ("OUTBOX_RELAY_BOOTSTRAP_SERVERS", bootstrap.as_str()),
        // One broker here; the manifests ask for 3 replicas.
        ("OUTBOX_RELAY_TOPIC_REPLICATION_FACTOR", "1"),
        ("OUTBOX_RELAY_METRICS_ADDRESS", address.as_str()),
    ]);
    RelayProcess::spawn(Path::new(RELAY), &pod.args, &env).expect("start outbox-relay")
}

/// The `connect` overlay runs the Kafka Connect worker with its REST API on loopback only
/// (its worker.properties), the probes' address on the pod network.
#[test]
fn the_connect_overlay_keeps_an_unauthenticated_rest_api_off_the_network() {
    let connect = render("overlays/connect");
    check_wiring(&connect);
    let args =
        strings(&one(&connect, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]);
    assert_eq!(
        args[..3],
        [
            "connect",
            "--worker-config",
            "/etc/outbox-relay/worker.properties"
        ]
    );
    assert!(
        args.windows(2)
            .any(|w| w == ["--metrics-address", "0.0.0.0:9187"]),
        "{args:?}"
    );
    let worker = one(&connect, "ConfigMap")["data"]["worker.properties"]
        .as_str()
        .unwrap()
        .to_owned();
    let active: Vec<&str> = worker
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .collect();
    let authenticated = active
        .iter()
        .any(|l| l.starts_with("rest.extension.classes="));
    let loopback = active.contains(&"listeners=http://127.0.0.1:8083");
    assert!(authenticated || loopback, "{worker}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kubernetes_base_renders_wired_and_its_pods_run() {
    let base = render("base");
    check_wiring(&base);
    let debezium = render("overlays/debezium");
    check_wiring(&debezium);
    assert!(strings(
        &one(&debezium, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    )
    .contains(&"--debezium-config".to_owned()));

    let stack = Stack::start().await;
    stack
        .db
        .batch_execute(&format!(
            "CREATE ROLE outbox_relay LOGIN REPLICATION SUPERUSER PASSWORD '{PASSWORD}'"
        ))
        .await
        .unwrap();
    stack.pg.require_password_for("outbox_relay").await.unwrap();

    // The base: both replicas start; one holds the slot, the other stands by, both ready.
    let dir = tempfile::tempdir().unwrap();
    let pod = materialize(&base, dir.path());
    let (first_port, second_port) = (free_port(), free_port());
    let mut first = start_pod(&stack, &pod, first_port);
    stack.wait_for_slot("outbox_relay", &first).await;
    let mut second = start_pod(&stack, &pod, second_port);
    second
        .wait_for_log("standing by", Duration::from_secs(20))
        .await;
    for port in [first_port, second_port] {
        wait_status(
            &format!("127.0.0.1:{port}"),
            "/ready",
            200,
            Duration::from_secs(20),
        )
        .await;
    }
    let active = |port: u16| {
        metric(
            &http_get(&format!("127.0.0.1:{port}"), "/metrics").1,
            "outbox_relay_active",
        )
    };
    assert_eq!((active(first_port), active(second_port)), (1.0, 0.0));
    insert_events(&stack.db, 0, 20, 5, 4).await.unwrap();
    stack
        .wait_delivered("outbox_relay", Duration::from_secs(30), Some(&first))
        .await;
    for relay in [&mut first, &mut second] {
        let status = relay.terminate(Duration::from_secs(30)).unwrap();
        assert!(status.is_some_and(|s| s.success()), "{}", relay.log());
        assert!(
            !relay.log().contains(PASSWORD),
            "the secret never reaches the log"
        );
    }

    // The Debezium overlay: the connector JSON and worker properties from its ConfigMap.
    let dir = tempfile::tempdir().unwrap();
    let pod = materialize(&debezium, dir.path());
    let port = free_port();
    let relay = start_pod(&stack, &pod, port);
    insert_events(&stack.db, 20, 20, 5, 4).await.unwrap();
    stack
        .wait_delivered("outbox_relay", Duration::from_secs(30), Some(&relay))
        .await;
    wait_status(
        &format!("127.0.0.1:{port}"),
        "/ready",
        200,
        Duration::from_secs(20),
    )
    .await;
    let (lost, duplicated) = lost_and_duplicated(&stack, 40).await;
    assert_eq!((lost, duplicated), (0, 0), "{}", relay.log());
    for line in relay.log().lines() {
        serde_json::from_str::<Value>(line)
            .unwrap_or_else(|e| panic!("JSON logs, as the manifests ask ({e}): {line}"));
    }
}
