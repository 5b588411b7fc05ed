//! `setup-sql`, `check` and `status` as an operator uses them.

mod common;

use common::*;
use outbox_relay_testkit::{Broker, PgCluster, RelayProcess, Storage};
use std::process::Command;
use std::time::Duration;

const SLOT: &str = "outbox_relay";
const SECRET: &str = "s3cret-pw-do-not-print";

fn relay(args: &[&str]) -> (i32, String) {
    let out = Command::new(RELAY).args(args).output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!text.contains(SECRET), "a password was printed:\n{text}");
    (out.status.code().unwrap_or(-1), text)
}

/// Exit code and standard output alone (for output meant for programs).
fn relay_stdout(args: &[&str]) -> (i32, String) {
    let out = Command::new(RELAY).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_sql_gives_a_least_privilege_role_that_check_accepts_and_run_works_with() {
    let pg = PgCluster::start()
        .unwrap_or_else(|e| panic!("cannot start PostgreSQL for this test: {e:#}"));
    let broker = Broker::start(Storage::Sqlite)
        .unwrap_or_else(|e| panic!("cannot start Apache Kafka: {e:#}"));
    let (code, sql) = relay(&["setup-sql"]);
    assert_eq!(code, 0);
    // As a DBA would: through psql, one statement at a time.
    let mut psql = pg
        .client("psql")
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    psql.stdin
        .take()
        .unwrap()
        .write_all(sql.replace("change-me", SECRET).as_bytes())
        .unwrap();
    let psql = psql.wait_with_output().unwrap();
    assert!(
        psql.status.success(),
        "the printed SQL fails in psql: {}",
        String::from_utf8_lossy(&psql.stderr)
    );
    let admin = pg.connect().await.unwrap();

    let url = pg.url_for("outbox_relay", SECRET, "postgres");
    let bootstrap = broker.bootstrap_servers();
    let common = [
        "--postgres-url",
        &url,
        "--bootstrap-servers",
        &bootstrap,
        "--topic-replication-factor",
        "1",
    ];
    let (code, out) = relay(&[&["check"][..], &common[..]].concat());
    assert_eq!(code, 0, "check with the setup-sql role:\n{out}");
    assert!(
        out.contains("ok   role outbox_relay may replicate"),
        "{out}"
    );
    assert!(out.contains("run can start"), "{out}");

    let args: Vec<String> = [
        &["run"][..],
        &common[..],
        &[
            "--metrics-address",
            "127.0.0.1:0",
            "--status-interval-ms",
            "100",
        ][..],
    ]
    .concat()
    .iter()
    .map(|s| s.to_string())
    .collect();
    let relay_process = RelayProcess::spawn(std::path::Path::new(RELAY), &args, &[]).unwrap();
    admin
        .batch_execute(
            "INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload) \
             VALUES (gen_random_uuid(), 'Order', 'o-1', 'OrderCreated', '{}')",
        )
        .await
        .unwrap();
    outbox_relay_testkit::wait_delivered(&admin, SLOT, Duration::from_secs(30), || {
        relay_process.log()
    })
    .await;
    let records = tokio::task::spawn_blocking(move || {
        outbox_relay_testkit::read_topic(&bootstrap, "Order.events")
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(records.len(), 1, "relay log:\n{}", relay_process.log());

    let (code, out) = relay(&["status", "--postgres-url", &url]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("plugin          pgoutput") && out.contains("active          yes (pid"),
        "{out}"
    );
    assert!(out.contains("lag "), "{out}");

    let (code, out) = relay_stdout(&["status", "--postgres-url", &url, "--output", "json"]);
    assert_eq!(code, 0, "{out}");
    let status: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON object");
    assert_eq!(status["slot"], SLOT);
    assert_eq!(status["plugin"], "pgoutput");
    assert_eq!(status["active"], true);
    assert!(status["active_pid"].as_i64().is_some(), "{status}");
    assert!(status["lag_bytes"].as_i64().is_some(), "{status}");
    assert!(
        status["confirmed_lsn"].as_str().unwrap().contains('/'),
        "{status}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_names_what_blocks_run_and_the_sql_that_fixes_it() {
    let stack = Stack::start().await;
    stack
        .db
        .batch_execute(&format!(
            "CREATE ROLE plain LOGIN PASSWORD '{SECRET}'; GRANT SELECT ON outbox TO plain;"
        ))
        .await
        .unwrap();
    let url = stack.pg.url_for("plain", SECRET, "postgres");
    let bootstrap = stack.broker.bootstrap_servers();
    let (code, out) = relay(&[
        "check",
        "--postgres-url",
        &url,
        "--bootstrap-servers",
        &bootstrap,
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("FAIL role plain lacks the REPLICATION attribute"),
        "{out}"
    );
    assert!(
        out.contains("fix: ALTER ROLE \"plain\" REPLICATION;"),
        "{out}"
    );
    assert!(
        out.contains("this role may not create it") && out.contains("CREATE PUBLICATION"),
        "{out}"
    );

    let (code, out) = relay(&[
        "check",
        "--postgres-url",
        &stack.pg.url(),
        "--bootstrap-servers",
        &bootstrap,
        "--table",
        "public.events",
    ]);
    assert_eq!(code, 1);
    assert!(
        out.contains("FAIL table public.events does not exist") && out.contains("sql/outbox.sql"),
        "{out}"
    );

    let (code, out) = relay(&[
        "check",
        "--postgres-url",
        &stack.pg.url(),
        "--bootstrap-servers",
        "127.0.0.1:1",
    ]);
    assert_eq!(code, 1);
    assert!(
        out.contains("FAIL Kafka at 127.0.0.1:1 does not answer"),
        "{out}"
    );

    let (code, out) = relay(&["status", "--postgres-url", &stack.pg.url()]);
    assert_eq!(code, 3, "no slot yet: {out}");
    assert!(out.contains("does not exist"), "{out}");
    let (code, out) = relay_stdout(&[
        "status",
        "--postgres-url",
        &stack.pg.url(),
        "--output",
        "json",
    ]);
    assert_eq!(code, 3, "no slot yet: {out}");
    let status: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON object");
    assert_eq!(status["exists"], false);
    let (code, _) = relay(&[
        "status",
        "--postgres-url",
        "postgres://postgres@127.0.0.1:1/postgres",
    ]);
    assert_eq!(code, 1, "an error is not a missing slot");
}

/// `preview` prints what `run` would produce from the slot's pending changes (events and
/// dead letters), produces nothing and leaves the slot where it was; `run` then produces
/// exactly those records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preview_shows_what_run_would_produce_without_producing_or_moving_the_slot() {
    let stack = Stack::start().await;
    let mut first = stack.spawn_relay_and_wait_for_slot(SLOT, &[]).await;
    first.terminate(Duration::from_secs(30)).unwrap();
    stack
        .db
        .batch_execute(
            "INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload) VALUES
               ('00000000-0000-0000-0000-000000000001', 'Order', 'o-1', 'Created', '{\"n\": 1}'),
               ('00000000-0000-0000-0000-000000000002', 'Order', 'o-1', 'Deleted', NULL);
             INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload) VALUES
               ('00000000-0000-0000-0000-000000000003', '', 'o-2', 'Created', '{\"n\": 3}')",
        )
        .await
        .unwrap();
    let before = stack.confirmed_flush_lsn(SLOT).await;
    let mut args = stack.relay_args(&["--output", "json"]);
    args[0] = "preview".into();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out) = relay_stdout(&args);
    assert_eq!(code, 0, "{out}");
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert_eq!(lines[0]["topic"], "Order.events");
    assert_eq!(lines[0]["key"], "o-1");
    assert_eq!(lines[0]["value"], "{\"n\": 1}");
    assert_eq!(
        lines[0]["headers"]["id"],
        "00000000-0000-0000-0000-000000000001"
    );
    assert_eq!(lines[1]["value"], serde_json::Value::Null, "a tombstone");
    assert_eq!(lines[2]["dead_letter"], true);
    assert_eq!(lines[2]["topic"], "outbox-relay.dlq");
    assert_eq!(
        stack.confirmed_flush_lsn(SLOT).await,
        before,
        "the slot did not move"
    );
    assert!(
        !stack.topics().await.contains(&"Order.events".to_string()),
        "nothing was produced"
    );
    // The text form, for people.
    let mut text_args: Vec<&str> = args.clone();
    text_args.truncate(text_args.len() - 2);
    let (code, text) = relay_stdout(&text_args);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("2 event(s), 1 dead letter(s) pending"),
        "{text}"
    );

    // run produces exactly what preview showed.
    let running = stack.spawn_relay(&[]);
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&running))
        .await;
    let produced = stack.read_topic("Order.events").await;
    assert_eq!(produced.len(), 2);
    for (record, shown) in produced.iter().zip(&lines) {
        assert_eq!(record.key_str(), shown["key"].as_str());
        assert_eq!(record.value_str(), shown["value"].as_str());
        let headers: serde_json::Map<String, serde_json::Value> = record
            .headers
            .iter()
            .map(|(k, v)| {
                let v = v
                    .as_deref()
                    .map(|b| String::from_utf8_lossy(b).into_owned());
                (k.clone(), v.map_or(serde_json::Value::Null, Into::into))
            })
            .collect();
        assert_eq!(serde_json::Value::Object(headers), shown["headers"]);
    }

    // A slot a relay streams from cannot be peeked: said so, exit 1; no slot: exit 3.
    let (code, out) = relay(&args);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("a running relay holds slot outbox_relay"),
        "{out}"
    );
    let mut missing = args.clone();
    missing.extend(["--slot", "nothing_here"]);
    assert_eq!(relay_stdout(&missing).0, 3);
}
