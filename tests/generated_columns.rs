//! A stored generated column the routing reads (here the route-by column, computed from the
//! payload) works in CDC mode as in polling mode: on PostgreSQL 18 the publication the relay
//! creates publishes it (`publish_generated_columns = stored`); an existing publication that
//! does not is refused with the ALTER that fixes it; before 18 (pgoutput sends no generated
//! column) the relay refuses at start, naming the column and the ways out. A generated column
//! the routing does not read is no reason to refuse.

mod common;

use common::*;
use outbox_relay_testkit::{Broker, PgCluster, Storage};
use std::time::Duration;

const SLOT: &str = "outbox_relay";

/// The seeds' outbox, with `aggregate_type` computed from the payload's `type`, and a
/// generated column the routing does not read.
const GENERATED_ROUTING: &str = "ALTER TABLE outbox DROP COLUMN aggregate_type; \
     ALTER TABLE outbox ADD COLUMN aggregate_type text GENERATED ALWAYS AS (payload->>'type') STORED; \
     ALTER TABLE outbox ADD COLUMN payload_size int GENERATED ALWAYS AS (length(payload::text)) STORED;";

async fn stack_on(major: u32) -> Stack {
    let pg = PgCluster::start_version(major, "")
        .unwrap_or_else(|e| panic!("PostgreSQL {major} for this test: {e:#}"));
    let broker = Broker::start(Storage::Sqlite)
        .unwrap_or_else(|e| panic!("cannot start Apache Kafka for this test: {e:#}"));
    let stack = Stack::of(pg, broker).await;
    stack.db.batch_execute(GENERATED_ROUTING).await.unwrap();
    stack
}

/// Events `first..first + count`: the routing value only in the payload (`{"type": T, "n": n}`),
/// types and keys as [`insert_events`] makes them.
async fn insert_typed_events(db: &tokio_postgres::Client, first: u64, count: u64) {
    db.batch_execute(&format!(
        "INSERT INTO outbox (id, aggregate_id, event_type, payload) \
         SELECT ('00000000-0000-0000-0000-' || lpad(to_hex(g), 12, '0'))::uuid, 'agg-' || (g % 10), 'Event' || g, \
                jsonb_build_object('type', (ARRAY['Order','Customer','Invoice','Shipment'])[g % 4 + 1], 'n', g) \
         FROM generate_series({first}, {}) g",
        first + count - 1
    ))
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generated_routing_column_is_published_and_routes_on_postgresql_18() {
    let stack = stack_on(18).await;

    // An existing publication without generated columns: refused at start, with the fix;
    // `check` says the same. Nothing is altered behind the DBA's back.
    stack
        .db
        .batch_execute("CREATE PUBLICATION existing FOR TABLE outbox WITH (publish = 'insert')")
        .await
        .unwrap();
    let (succeeded, log) = stack.run_until_exit(&["--publication", "existing"]);
    assert!(!succeeded, "{log}");
    assert!(
        log.contains("column aggregate_type of public.outbox is a generated column")
            && log.contains("the topic (route-by column)"),
        "{log}"
    );
    assert!(
        log.contains("ALTER PUBLICATION \"existing\" SET (publish_generated_columns = stored);"),
        "the fix is printed:\n{log}"
    );
    assert!(
        stack.confirmed_flush_lsn(SLOT).await.is_none(),
        "no slot was created"
    );
    let (code, stdout) = stack.check(&["--publication", "existing"]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains("publish_generated_columns = stored"),
        "{stdout}"
    );
    // The fix, as printed, makes it work.
    stack
        .db
        .batch_execute("ALTER PUBLICATION \"existing\" SET (publish_generated_columns = stored)")
        .await
        .unwrap();
    let (code, stdout) = stack.check(&["--publication", "existing"]);
    assert_eq!(code, Some(0), "{stdout}");

    // The relay's own publication is created publishing stored generated columns, and the
    // events are routed by the generated column.
    let relay = stack.spawn_relay_and_wait_for_slot(SLOT, &[]).await;
    let published: String = stack
        .db
        .query_one(
            "SELECT pubgencols::text FROM pg_publication WHERE pubname = 'outbox_relay'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(published, "s", "publish_generated_columns = stored");
    insert_typed_events(&stack.db, 0, 40).await;
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;
    // read_all_events checks that event n is on topic TYPES[n % 4].events.
    let (lost, duplicated) = lost_and_duplicated(&stack, 40).await;
    assert_eq!((lost, duplicated), (0, 0), "{}", relay.log());
    let orders = stack.read_topic("Order.events").await;
    assert_eq!(orders.len(), 10);
    assert_eq!(orders[0].key_str(), Some("agg-0"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generated_routing_column_is_refused_with_the_reason_before_postgresql_18() {
    let stack = stack_on(17).await;
    let (succeeded, log) = stack.run_until_exit(&[]);
    assert!(!succeeded, "{log}");
    assert!(
        log.contains("column aggregate_type of public.outbox is a generated column")
            && log.contains(
                "pgoutput sends no generated column before PostgreSQL 18 (this server is 17."
            ),
        "{log}"
    );
    assert!(
        log.contains("--mode polling")
            && log.contains(
                "ALTER TABLE \"public\".\"outbox\" ALTER COLUMN \"aggregate_type\" DROP EXPRESSION;"
            ),
        "the ways out are named:\n{log}"
    );
    assert!(!log.contains("reconnecting"), "never retried:\n{log}");
    assert!(
        stack.confirmed_flush_lsn(SLOT).await.is_none(),
        "no slot was created"
    );
    let (code, stdout) = stack.check(&[]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains("column aggregate_type of public.outbox is a generated column"),
        "{stdout}"
    );

    // The fix it names (a plain column; a trigger would fill it): the table keeps a generated
    // column the routing does not read, which is no reason to refuse.
    stack
        .db
        .batch_execute(
            "ALTER TABLE outbox ALTER COLUMN aggregate_type DROP EXPRESSION; \
             CREATE FUNCTION outbox_type() RETURNS trigger LANGUAGE plpgsql AS \
               $$ BEGIN NEW.aggregate_type := NEW.payload->>'type'; RETURN NEW; END $$; \
             CREATE TRIGGER outbox_type BEFORE INSERT ON outbox FOR EACH ROW EXECUTE FUNCTION outbox_type();",
        )
        .await
        .unwrap();
    let relay = stack.spawn_relay_and_wait_for_slot(SLOT, &[]).await;
    insert_typed_events(&stack.db, 0, 40).await;
    stack
        .wait_delivered(SLOT, Duration::from_secs(60), Some(&relay))
        .await;
    let (lost, duplicated) = lost_and_duplicated(&stack, 40).await;
    assert_eq!((lost, duplicated), (0, 0), "{}", relay.log());
}
