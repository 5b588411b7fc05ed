//! Decode + route of pgoutput Insert messages shaped exactly like PostgreSQL 15's for the
//! seeds' outbox table (the Relation is the captured one), at payloads of 100 B, 1 KB and
//! 10 KB. Reports throughput in pgoutput bytes/s and allocations per event.
//!
//! The cases are the cost check's (crates/cost): the native routing, and the Debezium mode
//! (`--debezium-config`) on the same messages for three connector configurations: the record
//! Kafka Connect would write, through the Connect record model, the converters and a chain of
//! transforms, one with a transform before the EventRouter (the row's change event made and
//! routed). `scripts/cost-check.sh` counts their instructions per event under callgrind.
//!
//! cargo bench --bench decode_route

use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use outbox_relay_cost::{decode_and_route, insert_message, Case, SIZES};
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

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("decode_route");
    for case in Case::ALL {
        for size in SIZES {
            let mut router = case.router();
            let message = insert_message(size);
            // Allocations per event, measured outside criterion's timing.
            let before = ALLOCATIONS.load(Ordering::Relaxed);
            for _ in 0..1000 {
                decode_and_route(&mut router, &message);
            }
            let per_event = (ALLOCATIONS.load(Ordering::Relaxed) - before) as f64 / 1000.0;
            println!(
                "{}, payload {size} B: message {} B, {per_event:.1} allocations per event",
                case.name(),
                message.len()
            );
            group.throughput(Throughput::Bytes(message.len() as u64));
            group.bench_with_input(
                BenchmarkId::new(case.name(), format!("{size}B")),
                &message,
                |b, m| b.iter(|| decode_and_route(&mut router, m)),
            );
        }
    }
    group.finish();
}

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}

criterion_group!(benches, bench);
