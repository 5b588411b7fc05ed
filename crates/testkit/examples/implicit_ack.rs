//! librdkafka's idempotent producer reports records delivered that Apache Kafka never wrote
//! (see crates/relay/src/deliver/producer/first_writes.rs), shown with librdkafka alone.
//!
//! For each of N new topics: create it, then send its first records at once, a few per
//! partition, each in a request of its own (1 ms apart, with `linger.ms=0`), with the
//! relay's producer settings (idempotent, `acks=all`, up to five requests in flight). At the
//! end every topic's watermarks are compared with the records reported delivered.
//!
//! ```text
//! cargo run -p outbox-relay-testkit --example implicit_ack -- 2000          # as librdkafka does
//! cargo run -p outbox-relay-testkit --example implicit_ack -- 2000 alone    # a partition's first record alone
//! ```
//! `BOOTSTRAP=host:port` uses that broker; otherwise one is started (scripts/install-kafka.sh).
//! Prints the records reported delivered without an offset (librdkafka's implicit
//! acknowledgements) and the records missing from Kafka.

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::ClientContext;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PARTITIONS: i32 = 6;
const PER_PARTITION: usize = 4;

#[derive(Default)]
struct Counts {
    delivered: AtomicUsize,
    without_offset: AtomicUsize,
    failed: AtomicUsize,
}

struct Context(Arc<Counts>);

impl ClientContext for Context {
    fn log(&self, _: rdkafka::config::RDKafkaLogLevel, facility: &str, message: &str) {
        eprintln!("{facility} {message}");
    }
}

impl ProducerContext for Context {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        match result {
            Ok(m) if m.offset() < 0 => {
                self.0.without_offset.fetch_add(1, Ordering::SeqCst);
                self.0.delivered.fetch_add(1, Ordering::SeqCst)
            }
            Ok(_) => self.0.delivered.fetch_add(1, Ordering::SeqCst),
            Err(_) => self.0.failed.fetch_add(1, Ordering::SeqCst),
        };
    }
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let topics: usize = args.next().map_or(Ok(1000), |a| a.parse())?;
    let alone = args.next().as_deref() == Some("alone");
    let _broker;
    let bootstrap = match std::env::var("BOOTSTRAP") {
        Ok(b) => b,
        Err(_) => {
            let broker =
                outbox_relay_testkit::broker::Broker::start(outbox_relay_testkit::Storage::Sqlite)?;
            let b = broker.bootstrap_servers();
            _broker = broker;
            b
        }
    };
    let counts = Arc::new(Counts::default());
    let mut config = ClientConfig::new();
    if let Ok(debug) = std::env::var("RDDEBUG") {
        config.set("debug", debug); // librdkafka's debug contexts, on stderr
    }
    let producer: BaseProducer<Context> = config
        .set("bootstrap.servers", &bootstrap)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "0")
        .set("message.timeout.ms", "0")
        .set_log_level(rdkafka::config::RDKafkaLogLevel::Debug)
        .create_with_context(Context(counts.clone()))?;
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()?;
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let run = std::process::id();
    let name = |n: usize| format!("implicit-ack-{run}-{n}");
    let started = Instant::now();
    for n in 0..topics {
        let topic = name(n);
        let new = NewTopic::new(&topic, PARTITIONS, TopicReplication::Fixed(1));
        for result in futures::executor::block_on(admin.create_topics(&[new], &options))? {
            result.map_err(|(t, e)| anyhow::anyhow!("creating {t}: {e}"))?;
        }
        for i in 0..PER_PARTITION {
            for p in 0..PARTITIONS {
                let mut record: BaseRecord<'_, (), str> =
                    BaseRecord::to(&topic).partition(p).payload("{}");
                while let Err((e, back)) = producer.send(record) {
                    anyhow::ensure!(
                        e.rdkafka_error_code() == Some(rdkafka::types::RDKafkaErrorCode::QueueFull),
                        "{e}"
                    );
                    producer.poll(Duration::from_millis(10));
                    record = back;
                }
            }
            if alone && i == 0 {
                // Each partition's first record acknowledged before the next one is sent.
                producer.flush(Duration::from_secs(60))?;
            }
            let next = Instant::now() + Duration::from_millis(1);
            while Instant::now() < next {
                producer.poll(Duration::from_millis(0));
            }
        }
        producer.poll(Duration::ZERO);
    }
    producer.flush(Duration::from_secs(300))?;
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()?;
    let mut missing = 0;
    for n in 0..topics {
        for p in 0..PARTITIONS {
            let (low, high) = consumer.fetch_watermarks(&name(n), p, Duration::from_secs(30))?;
            let written = (high - low) as usize;
            if written != PER_PARTITION {
                println!("{} [{p}]: {written} of {PER_PARTITION} records", name(n));
                missing += PER_PARTITION.saturating_sub(written);
            }
        }
    }
    println!(
        "{} topics ({}): {} records reported delivered, {} of them without an offset, {} failed; {} missing from Kafka ({:.0} s)",
        topics,
        if alone { "first record of a partition alone" } else { "as librdkafka does" },
        counts.delivered.load(Ordering::SeqCst),
        counts.without_offset.load(Ordering::SeqCst),
        counts.failed.load(Ordering::SeqCst),
        missing,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
