//! The delivery stage with a fake producer: out-of-order acknowledgements, dead-letter
//! ordering and refusals, queue-full backpressure and the drain, in milliseconds.

use super::*;
use crate::deliver::fake::{FakeProducer, FakeTails};
use bytes::Bytes;
use pgoutput::Lsn;

pub fn record(topic: &str, n: u8) -> OutboxRecord {
    OutboxRecord {
        topic: topic.into(),
        key: Some(Bytes::from(vec![b'k', n])),
        value: Some(Bytes::from(vec![n; 10])),
        headers: vec![("id".into(), Some(Bytes::from(vec![b'e', n])))],
        partition: None,
        timestamp_ms: None,
    }
}

/// The dead letter's reason header.
fn reason(record: &OutboxRecord) -> String {
    record
        .headers
        .iter()
        .find(|(k, _)| &**k == dead_letter::REASON)
        .map(|(_, v)| String::from_utf8_lossy(v.as_deref().unwrap_or_default()).into_owned())
        .expect("a dead letter has a reason")
}

fn origin(n: u64) -> Origin {
    Origin {
        table: "public.outbox".into(),
        position: Some(Lsn::from_u64(n)),
        event: None,
    }
}

/// Submits `count` events of topic A.events (`record(.., 0..count)`), each with a ticket of
/// `t` and a position of `at`.
async fn submit_events(d: &mut Deliver<FakeProducer>, t: &mut AckTracker, count: usize, at: u64) {
    for n in 0..count {
        d.submit(
            Routed::Record(record("A.events", n as u8)),
            t.produced(),
            origin(at),
        )
        .await
        .unwrap();
    }
}

fn stage(producer: FakeProducer) -> Deliver<FakeProducer> {
    Deliver::new(producer, "dlq", Arc::new(Metrics::new()), Arc::default())
}

/// The canary's topic is created off the delivery path: while its creation is under way
/// (a CreateTopics request can wait a minute for a new controller), a canary is not sent and
/// the events behind it go on, their reports taken and their positions confirmed.
#[tokio::test(start_paused = true)]
async fn a_canary_whose_topic_is_being_created_never_holds_the_events() {
    let mut producer = FakeProducer::new(100);
    producer.creating_topics = vec!["outbox-relay.canary".into()];
    let mut d = stage(producer);
    d.prepare_topic("outbox-relay.canary");
    let mut t = AckTracker::new(Lsn::ZERO);
    t.begin();
    let canary = OutboxRecord {
        topic: "outbox-relay.canary".into(),
        ..record("x", 0)
    };
    let submitted = tokio::time::timeout(
        Duration::from_secs(1),
        d.submit(
            Routed::Canary {
                record: canary,
                written_ms: 1,
            },
            t.produced(),
            origin(10),
        ),
    )
    .await;
    assert!(submitted.is_ok(), "the canary held the stage");
    assert_eq!(t.commit(Lsn::from_u64(10)), None);
    t.begin();
    submit_events(&mut d, &mut t, 1, 20).await;
    assert_eq!(t.commit(Lsn::from_u64(20)), None);
    assert_eq!(
        d.producer.sent_topics(),
        ["A.events"],
        "the canary is not sent"
    );
    d.producer.complete(0, Outcome::Acknowledged);
    let first = d.next_acknowledged().await.unwrap();
    let second = d.next_acknowledged().await.unwrap();
    assert_eq!(t.delivered(first), Some(Lsn::from_u64(10)));
    assert_eq!(t.delivered(second), Some(Lsn::from_u64(20)));
}

/// A partition that leaves a record unanswered longer than the limit is reported (/ready
/// red, the metric, named), while the others go on; once it answers, it is cleared.
#[tokio::test(start_paused = true)]
async fn a_partition_kafka_leaves_unanswered_is_reported_until_it_answers() {
    let metrics = Arc::new(Metrics::new());
    metrics.set_broker_reachable(true);
    metrics.streaming.set(1);
    let mut d = Deliver::new(
        FakeProducer::new(100),
        "dlq",
        metrics.clone(),
        Arc::default(),
    )
    .with_stuck_after(Duration::from_secs(180));
    let mut t = AckTracker::new(Lsn::ZERO);
    let mut stuck = record("orders.events", 0);
    stuck.partition = Some(2);
    d.submit(Routed::Record(stuck), t.produced(), origin(1))
        .await
        .unwrap();
    tokio::time::advance(Duration::from_secs(100)).await;
    d.submit(
        Routed::Record(record("other.events", 1)),
        t.produced(),
        origin(2),
    )
    .await
    .unwrap();
    d.producer.complete(1, Outcome::Acknowledged);
    let _ = d.next_acknowledged().await.unwrap();
    d.check_stuck();
    assert!(metrics.readiness().is_ok(), "100 s is within the limit");
    tokio::time::advance(Duration::from_secs(90)).await;
    d.check_stuck();
    let ready = metrics.readiness().unwrap_err();
    assert!(
        ready.contains("orders.events partition 2 for 190 s"),
        "{ready}"
    );
    assert_eq!(metrics.stuck_partitions.get(), 1);
    assert_eq!(metrics.stuck_seconds.get(), 190);
    d.producer.complete(0, Outcome::Acknowledged);
    let _ = d.next_acknowledged().await.unwrap();
    d.check_stuck();
    assert!(metrics.readiness().is_ok());
    assert_eq!(metrics.stuck_partitions.get(), 0);
}

#[tokio::test]
async fn acknowledgements_come_back_as_kafka_gives_them_and_the_tracker_orders_them() {
    let mut d = stage(FakeProducer::new(100));
    let mut t = AckTracker::new(Lsn::ZERO);
    t.begin();
    submit_events(&mut d, &mut t, 3, 10).await;
    let _ = t.commit(Lsn::from_u64(100));
    // Kafka acknowledges the last two first (other partitions).
    d.producer.complete(2, Outcome::Acknowledged);
    d.producer.complete(1, Outcome::Acknowledged);
    let first = d.next_acknowledged().await.unwrap();
    assert_eq!(t.delivered(first), None);
    let second = d.next_acknowledged().await.unwrap();
    assert_eq!(t.delivered(second), None, "event 0 is still in flight");
    d.producer.complete(0, Outcome::Acknowledged);
    let last = d.next_acknowledged().await.unwrap();
    assert_eq!(t.delivered(last), Some(Lsn::from_u64(100)));
    assert_eq!(d.counts().events, 3);
    assert!(!d.has_pending());
}

#[tokio::test]
async fn a_refused_event_is_acknowledged_only_through_its_dead_letter() {
    let mut d = stage(FakeProducer::new(100));
    let mut t = AckTracker::new(Lsn::ZERO);
    t.begin();
    d.submit(
        Routed::Record(record("A.events", 0)),
        t.produced(),
        origin(10),
    )
    .await
    .unwrap();
    let _ = t.commit(Lsn::from_u64(100));
    d.producer.complete(
        0,
        Outcome::Refused {
            error: "Broker: Message size too large".into(),
            // As the producer reports a size refusal: without the payload.
            record: producer::refused_record(&record("A.events", 0)).oversized(),
        },
    );
    // The refusal produces the dead letter; its acknowledgement is the event's.
    let pending =
        tokio::time::timeout(std::time::Duration::from_millis(50), d.next_acknowledged()).await;
    assert!(
        pending.is_err(),
        "nothing is acknowledged while the dead letter is in flight"
    );
    let sent = d.producer.sent_topics();
    assert_eq!(sent, ["A.events", "dlq"]);
    let letter = d.producer.sent.last().unwrap().clone();
    assert_eq!(letter.value, None, "the refused payload is left out");
    assert!(letter
        .headers
        .iter()
        .any(|(k, v)| &**k == dead_letter::SOURCE_LSN && v.as_deref() == Some(&b"0/A"[..])));
    d.producer.complete(1, Outcome::Acknowledged);
    let ticket = d.next_acknowledged().await.unwrap();
    assert_eq!(t.delivered(ticket), Some(Lsn::from_u64(100)));
    assert_eq!(d.counts().dead_letters, 1);
    assert_eq!(d.counts().events, 0);
    assert_eq!(
        d.metrics.dead_letters_total(),
        1,
        "counted on acknowledgement"
    );
}

#[tokio::test]
async fn dead_letters_keep_the_order_of_their_events() {
    let mut d = stage(FakeProducer::new(100));
    let mut t = AckTracker::new(Lsn::ZERO);
    let invalid = |n: u8| {
        Routed::Invalid(outbox_router::InvalidRow {
            reason: format!("row {n}"),
            table: "public.outbox".into(),
            original_topic: None,
            key: None,
            value: Some(Bytes::from(vec![n])),
            event_id: None,
            row: None,
            connect_dlq: None,
        })
    };
    d.submit(invalid(1), t.produced(), origin(1)).await.unwrap();
    d.submit(
        Routed::Record(record("A.events", 2)),
        t.produced(),
        origin(2),
    )
    .await
    .unwrap();
    d.submit(invalid(3), t.produced(), origin(3)).await.unwrap();
    let reasons: Vec<String> = d
        .producer
        .sent
        .iter()
        .map(|r| {
            r.headers
                .iter()
                .find(|(k, _)| &**k == dead_letter::REASON)
                .map(|(_, v)| {
                    String::from_utf8_lossy(v.as_deref().unwrap_or_default()).into_owned()
                })
                .unwrap_or_else(|| r.topic.to_string())
        })
        .collect();
    assert_eq!(reasons, ["row 1", "A.events", "row 3"]);
}

/// A streamed event at (`commit`, `index`).
fn streamed(commit: u64, index: u32) -> Origin {
    Origin {
        event: Some(EventPosition::Stream {
            commit: Lsn::from_u64(commit),
            index,
            committed_us: None,
        }),
        ..origin(commit)
    }
}

/// Submits events 0..`count` of A.events, streamed in the transaction committed at 100.
async fn submit_streamed(d: &mut Deliver<FakeProducer>, t: &mut AckTracker, count: u8) {
    for n in 0..count {
        d.submit(
            Routed::Record(record("A.events", n)),
            t.produced(),
            streamed(100, n as u32),
        )
        .await
        .unwrap();
    }
}

/// The broker refuses one record of a batch and fails its neighbours with it
/// (`_INVALID_DIFFERENT_RECORD`, reported first): the session ends, and its replay
/// dead-letters the refused event, payload kept, before it is sent again, so the neighbours
/// go through instead of failing with it for ever. In every mode, not only `--exactly-once`.
#[tokio::test]
async fn a_batch_failed_by_one_record_is_replayed_with_that_record_dead_lettered_first() {
    let refusals = Refusals::default();
    let mut d = stage(FakeProducer::new(100)).with_refusals(refusals.clone());
    let mut t = AckTracker::new(Lsn::ZERO);
    submit_streamed(&mut d, &mut t, 3).await;
    let neighbour = |n: u8| {
        Outcome::Neighbour {
        error: "Broker: Broker failed to validate record: Failed to append record because it was part of a batch"
            .into(),
        record: producer::refused_record(&record("A.events", n)),
    }
    };
    d.producer.complete(0, neighbour(0));
    d.producer.complete(
        1,
        Outcome::Refused {
            error: "Broker: Invalid record".into(),
            record: producer::refused_record(&record("A.events", 1)),
        },
    );
    d.producer.complete(2, neighbour(2));
    assert!(matches!(
        d.next_acknowledged().await,
        Err(RelayError::BrokerUnavailable(_))
    ));
    d.settle(std::time::Duration::from_millis(100)).await;

    // The next session replays the three events.
    let mut d = stage(FakeProducer::new(100)).with_refusals(refusals);
    let mut t = AckTracker::new(Lsn::ZERO);
    submit_streamed(&mut d, &mut t, 3).await;
    assert_eq!(d.producer.sent_topics(), ["A.events", "dlq", "A.events"]);
    let letter = &d.producer.sent[1];
    assert_eq!(
        letter.value,
        record("A.events", 1).value,
        "the payload is kept"
    );
    assert!(
        reason(letter).contains("Invalid record"),
        "{}",
        reason(letter)
    );
    assert_eq!(d.producer.sent[2].key, record("A.events", 2).key);

    // A row no replay repeats in order (polled, or of a snapshot, which is retaken whole):
    // dead-lettered with its payload, so that nothing loops.
    let mut d = stage(FakeProducer::new(100));
    d.submit(
        Routed::Record(record("A.events", 7)),
        t.produced(),
        origin(300),
    )
    .await
    .unwrap();
    d.producer.complete(0, neighbour(7));
    let pending =
        tokio::time::timeout(std::time::Duration::from_millis(50), d.next_acknowledged()).await;
    assert!(pending.is_err(), "its dead letter is in flight");
    assert_eq!(d.producer.sent_topics(), ["A.events", "dlq"]);
    assert_eq!(d.producer.sent[1].value, record("A.events", 7).value);
    assert!(reason(&d.producer.sent[1]).contains("another record of its batch was refused"));
}

#[tokio::test]
async fn a_dead_letter_the_topic_refuses_goes_again_without_payload_then_stops_the_relay() {
    let mut d = stage(FakeProducer::new(100));
    let mut t = AckTracker::new(Lsn::ZERO);
    d.submit(
        Routed::Invalid(outbox_router::InvalidRow {
            reason: "NULL routing value".into(),
            table: "public.outbox".into(),
            original_topic: None,
            key: None,
            value: Some(Bytes::from(vec![0; 4000])),
            event_id: None,
            row: None,
            connect_dlq: None,
        }),
        t.produced(),
        origin(7),
    )
    .await
    .unwrap();
    let refused = |d: &Deliver<FakeProducer>| Outcome::Refused {
        error: "Broker: Message size too large".into(),
        record: producer::refused_record(d.producer.sent.last().unwrap()).oversized(),
    };
    let outcome = refused(&d);
    d.producer.complete(0, outcome);
    let cut =
        tokio::time::timeout(std::time::Duration::from_millis(50), d.next_acknowledged()).await;
    assert!(cut.is_err(), "the cut dead letter is in flight");
    assert_eq!(d.producer.sent.len(), 2);
    assert_eq!(d.producer.sent[1].value, None);
    let outcome = refused(&d);
    d.producer.complete(1, outcome);
    let err = d.next_acknowledged().await.unwrap_err();
    assert_eq!(err.consequence(), crate::error::Consequence::Exit, "{err}");
    assert!(
        err.to_string().contains("dead-letter topic dlq refused"),
        "{err}"
    );
}

#[tokio::test]
async fn a_delivery_failed_in_transit_ends_the_session_and_confirms_nothing() {
    let mut d = stage(FakeProducer::new(100));
    let mut t = AckTracker::new(Lsn::ZERO);
    t.begin();
    d.submit(
        Routed::Record(record("A.events", 0)),
        t.produced(),
        origin(1),
    )
    .await
    .unwrap();
    let _ = t.commit(Lsn::from_u64(50));
    d.producer.complete(
        0,
        Outcome::Failed {
            error: "Local: Message timed out".into(),
        },
    );
    let err = d.next_acknowledged().await.unwrap_err();
    assert_eq!(err.consequence(), crate::error::Consequence::Resume);
    assert_eq!(t.confirmed(), Lsn::ZERO);
}

#[tokio::test]
async fn a_full_queue_waits_for_a_delivery_report_and_keeps_its_acknowledgement() {
    let mut d = stage(FakeProducer::new(2));
    let mut t = AckTracker::new(Lsn::ZERO);
    let first = t.produced();
    let first_seq = first.seq();
    d.submit(Routed::Record(record("A.events", 0)), first, origin(1))
        .await
        .unwrap();
    d.submit(
        Routed::Record(record("A.events", 1)),
        t.produced(),
        origin(1),
    )
    .await
    .unwrap();
    // The third waits: the producer completes the first delivery after a moment.
    let completer = d.producer.completer();
    let handle = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        completer.complete(0, Outcome::Acknowledged);
    });
    d.submit(
        Routed::Record(record("A.events", 2)),
        t.produced(),
        origin(1),
    )
    .await
    .unwrap();
    handle.await.unwrap();
    assert_eq!(d.producer.sent.len(), 3);
    assert_eq!(d.producer.queue_full_seen, 1);
    let ticket = d.next_acknowledged().await.unwrap();
    assert_eq!(
        ticket.seq(),
        first_seq,
        "the acknowledgement seen while waiting is kept"
    );
    let _ = t.delivered(ticket);
}

#[tokio::test]
async fn the_drain_returns_every_ticket() {
    let mut d = stage(FakeProducer::new(100));
    let mut t = AckTracker::new(Lsn::ZERO);
    submit_events(&mut d, &mut t, 5, 1).await;
    for n in (0..5).rev() {
        d.producer.complete(n, Outcome::Acknowledged);
    }
    d.drain(|ticket| {
        let _ = t.delivered(ticket);
    })
    .await
    .unwrap();
    assert!(t.all_delivered());
}

#[tokio::test]
async fn records_for_a_topic_the_broker_refuses_are_dead_lettered_and_the_stream_goes_on() {
    let mut producer = FakeProducer::new(100);
    producer.refused_topics.push("bad name!.events".into());
    let mut d = stage(producer);
    let mut t = AckTracker::new(Lsn::ZERO);
    d.submit(
        Routed::Record(record("bad name!.events", 0)),
        t.produced(),
        origin(1),
    )
    .await
    .unwrap();
    d.submit(
        Routed::Record(record("A.events", 1)),
        t.produced(),
        origin(2),
    )
    .await
    .unwrap();
    assert_eq!(d.producer.sent_topics(), ["dlq", "A.events"]);
    let reason = reason(&d.producer.sent[0]);
    assert!(
        reason.contains("topic bad name!.events refused"),
        "{reason}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_record_larger_than_the_whole_queue_is_dead_lettered_not_retried_forever() {
    let mut producer = FakeProducer::new(100);
    producer.queue_bytes = Some(5);
    let mut d = stage(producer);
    let mut t = AckTracker::new(Lsn::ZERO);
    d.submit(
        Routed::Record(record("A.events", 0)),
        t.produced(),
        origin(1),
    )
    .await
    .unwrap();
    assert_eq!(
        d.producer.sent_topics(),
        ["dlq"],
        "after a second of a full, idle queue"
    );
    let reason = reason(&d.producer.sent[0]);
    assert!(reason.contains("queue.buffering.max.kbytes"), "{reason}");
}

/// The hand-over is raced against the replication stream: each round of the stream loop
/// cancels it and tries again. Many quick tries are still not a second of a full queue.
#[tokio::test(start_paused = true)]
async fn a_full_queue_is_refused_after_a_second_however_often_the_hand_over_is_retried() {
    let mut producer = FakeProducer::new(100);
    producer.queue_bytes = Some(5);
    let mut d = stage(producer);
    let mut t = AckTracker::new(Lsn::ZERO);
    let start = tokio::time::Instant::now();
    t.begin();
    let submitted = tokio::time::timeout(
        Duration::from_millis(1),
        d.submit(
            Routed::Record(record("A.events", 0)),
            t.produced(),
            origin(1),
        ),
    )
    .await;
    assert!(submitted.is_err(), "waiting for room in the queue");
    assert_eq!(t.commit(Lsn::from_u64(100)), None);
    for _ in 0..500 {
        let round = tokio::time::timeout(Duration::from_millis(1), d.next_acknowledged()).await;
        assert!(round.is_err());
    }
    assert!(d.producer.queue_full_seen >= 500);
    assert!(
        d.producer.sent.is_empty(),
        "refused after {:?} of retries",
        start.elapsed()
    );
    assert_eq!(d.in_flight(), 1, "still held, in flight");
    d.producer.completer().complete(0, Outcome::Acknowledged);
    let ticket = d.next_acknowledged().await.unwrap();
    assert_eq!(d.producer.sent_topics(), ["dlq"]);
    assert_eq!(t.delivered(ticket), Some(Lsn::from_u64(100)));
    assert!(d.producer.sent_at[0] - start >= Duration::from_secs(1));
}

#[tokio::test]
async fn a_producer_is_rebuilt_only_once_everything_it_holds_came_back() {
    let mut producer = FakeProducer::new(100);
    producer.rebuild_for_topics = vec!["Small.events".into()];
    let mut d = stage(producer);
    let mut t = AckTracker::new(Lsn::ZERO);
    t.begin();
    submit_events(&mut d, &mut t, 2, 1).await;
    let completer = d.producer.completer();
    let acks = tokio::spawn(async move {
        tokio::task::yield_now().await;
        completer.complete(1, Outcome::Acknowledged);
        completer.complete(0, Outcome::Acknowledged);
    });
    // The first record for a topic with smaller batches waits for both in flight.
    d.submit(
        Routed::Record(record("Small.events", 2)),
        t.produced(),
        origin(2),
    )
    .await
    .unwrap();
    acks.await.unwrap();
    assert_eq!(
        d.producer.rebuilds,
        [(2, 0)],
        "rebuilt after two records, with nothing in flight"
    );
    assert_eq!(
        d.producer.sent_topics(),
        ["A.events", "A.events", "Small.events"]
    );
    let _ = t.commit(Lsn::from_u64(5));
    d.producer.complete(2, Outcome::Acknowledged);
    let mut confirmed = None;
    d.drain(|ticket| confirmed = t.delivered(ticket).or(confirmed))
        .await
        .unwrap();
    assert_eq!(
        confirmed,
        Some(Lsn::from_u64(5)),
        "no ticket lost in the rebuild"
    );
}

mod exactly_once_mode {
    use super::*;
    use crate::deliver::exactly_once::{TailRead, Written, POSITION_HEADER};

    /// Submits event `n` of `A.events` at position (`commit`, `index`).
    async fn submit_at(
        d: &mut Deliver<FakeProducer>,
        t: &mut AckTracker,
        n: u8,
        commit: u64,
        index: u32,
    ) {
        d.submit(
            Routed::Record(record("A.events", n)),
            t.produced(),
            at(commit, index),
        )
        .await
        .unwrap();
    }

    fn source() -> Source {
        Source::new("slot_a", "7301234567890123456", 1)
    }

    /// The guard of a session of [`source`] whose partitions end as `tails` say.
    fn guard(tails: &FakeTails) -> Guard {
        Guard::new(source(), None, Box::new(tails.clone()))
    }

    fn at(commit: u64, index: u32) -> Origin {
        Origin {
            event: Some(EventPosition::Stream {
                commit: Lsn::from_u64(commit),
                index,
                committed_us: None,
            }),
            ..origin(commit)
        }
    }

    fn tail(commit: u64, index: u32, partitions: i32) -> TailRead {
        TailRead::Record {
            offset: 99,
            position: Some(Written::encode(
                &source(),
                &EventPosition::Stream {
                    commit: Lsn::from_u64(commit),
                    index,
                    committed_us: None,
                },
                partitions,
            )),
        }
    }

    fn position_of(record: &OutboxRecord) -> Written {
        let value = record
            .headers
            .iter()
            .find(|(k, _)| &**k == POSITION_HEADER)
            .and_then(|(_, v)| v.clone())
            .expect("a position header");
        Written::parse(&value).expect("a readable position")
    }

    /// A refused event's dead letter is in Kafka before any later event goes to the producer:
    /// a partition's tail past the refused event then proves it is in the dead-letter topic,
    /// also to a later process that no longer knows it was refused (after kill -9).
    #[tokio::test]
    async fn a_later_event_waits_for_the_dead_letter_of_a_refused_one() {
        let mut producer = FakeProducer::new(100);
        producer.refuse_longer_than = Some(50);
        let done = producer.completer();
        let tails = FakeTails::default();
        let mut d = stage(producer).with_exactly_once(guard(&tails));
        let mut t = AckTracker::new(Lsn::ZERO);
        t.begin();
        // Q, in flight; R, refused for its size: its dead letter waits for Q's outcome.
        submit_at(&mut d, &mut t, 0, 100, 0).await;
        let mut big = record("A.events", 1);
        big.value = Some(Bytes::from(vec![1; 100]));
        d.submit(Routed::Record(big), t.produced(), at(100, 1))
            .await
            .unwrap();
        // Kafka answers Q, then R's dead letter, while E waits.
        let answers = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            done.complete(0, Outcome::Acknowledged);
            tokio::time::sleep(Duration::from_millis(20)).await;
            done.complete(1, Outcome::Acknowledged);
        });
        tokio::time::timeout(Duration::from_secs(5), submit_at(&mut d, &mut t, 2, 100, 2))
            .await
            .expect("E goes once the dead letter is in Kafka");
        answers.await.unwrap();
        assert_eq!(
            d.producer().sent_topics(),
            ["A.events", "dlq", "A.events"],
            "E only after R's dead letter"
        );
    }

    /// `--cleanup` after a restart: the replayed events at or before their partition's tail
    /// are skipped, and one of them may be there only as its dead letter (refused before the
    /// restart, which forgot it). An event the dead-letter topic may hold keeps its row; one
    /// past the dead-letter partition's tail is cleaned as delivered.
    #[tokio::test]
    async fn a_skipped_event_the_dead_letter_topic_may_hold_keeps_its_row() {
        let tails = FakeTails::default();
        tails.insert("A.events", 0, tail(100, 2, 1));
        tails.insert("dlq", 0, tail(100, 1, 1));
        let mut d = stage(FakeProducer::new(100))
            .noting_dead_letters()
            .with_exactly_once(guard(&tails));
        let mut t = AckTracker::new(Lsn::ZERO);
        t.begin();
        let mut seqs = Vec::new();
        for index in 0..3u32 {
            let ticket = t.produced();
            seqs.push(ticket.seq());
            d.submit(
                Routed::Record(record("A.events", index as u8)),
                ticket,
                at(100, index),
            )
            .await
            .unwrap();
        }
        assert!(d.producer().sent.is_empty(), "all three are in Kafka");
        assert_eq!(
            d.take_dead_lettered(),
            seqs[..2],
            "(100, 0) and (100, 1) may be dead letters; (100, 2) is past the dead-letter tail"
        );
    }

    /// A keyless event's dead letter is placed by its event id, as the letter itself is: the
    /// dead-letter partition asked is that one.
    #[tokio::test]
    async fn a_keyless_skipped_event_is_looked_for_where_its_dead_letter_would_be() {
        let mut producer = FakeProducer::new(100);
        producer.partitions = 4;
        let mut keyless = record("A.events", 1);
        keyless.key = None;
        let id = keyless.headers[0].1.clone().unwrap();
        let partition = crate::deliver::exactly_once::rule::key_partition(&id, 4);
        assert_ne!(partition, 0, "the case the test is about");
        let tails = FakeTails::default();
        tails.insert("A.events", partition, tail(100, 1, 4));
        tails.insert("dlq", partition, tail(100, 1, 4));
        let mut d = stage(producer)
            .noting_dead_letters()
            .with_exactly_once(guard(&tails));
        let mut t = AckTracker::new(Lsn::ZERO);
        t.begin();
        let ticket = t.produced();
        let seq = ticket.seq();
        d.submit(Routed::Record(keyless), ticket, at(100, 1))
            .await
            .unwrap();
        assert!(d.producer().sent.is_empty());
        assert_eq!(d.take_dead_lettered(), [seq]);
    }

    #[tokio::test]
    async fn replayed_events_up_to_the_partition_tail_are_acknowledged_without_being_produced() {
        let producer = FakeProducer::new(100);
        let tails = FakeTails::default();
        tails.insert("A.events", 0, tail(200, 1, 1));
        let mut d = stage(producer).with_exactly_once(guard(&tails));
        let mut t = AckTracker::new(Lsn::ZERO);
        // Replayed: (100, 0), (200, 0), (200, 1) are in Kafka; (200, 2) and (300, 0) are not.
        let mut commits = Vec::new();
        for (n, (commit, index)) in [(100, 0), (200, 0), (200, 1), (200, 2), (300, 0)]
            .into_iter()
            .enumerate()
        {
            t.begin();
            d.submit(
                Routed::Record(record("A.events", n as u8)),
                t.produced(),
                at(commit, index),
            )
            .await
            .unwrap();
            commits.push(t.commit(Lsn::from_u64(commit + 50)));
        }
        assert_eq!(
            tails.reads(),
            [("A.events".to_string(), 0)],
            "one tail read per partition"
        );
        let sent: Vec<u8> = d
            .producer
            .sent
            .iter()
            .map(|r| r.key.as_ref().unwrap()[1])
            .collect();
        assert_eq!(sent, [3, 4], "only the events after the tail are produced");
        assert_eq!(d.counts().skipped, 3);
        assert_eq!(d.metrics.exactly_once_skipped.get(), 3);
        // The skipped events count as delivered: the tracker confirms up to them.
        for _ in 0..3 {
            let ticket = d.next_acknowledged().await.unwrap();
            let _ = t.delivered(ticket);
        }
        assert_eq!(
            t.confirmed(),
            Lsn::from_u64(250),
            "confirmed through the last skipped event's transaction"
        );
        // Produced records carry their position and an explicit partition.
        let first = &d.producer.sent[0];
        assert_eq!(first.partition, Some(0));
        assert_eq!(
            position_of(first).position,
            EventPosition::Stream {
                commit: Lsn::from_u64(200),
                index: 2,
                committed_us: None,
            }
        );
        assert_eq!(position_of(first).slot, "slot_a");
        assert_eq!(position_of(first).server, "7301234567890123456/1");
        assert_eq!(position_of(first).partitions, 1);
    }

    #[tokio::test]
    async fn a_foreign_tail_is_counted_and_nothing_is_skipped() {
        let producer = FakeProducer::new(100);
        let tails = FakeTails::default();
        tails.insert(
            "A.events",
            0,
            TailRead::Record {
                offset: 7,
                position: None,
            },
        );
        let mut d = stage(producer).with_exactly_once(guard(&tails));
        let mut t = AckTracker::new(Lsn::ZERO);
        submit_at(&mut d, &mut t, 0, 100, 0).await;
        assert_eq!(d.producer.sent.len(), 1);
        assert_eq!(d.metrics.exactly_once_foreign_tails.get(), 1);
    }

    #[tokio::test]
    async fn an_event_the_relay_refuses_is_dead_lettered_even_behind_the_tail() {
        // The tail is past the event; the event was refused last time (too large), so it
        // never reached its partition: its dead letter decides, not the event's partition.
        let mut producer = FakeProducer::new(100);
        producer.refuse_longer_than = Some(5);
        let tails = FakeTails::default();
        tails.insert("A.events", 0, tail(900, 0, 1));
        let mut d = stage(producer).with_exactly_once(guard(&tails));
        let mut t = AckTracker::new(Lsn::ZERO);
        submit_at(&mut d, &mut t, 0, 100, 0).await;
        assert_eq!(d.producer.sent_topics(), ["dlq"]);
        let letter = &d.producer.sent[0];
        assert_eq!(
            position_of(letter).position,
            EventPosition::Stream {
                commit: Lsn::from_u64(100),
                index: 0,
                committed_us: None,
            }
        );
        assert_eq!(
            tails.reads(),
            [("dlq".to_string(), 0)],
            "the event's partition is not consulted"
        );
    }

    #[tokio::test]
    async fn a_dead_letter_already_in_the_dead_letter_topic_is_not_written_again() {
        let producer = FakeProducer::new(100);
        let tails = FakeTails::default();
        tails.insert("dlq", 0, tail(100, 0, 1));
        let mut d = stage(producer).with_exactly_once(guard(&tails));
        let mut t = AckTracker::new(Lsn::ZERO);
        let invalid = || {
            Routed::Invalid(outbox_router::InvalidRow {
                reason: "bad".into(),
                table: "public.outbox".into(),
                original_topic: None,
                key: None,
                value: None,
                event_id: None,
                row: None,
                connect_dlq: None,
            })
        };
        d.submit(invalid(), t.produced(), at(100, 0)).await.unwrap();
        d.submit(invalid(), t.produced(), at(100, 1)).await.unwrap();
        assert_eq!(
            d.producer.sent.len(),
            1,
            "only the second dead letter is written"
        );
        assert_eq!(
            position_of(&d.producer.sent[0]).position,
            EventPosition::Stream {
                commit: Lsn::from_u64(100),
                index: 1,
                committed_us: None,
            }
        );
        assert_eq!(d.counts().skipped, 1);
    }

    #[tokio::test]
    async fn an_event_the_broker_refused_in_an_earlier_session_is_dead_lettered_at_once() {
        // With enable.gapless.guarantee the broker's refusal stopped the producer: nothing
        // after it landed, and the next session must not send it (to be refused) again.
        let refusals = Refusals::default();
        let mut d = stage(FakeProducer::new(100))
            .with_refusals(refusals.clone())
            .with_exactly_once(guard(&FakeTails::default()));
        let mut t = AckTracker::new(Lsn::ZERO);
        submit_at(&mut d, &mut t, 0, 100, 0).await;
        d.producer.complete(
            0,
            Outcome::Refused {
                error: "Broker: Invalid record".into(),
                record: producer::refused_record(&record("A.events", 0)),
            },
        );
        d.settle(std::time::Duration::from_millis(100)).await;
        // The next session.
        let mut d = stage(FakeProducer::new(100))
            .with_refusals(refusals)
            .with_exactly_once(guard(&FakeTails::default()));
        submit_at(&mut d, &mut t, 0, 100, 0).await;
        assert_eq!(
            d.producer.sent_topics(),
            ["dlq"],
            "straight to its dead letter"
        );
        assert!(
            reason(&d.producer.sent[0]).contains("Invalid record"),
            "{}",
            reason(&d.producer.sent[0])
        );
    }

    /// A dead letter waits until every earlier event's outcome is known: an event the broker
    /// refuses late is dead-lettered before a later row's dead letter, so the dead-letter
    /// topic stays in position order and its tail check never skips the refused event.
    #[tokio::test]
    async fn a_dead_letter_waits_for_the_outcome_of_every_earlier_event() {
        let mut d = stage(FakeProducer::new(100)).with_exactly_once(guard(&FakeTails::default()));
        let mut t = AckTracker::new(Lsn::ZERO);
        submit_at(&mut d, &mut t, 0, 100, 0).await;
        d.submit(
            Routed::Invalid(outbox_router::InvalidRow {
                reason: "row 1".into(),
                table: "public.outbox".into(),
                original_topic: None,
                key: None,
                value: None,
                event_id: None,
                row: None,
                connect_dlq: None,
            }),
            t.produced(),
            at(100, 1),
        )
        .await
        .unwrap();
        assert_eq!(
            d.producer.sent_topics(),
            ["A.events"],
            "the later row's dead letter waits"
        );
        d.producer.complete(
            0,
            Outcome::Refused {
                error: "Broker: Invalid record".into(),
                record: producer::refused_record(&record("A.events", 0)),
            },
        );
        let pending =
            tokio::time::timeout(std::time::Duration::from_millis(50), d.next_acknowledged()).await;
        assert!(pending.is_err(), "the dead letters are in flight");
        assert_eq!(d.producer.sent_topics(), ["A.events", "dlq", "dlq"]);
        let positions: Vec<EventPosition> = d.producer.sent[1..]
            .iter()
            .map(|r| position_of(r).position)
            .collect();
        assert_eq!(
            positions,
            [
                EventPosition::Stream {
                    commit: Lsn::from_u64(100),
                    index: 0,
                    committed_us: None,
                },
                EventPosition::Stream {
                    commit: Lsn::from_u64(100),
                    index: 1,
                    committed_us: None,
                }
            ],
            "the dead-letter topic is written in position order"
        );
    }

    #[tokio::test]
    async fn without_the_flag_records_are_unchanged() {
        let mut d = stage(FakeProducer::new(100));
        let mut t = AckTracker::new(Lsn::ZERO);
        submit_at(&mut d, &mut t, 0, 100, 0).await;
        assert_eq!(
            d.producer.sent[0],
            record("A.events", 0),
            "no header, no explicit partition"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn held_events_go_in_order_once_their_linger_is_over_and_count_as_in_flight() {
    let mut d = stage(FakeProducer::new(1));
    let mut t = AckTracker::new(Lsn::ZERO);
    d.linger(CATCH_UP_LINGER);
    let start = tokio::time::Instant::now();
    t.begin();
    submit_events(&mut d, &mut t, 3, 10).await;
    assert_eq!(t.commit(Lsn::from_u64(100)), None);
    assert!(d.producer.sent.is_empty(), "held while the linger runs");
    assert_eq!(d.in_flight(), 3, "held events are in flight");
    assert!(d.has_pending());
    // Before the linger is over nothing goes; after, the first goes (the queue takes one).
    let early = tokio::time::timeout(CATCH_UP_LINGER / 2, d.next_acknowledged()).await;
    assert!(early.is_err());
    assert!(d.producer.sent.is_empty());
    let pending = tokio::time::timeout(CATCH_UP_LINGER, d.next_acknowledged()).await;
    assert!(pending.is_err(), "nothing acknowledged yet");
    assert_eq!(d.producer.sent.len(), 1);
    assert_eq!(d.producer.sent_at[0] - start, CATCH_UP_LINGER);
    // A full queue waits for a report; the rest go after it, in order.
    for id in 0..3 {
        d.producer.complete(id, Outcome::Acknowledged);
        let ticket = d.next_acknowledged().await.unwrap();
        let confirmed = t.delivered(ticket);
        assert_eq!(confirmed, (id == 2).then(|| Lsn::from_u64(100)));
    }
    let keys: Vec<_> = d.producer.sent.iter().map(|r| r.key.clone()).collect();
    assert_eq!(
        keys,
        (0..3)
            .map(|n| record("A.events", n).key)
            .collect::<Vec<_>>()
    );
    assert!(!d.has_pending());
}

#[tokio::test(start_paused = true)]
async fn a_drain_sends_held_events_at_once() {
    let mut d = stage(FakeProducer::new(100));
    let mut t = AckTracker::new(Lsn::ZERO);
    d.linger(CATCH_UP_LINGER);
    let start = tokio::time::Instant::now();
    t.begin();
    submit_events(&mut d, &mut t, 2, 10).await;
    let _ = t.commit(Lsn::from_u64(100));
    d.producer.complete(0, Outcome::Acknowledged);
    d.producer.complete(1, Outcome::Acknowledged);
    let mut confirmed = None;
    d.drain(|ticket| confirmed = t.delivered(ticket).or(confirmed))
        .await
        .unwrap();
    assert_eq!(confirmed, Some(Lsn::from_u64(100)));
    assert!(d.producer.sent_at.iter().all(|at| *at == start));
}

#[tokio::test(start_paused = true)]
async fn held_events_go_when_there_are_too_many_to_hold_whatever_the_linger() {
    let mut d = stage(FakeProducer::new(2 * linger::MAX_HELD_RECORDS));
    let mut t = AckTracker::new(Lsn::ZERO);
    d.linger(Duration::from_secs(3600));
    t.begin();
    submit_events(&mut d, &mut t, linger::MAX_HELD_RECORDS, 10).await;
    assert_eq!(d.producer.sent.len(), linger::MAX_HELD_RECORDS);
    // And by their bytes: 100 KB values, ten of them reach the bound.
    let big = |n: u8| OutboxRecord {
        value: Some(Bytes::from(vec![n; linger::MAX_HELD_BYTES / 10])),
        ..record("A.events", n)
    };
    for n in 0..9 {
        d.submit(Routed::Record(big(n)), t.produced(), origin(10))
            .await
            .unwrap();
    }
    assert_eq!(d.producer.sent.len(), linger::MAX_HELD_RECORDS);
    d.submit(Routed::Record(big(9)), t.produced(), origin(10))
        .await
        .unwrap();
    assert_eq!(d.producer.sent.len(), linger::MAX_HELD_RECORDS + 10);
}
