//! Signals and incremental snapshots through the native options and `outbox-relay signal`:
//! each channel (the signal table, a Kafka topic, a file) starts a snapshot that re-sends the
//! outbox's rows as events; a relay killed in the middle of one reads on where its confirmed
//! progress was. Real PostgreSQL, real broker. (The records against Debezium's own:
//! `tests/debezium.rs`.)

mod common;

use common::*;
use std::collections::HashMap;
use std::time::Duration;

const SIGNALS: &str = "CREATE TABLE public.signals (id varchar(42) PRIMARY KEY, type varchar(32) NOT NULL, data varchar(2048))";

/// Event numbers read so far, each as often as it was sent.
async fn counts(stack: &Stack) -> HashMap<u64, usize> {
    let mut seen = HashMap::new();
    for (_, n) in read_all_events(stack).await.unwrap() {
        *seen.entry(n).or_insert(0) += 1;
    }
    seen
}

async fn wait_until(
    stack: &Stack,
    relay: &outbox_relay_testkit::RelayProcess,
    what: &str,
    done: impl Fn(&HashMap<u64, usize>) -> bool,
) -> HashMap<u64, usize> {
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let seen = counts(stack).await;
        if done(&seen) {
            return seen;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: {} events seen\n{}",
            seen.len(),
            relay.log()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// `outbox-relay signal execute-snapshot` through each channel the relay reads: rows already
/// in the outbox (never relayed: `--snapshot-mode no-data`) are sent, all of them, then only
/// those `--where` keeps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_signal_command_starts_incremental_snapshots_through_each_channel() {
    let stack = Stack::start().await;
    stack.db.batch_execute(SIGNALS).await.unwrap();
    insert_events(&stack.db, 0, 20, 5, 3).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("signals.txt");
    let options = [
        "--signal-table",
        "public.signals",
        "--signal-channels",
        "source,kafka,file",
        "--signal-file",
        file.to_str().unwrap(),
        "--signal-poll-interval-ms",
        "200",
        "--incremental-snapshot-chunk-size",
        "7",
    ];
    let relay = stack
        .spawn_relay_and_wait_for_slot("outbox_relay", &options)
        .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        counts(&stack).await.is_empty(),
        "no-data: nothing before a signal"
    );
    let signal = |words: &[&str]| {
        let (code, out, err) = stack.command(&[&["signal"], words].concat(), &options);
        assert_eq!(code, Some(0), "{out}\n{err}");
        out
    };
    // The signal table (the first channel on).
    let out = signal(&[
        "execute-snapshot",
        "--table",
        "public.outbox",
        "--id",
        "first",
    ]);
    assert!(
        out.contains("signal first (execute-snapshot) written to the signal table"),
        "{out}"
    );
    let seen = wait_until(&stack, &relay, "source channel", |s| s.len() == 20).await;
    assert!(seen.values().all(|n| *n == 1), "{seen:?}");
    // Kafka: only the Order events (n % 4 == 0).
    let out = signal(&[
        "execute-snapshot",
        "--table",
        "public.outbox",
        "--where",
        "aggregate_type = 'Order'",
        "--channel",
        "kafka",
    ]);
    assert!(
        out.contains("topic outbox_relay-signal, key outbox_relay"),
        "{out}"
    );
    let seen = wait_until(&stack, &relay, "kafka channel", |s| {
        s.values().sum::<usize>() == 25
    })
    .await;
    assert!(
        (0..20).filter(|n| n % 4 == 0).all(|n| seen[&n] == 2),
        "{seen:?}"
    );
    // The file: agg-1's events (n % 3 == 1).
    signal(&[
        "execute-snapshot",
        "--table",
        "public.outbox",
        "--where",
        "aggregate_id = 'agg-1'",
        "--channel",
        "file",
    ]);
    let want = 25 + (0..20).filter(|n| n % 3 == 1).count();
    wait_until(&stack, &relay, "file channel", |s| {
        s.values().sum::<usize>() == want
    })
    .await;
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "",
        "the file is emptied once read"
    );
    // A filter PostgreSQL refuses ends that snapshot, never the stream.
    signal(&[
        "execute-snapshot",
        "--table",
        "public.outbox",
        "--where",
        "no_such_column = 1",
    ]);
    relay
        .wait_for_log("no_such_column", Duration::from_secs(30))
        .await;
    insert_events(&stack.db, 20, 1, 1, 3).await.unwrap();
    wait_until(&stack, &relay, "streaming after a refused filter", |s| {
        s.contains_key(&20)
    })
    .await;
    // A log signal, and arguments that make no signal.
    signal(&["log", "--message", "operator was here at {}"]);
    relay
        .wait_for_log("operator was here at {lsn=", Duration::from_secs(30))
        .await;
    let (code, _, err) = stack.command(&["signal", "execute-snapshot"], &options);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--table"), "{err}");
    // Only the watermark rows and the signals in the table: nothing else written there.
    let kinds: Vec<String> = stack
        .db
        .query("SELECT DISTINCT type FROM public.signals ORDER BY 1", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        kinds,
        [
            "execute-snapshot",
            "log",
            "snapshot-window-close",
            "snapshot-window-open"
        ]
    );
}

/// Kill -9 in the middle of an incremental snapshot: the next start reads on from the
/// confirmed progress, every row arrives at least once, and each aggregate's events arrive in
/// order (a chunk sent again comes whole, after what was sent before it). The signal table
/// keeps `data` as jsonb.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_killed_in_an_incremental_snapshot_reads_on_where_it_was() {
    const EVENTS: u64 = 20_000;
    let stack = Stack::start().await;
    // Not Debezium's column types: the watermarks are written as the columns take them.
    stack
        .db
        .batch_execute(
            "CREATE TABLE public.signals (id text PRIMARY KEY, type text NOT NULL, data jsonb)",
        )
        .await
        .unwrap();
    insert_events(&stack.db, 0, EVENTS, 1_000, 7).await.unwrap();
    let options = [
        "--signal-table",
        "public.signals",
        "--incremental-snapshot-chunk-size",
        "500",
    ];
    let mut relay = stack
        .spawn_relay_and_wait_for_slot("outbox_relay", &options)
        .await;
    let (code, out, err) = stack.command(
        &["signal", "execute-snapshot", "--table", "public.outbox"],
        &options,
    );
    assert_eq!(code, Some(0), "{out}\n{err}");
    // Killed once a part is through and its progress saved.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let saved: i64 = stack
            .db
            .query_one(
                "SELECT count(*) FROM pg_tables WHERE tablename = 'outbox_relay_incremental_snapshots'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        let progress: Option<String> = if saved > 0 {
            stack
                .db
                .query_opt(
                    "SELECT progress FROM public.outbox_relay_incremental_snapshots",
                    &[],
                )
                .await
                .unwrap()
                .map(|r| r.get(0))
        } else {
            None
        };
        if progress.is_some_and(|p| p.contains("last_key\":[")) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no progress saved\n{}",
            relay.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    relay.kill9();
    let before = counts(&stack).await.len() as u64;
    assert!(
        before < EVENTS,
        "killed too late to tell: {before} of {EVENTS} sent"
    );
    let relay = stack.spawn_relay(&options);
    let seen = wait_until(&stack, &relay, "after the restart", |s| {
        s.len() as u64 == EVENTS
    })
    .await;
    assert!((0..EVENTS).all(|n| seen.contains_key(&n)));
    // Each aggregate's events in order: a chunk sent again repeats events already sent, so
    // each event's first arrival comes after the first arrival of every earlier event of its
    // aggregate.
    let mut per_key: HashMap<String, Vec<u64>> = HashMap::new();
    for (record, n) in read_all_events(&stack).await.unwrap() {
        // Order holds within a partition: a topic's key.
        let key = String::from_utf8_lossy(record.key.as_deref().unwrap_or_default()).into_owned();
        per_key
            .entry(format!("{}/{key}", TYPES[(n % 4) as usize]))
            .or_default()
            .push(n);
    }
    let mut repeated = 0;
    for (key, ns) in per_key {
        let mut firsts: Vec<u64> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for n in ns {
            if seen.insert(n) {
                firsts.push(n);
            } else {
                repeated += 1;
            }
        }
        assert!(
            firsts.windows(2).all(|w| w[0] < w[1]),
            "{key}: first arrivals out of order: {firsts:?}"
        );
    }
    eprintln!("events sent twice after the restart: {repeated}");
    // Done: the progress row is gone once the end is confirmed.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let left: i64 = stack
            .db
            .query_one(
                "SELECT count(*) FROM public.outbox_relay_incremental_snapshots",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if left == 0 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{}", relay.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
