//! The outbox of the memory benchmark and the small-pod test: Debezium's outbox table, rows of
//! about 2 KB of jsonb payload each, and the Debezium connector configuration users run against
//! it (snapshot.mode=initial, the EventRouter, StringConverter).

/// Debezium's outbox table, with an insertion-order column.
pub const DDL: &str = "CREATE TABLE public.outbox (
    seq bigint GENERATED ALWAYS AS IDENTITY,
    id uuid PRIMARY KEY,
    aggregatetype varchar(255) NOT NULL,
    aggregateid varchar(255) NOT NULL,
    type varchar(255) NOT NULL,
    payload jsonb
)";

/// `rows` rows of about 2 KB of payload each (300,000 of them: 603 MB of payload text), over
/// three aggregate types.
pub fn insert_rows(rows: u64) -> String {
    format!(
        "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) \
         SELECT gen_random_uuid(), (ARRAY['Order','Customer','Invoice'])[g % 3 + 1], 'agg-' || (g % 1000), 'Created', \
                jsonb_build_object('n', g, 'note', repeat(md5(g::text), 62)) \
         FROM generate_series(1, {rows}) g"
    )
}

/// Writes `rows` rows ([`insert_rows`]) and says how many bytes of payload text the outbox
/// holds then.
pub async fn fill(db: &tokio_postgres::Client, rows: u64) -> i64 {
    db.batch_execute(&insert_rows(rows)).await.unwrap();
    db.query_one("SELECT sum(length(payload::text))::bigint FROM outbox", &[])
        .await
        .unwrap()
        .get(0)
}

/// The arguments of `outbox-relay run` with [`connector`] (written to `dir`) and the broker
/// `bootstrap_servers`; metrics on a free port.
pub fn run_args(
    dir: &std::path::Path,
    port: u16,
    topic_prefix: &str,
    extra: &[(&str, &str)],
    bootstrap_servers: &str,
) -> Vec<String> {
    let path = dir.join("outbox.json");
    std::fs::write(&path, connector(port, topic_prefix, extra).to_string()).unwrap();
    [
        "run",
        "--debezium-config",
        &path.display().to_string(),
        "--bootstrap-servers",
        bootstrap_servers,
        "--metrics-address",
        "127.0.0.1:0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// The connector configuration, for PostgreSQL on `port`, with `extra` options on top (a
/// slot's name, say).
pub fn connector(port: u16, topic_prefix: &str, extra: &[(&str, &str)]) -> serde_json::Value {
    let mut config = serde_json::json!({
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "plugin.name": "pgoutput",
        "database.hostname": "127.0.0.1",
        "database.port": port.to_string(),
        "database.user": "postgres",
        "database.dbname": "postgres",
        "topic.prefix": topic_prefix,
        "table.include.list": "public.outbox",
        "snapshot.mode": "initial",
        "topic.creation.default.replication.factor": "1",
        "topic.creation.default.partitions": "3",
        "transforms": "outbox",
        "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter"
    });
    for (key, value) in extra {
        config[*key] = serde_json::Value::String((*value).to_owned());
    }
    serde_json::json!({ "name": "outbox", "config": config })
}
