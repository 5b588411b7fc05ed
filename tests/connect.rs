//! `outbox-relay connect`: the Kafka Connect REST API that Debezium users' deploy scripts
//! call, driven with the curl commands of Debezium's tutorial (register with
//! `curl -X POST -H "Content-Type: application/json" … -d @register-postgres.json`, poll the
//! status, pause, resume, update the config with PUT, restart, delete), with the events
//! checked on the broker at each step.

mod common;

use common::*;
use outbox_relay_testkit::{RelayProcess, Storage};
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

const EVENTS: &str = "CREATE TABLE public.outbox (
    id uuid PRIMARY KEY,
    aggregatetype varchar(255) NOT NULL,
    aggregateid varchar(255) NOT NULL,
    type varchar(255) NOT NULL,
    payload jsonb
);";

/// `curl -s -w '\n%{http_code}' …`: (status, body as JSON or text).
fn curl(args: &[&str]) -> (u16, Value) {
    let out = std::process::Command::new("curl")
        .args(["-s", "-w", "\n%{http_code}"])
        .args(args)
        .output()
        .expect("curl is needed by this test: apt-get install curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    let status = code.trim().parse().unwrap_or(0);
    let body = serde_json::from_str(body).unwrap_or(Value::String(body.to_owned()));
    (status, body)
}

/// `curl -X METHOD -H Content-Type:application/json URL -d BODY` (BODY may be `@file`).
fn send(method: &str, url: &str, body: &str) -> (u16, Value) {
    curl(&[
        "-X",
        method,
        "-H",
        "Content-Type:application/json",
        url,
        "-d",
        body,
    ])
}

/// Connect's error body names what is wrong.
fn assert_message(body: &Value, contains: &str) {
    let message = body["message"].as_str().unwrap_or_default();
    assert!(message.contains(contains), "{body}");
}

/// Workers of one cluster (Connect's distributed mode): one group, its config and status
/// topics, and the settings README gives for a quick move of a dead worker's connectors.
const DISTRIBUTED: &str = "group.id=outbox\n\
    config.storage.topic=connect-configs\nconfig.storage.replication.factor=1\n\
    status.storage.topic=connect-status\nstatus.storage.replication.factor=1\n\
    offset.storage.topic=connect-offsets\noffset.storage.replication.factor=1\noffset.flush.interval.ms=500\n\
    session.timeout.ms=6000\nheartbeat.interval.ms=1000\nscheduled.rebalance.max.delay.ms=0\n";

struct Worker {
    process: RelayProcess,
    url: String,
    /// The metrics address: /metrics, /health, /ready.
    metrics: String,
}

fn start_worker(stack: &Stack, dir: &Path) -> Worker {
    start_worker_with(stack, dir, "")
}

/// A worker whose properties file adds `extra` lines to the brokers and converters.
fn start_worker_with(stack: &Stack, dir: &Path, extra: &str) -> Worker {
    start_worker_env(stack, dir, extra, &[])
}

/// A worker with `extra` properties lines and environment variables.
fn start_worker_env(stack: &Stack, dir: &Path, extra: &str, env: &[(&str, &str)]) -> Worker {
    start_worker_args(stack, dir, extra, env, &[])
}

/// A worker with `extra` properties lines, environment variables and connector files to run
/// from the start (`connect-standalone worker.properties connector.properties…`).
fn start_worker_args(
    stack: &Stack,
    dir: &Path,
    extra: &str,
    env: &[(&str, &str)],
    connectors: &[&Path],
) -> Worker {
    start_worker_on(
        stack,
        dir,
        extra,
        env,
        connectors,
        outbox_relay_testkit::net::free_port(),
    )
}

/// A worker whose REST API listens on `port` (its worker id: a worker that comes back on
/// the same port is the same worker to its cluster).
fn start_worker_on(
    stack: &Stack,
    dir: &Path,
    extra: &str,
    env: &[(&str, &str)],
    connectors: &[&Path],
    port: u16,
) -> Worker {
    let worker = dir.join(format!(
        "connect-{}.properties",
        outbox_relay_testkit::net::free_port()
    ));
    std::fs::write(
        &worker,
        format!(
            "bootstrap.servers={}\n\
             key.converter=org.apache.kafka.connect.storage.StringConverter\n\
             value.converter=org.apache.kafka.connect.storage.StringConverter\n{extra}",
            stack.broker.bootstrap_servers()
        ),
    )
    .unwrap();
    let metrics_port = outbox_relay_testkit::net::free_port();
    let mut args = vec![
        "connect".into(),
        "--worker-config".into(),
        worker.display().to_string(),
        "--listen".into(),
        format!("127.0.0.1:{port}"),
        "--metrics-address".into(),
        format!("127.0.0.1:{metrics_port}"),
    ];
    args.extend(connectors.iter().map(|c| c.display().to_string()));
    let process =
        RelayProcess::spawn(Path::new(RELAY), &args, env).expect("start outbox-relay connect");
    assert!(
        outbox_relay_testkit::net::wait_for_port(port, Duration::from_secs(20)),
        "the REST API never listened:\n{}",
        process.log()
    );
    Worker {
        process,
        url: format!("http://127.0.0.1:{port}"),
        metrics: format!("http://127.0.0.1:{metrics_port}"),
    }
}

/// The tutorial's register-postgres.json, pointed at the test's database, with the
/// EventRouter.
fn register_json(stack: &Stack, slot: &str) -> Value {
    json!({
        "name": "inventory-connector",
        "config": {
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "tasks.max": "1",
            "database.hostname": "127.0.0.1",
            "database.port": stack.pg.port().to_string(),
            "database.user": "postgres",
            "database.password": "postgres",
            "database.dbname": "postgres",
            "topic.prefix": "dbserver1",
            "table.include.list": "public.outbox",
            "plugin.name": "pgoutput",
            "slot.name": slot,
            "publication.autocreate.mode": "filtered",
            "snapshot.mode": "no_data",
            "topic.creation.default.partitions": "1",
            "topic.creation.default.replication.factor": "1",
            "transforms": "outbox",
            "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter"
        }
    })
}

async fn insert(stack: &Stack, n: u32, kind: &str) {
    stack
        .db
        .batch_execute(&format!(
            "INSERT INTO outbox VALUES ('6b1c0e4e-0000-4000-8000-{n:012}', '{kind}', 'a-{n}', 'Created', '{{\"n\": {n}}}')"
        ))
        .await
        .unwrap();
}

async fn wait_state(worker: &Worker, name: &str, connector: &str, task: Option<&str>) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (code, status) = curl(&[&format!("{}/connectors/{name}/status", worker.url)]);
        let task_state = status["tasks"][0]["state"].as_str();
        if code == 200 && status["connector"]["state"] == connector && task_state == task {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "{name} never reached {connector}/{task:?}: {code} {status}\n{}",
            worker.process.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The values on `topic`, none while the relay has not created it yet.
async fn values(stack: &Stack, topic: &str) -> Vec<String> {
    if !stack.topics().await.iter().any(|t| t == topic) {
        return Vec::new();
    }
    stack
        .read_topic(topic)
        .await
        .iter()
        .map(|r| String::from_utf8(r.value.clone().unwrap()).unwrap())
        .collect()
}

async fn wait_values(stack: &Stack, topic: &str, want: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = values(stack, topic).await;
        if got == want {
            return;
        }
        assert!(Instant::now() < deadline, "{topic}: {got:?}, want {want:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debeziums_tutorial_curl_sequence_runs_unchanged() {
    let stack = Stack::start_with_schema(Storage::Sqlite, EVENTS).await;
    let dir = tempfile::tempdir().unwrap();
    let worker = start_worker(&stack, dir.path());
    let url = &worker.url;

    // GET / and the plugins, as UIs probe a worker.
    let (code, root) = curl(&[&format!("{url}/")]);
    assert_eq!(code, 200);
    assert!(
        root["version"].is_string() && root.get("kafka_cluster_id").is_some(),
        "{root}"
    );
    let (_, plugins) = curl(&[&format!("{url}/connector-plugins")]);
    assert_eq!(
        plugins[0]["class"],
        "io.debezium.connector.postgresql.PostgresConnector"
    );
    assert_eq!(plugins.as_array().unwrap().len(), 1, "{plugins}");
    let (_, all) = curl(&[&format!("{url}/connector-plugins?connectorsOnly=false")]);
    let has = |kind: &str, class: &str| {
        all.as_array()
            .unwrap()
            .iter()
            .any(|p| p["type"] == kind && p["class"] == class)
    };
    assert!(
        has(
            "transformation",
            "io.debezium.transforms.outbox.EventRouter"
        ),
        "{all}"
    );
    assert!(
        has("converter", "org.apache.kafka.connect.json.JsonConverter"),
        "{all}"
    );
    // Every transformation, predicate and converter a configuration may name.
    for (kind, class) in [
        (
            "transformation",
            "org.apache.kafka.connect.transforms.RegexRouter",
        ),
        (
            "transformation",
            "org.apache.kafka.connect.transforms.HeaderFrom$Value",
        ),
        (
            "predicate",
            "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
        ),
        ("converter", "io.confluent.connect.avro.AvroConverter"),
        (
            "header_converter",
            "org.apache.kafka.connect.storage.SimpleHeaderConverter",
        ),
    ] {
        assert!(has(kind, class), "{kind} {class}: {all}");
    }
    // The connector's and the EventRouter's option definitions (KIP-769).
    let definition = |class: &str, option: &str| -> Value {
        let (code, defs) = curl(&[&format!("{url}/connector-plugins/{class}/config")]);
        assert_eq!(code, 200, "{defs}");
        defs.as_array()
            .unwrap()
            .iter()
            .find(|d| d["name"] == option)
            .cloned()
            .unwrap_or_else(|| panic!("{option} not in {defs}"))
    };
    let slot = definition(
        "io.debezium.connector.postgresql.PostgresConnector",
        "slot.name",
    );
    assert_eq!(slot["default_value"], "debezium", "{slot}");
    let route = definition(
        "io.debezium.transforms.outbox.EventRouter",
        "route.by.field",
    );
    assert_eq!(route["default_value"], "aggregatetype", "{route}");
    let (code, _) = curl(&[&format!(
        "{url}/connector-plugins/com.example.Nothing/config"
    )]);
    assert_eq!(code, 404);

    // Register: curl -i -X POST -H "Accept:application/json" -H "Content-Type:application/json" localhost:8083/connectors/ -d @register-postgres.json
    let register = dir.path().join("register-postgres.json");
    std::fs::write(&register, register_json(&stack, "tutorial").to_string()).unwrap();
    let data = format!("@{}", register.display());
    let post = [
        "-X",
        "POST",
        "-H",
        "Accept:application/json",
        "-H",
        "Content-Type:application/json",
        &format!("{url}/connectors/"),
        "-d",
        &data,
    ];
    let (code, created) = curl(&post);
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["name"], "inventory-connector");
    assert_eq!(created["config"]["name"], "inventory-connector");
    assert_eq!(
        created["tasks"],
        json!([{"connector": "inventory-connector", "task": 0}])
    );
    assert_eq!(created["type"], "source");
    // Registering it again: 409, as Connect answers.
    let (code, conflict) = curl(&post);
    assert_eq!(code, 409, "{conflict}");
    assert_eq!(conflict["error_code"], 409);

    let status = wait_state(&worker, "inventory-connector", "RUNNING", Some("RUNNING")).await;
    assert_eq!(status["type"], "source");
    stack
        .wait_confirmed(
            "tutorial",
            outbox_relay_testkit::Lsn::from_u64(1),
            Duration::from_secs(30),
            Some(&worker.process),
        )
        .await;
    let (_, names) = curl(&[&format!("{url}/connectors")]);
    assert_eq!(names, json!(["inventory-connector"]));
    let (_, expanded) = curl(&[&format!("{url}/connectors?expand=status&expand=info")]);
    assert_eq!(
        expanded["inventory-connector"]["status"]["connector"]["state"],
        "RUNNING"
    );
    assert_eq!(
        expanded["inventory-connector"]["info"]["name"],
        "inventory-connector"
    );

    insert(&stack, 1, "Order").await;
    wait_values(&stack, "outbox.event.Order", &[r#"{"n": 1}"#]).await;

    // KIP-1017's /health on the REST port; metrics and readiness on the metrics address.
    let (code, health) = curl(&[&format!("{url}/health")]);
    assert_eq!(
        (code, &health["status"]),
        (200, &json!("healthy")),
        "{health}"
    );
    let (code, ready) = curl(&[&format!("{}/ready", worker.metrics)]);
    assert_eq!(code, 200, "{ready}");
    assert_eq!(ready, json!("ready: inventory-connector active\n"));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, metrics) = curl(&[&format!("{}/metrics", worker.metrics)]);
        let text = metrics.as_str().unwrap_or_default().to_owned();
        if text
            .contains(r#"outbox_relay_events_total{slot="tutorial",topic="outbox.event.Order"} 1"#)
        {
            assert!(text.ends_with("# EOF\n"), "{text}");
            break;
        }
        assert!(Instant::now() < deadline, "{text}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Pause: nothing is relayed until resume, and nothing is lost.
    let (code, _) = curl(&[
        "-X",
        "PUT",
        &format!("{url}/connectors/inventory-connector/pause"),
    ]);
    assert_eq!(code, 202);
    wait_state(&worker, "inventory-connector", "PAUSED", Some("PAUSED")).await;
    let (code, ready) = curl(&[&format!("{}/ready", worker.metrics)]);
    assert_eq!(
        (code, ready),
        (200, json!("ready: inventory-connector paused\n"))
    );
    insert(&stack, 2, "Order").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        values(&stack, "outbox.event.Order").await.len(),
        1,
        "relayed while paused"
    );
    let (code, _) = curl(&[
        "-X",
        "PUT",
        &format!("{url}/connectors/inventory-connector/resume"),
    ]);
    assert_eq!(code, 202);
    wait_values(
        &stack,
        "outbox.event.Order",
        &[r#"{"n": 1}"#, r#"{"n": 2}"#],
    )
    .await;

    // Update the configuration with PUT (200: it exists): the routing changes.
    let mut config = register_json(&stack, "tutorial")["config"].clone();
    config["transforms.outbox.route.topic.replacement"] = json!("${routedByValue}.events");
    let (code, updated) = send(
        "PUT",
        &format!("{url}/connectors/inventory-connector/config"),
        &config.to_string(),
    );
    assert_eq!(code, 200, "{updated}");
    let (_, stored) = curl(&[&format!("{url}/connectors/inventory-connector/config")]);
    assert_eq!(
        stored["transforms.outbox.route.topic.replacement"],
        "${routedByValue}.events"
    );
    wait_state(&worker, "inventory-connector", "RUNNING", Some("RUNNING")).await;
    insert(&stack, 3, "Order").await;
    wait_values(&stack, "Order.events", &[r#"{"n": 3}"#]).await;

    // Restart (204), with tasks (202 and the status).
    let (code, _) = curl(&[
        "-X",
        "POST",
        &format!("{url}/connectors/inventory-connector/restart"),
    ]);
    assert_eq!(code, 204);
    let (code, restarted) = curl(&[
        "-X",
        "POST",
        &format!("{url}/connectors/inventory-connector/restart?includeTasks=true&onlyFailed=false"),
    ]);
    assert_eq!(code, 202, "{restarted}");
    wait_state(&worker, "inventory-connector", "RUNNING", Some("RUNNING")).await;
    insert(&stack, 4, "Order").await;
    wait_values(&stack, "Order.events", &[r#"{"n": 3}"#, r#"{"n": 4}"#]).await;

    // The topics it wrote to, under both routings; reset (202), then only those written next.
    let topics_url = format!("{url}/connectors/inventory-connector/topics");
    let (code, topics) = curl(&[&topics_url]);
    assert_eq!(code, 200);
    assert_eq!(
        topics,
        json!({"inventory-connector": {"topics": ["Order.events", "outbox.event.Order"]}})
    );
    let (code, _) = curl(&["-X", "PUT", &format!("{topics_url}/reset")]);
    assert_eq!(code, 202);
    let (_, topics) = curl(&[&topics_url]);
    assert_eq!(topics, json!({"inventory-connector": {"topics": []}}));
    insert(&stack, 5, "Order").await;
    wait_values(
        &stack,
        "Order.events",
        &[r#"{"n": 3}"#, r#"{"n": 4}"#, r#"{"n": 5}"#],
    )
    .await;
    let (_, topics) = curl(&[&topics_url]);
    assert_eq!(
        topics,
        json!({"inventory-connector": {"topics": ["Order.events"]}})
    );

    // Stop (204), read and move the offsets (the slot's position in Debezium's shape),
    // resume.
    let (code, offsets) = curl(&[&format!("{url}/connectors/inventory-connector/offsets")]);
    assert_eq!(code, 200, "{offsets}");
    assert_eq!(
        offsets["offsets"][0]["partition"],
        json!({"server": "dbserver1"})
    );
    let lsn = offsets["offsets"][0]["offset"]["lsn"]
        .as_u64()
        .expect("an lsn");
    let patch = |lsn: u64| {
        json!({"offsets": [{"partition": {"server": "dbserver1"}, "offset": {"lsn": lsn}}]})
            .to_string()
    };
    let patch_offsets = |body: String| {
        send(
            "PATCH",
            &format!("{url}/connectors/inventory-connector/offsets"),
            &body,
        )
    };
    let (code, running) = patch_offsets(patch(lsn));
    assert_eq!(code, 400, "{running}");
    assert_message(&running, "STOPPED state");
    let (code, _) = curl(&[
        "-X",
        "PUT",
        &format!("{url}/connectors/inventory-connector/stop"),
    ]);
    assert_eq!(code, 204);
    let stopped = wait_state(&worker, "inventory-connector", "STOPPED", None).await;
    assert_eq!(stopped["tasks"], json!([]));
    let (code, backward) = patch_offsets(patch(lsn - 1));
    assert_eq!(code, 400, "{backward}");
    assert_message(&backward, "backwards");
    // Moving forward skips what lies in between: events written while stopped, before the
    // new position, are not relayed (the operator asked for it).
    insert(&stack, 6, "Order").await;
    let skip_to = stack.current_wal_lsn().await.as_u64();
    let (code, moved) = patch_offsets(patch(skip_to));
    assert_eq!(code, 200, "{moved}");
    let (_, offsets) = curl(&[&format!("{url}/connectors/inventory-connector/offsets")]);
    assert_eq!(
        offsets["offsets"][0]["offset"]["lsn"].as_u64(),
        Some(skip_to)
    );
    let (code, _) = curl(&[
        "-X",
        "PUT",
        &format!("{url}/connectors/inventory-connector/resume"),
    ]);
    assert_eq!(code, 202);
    wait_state(&worker, "inventory-connector", "RUNNING", Some("RUNNING")).await;
    insert(&stack, 7, "Order").await;
    wait_values(
        &stack,
        "Order.events",
        &[r#"{"n": 3}"#, r#"{"n": 4}"#, r#"{"n": 5}"#, r#"{"n": 7}"#],
    )
    .await;

    // Validate as Connect's ConnectorPluginsResource does: errors in the body, per option.
    let mut invalid = config.clone();
    invalid["snapshot.mode"] = json!("custom");
    let (code, validation) = send(
        "PUT",
        &format!("{url}/connector-plugins/PostgresConnector/config/validate"),
        &invalid.to_string(),
    );
    assert_eq!(code, 200, "{validation}");
    assert_eq!(validation["error_count"], 1, "{validation}");
    let entry = validation["configs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["value"]["name"] == "snapshot.mode")
        .unwrap();
    assert_eq!(
        entry["value"]["errors"].as_array().unwrap().len(),
        1,
        "{validation}"
    );
    // Each option's definition comes from the relay's option catalog: where it applies, its
    // default, its documentation and what the relay does with it.
    let definition = &entry["definition"];
    assert_eq!(definition["group"], "Connector", "{validation}");
    assert_eq!(definition["default_value"], "initial", "{validation}");
    assert!(
        definition["documentation"]
            .as_str()
            .unwrap()
            .contains("outbox-relay: applied"),
        "{validation}"
    );

    // Valid options are checked against the database, as Debezium's connector does: the
    // running configuration passes, a missing outbox table is filed under its option.
    let (code, validation) = send(
        "PUT",
        &format!("{url}/connector-plugins/PostgresConnector/config/validate"),
        &config.to_string(),
    );
    assert_eq!(
        (code, &validation["error_count"]),
        (200, &json!(0)),
        "{validation}"
    );
    let mut missing = config.clone();
    missing["table.include.list"] = json!("public.no_such_outbox");
    let (code, validation) = send(
        "PUT",
        &format!("{url}/connector-plugins/PostgresConnector/config/validate"),
        &missing.to_string(),
    );
    assert_eq!(
        (code, &validation["error_count"]),
        (200, &json!(1)),
        "{validation}"
    );
    let entry = validation["configs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["value"]["name"] == "table.include.list")
        .unwrap();
    let error = entry["value"]["errors"][0].as_str().unwrap();
    assert!(
        error.contains("public.no_such_outbox does not exist") && error.contains("sql/outbox.sql"),
        "{error}"
    );

    // A bad configuration: 400 naming the option; the running one is untouched.
    let mut bad = config.clone();
    bad["snapshot.mode"] = json!("custom");
    let (code, refused) = send(
        "PUT",
        &format!("{url}/connectors/inventory-connector/config"),
        &bad.to_string(),
    );
    assert_eq!(code, 400, "{refused}");
    assert_message(&refused, "snapshot.mode");

    // Delete: 204, then 404 with Connect's error body.
    let (code, _) = curl(&[
        "-X",
        "DELETE",
        &format!("{url}/connectors/inventory-connector"),
    ]);
    assert_eq!(code, 204);
    let (code, missing) = curl(&[&format!("{url}/connectors/inventory-connector/status")]);
    assert_eq!(code, 404);
    assert_eq!(
        missing,
        json!({"error_code": 404, "message": "No status found for connector inventory-connector"})
    );
    let (code, missing) = curl(&[&format!("{url}/connectors/inventory-connector")]);
    assert_eq!(code, 404);
    assert_eq!(
        missing["message"],
        "Connector inventory-connector not found"
    );
    let mut worker = worker;
    worker.process.terminate(Duration::from_secs(20)).unwrap();
}

/// Distributed mode: registrations live in `config.storage.topic` (KafkaConfigBackingStore's
/// `connector-<name>` and `target-state-<name>` records), so a worker killed with SIGKILL
/// comes back with its connector, and a second worker on the same topic runs the same
/// connector, standing by (UNASSIGNED) while the first streams, taking over when it dies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registrations_survive_in_the_config_topic_and_a_second_worker_takes_over() {
    let stack = Stack::start_with_schema(Storage::Sqlite, EVENTS).await;
    let dir = tempfile::tempdir().unwrap();
    let distributed = DISTRIBUTED;
    let mut first = start_worker_with(&stack, dir.path(), distributed);
    let register = dir.path().join("register-postgres.json");
    std::fs::write(&register, register_json(&stack, "kept").to_string()).unwrap();
    let (code, body) = send(
        "POST",
        &format!("{}/connectors/", first.url),
        &format!("@{}", register.display()),
    );
    assert_eq!(code, 201, "{body}");
    wait_state(&first, "inventory-connector", "RUNNING", Some("RUNNING")).await;
    insert(&stack, 1, "Order").await;
    wait_values(&stack, "outbox.event.Order", &[r#"{"n": 1}"#]).await;
    // What the topic holds, as Connect writes it.
    let records = stack.read_topic("connect-configs").await;
    let value = |key: &str| -> Value {
        let r = records
            .iter()
            .rev()
            .find(|r| r.key.as_deref() == Some(key.as_bytes()))
            .unwrap_or_else(|| panic!("no {key} in {records:?}"));
        serde_json::from_slice(r.value.as_deref().unwrap()).unwrap()
    };
    assert_eq!(
        value("connector-inventory-connector")["properties"]["slot.name"],
        "kept"
    );
    assert_eq!(
        value("target-state-inventory-connector"),
        json!({"state": "STARTED", "state.v2": "STARTED"})
    );

    // Killed: a new worker on the same topic brings the connector back. (Killed once the
    // slot confirmed event 1: killed before, it would come again, as after any crash.)
    stack
        .wait_delivered("kept", Duration::from_secs(30), Some(&first.process))
        .await;
    first.process.kill9();
    let second = start_worker_with(&stack, dir.path(), distributed);
    wait_state(&second, "inventory-connector", "RUNNING", Some("RUNNING")).await;
    let (_, config) = curl(&[&format!(
        "{}/connectors/inventory-connector/config",
        second.url
    )]);
    assert_eq!(config["slot.name"], "kept");
    insert(&stack, 2, "Order").await;
    wait_values(
        &stack,
        "outbox.event.Order",
        &[r#"{"n": 1}"#, r#"{"n": 2}"#],
    )
    .await;

    // A third worker joins: the connector stays where it runs, as the third reports too.
    let mut third = start_worker_with(&stack, dir.path(), distributed);
    wait_runner(&third, "inventory-connector", &second).await;
    let mut second = second;
    stack
        .wait_delivered("kept", Duration::from_secs(30), Some(&second.process))
        .await;
    second.process.kill9();
    wait_runner(&third, "inventory-connector", &third).await;
    insert(&stack, 3, "Order").await;
    wait_values(
        &stack,
        "outbox.event.Order",
        &[r#"{"n": 1}"#, r#"{"n": 2}"#, r#"{"n": 3}"#],
    )
    .await;

    // Deleted: tombstones, and a new worker starts with nothing.
    let (code, _) = curl(&[
        "-X",
        "DELETE",
        &format!("{}/connectors/inventory-connector", third.url),
    ]);
    assert_eq!(code, 204);
    third.process.terminate(Duration::from_secs(20)).unwrap();
    let mut fourth = start_worker_with(&stack, dir.path(), distributed);
    let (_, names) = curl(&[&format!("{}/connectors", fourth.url)]);
    assert_eq!(names, json!([]));
    fourth.process.terminate(Duration::from_secs(20)).unwrap();
}

/// Which of two workers of a cluster runs the connector's task, as both report it (the same
/// status from each): (the one running it, the other).
async fn active_and_standby<'a>(a: &'a Worker, b: &'a Worker) -> (&'a Worker, &'a Worker) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status =
            |w: &Worker| curl(&[&format!("{}/connectors/inventory-connector/status", w.url)]).1;
        let (from_a, from_b) = (status(a), status(b));
        let runner = from_a["tasks"][0]["worker_id"]
            .as_str()
            .unwrap_or("?")
            .to_owned();
        if from_a == from_b && from_a["tasks"][0]["state"] == "RUNNING" {
            if runs_on(a, &runner) {
                return (a, b);
            }
            if runs_on(b, &runner) {
                return (b, a);
            }
        }
        assert!(
            Instant::now() < deadline,
            "no one worker runs it as both say: {from_a} / {from_b}\n{}\n{}",
            a.process.log(),
            b.process.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Whether `worker_id` (host:port, as Connect reports it) is `w`'s.
fn runs_on(w: &Worker, worker_id: &str) -> bool {
    !worker_id.is_empty() && w.url.ends_with(worker_id)
}

/// Until `asked` reports `name` RUNNING, its task RUNNING on `runner`.
async fn wait_runner(asked: &Worker, name: &str, runner: &Worker) {
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let (_, status) = curl(&[&format!("{}/connectors/{name}/status", asked.url)]);
        let task = &status["tasks"][0];
        if status["connector"]["state"] == "RUNNING"
            && task["state"] == "RUNNING"
            && runs_on(runner, task["worker_id"].as_str().unwrap_or_default())
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name} never ran on {}: {status}\n{}",
            runner.url,
            asked.process.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A deploy script that waits for the task to be RUNNING and then writes must find the
/// write relayed: as Debezium's task is once its start() made the slot, the relay's is
/// RUNNING only once its slot exists. An open transaction that wrote holds
/// CREATE_REPLICATION_SLOT back; until it ends the task is not RUNNING.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_is_running_only_once_its_slot_exists() {
    let stack = Stack::start_with_schema(Storage::Sqlite, EVENTS).await;
    let holder = stack.pg.connect().await.unwrap();
    holder
        .batch_execute("CREATE TABLE elsewhere (n int); BEGIN; INSERT INTO elsewhere VALUES (1)")
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let worker = start_worker(&stack, dir.path());
    let (code, body) = send(
        "POST",
        &format!("{}/connectors", worker.url),
        &register_json(&stack, "held").to_string(),
    );
    assert_eq!(code, 201, "{body}");
    // The slot is being made, waiting for the open transaction.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let waiting: i64 = stack
            .db
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' \
                 AND query ILIKE '%create%replication_slot%' AND pid <> pg_backend_pid()",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if waiting > 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the slot was never being made\n{}",
            worker.process.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (_, status) = curl(&[&format!(
        "{}/connectors/inventory-connector/status",
        worker.url
    )]);
    assert_eq!(status["connector"]["state"], "RUNNING", "{status}");
    assert_eq!(status["tasks"][0]["state"], "UNASSIGNED", "{status}");

    holder.batch_execute("COMMIT").await.unwrap();
    wait_state(&worker, "inventory-connector", "RUNNING", Some("RUNNING")).await;
    insert(&stack, 1, "Order").await;
    wait_values(&stack, "outbox.event.Order", &[r#"{"n": 1}"#]).await;
}

/// Two running workers on one config topic: what is done through either reaches the other
/// while it runs (as Connect's workers read their config topic), so a standby that takes
/// over runs the configuration and target state of the moment, not those it started with.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_through_one_worker_reach_the_other_while_it_runs() {
    let stack = Stack::start_with_schema(Storage::Sqlite, EVENTS).await;
    let dir = tempfile::tempdir().unwrap();
    let distributed = DISTRIBUTED;
    let mut a = start_worker_with(&stack, dir.path(), distributed);
    let mut b = start_worker_with(&stack, dir.path(), distributed);
    let (code, body) = send(
        "POST",
        &format!("{}/connectors", a.url),
        &register_json(&stack, "shared").to_string(),
    );
    assert_eq!(code, 201, "{body}");
    // Registered through a: b runs it too, one streaming and the other standing by.
    let (active, standby) = active_and_standby(&a, &b).await;
    insert(&stack, 1, "Order").await;
    wait_values(&stack, "outbox.event.Order", &[r#"{"n": 1}"#]).await;

    // Reconfigured through the standby: the active worker relays under the new routing.
    let (_, mut config) = curl(&[&format!(
        "{}/connectors/inventory-connector/config",
        standby.url
    )]);
    config["transforms.outbox.route.topic.replacement"] = json!("${routedByValue}.events");
    let (code, body) = send(
        "PUT",
        &format!("{}/connectors/inventory-connector/config", standby.url),
        &config.to_string(),
    );
    assert_eq!(code, 200, "{body}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, seen) = curl(&[&format!(
            "{}/connectors/inventory-connector/config",
            active.url
        )]);
        if seen == config {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never reached the other worker: {seen}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (active, standby) = active_and_standby(active, standby).await;
    insert(&stack, 2, "Order").await;
    wait_values(&stack, "Order.events", &[r#"{"n": 2}"#]).await;

    // Paused through the standby: both pause, nothing is relayed; resumed through the other.
    let (code, _) = curl(&[
        "-X",
        "PUT",
        &format!("{}/connectors/inventory-connector/pause", standby.url),
    ]);
    assert_eq!(code, 202);
    wait_state(active, "inventory-connector", "PAUSED", Some("PAUSED")).await;
    wait_state(standby, "inventory-connector", "PAUSED", Some("PAUSED")).await;
    insert(&stack, 3, "Order").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(values(&stack, "Order.events").await, [r#"{"n": 2}"#]);
    let (code, _) = curl(&[
        "-X",
        "PUT",
        &format!("{}/connectors/inventory-connector/resume", active.url),
    ]);
    assert_eq!(code, 202);
    let (active, standby) = active_and_standby(active, standby).await;
    wait_values(&stack, "Order.events", &[r#"{"n": 2}"#, r#"{"n": 3}"#]).await;

    // Deleted through one: gone from both, the slot no longer read by either.
    let (code, _) = curl(&[
        "-X",
        "DELETE",
        &format!("{}/connectors/inventory-connector", standby.url),
    ]);
    assert_eq!(code, 204);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (code, _) = curl(&[&format!(
            "{}/connectors/inventory-connector/status",
            active.url
        )]);
        if code == 404 {
            break;
        }
        assert!(Instant::now() < deadline, "still on the other worker");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while stack
        .db
        .query_one(
            "SELECT active FROM pg_replication_slots WHERE slot_name = 'shared'",
            &[],
        )
        .await
        .unwrap()
        .get::<_, bool>(0)
    {
        assert!(Instant::now() < deadline, "the slot is still read");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    a.process.terminate(Duration::from_secs(20)).unwrap();
    b.process.terminate(Duration::from_secs(20)).unwrap();
}

/// `/admin/loggers` as Connect's LoggingResource: list, read, set on this worker (the
/// loggers changed; the relay logs at the new level at once), set cluster-wide through the
/// config topic (204; the other worker applies it), and Connect's errors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_loggers_change_log_levels_while_running() {
    let stack = Stack::start_with_schema(Storage::Memory, EVENTS).await;
    let dir = tempfile::tempdir().unwrap();
    let distributed = DISTRIBUTED;
    let env = [("RUST_LOG", "info,rdkafka=warn")];
    let mut a = start_worker_env(&stack, dir.path(), distributed, &env);
    let mut b = start_worker_env(&stack, dir.path(), distributed, &env);
    let (code, all) = curl(&[&format!("{}/admin/loggers", a.url)]);
    assert_eq!(code, 200);
    assert_eq!(all["root"], json!({"level": "INFO", "last_modified": null}));
    assert_eq!(all["rdkafka"]["level"], "WARN");
    let (code, body) = curl(&[&format!("{}/admin/loggers/com.example.Nothing", a.url)]);
    assert_eq!(code, 404);
    assert_message(&body, "Logger com.example.Nothing not found.");
    let (_, inherited) = curl(&[&format!(
        "{}/admin/loggers/io.debezium.connector.postgresql",
        a.url
    )]);
    assert_eq!(inherited["level"], "INFO");

    // Registered and relaying at INFO: no debug lines.
    let (code, body) = send(
        "POST",
        &format!("{}/connectors", a.url),
        &register_json(&stack, "logged").to_string(),
    );
    assert_eq!(code, 201, "{body}");
    let (active, _) = active_and_standby(&a, &b).await;
    insert(&stack, 1, "Order").await;
    stack
        .wait_delivered("logged", Duration::from_secs(30), Some(&active.process))
        .await;
    assert!(
        !active.process.log().contains("DEBUG"),
        "{}",
        active.process.log()
    );

    // Set on the active worker: the loggers changed, and the relay's debug lines appear.
    let (code, changed) = send(
        "PUT",
        &format!("{}/admin/loggers/io.debezium", active.url),
        r#"{"level": "DEBUG"}"#,
    );
    assert_eq!(code, 200, "{changed}");
    assert_eq!(changed, json!(["io.debezium"]));
    let (_, level) = curl(&[&format!("{}/admin/loggers/io.debezium", active.url)]);
    assert_eq!(level["level"], "DEBUG");
    assert!(
        level["last_modified"].as_i64().unwrap() > 1_700_000_000_000,
        "{level}"
    );
    insert(&stack, 2, "Order").await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !active.process.log().contains("DEBUG") {
        assert!(
            Instant::now() < deadline,
            "no debug line: {}",
            active.process.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Connect's errors.
    let (code, body) = send(
        "PUT",
        &format!("{}/admin/loggers/io.debezium", a.url),
        r#"{"level": "verbose"}"#,
    );
    assert_eq!(code, 404);
    assert_message(&body, "invalid log level 'verbose'.");
    let (code, body) = send("PUT", &format!("{}/admin/loggers/io.debezium", a.url), "{}");
    assert_eq!(code, 400);
    assert_message(
        &body,
        "Desired 'level' parameter was not specified in request.",
    );

    // Cluster-wide through a: b applies it too.
    let (code, _) = send(
        "PUT",
        &format!(
            "{}/admin/loggers/org.apache.kafka.connect?scope=cluster",
            a.url
        ),
        r#"{"level": "TRACE"}"#,
    );
    assert_eq!(code, 204);
    for worker in [&a, &b] {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (_, level) = curl(&[&format!(
                "{}/admin/loggers/org.apache.kafka.connect",
                worker.url
            )]);
            if level["level"] == "TRACE" {
                break;
            }
            assert!(Instant::now() < deadline, "not applied: {level}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    a.process.terminate(Duration::from_secs(20)).unwrap();
    b.process.terminate(Duration::from_secs(20)).unwrap();
}

/// Config providers resolve as in Connect (the worker's `config.providers`), and the
/// configuration is shown as registered: `GET …/config` never echoes what a provider read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_providers_resolve_and_config_shows_them_unresolved() {
    let stack = Stack::start_with_schema(Storage::Memory, EVENTS).await;
    let dir = tempfile::tempdir().unwrap();
    let secrets = dir.path().join("secrets.properties");
    std::fs::write(&secrets, "slot=from_file\npassword=postgres\n").unwrap();
    let worker = start_worker_with(
        &stack,
        dir.path(),
        "config.providers=file\n\
         config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider\n",
    );
    let mut register = register_json(&stack, "unused");
    let slot_ref = format!("${{file:{}:slot}}", secrets.display());
    let password_ref = format!("${{file:{}:password}}", secrets.display());
    register["config"]["slot.name"] = json!(slot_ref);
    register["config"]["database.password"] = json!(password_ref);
    let (code, created) = send(
        "POST",
        &format!("{}/connectors", worker.url),
        &register.to_string(),
    );
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["config"]["database.password"], json!(password_ref));
    wait_state(&worker, "inventory-connector", "RUNNING", Some("RUNNING")).await;
    // The slot the relay streams from is the one the file names.
    stack
        .wait_confirmed(
            "from_file",
            outbox_relay_testkit::Lsn::from_u64(1),
            Duration::from_secs(30),
            Some(&worker.process),
        )
        .await;
    insert(&stack, 1, "Order").await;
    wait_values(&stack, "outbox.event.Order", &[r#"{"n": 1}"#]).await;
    let active: bool = stack
        .db
        .query_one(
            "SELECT active FROM pg_replication_slots WHERE slot_name = 'from_file'",
            &[],
        )
        .await
        .expect("the slot named in the secrets file")
        .get(0);
    assert!(active);
    let (_, config) = curl(&[&format!(
        "{}/connectors/inventory-connector/config",
        worker.url
    )]);
    assert_eq!(config["slot.name"], json!(slot_ref));
    assert_eq!(config["database.password"], json!(password_ref));
    let (_, info) = curl(&[&format!("{}/connectors/inventory-connector", worker.url)]);
    assert_eq!(info["config"]["database.password"], json!(password_ref));
    let mut worker = worker;
    worker.process.terminate(Duration::from_secs(20)).unwrap();
}

/// `topic.tracking.enable=false` and `topic.tracking.allow.reset=false` refuse as Connect does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_tracking_can_be_turned_off_as_in_connect() {
    let stack = Stack::start_with_schema(Storage::Memory, EVENTS).await;
    let dir = tempfile::tempdir().unwrap();
    let mut off = start_worker_with(&stack, dir.path(), "topic.tracking.enable=false\n");
    let (code, body) = curl(&[&format!("{}/connectors/any/topics", off.url)]);
    assert_eq!(code, 403, "{body}");
    assert_message(&body, "Topic tracking is disabled.");
    let mut no_reset = start_worker_with(&stack, dir.path(), "topic.tracking.allow.reset=false\n");
    let (code, body) = curl(&[&format!("{}/connectors/any/topics", no_reset.url)]);
    assert_eq!((code, body), (200, json!({"any": {"topics": []}})));
    let (code, body) = curl(&[
        "-X",
        "PUT",
        &format!("{}/connectors/any/topics/reset", no_reset.url),
    ]);
    assert_eq!(code, 403, "{body}");
    assert_message(&body, "Topic tracking reset is disabled.");
    off.process.terminate(Duration::from_secs(20)).unwrap();
    no_reset.process.terminate(Duration::from_secs(20)).unwrap();
}

/// Standalone mode, as `connect-standalone worker.properties connector.properties…`: the
/// connectors named on the command line (a .properties file and a JSON file) run from the
/// start, each on its own slot, and the REST API shows and manages them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standalone_connector_files_run_from_the_start() {
    let stack = Stack::start_with_schema(Storage::Memory, EVENTS).await;
    let dir = tempfile::tempdir().unwrap();
    let tutorial = register_json(&stack, "standalone_props")["config"].clone();
    let properties: String = tutorial
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| format!("{k}={}\n", v.as_str().unwrap()))
        .collect();
    let props_file = dir.path().join("postgres.properties");
    std::fs::write(&props_file, format!("name=from-properties\n{properties}")).unwrap();
    let mut second = register_json(&stack, "standalone_json");
    second["name"] = json!("from-json");
    second["config"]["transforms.outbox.route.topic.replacement"] =
        json!("${routedByValue}.events");
    let json_file = dir.path().join("second.json");
    std::fs::write(&json_file, second.to_string()).unwrap();
    let mut worker = start_worker_args(&stack, dir.path(), "", &[], &[&props_file, &json_file]);
    let (_, names) = curl(&[&format!("{}/connectors", worker.url)]);
    assert_eq!(names, json!(["from-json", "from-properties"]));
    for (name, slot) in [
        ("from-properties", "standalone_props"),
        ("from-json", "standalone_json"),
    ] {
        wait_state(&worker, name, "RUNNING", Some("RUNNING")).await;
        stack
            .wait_confirmed(
                slot,
                outbox_relay_testkit::Lsn::from_u64(1),
                Duration::from_secs(30),
                Some(&worker.process),
            )
            .await;
    }
    insert(&stack, 1, "Order").await;
    wait_values(&stack, "outbox.event.Order", &[r#"{"n": 1}"#]).await;
    wait_values(&stack, "Order.events", &[r#"{"n": 1}"#]).await;
    let (_, config) = curl(&[&format!("{}/connectors/from-properties/config", worker.url)]);
    assert_eq!(config["slot.name"], "standalone_props");
    worker.process.terminate(Duration::from_secs(20)).unwrap();
}

/// Pause, resume and config changes sent at once, from several clients, on one connector:
/// they are applied one after the other, never leaving a second pipeline beside the
/// connector's (an orphan would hold the slot for ever). After the storm a resume streams,
/// and a pause lets go of the slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_pause_resume_and_config_never_leave_two_pipelines() {
    let stack = Stack::start_with_schema(Storage::Sqlite, EVENTS).await;
    let dir = tempfile::tempdir().unwrap();
    let worker = start_worker(&stack, dir.path());
    let register = register_json(&stack, "storm");
    let (code, body) = send(
        "POST",
        &format!("{}/connectors", worker.url),
        &register.to_string(),
    );
    assert_eq!(code, 201, "{body}");
    wait_state(&worker, "inventory-connector", "RUNNING", Some("RUNNING")).await;
    let base = format!("{}/connectors/inventory-connector", worker.url);
    // Plain HTTP from many threads at once (a curl process each would rarely overlap).
    let address = worker.url.trim_start_matches("http://").to_owned();
    let config = {
        let mut config = register["config"].clone();
        config["status.update.interval.ms"] = json!("500");
        config.to_string()
    };
    let clients: Vec<_> = (0..12)
        .map(|client| {
            let address = address.clone();
            let config = config.clone();
            std::thread::spawn(move || {
                for round in 0..20 {
                    let (path, body) = match (client + round) % 5 {
                        0 | 2 => ("resume", ""),
                        1 | 3 => ("pause", ""),
                        _ => ("config", config.as_str()),
                    };
                    raw_put(
                        &address,
                        &format!("/connectors/inventory-connector/{path}"),
                        body,
                    );
                }
            })
        })
        .collect();
    for client in clients {
        client.join().unwrap();
    }
    let (code, _) = send("PUT", &format!("{base}/resume"), "");
    assert_eq!(code, 202);
    wait_state(&worker, "inventory-connector", "RUNNING", Some("RUNNING")).await;
    insert(&stack, 1, "Order").await;
    wait_values(&stack, "outbox.event.Order", &[r#"{"n": 1}"#]).await;
    let (code, _) = send("PUT", &format!("{base}/pause"), "");
    assert_eq!(code, 202);
    wait_state(&worker, "inventory-connector", "PAUSED", Some("PAUSED")).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let active: bool = stack
            .db
            .query_one(
                "SELECT active FROM pg_replication_slots WHERE slot_name = 'storm'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if !active {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "a pipeline still holds the slot after the pause:\n{}",
            worker.process.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Paused: what is written now waits in the slot.
    insert(&stack, 2, "Order").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(values(&stack, "outbox.event.Order").await, [r#"{"n": 1}"#]);
}

/// `PUT path` with a JSON `body`, over one plain TCP connection: the status code.
fn raw_put(address: &str, path: &str, body: &str) -> u16 {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    write!(
        stream,
        "PUT {path} HTTP/1.1\r\nHost: worker\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// Connector `i` of a cluster test: its own slot, its events on `c<i>.<aggregate type>`.
fn cluster_connector(stack: &Stack, i: usize) -> Value {
    let mut c = register_json(stack, &format!("c{i}"));
    c["name"] = json!(format!("c{i}"));
    c["config"]["transforms.outbox.route.topic.replacement"] =
        json!(format!("c{i}.${{routedByValue}}"));
    c
}

/// The status of every connector as `w` reports it (`GET /connectors?expand=status`).
fn statuses(w: &Worker) -> Value {
    curl(&[&format!("{}/connectors?expand=status", w.url)]).1
}

/// Until every worker of `workers` reports the same status for `n` connectors, each RUNNING
/// on one of `workers`, spread as `want` (connectors per worker, sorted): connector → the
/// worker id running it.
async fn settled(
    workers: &[&Worker],
    n: usize,
    want: &[usize],
) -> std::collections::BTreeMap<String, String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let seen: Vec<Value> = workers.iter().map(|w| statuses(w)).collect();
        let first = &seen[0];
        let runners: Option<std::collections::BTreeMap<String, String>> =
            first.as_object().filter(|o| o.len() == n).and_then(|o| {
                o.iter()
                    .map(|(name, s)| {
                        let task = &s["status"]["tasks"][0];
                        let id = task["worker_id"].as_str()?;
                        (s["status"]["connector"]["state"] == "RUNNING"
                            && task["state"] == "RUNNING"
                            && workers.iter().any(|w| runs_on(w, id)))
                        .then(|| (name.clone(), id.to_owned()))
                    })
                    .collect()
            });
        if let Some(runners) = runners {
            if seen.iter().all(|s| s == first) && spread(&runners) == want {
                return runners;
            }
        }
        assert!(
            Instant::now() < deadline,
            "never settled: {seen:?}\n{}",
            workers[0].process.log()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// How many connectors each worker id runs, sorted.
fn spread(runners: &std::collections::BTreeMap<String, String>) -> Vec<usize> {
    let mut by: std::collections::BTreeMap<&str, usize> = Default::default();
    for id in runners.values() {
        *by.entry(id).or_default() += 1;
    }
    let mut counts: Vec<usize> = by.into_values().collect();
    counts.sort();
    counts
}

/// Until each of the connectors' topics holds events 1..=n (each at least once, in order).
async fn wait_all_events(stack: &Stack, connectors: usize, n: u32) {
    for i in 0..connectors {
        let topic = format!("c{i}.Order");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let mut got: Vec<String> = values(stack, &topic).await;
            got.dedup();
            let want: Vec<String> = (1..=n).map(|k| format!(r#"{{"n": {k}}}"#)).collect();
            let firsts: Vec<&String> = {
                let mut seen = std::collections::BTreeSet::new();
                got.iter().filter(|v| seen.insert(v.to_string())).collect()
            };
            if firsts
                .iter()
                .map(|s| s.as_str())
                .eq(want.iter().map(String::as_str))
            {
                break;
            }
            assert!(Instant::now() < deadline, "{topic}: {got:?}, want {want:?}");
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
}

/// Three workers of one cluster and nine connectors: spread 3/3/3 and the same status from
/// every worker; a worker killed -9: its three move to the others within the session
/// timeout and a start, 0 events lost; back on its port: three move to it, nothing else
/// does; a fourth joins: 3/2/2/2. A restart asked of a worker that does not run the
/// connector reaches the one that does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_spreads_connectors_and_moves_a_dead_workers() {
    let stack = Stack::start_with_schema(Storage::Memory, EVENTS).await;
    let dir = tempfile::tempdir().unwrap();
    let w1 = start_worker_with(&stack, dir.path(), DISTRIBUTED);
    let w2_port = outbox_relay_testkit::net::free_port();
    let mut w2 = start_worker_on(&stack, dir.path(), DISTRIBUTED, &[], &[], w2_port);
    let w3 = start_worker_with(&stack, dir.path(), DISTRIBUTED);
    for i in 0..9 {
        let (code, body) = send(
            "POST",
            &format!("{}/connectors", w1.url),
            &cluster_connector(&stack, i).to_string(),
        );
        assert_eq!(code, 201, "{body}");
    }
    let runners = settled(&[&w1, &w2, &w3], 9, &[3, 3, 3]).await;
    insert(&stack, 1, "Order").await;
    wait_all_events(&stack, 9, 1).await;

    // Metrics: each worker counts the connectors it runs, and its rebalances.
    let metrics = curl(&[&format!("{}/metrics", w1.metrics)]).1;
    let metrics = metrics.as_str().unwrap_or_default().to_owned();
    assert!(
        metrics.contains("outbox_relay_connect_worker_connector_count 3"),
        "{metrics}"
    );
    assert!(
        metrics.contains("outbox_relay_connect_worker_rebalances_total"),
        "{metrics}"
    );

    // w2 killed -9 while events are written: its three move within the bound.
    let w2_id = format!("127.0.0.1:{w2_port}");
    let on_w2: Vec<String> = runners
        .iter()
        .filter(|(_, id)| **id == w2_id)
        .map(|(c, _)| c.clone())
        .collect();
    assert_eq!(on_w2.len(), 3);
    insert(&stack, 2, "Order").await;
    let killed = Instant::now();
    w2.process.kill9();
    insert(&stack, 3, "Order").await;
    let after_kill = settled(&[&w1, &w3], 9, &[4, 5]).await;
    let moved_in = killed.elapsed();
    eprintln!("a killed worker's connectors streamed again elsewhere after {moved_in:?}");
    assert!(
        moved_in < Duration::from_secs(15),
        "session.timeout.ms=6000: moved after {moved_in:?}"
    );
    for (c, id) in &runners {
        if *id != w2_id {
            assert_eq!(&after_kill[c], id, "{c} moved though its worker lives");
        }
    }
    insert(&stack, 4, "Order").await;
    wait_all_events(&stack, 9, 4).await;

    // w2 back on its port: three move to it, nothing else.
    let w2 = start_worker_on(&stack, dir.path(), DISTRIBUTED, &[], &[], w2_port);
    let back = settled(&[&w1, &w2, &w3], 9, &[3, 3, 3]).await;
    let moved: Vec<&String> = back
        .iter()
        .filter(|(c, id)| after_kill[*c] != **id)
        .map(|(c, _)| c)
        .collect();
    assert_eq!(moved.len(), 3, "{after_kill:?} → {back:?}");
    assert!(moved.iter().all(|c| back[*c] == w2_id));

    // A restart asked of a worker that does not run the connector: the one that does
    // restarts it (its task RUNNING again, on the same worker).
    let (c, runner) = back.iter().find(|(_, id)| !runs_on(&w1, id)).unwrap();
    let (code, body) = curl(&[
        "-X",
        "POST",
        &format!("{}/connectors/{c}/restart?includeTasks=true", w1.url),
    ]);
    assert!(code == 202 || code == 204, "{code} {body}");
    let running_it = [&w2, &w3].into_iter().find(|w| runs_on(w, runner)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !running_it
        .process
        .log()
        .lines()
        .any(|l| l.contains("restart requested through the config topic") && l.contains(c.as_str()))
    {
        assert!(Instant::now() < deadline, "{}", running_it.process.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let again = settled(&[&w1, &w2, &w3], 9, &[3, 3, 3]).await;
    assert_eq!(&again[c], runner);

    // A fourth joins: two move to it.
    let w4 = start_worker_with(&stack, dir.path(), DISTRIBUTED);
    let four = settled(&[&w1, &w2, &w3, &w4], 9, &[2, 2, 2, 3]).await;
    let moved = four.iter().filter(|(c, id)| again[*c] != **id).count();
    assert_eq!(moved, 2, "{again:?} → {four:?}");
    insert(&stack, 5, "Order").await;
    wait_all_events(&stack, 9, 5).await;

    // The status topic holds Connect's records.
    let records = stack.read_topic("connect-status").await;
    let task = records
        .iter()
        .rev()
        .find(|r| r.key.as_deref() == Some(b"status-task-c0-0".as_slice()))
        .expect("a task status record");
    let value: Value = serde_json::from_slice(task.value.as_deref().unwrap()).unwrap();
    assert_eq!(value["state"], "RUNNING", "{value}");
    assert!(value["generation"].as_i64().unwrap() > 0, "{value}");
    assert_eq!(value["worker_id"], json!(four["c0"]), "{value}");

    // The offset topic holds Debezium's offsets as Connect writes them, at the slot's position.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let records = stack.read_topic("connect-offsets").await;
        let latest = records
            .iter()
            .rev()
            .find(|r| r.key.as_deref() == Some(br#"["c0",{"server":"dbserver1"}]"#.as_slice()))
            .and_then(|r| serde_json::from_slice::<Value>(r.value.as_deref()?).ok());
        let slot: i64 = stack
            .db
            .query_one(
                "SELECT (confirmed_flush_lsn - '0/0')::bigint FROM pg_replication_slots WHERE slot_name = 'c0'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if latest
            .as_ref()
            .is_some_and(|v| v["lsn"] == json!(slot) && v["lsn_commit"] == json!(slot))
        {
            break;
        }
        assert!(Instant::now() < deadline, "{latest:?}, the slot at {slot}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    for mut w in [w1, w2, w3, w4] {
        w.process.terminate(Duration::from_secs(20)).unwrap();
    }
}

/// The tutorial's curl sequence sent to worker 2 of a 3-worker cluster, whichever worker
/// runs the connector: register (201, then 409), status, pause and resume, a new
/// configuration, restarts, topics and their reset, delete; each worker answers the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tutorials_curl_sequence_against_worker_two_of_three() {
    let stack = Stack::start_with_schema(Storage::Memory, EVENTS).await;
    let dir = tempfile::tempdir().unwrap();
    let w1 = start_worker_with(&stack, dir.path(), DISTRIBUTED);
    let w2 = start_worker_with(&stack, dir.path(), DISTRIBUTED);
    let w3 = start_worker_with(&stack, dir.path(), DISTRIBUTED);
    let all = [&w1, &w2, &w3];
    let url = &w2.url;
    let body = register_json(&stack, "tutorial").to_string();
    let (code, created) = send("POST", &format!("{url}/connectors/"), &body);
    assert_eq!(code, 201, "{created}");
    let (code, _) = send("POST", &format!("{url}/connectors/"), &body);
    assert_eq!(code, 409);
    settled(&all, 1, &[1]).await;
    insert(&stack, 1, "Order").await;
    wait_values(&stack, "outbox.event.Order", &[r#"{"n": 1}"#]).await;

    // Paused through w2: PAUSED from every worker, nothing relayed; resumed.
    let connector = format!("{url}/connectors/inventory-connector");
    let (code, _) = curl(&["-X", "PUT", &format!("{connector}/pause")]);
    assert_eq!(code, 202);
    for w in all {
        wait_state(w, "inventory-connector", "PAUSED", Some("PAUSED")).await;
    }
    insert(&stack, 2, "Order").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(values(&stack, "outbox.event.Order").await.len(), 1);
    let (code, _) = curl(&["-X", "PUT", &format!("{connector}/resume")]);
    assert_eq!(code, 202);
    wait_values(
        &stack,
        "outbox.event.Order",
        &[r#"{"n": 1}"#, r#"{"n": 2}"#],
    )
    .await;

    // A new configuration through w2 reaches the worker running it.
    let mut config = register_json(&stack, "tutorial")["config"].clone();
    config["transforms.outbox.route.topic.replacement"] = json!("${routedByValue}.events");
    let (code, updated) = send("PUT", &format!("{connector}/config"), &config.to_string());
    assert_eq!(code, 200, "{updated}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !all.iter().all(|w| {
        curl(&[&format!("{}/connectors/inventory-connector/config", w.url)]).1
            ["transforms.outbox.route.topic.replacement"]
            == "${routedByValue}.events"
    }) {
        assert!(
            Instant::now() < deadline,
            "the new configuration never reached every worker"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    settled(&all, 1, &[1]).await;
    insert(&stack, 3, "Order").await;
    wait_values(&stack, "Order.events", &[r#"{"n": 3}"#]).await;

    // Restarts through w2 (204; 202 with the status).
    let (code, _) = curl(&["-X", "POST", &format!("{connector}/restart")]);
    assert_eq!(code, 204);
    let (code, restarted) = curl(&[
        "-X",
        "POST",
        &format!("{connector}/restart?includeTasks=true&onlyFailed=false"),
    ]);
    assert_eq!(code, 202, "{restarted}");
    settled(&all, 1, &[1]).await;
    insert(&stack, 4, "Order").await;
    wait_values(&stack, "Order.events", &[r#"{"n": 3}"#, r#"{"n": 4}"#]).await;

    // Its topics, the same from every worker, whichever runs it; reset through w2.
    let topics_of =
        |w: &Worker| curl(&[&format!("{}/connectors/inventory-connector/topics", w.url)]).1;
    let want = json!({"inventory-connector": {"topics": ["Order.events", "outbox.event.Order"]}});
    let deadline = Instant::now() + Duration::from_secs(20);
    while !all.iter().all(|w| topics_of(w) == want) {
        assert!(Instant::now() < deadline, "{:?}", all.map(topics_of));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (code, _) = curl(&["-X", "PUT", &format!("{connector}/topics/reset")]);
    assert_eq!(code, 202);
    let empty = json!({"inventory-connector": {"topics": []}});
    let deadline = Instant::now() + Duration::from_secs(20);
    while !all.iter().all(|w| topics_of(w) == empty) {
        assert!(Instant::now() < deadline, "{:?}", all.map(topics_of));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    insert(&stack, 5, "Order").await;
    let only = json!({"inventory-connector": {"topics": ["Order.events"]}});
    let deadline = Instant::now() + Duration::from_secs(20);
    while !all.iter().all(|w| topics_of(w) == only) {
        assert!(Instant::now() < deadline, "{:?}", all.map(topics_of));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Deleted through w2: gone from every worker, its slot read by none.
    let (code, _) = curl(&["-X", "DELETE", &connector]);
    assert_eq!(code, 204);
    for w in all {
        let deadline = Instant::now() + Duration::from_secs(20);
        while curl(&[&format!("{}/connectors/inventory-connector/status", w.url)]).0 != 404 {
            assert!(Instant::now() < deadline, "still on {}", w.url);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while stack
        .db
        .query_one(
            "SELECT active FROM pg_replication_slots WHERE slot_name = 'tutorial'",
            &[],
        )
        .await
        .unwrap()
        .get::<_, bool>(0)
    {
        assert!(Instant::now() < deadline, "the slot is still read");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for mut w in [w1, w2, w3] {
        w.process.terminate(Duration::from_secs(20)).unwrap();
    }
}

/// `scheduled.rebalance.max.delay.ms`: a worker killed -9 and back on its port within the
/// delay gets its own connectors back, and nothing else moves; meanwhile they are reported
/// UNASSIGNED, not RUNNING on the dead worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_back_within_the_delay_gets_its_connectors_back() {
    let stack = Stack::start_with_schema(Storage::Memory, EVENTS).await;
    let dir = tempfile::tempdir().unwrap();
    let delayed = DISTRIBUTED.replace(
        "scheduled.rebalance.max.delay.ms=0",
        "scheduled.rebalance.max.delay.ms=60000",
    );
    let w1 = start_worker_with(&stack, dir.path(), &delayed);
    let w2_port = outbox_relay_testkit::net::free_port();
    let mut w2 = start_worker_on(&stack, dir.path(), &delayed, &[], &[], w2_port);
    for i in 0..4 {
        let (code, body) = send(
            "POST",
            &format!("{}/connectors", w1.url),
            &cluster_connector(&stack, i).to_string(),
        );
        assert_eq!(code, 201, "{body}");
    }
    let before = settled(&[&w1, &w2], 4, &[2, 2]).await;
    let w2_id = format!("127.0.0.1:{w2_port}");
    let on_w2: Vec<&String> = before
        .iter()
        .filter(|(_, id)| **id == w2_id)
        .map(|(c, _)| c)
        .collect();
    w2.process.kill9();
    // Held for it: UNASSIGNED once the coordinator saw it go, the others untouched.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let all = statuses(&w1);
        let held = on_w2
            .iter()
            .all(|c| all[c.as_str()]["status"]["tasks"][0]["state"] == "UNASSIGNED");
        let kept = before
            .iter()
            .filter(|(_, id)| **id != w2_id)
            .all(|(c, id)| {
                all[c.as_str()]["status"]["tasks"][0]["state"] == "RUNNING"
                    && all[c.as_str()]["status"]["tasks"][0]["worker_id"] == json!(id)
            });
        if held && kept {
            break;
        }
        assert!(Instant::now() < deadline, "{all}\n{}", w1.process.log());
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let w2 = start_worker_on(&stack, dir.path(), &delayed, &[], &[], w2_port);
    let after = settled(&[&w1, &w2], 4, &[2, 2]).await;
    assert_eq!(after, before, "each connector back where it ran");
    insert(&stack, 1, "Order").await;
    wait_all_events(&stack, 4, 1).await;
    for mut w in [w1, w2] {
        w.process.terminate(Duration::from_secs(20)).unwrap();
    }
}
