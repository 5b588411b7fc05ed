//! A Connect cluster losing a worker: three `outbox-relay connect` workers of one group
//! (`session.timeout.ms=6000`, `heartbeat.interval.ms=1000`,
//! `scheduled.rebalance.max.delay.ms=0`, as docs/connect.md gives them) and three connectors.
//! Each round kills -9 the worker running `c0`, times until every connector is RUNNING
//! again (its task holding its slot) on the workers left, as their status reports it, then
//! brings the worker back on its port and waits for the spread 1/1/1. Reports the median and
//! the maximum over the rounds.
//!
//! cargo bench --bench connect_failover
//! OUTBOX_RELAY_BENCH_ROUNDS=10 cargo bench --bench connect_failover

#[allow(dead_code)]
mod support;

use outbox_relay_testkit::{http, Broker, PgCluster, RelayProcess, Storage};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};
use support::env_u64;

const RELAY: &str = env!("CARGO_BIN_EXE_outbox-relay");

const OUTBOX: &str = "CREATE TABLE public.outbox (
    id uuid PRIMARY KEY,
    aggregatetype varchar(255) NOT NULL,
    aggregateid varchar(255) NOT NULL,
    type varchar(255) NOT NULL,
    payload jsonb
);";

struct Worker {
    process: RelayProcess,
    address: String,
}

fn start(dir: &Path, bootstrap: &str, port: u16) -> Worker {
    let properties = dir.join(format!("worker-{port}.properties"));
    std::fs::write(
        &properties,
        format!(
            "bootstrap.servers={bootstrap}\ngroup.id=bench\n\
             config.storage.topic=connect-configs\nconfig.storage.replication.factor=1\n\
             status.storage.topic=connect-status\nstatus.storage.replication.factor=1\n\
             session.timeout.ms=6000\nheartbeat.interval.ms=1000\nscheduled.rebalance.max.delay.ms=0\n\
             key.converter=org.apache.kafka.connect.storage.StringConverter\n\
             value.converter=org.apache.kafka.connect.storage.StringConverter\n"
        ),
    )
    .unwrap();
    let args: Vec<String> = [
        "connect",
        "--worker-config",
        properties.to_str().unwrap(),
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--metrics-address",
        "127.0.0.1:0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let process = RelayProcess::spawn(Path::new(RELAY), &args, &[("RUST_LOG", "warn")]).unwrap();
    assert!(
        outbox_relay_testkit::net::wait_for_port(port, Duration::from_secs(30)),
        "{}",
        process.log()
    );
    Worker {
        process,
        address: format!("127.0.0.1:{port}"),
    }
}

/// Connector → the worker id its RUNNING task runs on, as `asked` reports it; `None` while
/// any is not RUNNING.
fn runners(asked: &str) -> Option<BTreeMap<String, String>> {
    let (code, body) = http::get(asked, "/connectors?expand=status");
    if code != 200 {
        return None;
    }
    let all: serde_json::Value = serde_json::from_str(&body).ok()?;
    all.as_object()?
        .iter()
        .map(|(name, s)| {
            let task = &s["status"]["tasks"][0];
            (task["state"] == "RUNNING")
                .then(|| Some((name.clone(), task["worker_id"].as_str()?.to_owned())))
                .flatten()
        })
        .collect()
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let rounds = env_u64("OUTBOX_RELAY_BENCH_ROUNDS", 5) as usize;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async move {
        let pg = PgCluster::start().expect("PostgreSQL (scripts/install-deps.sh)");
        let broker = Broker::start(Storage::Memory).expect("Apache Kafka (scripts/install-kafka.sh)");
        pg.connect().await.unwrap().batch_execute(OUTBOX).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let bootstrap = broker.bootstrap_servers();
        let ports: Vec<u16> = (0..3).map(|_| outbox_relay_testkit::net::free_port()).collect();
        let mut workers: Vec<Worker> = ports.iter().map(|p| start(dir.path(), &bootstrap, *p)).collect();
        for i in 0..3 {
            let connector = serde_json::json!({
                "name": format!("c{i}"),
                "config": {
                    "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
                    "database.hostname": "127.0.0.1",
                    "database.port": pg.port().to_string(),
                    "database.user": "postgres",
                    "database.password": "postgres",
                    "database.dbname": "postgres",
                    "topic.prefix": "bench",
                    "table.include.list": "public.outbox",
                    "slot.name": format!("c{i}"),
                    "publication.autocreate.mode": "filtered",
                    "snapshot.mode": "no_data",
                    "topic.creation.default.partitions": "1",
                    "topic.creation.default.replication.factor": "1",
                    "transforms": "outbox",
                    "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter"
                }
            });
            let (code, body) = http::post(&workers[0].address, "/connectors", "application/json", &connector.to_string());
            assert_eq!(code, 201, "{body}");
        }
        let spread_one_each = |asked: &str| {
            runners(asked).is_some_and(|r| {
                let mut by: BTreeMap<String, usize> = BTreeMap::new();
                for w in r.values() {
                    *by.entry(w.clone()).or_default() += 1;
                }
                r.len() == 3 && by.len() == 3
            })
        };
        let wait = |what: &str, done: &dyn Fn() -> bool| {
            let deadline = Instant::now() + Duration::from_secs(120);
            while !done() {
                assert!(Instant::now() < deadline, "{what}");
                std::thread::sleep(Duration::from_millis(50));
            }
        };
        wait("the first spread", &|| spread_one_each(&workers[1].address));
        let mut moved = Vec::new();
        for round in 0..rounds {
            let running = runners(&workers[0].address).unwrap();
            let victim = workers.iter().position(|w| w.address == running["c0"]).unwrap();
            let witness = workers[(victim + 1) % 3].address.clone();
            let dead = workers[victim].address.clone();
            let killed = Instant::now();
            workers[victim].process.kill9();
            wait("the dead worker's connectors never moved", &|| {
                runners(&witness).is_some_and(|r| r.len() == 3 && r.values().all(|w| *w != dead))
            });
            let took = killed.elapsed();
            println!("round {round}: c0's worker killed -9; every connector RUNNING elsewhere after {:.2} s", took.as_secs_f64());
            moved.push(took.as_secs_f64());
            workers[victim] = start(dir.path(), &bootstrap, ports[victim]);
            wait("the spread after the return", &|| spread_one_each(&witness));
        }
        moved.sort_by(f64::total_cmp);
        let median = moved[moved.len() / 2];
        let max = moved[moved.len() - 1];
        println!(
            "connect_failover: a killed worker's connectors streaming elsewhere: median {median:.2} s, max {max:.2} s over {rounds} kills \
             (session.timeout.ms=6000, heartbeat.interval.ms=1000, scheduled.rebalance.max.delay.ms=0; target ≤ 15 s)"
        );
        for mut w in workers {
            let _ = w.process.terminate(Duration::from_secs(20));
        }
    });
}
