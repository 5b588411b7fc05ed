//! `check`: can `run` work here with these settings, and if not, what fixes it.

use crate::config::ConnectionInfo;
use crate::config::{ClientRole, Retire, Settings, SourceSettings};
use crate::error::RelayError;
use crate::source::catalog;
use postgres_protocol::escape::{escape_identifier, escape_literal};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use std::time::Duration;

/// One line of `check` output.
struct Finding {
    ok: bool,
    what: String,
    fix: Option<String>,
}

fn ok(what: impl Into<String>) -> Finding {
    Finding {
        ok: true,
        what: what.into(),
        fix: None,
    }
}

fn fail(what: impl Into<String>, fix: impl Into<String>) -> Finding {
    Finding {
        ok: false,
        what: what.into(),
        fix: Some(fix.into()),
    }
}

/// A refusal the relay prints as "what is wrong; what fixes it", as a failed finding.
fn fail_with_fix(message: &str) -> Finding {
    let (what, fix) = message
        .rsplit_once("; ")
        .or_else(|| message.split_once(". "))
        .unwrap_or((message, ""));
    fail(what.to_owned(), fix.to_owned())
}

/// Runs every check, prints them, returns whether `run` can work.
pub async fn check(settings: &Settings) -> bool {
    let mut findings = vec![ok("configuration is valid")];
    if let Some(debezium) = &settings.preset {
        findings.extend(
            debezium
                .notes
                .iter()
                .map(|n| ok(format!("Debezium configuration: {n}"))),
        );
        if !debezium.unknown_options.is_empty() {
            println!(
                "warn unknown connector options, ignored: {}",
                debezium.unknown_options.join(", ")
            );
        }
    }
    findings.extend(check_postgres(settings).await);
    findings.extend(check_kafka(settings).await);
    let mut all_ok = true;
    for f in &findings {
        println!("{} {}", if f.ok { "ok  " } else { "FAIL" }, f.what);
        if let Some(fix) = &f.fix {
            for line in fix.lines() {
                println!("       fix: {line}");
            }
        }
        all_ok &= f.ok;
    }
    println!(
        "{}",
        if all_ok {
            "outbox-relay run can start with these settings."
        } else {
            "outbox-relay run cannot work until the failures above are fixed."
        }
    );
    all_ok
}

async fn check_postgres(s: &Settings) -> Vec<Finding> {
    let mut out = Vec::new();
    let conn = match ConnectionInfo::parse(s.postgres_url.expose()) {
        Ok(c) => c,
        Err(e) => {
            return vec![fail(
                format!("postgres-url: {e}"),
                "pass --postgres-url postgres://USER:PASSWORD@HOST:PORT/DATABASE",
            )]
        }
    };
    let client = match crate::source::postgres::Database::of(s).connect().await {
        Ok(c) => {
            out.push(ok(format!("connected to {}", conn.display)));
            c
        }
        Err(e) => {
            out.push(fail(
                format!("cannot connect to PostgreSQL: {e}"),
                "check host, port, user, password and pg_hba.conf",
            ));
            return out;
        }
    };
    let tables = match catalog::outbox_tables(&client, &s.router).await {
        Ok(tables) => tables,
        Err(e) => {
            out.push(fail_with_fix(&e.to_string()));
            return out;
        }
    };
    // The first table's schema keeps the relay's bookkeeping (`public` when only logical
    // decoding messages are relayed); polling reads only it.
    let home = tables
        .first()
        .cloned()
        .unwrap_or_else(|| outbox_router::TableName {
            schema: "public".into(),
            name: "pg_logical_emit_message".into(),
        });
    let table = &home;
    let qualified = crate::source::sql_rows::qualified(table);
    let one = |sql: &'static str| {
        let client = &client;
        async move { client.query_one(sql, &[]).await }
    };
    // Polling mode needs no logical replication: only the table privileges below.
    if s.cdc().is_some() {
        match one("SELECT current_setting('wal_level')").await {
            Ok(row) if row.get::<_, String>(0) == "logical" => out.push(ok("wal_level = logical")),
            Ok(row) => out.push(fail(
                format!(
                    "wal_level = {}, logical replication needs logical",
                    row.get::<_, String>(0)
                ),
                "ALTER SYSTEM SET wal_level = logical;  -- then restart PostgreSQL",
            )),
            Err(e) => out.push(fail(
                format!("cannot read wal_level: {e}"),
                "check the user's privileges",
            )),
        }
        match one("SELECT rolreplication OR rolsuper, current_user::text FROM pg_roles WHERE rolname = current_user").await {
            Ok(row) if row.get::<_, bool>(0) => out.push(ok(format!("role {} may replicate", row.get::<_, String>(1)))),
            Ok(row) => {
                let role: String = row.get(1);
                out.push(fail(
                    format!("role {role} lacks the REPLICATION attribute"),
                    format!("ALTER ROLE {} REPLICATION;", escape_identifier(&role)),
                ))
            }
            Err(e) => out.push(fail(format!("cannot read the role: {e}"), "check the user's privileges")),
        }
    }
    let mut all_exist = true;
    for table in &tables {
        let qualified = crate::source::sql_rows::qualified(table);
        let exists = catalog::table_exists(&client, table).await.unwrap_or(false);
        all_exist &= exists;
        if !exists {
            out.push(fail(
                format!("table {table} does not exist"),
                "create it: psql -f sql/outbox.sql (or `outbox-relay setup-sql`), or pass --table SCHEMA.TABLE",
            ));
        } else {
            let readable = client
                .query_one(
                    "SELECT has_table_privilege(current_user, $1::text::regclass, 'SELECT')",
                    &[&qualified],
                )
                .await
                .map(|r| r.get::<_, bool>(0))
                .unwrap_or(false);
            if readable {
                out.push(ok(format!("table {table} exists and is readable")));
                out.extend(column_types(&client, s, table).await);
            } else {
                out.push(fail(
                    format!("no SELECT privilege on {table}"),
                    format!("GRANT SELECT ON {qualified} TO CURRENT_USER;  -- as the owner"),
                ));
            }
        }
    }
    let table_exists = all_exist;
    let cdc = match &s.source {
        SourceSettings::Cdc(cdc) => cdc,
        SourceSettings::Polling(polling) => {
            let (privilege, action) = match &polling.retire {
                Retire::Delete => ("DELETE", "delete relayed rows"),
                Retire::MarkProcessed(_) => ("UPDATE", "mark relayed rows"),
            };
            let allowed = client
                .query_one(
                    "SELECT has_table_privilege($1::text::regclass, $2)",
                    &[&qualified, &privilege],
                )
                .await
                .map(|r| r.get::<_, bool>(0))
                .unwrap_or(false);
            if allowed {
                out.push(ok(format!("polling mode may {action} in {table}")));
            } else {
                out.push(fail(
                    format!("polling mode cannot {action}: no {privilege} privilege on {table}"),
                    format!("GRANT {privilege} ON {qualified} TO CURRENT_USER;  -- as the owner"),
                ));
            }
            if table_exists {
                match catalog::insertion_order_column(&client, table, polling.order_by.as_deref())
                    .await
                {
                    Ok(column) => out.push(ok(format!(
                        "polling mode orders {table} by {column} (insertion order)"
                    ))),
                    Err(e) => out.push(fail_with_fix(&e.to_string())),
                }
            }
            return out;
        }
    };
    let all_tables = tables
        .iter()
        .map(crate::source::sql_rows::qualified)
        .collect::<Vec<_>>()
        .join(", ");
    let create_publication = format!(
        "CREATE PUBLICATION {}{} WITH (publish = 'insert');",
        escape_identifier(&cdc.publication),
        if tables.is_empty() {
            String::new()
        } else {
            format!(" FOR TABLE {all_tables}")
        }
    );
    let publication = client
        .query_opt(
            "SELECT 1 FROM pg_publication WHERE pubname = $1",
            &[&cdc.publication],
        )
        .await;
    match publication {
        Ok(Some(_)) => {
            for table in &tables {
                out.push(published(&client, &cdc.publication, table).await);
            }
        }
        Ok(None) if table_exists => {
            let mut can_create = true;
            for table in &tables {
                can_create &= client
                    .query_one(
                        "SELECT r.rolsuper OR pg_has_role(current_user, c.relowner, 'USAGE') \
                         FROM pg_class c, pg_roles r WHERE c.oid = $1::text::regclass AND r.rolname = current_user",
                        &[&crate::source::sql_rows::qualified(table)],
                    )
                    .await
                    .map(|r| r.get::<_, bool>(0))
                    .unwrap_or(false);
            }
            if can_create {
                out.push(ok(format!(
                    "publication {} is missing; run will create it",
                    cdc.publication
                )));
            } else {
                out.push(fail(
                    format!(
                        "publication {} is missing and this role may not create it",
                        cdc.publication
                    ),
                    format!("as the table owner: {create_publication}"),
                ));
            }
        }
        Ok(None) => {}
        Err(e) => out.push(fail(
            format!("cannot read publications: {e}"),
            "check the user's privileges",
        )),
    }
    match catalog::slot_state(&client, &cdc.slot).await {
        Ok(Some(state)) if state.plugin.as_deref() != Some("pgoutput") => out.push(fail(
            format!("slot {} uses plugin {:?}, not pgoutput", cdc.slot, state.plugin.unwrap_or_default()),
            format!("SELECT pg_drop_replication_slot({});  -- or choose another --slot", escape_literal(&cdc.slot)),
        )),
        Ok(Some(state)) if state.wal_status.as_deref() == Some("lost") => out.push(fail(
            format!("slot {} was invalidated (max_slot_wal_keep_size): events after its position are gone", cdc.slot),
            format!("{}", catalog::invalidated_slot(&cdc.slot)),
        )),
        Ok(Some(state)) if state.database.as_deref() != Some(conn.database.as_str()) => out.push(fail(
            format!("slot {} belongs to database {:?}", cdc.slot, state.database.unwrap_or_default()),
            "choose another --slot",
        )),
        Ok(Some(state)) => out.push(ok(format!(
            "slot {} (pgoutput) resumes at {}{}",
            cdc.slot,
            state.confirmed_flush_lsn.map(|l| l.to_string()).unwrap_or_default(),
            state.active_pid.map(|p| format!("; held by pid {p}: run will wait for it (standby)")).unwrap_or_default()
        ))),
        Ok(None) if crate::source::slot_history::remembered(&client, &table.schema, &cdc.slot)
            .await
            .ok()
            .flatten()
            .is_some() =>
        {
            out.push(fail(
                format!("slot {} is gone, but this relay streamed from it: events since its last position would be skipped", cdc.slot),
                "run with --on-missing-slot reread (relay every row still in the outbox again) or --on-missing-slot accept-gap",
            ))
        }
        Ok(None) => match one("SELECT current_setting('max_replication_slots')::int - (SELECT count(*) FROM pg_replication_slots)::int").await {
            Ok(row) if row.get::<_, i32>(0) > 0 => out.push(ok(format!("slot {} is missing; run will create it ({} free)", cdc.slot, row.get::<_, i32>(0)))),
            Ok(_) => out.push(fail(
                "no free replication slot (max_replication_slots reached)",
                "ALTER SYSTEM SET max_replication_slots = <more>;  -- then restart, or drop an unused slot",
            )),
            Err(e) => out.push(fail(format!("cannot count replication slots: {e}"), "check the user's privileges")),
        },
        Err(e) => out.push(fail(format!("cannot read replication slots: {e}"), "check the user's privileges")),
    }
    out
}

/// Whether an existing publication carries every INSERT of `table`.
async fn published(
    client: &tokio_postgres::Client,
    publication: &str,
    table: &outbox_router::TableName,
) -> Finding {
    let included = client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_publication_tables WHERE pubname = $1 AND schemaname = $2 AND tablename = $3)",
            &[&publication, &table.schema, &table.name],
        )
        .await
        .map(|r| r.get::<_, bool>(0));
    match included {
        Ok(true) => match catalog::publication_problem(client, publication, table).await {
            Ok(None) => ok(format!("publication {publication} includes {table}")),
            Ok(Some(problem)) => {
                let (what, fix) = problem
                    .split_once("; ")
                    .or_else(|| problem.split_once(". "))
                    .unwrap_or((&problem, ""));
                fail(what.to_owned(), fix.to_owned())
            }
            Err(e) => fail(
                format!("cannot read publication {publication}: {e}"),
                "check the user's privileges",
            ),
        },
        Ok(false) => fail(
            format!("publication {publication} exists without {table}"),
            format!(
                "ALTER PUBLICATION {} ADD TABLE {};",
                escape_identifier(publication),
                crate::source::sql_rows::qualified(table)
            ),
        ),
        Err(e) => fail(
            format!("cannot read publications: {e}"),
            "check the user's privileges",
        ),
    }
}

async fn check_kafka(s: &Settings) -> Vec<Finding> {
    let config = s.kafka.client_config(ClientRole::Admin);
    let admin: AdminClient<DefaultClientContext> = match config.create() {
        Ok(a) => a,
        Err(e) => {
            return vec![fail(
                format!("Kafka client settings rejected: {e}"),
                "fix the --producer-property values",
            )]
        }
    };
    let bootstrap = s.kafka.bootstrap_servers.clone();
    let metadata = {
        let config = config.clone();
        tokio::task::spawn_blocking(move || {
            let consumer: rdkafka::consumer::BaseConsumer = config.create()?;
            use rdkafka::consumer::Consumer;
            consumer
                .fetch_metadata(None, Duration::from_secs(10))
                .map(|m| m.brokers().len())
        })
        .await
    };
    let mut out = Vec::new();
    match metadata {
        Ok(Ok(brokers)) => out.push(ok(format!(
            "Kafka at {bootstrap} answers ({brokers} broker(s))"
        ))),
        Ok(Err(e)) => {
            out.push(fail(
                format!("Kafka at {bootstrap} does not answer: {e}"),
                "check --bootstrap-servers and the security.* / sasl.* / ssl.* producer properties",
            ));
            return out;
        }
        Err(e) => {
            out.push(fail(format!("Kafka metadata request failed: {e}"), "retry"));
            return out;
        }
    }
    // validate_only: the broker checks the request (authorisation, settings) without creating anything.
    let probe = NewTopic::new(
        "outbox-relay-check-probe",
        s.kafka.topic_partitions,
        TopicReplication::Fixed(s.kafka.topic_replication_factor),
    );
    let options = AdminOptions::new()
        .validate_only(true)
        .operation_timeout(Some(Duration::from_secs(10)));
    match admin.create_topics(&[probe], &options).await {
        Ok(results) => match results.into_iter().next() {
            Some(Err((_, code))) if matches!(code, rdkafka::types::RDKafkaErrorCode::TopicAuthorizationFailed | rdkafka::types::RDKafkaErrorCode::ClusterAuthorizationFailed) => {
                out.push(fail(format!("not allowed to create topics ({code})"), "grant CREATE on the cluster, or create the <type>.events topics and the dead-letter topic beforehand"))
            }
            Some(Err((_, rdkafka::types::RDKafkaErrorCode::TopicAlreadyExists))) => out.push(ok("topics can be created")),
            Some(Err((_, code))) => out.push(fail(
                format!("a topic with {} partition(s) and replication factor {} would be refused: {code}", s.kafka.topic_partitions, s.kafka.topic_replication_factor),
                "adjust --topic-partitions / --topic-replication-factor to what the cluster allows",
            )),
            _ => out.push(ok(format!("topics can be created ({} partition(s), replication factor {})", s.kafka.topic_partitions, s.kafka.topic_replication_factor))),
        },
        Err(e) => out.push(fail(format!("cannot ask Kafka to create topics: {e}"), "check the broker's version and permissions")),
    }
    out
}

/// With Kafka Connect output (`--debezium-config`): whether every column the routing reads
/// has a type outbox-relay writes the way Debezium does, before anything runs.
async fn column_types(
    client: &tokio_postgres::Client,
    s: &Settings,
    table: &outbox_router::TableName,
) -> Option<Finding> {
    let mut router = outbox_router::Router::new(s.router.clone());
    if !router.wants_column_facts() {
        return None;
    }
    let read = async {
        let relation = crate::source::sql_rows::relation(client, table, 0).await?;
        let facts = catalog::column_facts(client, table).await?;
        Ok::<_, RelayError>((relation, facts))
    };
    Some(match read.await {
        Err(e) => fail(
            format!("cannot read the column types of {table}: {e}"),
            "the relay's role needs SELECT on the table",
        ),
        Ok((relation, facts)) => match router.column_problem(&relation, facts) {
            None => ok(format!(
                "the columns of {table} that the routing reads have types Debezium maps"
            )),
            Some(problem) => fail(problem, "see the README's \"Column types\" table"),
        },
    })
}
