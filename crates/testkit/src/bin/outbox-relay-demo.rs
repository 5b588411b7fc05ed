//! The demo behind `scripts/demo.sh`: a throwaway PostgreSQL, a Kafka-protocol broker, the
//! real relay binary, a sample order service writing an order and its outbox event in ONE
//! transaction, and a consumer printing events as they arrive on `Order.events`.
//!
//! The broker is embedded unless `--bootstrap-servers` names one: librdkafka's mock cluster,
//! running in this process and listening on a loopback port. The relay (another process)
//! and the consumer talk to it over the Kafka protocol like to any broker; it keeps data in
//! memory, which is all a demo needs, and costs no broker build.
//!
//! Usage: outbox-relay-demo RELAY_BINARY [--orders N] [--bootstrap-servers HOST:PORT]
//! (N = 0: until Ctrl-C)

use anyhow::{bail, Context, Result};
use outbox_relay_testkit::{PgCluster, RelayProcess};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use std::path::PathBuf;
use std::time::{Duration, Instant};

const OUTBOX_DDL: &str = include_str!("../../../../sql/outbox.sql");

#[tokio::main]
async fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let relay_bin = PathBuf::from(
        args.next()
            .context("usage: outbox-relay-demo RELAY_BINARY [--orders N]")?,
    );
    let mut orders: u64 = 5;
    let mut external: Option<String> = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--orders" => orders = args.next().context("--orders N")?.parse()?,
            "--bootstrap-servers" => {
                external = Some(args.next().context("--bootstrap-servers HOST:PORT")?)
            }
            other => bail!("unknown argument {other}"),
        }
    }

    println!("==> starting a throwaway PostgreSQL 15 (wal_level=logical)");
    let pg = PgCluster::start()?;
    let (bootstrap, _embedded) = match external {
        Some(servers) => {
            println!("==> using the Kafka at {servers} (--bootstrap-servers)");
            (servers, None)
        }
        None => {
            // The mock cluster creates no topic on request: the relay's topics exist from the
            // start (its events', the dead-letter topic and the canary's).
            let broker = EmbeddedBroker::start(&[
                "Order.events",
                "outbox-relay.dlq",
                "outbox-relay.canary",
            ])?;
            println!(
                "==> embedded Kafka-protocol broker: librdkafka's mock cluster in this process, listening on {} \
                 (in memory; for a real Kafka: scripts/demo.sh --bootstrap-servers HOST:PORT)",
                broker.bootstrap
            );
            (broker.bootstrap.clone(), Some(broker))
        }
    };
    let db = pg.connect().await?;
    db.batch_execute(OUTBOX_DDL).await?;
    db.batch_execute(
        "CREATE TABLE orders (id uuid PRIMARY KEY, customer text NOT NULL, total numeric NOT NULL)",
    )
    .await?;

    let relay_args: Vec<String> = [
        "run",
        "--postgres-url",
        &pg.url(),
        "--bootstrap-servers",
        &bootstrap,
        "--topic-replication-factor",
        "1",
        "--status-interval-ms",
        "200",
        "--metrics-address",
        "127.0.0.1:0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    println!("==> outbox-relay {}", relay_args.join(" "));
    let mut relay = RelayProcess::spawn(&relay_bin, &relay_args, &[])?;
    wait_for_slot(&db, &relay).await?;

    let expected = orders;
    let consumer = tokio::task::spawn_blocking(move || print_events(&bootstrap, expected));

    let mut n = 0u64;
    while orders == 0 || n < orders {
        n += 1;
        let tx = format!(
            "BEGIN;
             INSERT INTO orders VALUES (gen_random_uuid(), 'customer-{c}', {total});
             INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload)
               SELECT gen_random_uuid(), 'Order', id::text, 'OrderCreated',
                      jsonb_build_object('orderId', id, 'customer', customer, 'total', total)
               FROM orders ORDER BY ctid DESC LIMIT 1;
             COMMIT;",
            c = n % 3,
            total = 10 * n
        );
        db.batch_execute(&tx).await?;
        println!(
            "order service: committed order #{n} and its OrderCreated event in one transaction"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let received = consumer.await??;
    let status = relay.terminate(Duration::from_secs(30))?;
    println!("==> {received} events received; relay stopped ({status:?})");
    if received != orders {
        bail!(
            "expected {orders} events, received {received}; relay log:\n{}",
            relay.log()
        );
    }
    Ok(())
}

async fn wait_for_slot(db: &tokio_postgres::Client, relay: &RelayProcess) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if db
            .query_opt(
                "SELECT 1 FROM pg_replication_slots WHERE slot_name = 'outbox_relay'",
                &[],
            )
            .await?
            .is_some()
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!(
        "the relay did not create its slot; its log:\n{}",
        relay.log()
    )
}

/// Prints each event on Order.events as it arrives; returns how many were printed.
fn print_events(bootstrap: &str, expected: u64) -> Result<u64> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "demo")
        .set("fetch.wait.max.ms", "50")
        .set("log_level", "3")
        .create()?;
    // The relay creates the topic with the first event.
    loop {
        let md = consumer.fetch_metadata(Some("Order.events"), Duration::from_secs(10))?;
        if md.topics().iter().any(|t| {
            t.name() == "Order.events" && t.error().is_none() && !t.partitions().is_empty()
        }) {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("Order.events", 0, Offset::Beginning)?;
    consumer.assign(&tpl)?;
    let mut received = 0;
    while expected == 0 || received < expected {
        match consumer.poll(Duration::from_secs(1)) {
            None => continue,
            Some(Err(e)) => bail!("consumer: {e}"),
            Some(Ok(m)) => {
                received += 1;
                let headers: Vec<String> = m
                    .headers()
                    .map(|h| {
                        h.iter()
                            .map(|h| {
                                format!(
                                    "{}={}",
                                    h.key,
                                    String::from_utf8_lossy(h.value.unwrap_or_default())
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                println!(
                    "consumer: {} [partition {} offset {}] key={} headers=[{}] value={}",
                    m.topic(),
                    m.partition(),
                    m.offset(),
                    String::from_utf8_lossy(m.key().unwrap_or_default()),
                    headers.join(", "),
                    m.payload()
                        .map(|p| String::from_utf8_lossy(p).into_owned())
                        .unwrap_or_else(|| "<tombstone>".into())
                );
            }
        }
    }
    Ok(received)
}

/// librdkafka's mock cluster on its own thread (it is not `Send`), with `topics` created (one
/// partition each), until dropped.
struct EmbeddedBroker {
    bootstrap: String,
    stop: Option<std::sync::mpsc::Sender<()>>,
}

impl EmbeddedBroker {
    fn start(topics: &[&str]) -> Result<EmbeddedBroker> {
        let topics: Vec<String> = topics.iter().map(|t| t.to_string()).collect();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            let started = (|| -> Result<_> {
                let cluster = rdkafka::mocking::MockCluster::new(1)?;
                for topic in &topics {
                    cluster.create_topic(topic, 1, 1)?;
                }
                Ok(cluster)
            })();
            match started {
                Ok(cluster) => {
                    let _ = ready_tx.send(Ok(cluster.bootstrap_servers()));
                    let _ = stop_rx.recv();
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                }
            }
        });
        let bootstrap = ready_rx
            .recv()
            .context("the embedded broker's thread ended")??;
        Ok(EmbeddedBroker {
            bootstrap,
            stop: Some(stop_tx),
        })
    }
}

impl Drop for EmbeddedBroker {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
