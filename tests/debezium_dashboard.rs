//! Debezium's metric names: a real Prometheus scrapes a relay running a Debezium connector
//! configuration (an initial snapshot, then streaming), and every panel of the Grafana
//! dashboard of Debezium's monitoring example returns data, its template variables resolved
//! as Grafana resolves them. `--debezium-metrics false` leaves the series out.

mod common;

use common::*;
use outbox_relay_testkit::{http, Storage};
use serde_json::Value;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const QUERIES: &str = include_str!("fixtures/debezium/dashboard-queries.txt");

/// A Prometheus of the test's own, scraping `target` every second.
struct Prometheus {
    child: Child,
    address: String,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(target: &str) -> Prometheus {
        let binary = which("prometheus").unwrap_or_else(|| {
            panic!(
                "Prometheus is needed by this test: scripts/install-deps.sh installs it \
                 (apt-get install prometheus)"
            )
        });
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: prometheus\n    \
                 static_configs:\n      - targets: [\"{target}\"]\n"
            ),
        )
        .unwrap();
        let port = outbox_relay_testkit::net::free_port();
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("log")).unwrap())
            .spawn()
            .expect("start prometheus");
        assert!(
            outbox_relay_testkit::net::wait_for_port(port, Duration::from_secs(30)),
            "Prometheus never listened: {}",
            std::fs::read_to_string(dir.path().join("log")).unwrap_or_default()
        );
        Prometheus {
            child,
            address: format!("127.0.0.1:{port}"),
            _dir: dir,
        }
    }

    /// An instant query's result vector.
    fn query(&self, promql: &str) -> Vec<Value> {
        let out = Command::new("curl")
            .args(["-s", "-G", "--data-urlencode"])
            .arg(format!("query={promql}"))
            .arg(format!("http://{}/api/v1/query", self.address))
            .output()
            .expect("curl is needed by this test: apt-get install curl");
        let body: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        assert_ne!(body["status"], "error", "{promql}: {body}");
        body["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn which(name: &str) -> Option<String> {
    let out = Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .ok()?;
    let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (!path.is_empty()).then_some(path)
}

/// The one value of `promql`'s result.
fn value(p: &Prometheus, promql: &str) -> Option<f64> {
    p.query(promql)
        .first()
        .and_then(|r| r["value"][1].as_str()?.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debeziums_dashboard_shows_the_relay() {
    let stack = Stack::start_with(Storage::Memory).await;
    let dir = tempfile::tempdir().unwrap();
    // Three rows for the initial snapshot, three streamed after it.
    insert_events(&stack.db, 0, 3, 1, 3).await.unwrap();
    let config = outbox_connector(dir.path(), "dash", &[("snapshot.mode", "initial")]);
    let relay = stack.spawn_relay(&["--debezium-config", &config]);
    stack.wait_for_slot("dash", &relay).await;
    insert_events(&stack.db, 3, 3, 1, 3).await.unwrap();
    stack
        .wait_delivered("dash", Duration::from_secs(30), Some(&relay))
        .await;
    let metrics = http::metrics_address(&relay);
    let prometheus = Prometheus::start(&metrics);

    // The dashboard's template variables, as Grafana's regexes take them from the series.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (plugin, name) = loop {
        let series = prometheus.query("debezium_metrics_TotalNumberOfEventsSeen");
        if let Some(labels) = series.first().map(|s| &s["metric"]) {
            break (
                labels["plugin"].as_str().unwrap().to_owned(),
                labels["name"].as_str().unwrap().to_owned(),
            );
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus never scraped Debezium's series:\n{}",
            relay.log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!((plugin.as_str(), name.as_str()), ("postgres", "app"));

    // Every panel's query returns data (the network rates once librdkafka's statistics came).
    let deadline = Instant::now() + Duration::from_secs(60);
    for line in QUERIES
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (panel, query) = line.split_once('\t').expect("panel<TAB>query");
        let query = query
            .replace("$connector_type", &plugin)
            .replace("$connector_name", &name);
        while prometheus.query(&query).is_empty() {
            assert!(
                Instant::now() < deadline,
                "panel {panel:?}: {query} returns nothing\n{}",
                http::get(&metrics, "/metrics").1
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    // And what they show is what happened.
    let of = |attribute: &str, context: &str| {
        value(
            &prometheus,
            &format!("debezium_metrics_{attribute}{{plugin=\"postgres\",name=\"app\",context=\"{context}\"}}"),
        )
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while of("TotalNumberOfEventsSeen", "streaming") != Some(3.0) {
        assert!(
            Instant::now() < deadline,
            "{:?}\n{}",
            of("TotalNumberOfEventsSeen", "streaming"),
            http::get(&metrics, "/metrics").1
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(of("Connected", "streaming"), Some(1.0));
    assert_eq!(of("SnapshotCompleted", "snapshot"), Some(1.0));
    assert_eq!(of("SnapshotRunning", "snapshot"), Some(0.0));
    assert_eq!(of("RemainingTableCount", "snapshot"), Some(0.0));
    assert_eq!(
        value(
            &prometheus,
            "debezium_metrics_RowsScanned{name=\"app\",table=\"public.outbox\"}"
        ),
        Some(3.0)
    );
    drop(prometheus);
    let mut relay = relay;
    relay.terminate(Duration::from_secs(20)).unwrap();

    // Off by the switch.
    let config = outbox_connector(dir.path(), "quiet", &[]);
    let mut quiet =
        stack.spawn_relay(&["--debezium-config", &config, "--debezium-metrics", "false"]);
    stack.wait_for_slot("quiet", &quiet).await;
    let text = http::get(&http::metrics_address(&quiet), "/metrics").1;
    assert!(text.contains("outbox_relay_"), "{text}");
    assert!(
        !text.contains("debezium_metrics_") && !text.contains("jvm_"),
        "{text}"
    );
    quiet.terminate(Duration::from_secs(20)).unwrap();
}
