//! The streaming loop over a fake replication stream and a fake producer: what reaches
//! PostgreSQL as confirmed, for out-of-order acknowledgements, dead letters, a full
//! in-flight window and a graceful stop. Real PostgreSQL and Kafka prove the same end to
//! end in `tests/`.

use super::*;
use crate::deliver::fake::{Completer, FakeProducer};
use crate::deliver::{Deliver, Outcome};
use bytes::{BufMut, Bytes, BytesMut};
use outbox_router::RouterConfig;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use tokio::sync::mpsc;

const COLUMNS: &[&str] = &[
    "id",
    "aggregate_type",
    "aggregate_id",
    "event_type",
    "payload",
];

/// pgoutput bytes of a Relation message for the seeds' outbox (all columns text).
fn relation_bytes() -> Bytes {
    let mut b = BytesMut::new();
    b.put_u8(b'R');
    b.put_u32(16384);
    b.put_slice(b"public\0outbox\0");
    b.put_u8(b'd');
    b.put_i16(COLUMNS.len() as i16);
    for c in COLUMNS {
        b.put_u8(0);
        b.put_slice(c.as_bytes());
        b.put_u8(0);
        b.put_u32(25);
        b.put_i32(-1);
    }
    b.freeze()
}

/// pgoutput bytes of an Insert of event `n` (aggregate type `None` = NULL: unroutable).
fn insert_bytes(n: u32, aggregate_type: Option<&str>) -> Bytes {
    let id = format!("e{n}");
    let key = format!("agg-{n}");
    let payload = format!("{{\"n\": {n}}}");
    let values = [
        Some(id.as_str()),
        aggregate_type,
        Some(key.as_str()),
        Some("Created"),
        Some(payload.as_str()),
    ];
    let mut b = BytesMut::new();
    b.put_u8(b'I');
    b.put_u32(16384);
    b.put_u8(b'N');
    b.put_i16(values.len() as i16);
    for v in values {
        match v {
            Some(text) => {
                b.put_u8(b't');
                b.put_i32(text.len() as i32);
                b.put_slice(text.as_bytes());
            }
            None => b.put_u8(b'n'),
        }
    }
    b.freeze()
}

fn lsn(n: u64) -> Lsn {
    Lsn::from_u64(n)
}

/// A replication stream fed by the test; what the loop confirms is recorded.
struct FakeStream {
    changes: mpsc::UnboundedReceiver<Change>,
    catching_up: Arc<AtomicBool>,
    confirmed: Arc<Mutex<Vec<Lsn>>>,
    received: Arc<Mutex<usize>>,
    probes: Arc<Mutex<Vec<tokio::time::Instant>>>,
}

impl ChangeStream for FakeStream {
    fn catching_up(&self) -> bool {
        self.catching_up.load(Ordering::Relaxed)
    }
    async fn recv(&mut self) -> Result<Option<Change>, RelayError> {
        let change = self.changes.recv().await;
        *self.received.lock().unwrap() += change.is_some() as usize;
        Ok(change)
    }
    fn confirm(&mut self, lsn: Lsn) {
        self.confirmed.lock().unwrap().push(lsn);
    }
    async fn probe(&mut self) -> Result<(), RelayError> {
        self.probes
            .lock()
            .unwrap()
            .push(tokio::time::Instant::now());
        Ok(())
    }
    async fn column_facts(&mut self, _: &TableName) -> Result<Vec<ColumnFacts>, RelayError> {
        Ok(Vec::new())
    }
}

struct Harness {
    feed: mpsc::UnboundedSender<Change>,
    /// What the stream says of its lag.
    catching_up: Arc<AtomicBool>,
    confirmed: Arc<Mutex<Vec<Lsn>>>,
    received: Arc<Mutex<usize>>,
    probes: Arc<Mutex<Vec<tokio::time::Instant>>>,
    completer: Completer,
    stop: watch::Sender<bool>,
}

impl Harness {
    fn transaction(&self, rows: &[(u32, Option<&str>)], end: u64) {
        let send = |c| self.feed.send(c).unwrap();
        send(Change::Begin {
            commit: Lsn::from_u64(1),
            xid: 1,
            commit_time_micros: 0,
        });
        send(Change::Data {
            wal_start: lsn(end - 100),
            wal_end: lsn(end - 100),
            data: relation_bytes(),
        });
        for (i, (n, aggregate_type)) in rows.iter().enumerate() {
            send(Change::Data {
                wal_start: lsn(end - 90 + i as u64),
                wal_end: lsn(end - 90 + i as u64),
                data: insert_bytes(*n, *aggregate_type),
            });
        }
        send(Change::Commit {
            end_lsn: lsn(end),
            commit_time_micros: 0,
        });
    }

    fn last_confirmed(&self) -> Option<Lsn> {
        self.confirmed.lock().unwrap().last().copied()
    }
}

/// Runs `scenario` against a streamer with the given in-flight bound; returns what the fake
/// producer was given and the final position `finish` reported.
async fn run<F, Fut>(
    max_in_flight: usize,
    capacity: usize,
    scenario: F,
) -> (Vec<outbox_router::OutboxRecord>, Lsn)
where
    F: FnOnce(Harness) -> Fut,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let (sent, final_lsn) = run_timed(max_in_flight, capacity, scenario).await;
    (
        sent.into_iter().map(|(record, _)| record).collect(),
        final_lsn,
    )
}

/// [`run`], with when the fake producer accepted each record.
async fn run_timed<F, Fut>(
    max_in_flight: usize,
    capacity: usize,
    scenario: F,
) -> (
    Vec<(outbox_router::OutboxRecord, tokio::time::Instant)>,
    Lsn,
)
where
    F: FnOnce(Harness) -> Fut,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let (feed, changes) = mpsc::unbounded_channel();
    let confirmed = Arc::new(Mutex::new(Vec::new()));
    let producer = FakeProducer::new(capacity);
    let completer = producer.completer();
    let (stop, mut shutdown) = watch::channel(false);
    let metrics = Arc::new(Metrics::new());
    let mut confirmations = Confirmations::new(metrics.clone());
    let table = TableName::parse("public.outbox").unwrap();
    let received = Arc::new(Mutex::new(0));
    let probes = Arc::new(Mutex::new(Vec::new()));
    let catching_up = Arc::new(AtomicBool::new(false));
    let stream = FakeStream {
        changes,
        catching_up: catching_up.clone(),
        confirmed: confirmed.clone(),
        received: received.clone(),
        probes: probes.clone(),
    };
    let deliver = Deliver::new(producer, "dlq", metrics.clone(), Default::default());
    let mut streamer = Streamer::new(
        stream,
        deliver,
        Router::new(RouterConfig::default()),
        Lsn::ZERO,
        &mut confirmations,
        metrics,
        &table,
        max_in_flight,
    );
    let harness = Harness {
        feed,
        catching_up,
        confirmed,
        received,
        probes,
        completer,
        stop,
    };
    let local = tokio::task::LocalSet::new();
    local.spawn_local(scenario(harness));
    let final_lsn = local
        .run_until(async {
            streamer.stream(&mut shutdown).await.unwrap();
            streamer.finish().await
        })
        .await;
    let producer = streamer.deliver_producer();
    let sent = producer
        .sent
        .iter()
        .cloned()
        .zip(producer.sent_at.iter().copied());
    (sent.collect(), final_lsn)
}

async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
}

#[tokio::test]
async fn only_the_delivered_prefix_of_transactions_is_confirmed() {
    let (sent, final_lsn) = run(100, 100, |h| async move {
        h.transaction(&[(0, Some("Order")), (1, Some("Order"))], 1000);
        h.transaction(&[(2, Some("Customer"))], 2000);
        settle().await;
        assert_eq!(h.last_confirmed(), None, "nothing acknowledged yet");
        // Kafka acknowledges the second transaction's event first.
        h.completer.complete(2, Outcome::Acknowledged);
        h.completer.complete(1, Outcome::Acknowledged);
        settle().await;
        assert_eq!(
            h.last_confirmed(),
            None,
            "event 0 holds both transactions back"
        );
        h.completer.complete(0, Outcome::Acknowledged);
        settle().await;
        assert_eq!(h.last_confirmed(), Some(lsn(2000)));
        h.stop.send(true).unwrap();
    })
    .await;
    assert_eq!(sent.len(), 3);
    assert_eq!(&*sent[2].topic, "Customer.events");
    assert_eq!(final_lsn, lsn(2000));
}

#[tokio::test]
async fn an_unroutable_row_holds_the_position_until_its_dead_letter_is_acknowledged() {
    let (sent, _) = run(100, 100, |h| async move {
        h.transaction(&[(0, Some("Order")), (1, None), (2, Some("Order"))], 1000);
        settle().await;
        h.completer.complete(0, Outcome::Acknowledged);
        h.completer.complete(2, Outcome::Acknowledged);
        settle().await;
        assert_eq!(
            h.last_confirmed(),
            None,
            "the dead letter is still in flight"
        );
        h.completer.complete(1, Outcome::Acknowledged);
        settle().await;
        assert_eq!(h.last_confirmed(), Some(lsn(1000)));
        h.stop.send(true).unwrap();
    })
    .await;
    let topics: Vec<&str> = sent.iter().map(|r| &*r.topic).collect();
    assert_eq!(
        topics,
        ["Order.events", "dlq", "Order.events"],
        "in stream order"
    );
}

#[tokio::test]
async fn reading_pauses_while_the_in_flight_window_is_full() {
    let (sent, final_lsn) = run(2, 100, |h| async move {
        h.transaction(
            &[
                (0, Some("A")),
                (1, Some("A")),
                (2, Some("A")),
                (3, Some("A")),
            ],
            1000,
        );
        settle().await;
        // Two in flight: the loop reads Begin, Relation and two Inserts, not the third.
        assert_eq!(*h.received.lock().unwrap(), 4);
        assert_eq!(h.last_confirmed(), None);
        h.completer.complete(0, Outcome::Acknowledged);
        settle().await;
        assert_eq!(
            *h.received.lock().unwrap(),
            5,
            "one acknowledgement, one more read"
        );
        for id in 1..4 {
            h.completer.complete(id, Outcome::Acknowledged);
            settle().await;
        }
        assert_eq!(h.last_confirmed(), Some(lsn(1000)));
        h.stop.send(true).unwrap();
    })
    .await;
    assert_eq!(sent.len(), 4);
    assert_eq!(final_lsn, lsn(1000));
}

#[tokio::test]
async fn a_full_producer_queue_is_backpressure_not_an_error() {
    let (sent, final_lsn) = run(100, 1, |h| async move {
        h.transaction(&[(0, Some("A")), (1, Some("A")), (2, Some("A"))], 1000);
        for id in 0..3 {
            settle().await;
            h.completer.complete(id, Outcome::Acknowledged);
        }
        settle().await;
        assert_eq!(h.last_confirmed(), Some(lsn(1000)));
        h.stop.send(true).unwrap();
    })
    .await;
    assert_eq!(sent.len(), 3);
    assert_eq!(final_lsn, lsn(1000));
}

#[tokio::test]
async fn a_graceful_stop_finishes_the_open_transaction_and_drains() {
    let (sent, final_lsn) = run(100, 100, |h| async move {
        // Stop requested in the middle of a transaction: the loop reads to its commit.
        h.feed
            .send(Change::Begin {
                commit: Lsn::from_u64(1),
                xid: 1,
                commit_time_micros: 0,
            })
            .unwrap();
        h.feed
            .send(Change::Data {
                wal_start: lsn(900),
                wal_end: lsn(900),
                data: relation_bytes(),
            })
            .unwrap();
        h.feed
            .send(Change::Data {
                wal_start: lsn(910),
                wal_end: lsn(910),
                data: insert_bytes(0, Some("A")),
            })
            .unwrap();
        settle().await;
        h.stop.send(true).unwrap();
        settle().await;
        h.feed
            .send(Change::Commit {
                end_lsn: lsn(1000),
                commit_time_micros: 0,
            })
            .unwrap();
        settle().await;
        // The drain waits for the acknowledgement, then confirms the commit.
        h.completer.complete(0, Outcome::Acknowledged);
    })
    .await;
    assert_eq!(sent.len(), 1);
    assert_eq!(final_lsn, lsn(1000));
}

#[tokio::test]
async fn an_idle_stream_confirms_keepalives() {
    let (_, final_lsn) = run(100, 100, |h| async move {
        h.feed
            .send(Change::KeepAlive { wal_end: lsn(5000) })
            .unwrap();
        settle().await;
        assert_eq!(h.last_confirmed(), Some(lsn(5000)));
        h.stop.send(true).unwrap();
    })
    .await;
    assert_eq!(final_lsn, lsn(5000));
}

#[tokio::test(start_paused = true)]
async fn the_server_is_probed_after_a_silence_counted_from_the_last_message() {
    run(100, 100, |h| async move {
        let start = tokio::time::Instant::now();
        let silence = super::stream::SILENCE_BEFORE_PROBE;
        // A message 6 s in: the silence that leads to a probe starts there, not at the start.
        tokio::time::sleep(Duration::from_secs(6)).await;
        h.feed
            .send(Change::KeepAlive { wal_end: lsn(100) })
            .unwrap();
        tokio::time::sleep(silence - Duration::from_millis(100)).await;
        assert!(
            h.probes.lock().unwrap().is_empty(),
            "probed before {silence:?} of silence"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        let probes = h.probes.lock().unwrap().clone();
        assert_eq!(probes.len(), 1, "one probe after {silence:?} of silence");
        assert!(probes[0] - start >= Duration::from_secs(6) + silence);
        // The next one a whole silence after that probe.
        tokio::time::sleep(silence).await;
        assert_eq!(h.probes.lock().unwrap().len(), 2);
        h.stop.send(true).unwrap();
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn events_read_while_the_stream_is_behind_go_to_the_producer_together_after_the_linger() {
    let linger = crate::deliver::CATCH_UP_LINGER;
    let times = Arc::new(Mutex::new(Vec::new()));
    let (sent, final_lsn) = {
        let times = times.clone();
        run_timed(100, 100, |h| async move {
            h.catching_up.store(true, Ordering::Relaxed);
            times.lock().unwrap().push(tokio::time::Instant::now());
            h.transaction(&[(0, Some("A")), (1, Some("B")), (2, Some("A"))], 1000);
            tokio::time::sleep(linger / 2).await;
            h.transaction(&[(3, Some("A"))], 2000);
            tokio::time::sleep(linger).await;
            for id in 0..4 {
                h.completer.complete(id, Outcome::Acknowledged);
            }
            settle().await;
            assert_eq!(h.last_confirmed(), Some(lsn(2000)));
            // Caught up: the next event goes at once, and so does what was held before it.
            h.catching_up.store(false, Ordering::Relaxed);
            times.lock().unwrap().push(tokio::time::Instant::now());
            h.transaction(&[(4, Some("A"))], 3000);
            settle().await;
            h.completer.complete(4, Outcome::Acknowledged);
            settle().await;
            h.stop.send(true).unwrap();
        })
        .await
    };
    let times = times.lock().unwrap().clone();
    let (behind, caught_up) = (times[0], times[1]);
    let keys: Vec<&[u8]> = sent
        .iter()
        .map(|(r, _)| r.key.as_deref().unwrap())
        .collect();
    assert_eq!(
        keys,
        [&b"agg-0"[..], b"agg-1", b"agg-2", b"agg-3", b"agg-4"],
        "in stream order"
    );
    // All four late events together, when the first one's linger was over.
    for (record, at) in &sent[..4] {
        assert_eq!(
            *at - behind,
            linger,
            "{:?} went {:?} after it was read",
            record.key,
            *at - behind
        );
    }
    assert_eq!(
        sent[4].1, caught_up,
        "an event that is not late is not held"
    );
    assert_eq!(final_lsn, lsn(3000));
}

#[tokio::test(start_paused = true)]
async fn a_full_in_flight_window_sends_what_is_held_at_once() {
    let start = tokio::time::Instant::now();
    let (sent, final_lsn) = run_timed(2, 100, |h| async move {
        h.catching_up.store(true, Ordering::Relaxed);
        h.transaction(&[(0, Some("A")), (1, Some("A")), (2, Some("A"))], 1000);
        settle().await;
        for id in 0..3 {
            h.completer.complete(id, Outcome::Acknowledged);
            settle().await;
        }
        assert_eq!(h.last_confirmed(), Some(lsn(1000)));
        h.stop.send(true).unwrap();
    })
    .await;
    assert_eq!(sent.len(), 3);
    // The window (2) filled with held events: they went without waiting for the linger.
    assert_eq!(sent[0].1, start);
    assert_eq!(sent[1].1, start);
    assert_eq!(final_lsn, lsn(1000));
}

/// The history file a promoted standby serves (`TIMELINE_HISTORY 3`): each parent timeline
/// and where the next one branched off.
#[test]
fn a_timeline_history_lists_each_parent_and_its_switch_point() {
    let file = b"1\t0/3098938\tno recovery target specified\n\n2\t0/4000A0\tbefore 2026-11-26\n";
    assert_eq!(
        super::parse_timeline_history(file),
        [(1, Lsn::from_u64(0x3098938)), (2, Lsn::from_u64(0x4000A0))]
    );
}

/// A graceful stop records its last position only on the server the session streamed from:
/// a standby promoted meanwhile (a new timeline, maybe branched off before that position), a
/// restored copy or another system is left to resume from its own slot position.
#[test]
fn the_final_position_is_recorded_only_on_the_server_it_was_confirmed_to() {
    let identity = |system: &str, timeline: u32| super::Identity {
        system_id: system.into(),
        timeline,
        history: if timeline > 1 {
            vec![(timeline - 1, lsn(0x5000))]
        } else {
            Vec::new()
        },
    };
    let session = identity("7301", 1);
    assert!(super::final_position_holds_on(
        &session,
        &identity("7301", 1)
    ));
    assert!(
        !super::final_position_holds_on(&session, &identity("7301", 2)),
        "a promoted standby"
    );
    assert!(!super::final_position_holds_on(
        &session,
        &identity("7302", 1)
    ));
    assert!(
        !super::final_position_holds_on(&identity("7301", 2), &identity("7301", 1)),
        "an older timeline"
    );
}
