//! Decode + route of pgoutput Insert messages shaped exactly like PostgreSQL 15's for the
//! seeds' outbox table (the Relation is the captured one), at payloads of 100 B, 1 KB and
//! 10 KB. Reports throughput in pgoutput bytes/s and allocations per event.
//!
//! cargo bench --bench decode_route

use bytes::{BufMut, Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
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
/// positions and routes in one pass (pgoutput::decode + Router::route for other messages).
fn decode_and_route(router: &mut Router, message: &Bytes) -> usize {
    match router.route_message(message).expect("valid message") {
        RouteOutcome::Record(r) => r.value.map_or(0, |v| v.len()),
        other => panic!("{other:?}"),
    }
}

fn bench(c: &mut Criterion) {
    let relation = pgoutput::decode(captured_outbox_relation()).unwrap();
    let pgoutput::LogicalMessage::Relation(rel) = &relation else {
        panic!()
    };
    let mut group = c.benchmark_group("decode_route");
    for size in [100usize, 1_000, 10_000] {
        let mut router = Router::new(RouterConfig::default());
        router.route(&relation);
        let message = insert_message(rel.relation_id, size);
        // Allocations per event, measured outside criterion's timing.
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        for _ in 0..1000 {
            decode_and_route(&mut router, &message);
        }
        let per_event = (ALLOCATIONS.load(Ordering::Relaxed) - before) as f64 / 1000.0;
        println!(
            "payload {size} B: message {} B, {per_event:.1} allocations per event",
            message.len()
        );
        group.throughput(Throughput::Bytes(message.len() as u64));
        group.bench_with_input(
            BenchmarkId::from_parameter(format!("{size}B")),
            &message,
            |b, m| b.iter(|| decode_and_route(&mut router, m)),
        );
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
