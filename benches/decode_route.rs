//! Decode + route of pgoutput Insert messages shaped exactly like PostgreSQL 15's for the
//! seeds' outbox table (the Relation is the captured one), at payloads of 100 B, 1 KB and
//! 10 KB. Reports throughput in pgoutput bytes/s and allocations per event.
//!
//! Beside the native routing, the Debezium mode (`--debezium-config`) on the same messages:
//! the record Kafka Connect would write, through the Connect record model, the converters and
//! a chain of transforms, for three connector configurations ([`DEBEZIUM_CASES`]), one
//! with a transform before the EventRouter (the row's change event made and routed).
//!
//! cargo bench --bench decode_route
//!
//! `OUTBOX_RELAY_BENCH_LOOP=N` skips criterion and routes N events of each case
//! (`OUTBOX_RELAY_BENCH_ONLY=debezium-json/100B`: of that one), for an exact count of
//! instructions: `valgrind --tool=callgrind` on the bench binary with N and with 0, the
//! difference over N is instructions per event. `scripts/instructions-per-event.sh` does so
//! for every case.

use bytes::{BufMut, Bytes, BytesMut};
use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use outbox_relay_core::debezium;
use outbox_router::{RouteOutcome, Router, RouterConfig};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

struct CountingAllocator;
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

const FIXTURE: &str = include_str!("../crates/pgoutput/tests/fixtures/pg15-session.hex");

fn captured_outbox_relation() -> Bytes {
    let line = FIXTURE
        .lines()
        .nth(1)
        .expect("the second captured message is the outbox Relation");
    Bytes::from(hex_decode(line.split_once(' ').unwrap().1))
}

fn hex_decode(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// An Insert into the captured relation with a JSON payload of `payload_len` bytes.
fn insert_message(relation_id: u32, payload_len: usize) -> Bytes {
    let mut payload = String::from("{\"data\": \"");
    while payload.len() < payload_len - 2 {
        payload.push('x');
    }
    payload.push_str("\"}");
    let columns: [&[u8]; 6] = [
        b"8a0e6a0e-6c9b-4d3a-9a57-2b3f0f6b1c01",
        b"Order",
        b"order-12345",
        b"OrderCreated",
        payload.as_bytes(),
        b"2026-01-01 00:00:00.123456+00",
    ];
    let mut m = BytesMut::new();
    m.put_u8(b'I');
    m.put_u32(relation_id);
    m.put_u8(b'N');
    m.put_i16(columns.len() as i16);
    for c in columns {
        m.put_u8(b't');
        m.put_i32(c.len() as i32);
        m.put_slice(c);
    }
    m.freeze()
}

/// What the relay does with each Insert: `Router::route_message` decodes the column
/// positions and routes in one pass (pgoutput::decode + Router::route for other messages);
/// in the Debezium mode it also applies the transforms after the EventRouter and the
/// converters, as `run` does.
fn decode_and_route(router: &mut Router, message: &Bytes) -> usize {
    match router.route_message(message).expect("valid message") {
        RouteOutcome::Record(r) => r.value.map_or(0, |v| v.len()),
        other => panic!("{other:?}"),
    }
}

/// Connector configurations of the Debezium mode, on the captured `public.outbox` table.
const DEBEZIUM_CASES: &[(&str, &str)] = &[
    (
        // The seeds' shape: the EventRouter with the payload expanded, a string key and
        // schemaless JSON values, the event type as a header.
        "debezium-json",
        r#"{"name": "bench", "config": {
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "database.hostname": "localhost", "database.dbname": "postgres",
            "database.user": "postgres", "topic.prefix": "bench",
            "table.include.list": "public.outbox",
            "transforms": "outbox",
            "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
            "transforms.outbox.route.by.field": "aggregate_type",
            "transforms.outbox.table.field.event.key": "aggregate_id",
            "transforms.outbox.table.fields.additional.placement": "event_type:header:eventType",
            "transforms.outbox.table.expand.json.payload": "true",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false"}}"#,
    ),
    (
        // The same with JsonConverter's schemas (its default) and a chain after the
        // EventRouter: a topic prefix (RegexRouter), a header (InsertHeader) and a Filter
        // under a predicate that matches no record.
        "debezium-chain",
        r#"{"name": "bench", "config": {
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "database.hostname": "localhost", "database.dbname": "postgres",
            "database.user": "postgres", "topic.prefix": "bench",
            "table.include.list": "public.outbox",
            "transforms": "outbox,prefix,origin,drop",
            "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
            "transforms.outbox.route.by.field": "aggregate_type",
            "transforms.outbox.table.field.event.key": "aggregate_id",
            "transforms.outbox.table.fields.additional.placement": "event_type:header:eventType",
            "transforms.outbox.table.expand.json.payload": "true",
            "transforms.prefix.type": "org.apache.kafka.connect.transforms.RegexRouter",
            "transforms.prefix.regex": "(.*)",
            "transforms.prefix.replacement": "prod.$1",
            "transforms.origin.type": "org.apache.kafka.connect.transforms.InsertHeader",
            "transforms.origin.header": "origin",
            "transforms.origin.value.literal": "orders-service",
            "transforms.drop.type": "org.apache.kafka.connect.transforms.Filter",
            "transforms.drop.predicate": "tombstone",
            "predicates": "tombstone",
            "predicates.tombstone.type": "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter"}}"#,
    ),
    (
        // debezium-json with a transform before the EventRouter, as Debezium's CloudEvents
        // recipe puts one: the row's whole change event is made, HeaderFrom copies its
        // source, op and transaction into headers, the EventRouter routes it.
        "debezium-before",
        r#"{"name": "bench", "config": {
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "database.hostname": "localhost", "database.dbname": "postgres",
            "database.user": "postgres", "topic.prefix": "bench",
            "table.include.list": "public.outbox",
            "transforms": "meta,outbox",
            "transforms.meta.type": "org.apache.kafka.connect.transforms.HeaderFrom$Value",
            "transforms.meta.fields": "source,op,transaction",
            "transforms.meta.headers": "source,op,transaction",
            "transforms.meta.operation": "copy",
            "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
            "transforms.outbox.route.by.field": "aggregate_type",
            "transforms.outbox.table.field.event.key": "aggregate_id",
            "transforms.outbox.table.fields.additional.placement": "event_type:header:eventType",
            "transforms.outbox.table.expand.json.payload": "true",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false"}}"#,
    ),
];

fn debezium_router(json: &str) -> RouterConfig {
    let raw = debezium::parse(json).expect("a connector configuration");
    debezium::translate(&raw, None)
        .expect("the bench's connector configuration is accepted")
        .router
}

fn bench(c: &mut Criterion) {
    let relation = pgoutput::decode(captured_outbox_relation()).unwrap();
    let pgoutput::LogicalMessage::Relation(rel) = &relation else {
        panic!()
    };
    let mut cases = vec![("native", RouterConfig::default())];
    cases.extend(
        DEBEZIUM_CASES
            .iter()
            .map(|(name, json)| (*name, debezium_router(json))),
    );
    let events: Option<usize> = std::env::var("OUTBOX_RELAY_BENCH_LOOP")
        .ok()
        .map(|n| n.parse().expect("OUTBOX_RELAY_BENCH_LOOP=N"));
    let mut group = c.benchmark_group("decode_route");
    for (name, config) in cases {
        for size in [100usize, 1_000, 10_000] {
            let mut router = Router::new(config.clone()).with_clock(|| 1_764_152_870_824);
            router.route(&relation);
            let message = insert_message(rel.relation_id, size);
            if let Some(n) = events {
                let only = std::env::var("OUTBOX_RELAY_BENCH_ONLY").ok();
                if only.is_some_and(|only| only != format!("{name}/{size}B")) {
                    continue;
                }
                for _ in 0..n {
                    std::hint::black_box(decode_and_route(&mut router, &message));
                }
                continue;
            }
            // Allocations per event, measured outside criterion's timing.
            let before = ALLOCATIONS.load(Ordering::Relaxed);
            for _ in 0..1000 {
                decode_and_route(&mut router, &message);
            }
            let per_event = (ALLOCATIONS.load(Ordering::Relaxed) - before) as f64 / 1000.0;
            println!(
                "{name}, payload {size} B: message {} B, {per_event:.1} allocations per event",
                message.len()
            );
            group.throughput(Throughput::Bytes(message.len() as u64));
            group.bench_with_input(
                BenchmarkId::new(name, format!("{size}B")),
                &message,
                |b, m| b.iter(|| decode_and_route(&mut router, m)),
            );
        }
    }
    group.finish();
}

fn main() {
    if std::env::var_os("OUTBOX_RELAY_BENCH_LOOP").is_some() {
        bench(&mut Criterion::default());
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}

criterion_group!(benches, bench);
