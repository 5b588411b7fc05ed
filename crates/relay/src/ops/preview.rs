//! `preview`: what `run` would produce from what is pending in the slot, without producing or
//! advancing anything. The pending changes are peeked (`pg_logical_slot_peek_binary_changes`
//! with the relay's pgoutput options), decoded and routed by the same router `run` uses;
//! each event is printed as its record (topic, key, headers, value), each row that cannot be
//! routed as the dead letter it would become.

use crate::config::Settings;
use crate::deliver::{DeadLetter, Routed};
use crate::error::RelayError;
use crate::route;
use crate::source::catalog;
use bytes::Bytes;
use outbox_router::{OutboxRecord, Router, TableName};
use pgoutput::{LogicalMessage, Lsn};

/// What `preview` found: `None` when the slot does not exist.
pub struct Previewed {
    pub events: usize,
    pub dead_letters: usize,
}

/// Prints up to `limit` pending events of the slot; `json`: one JSON object per line.
pub async fn preview(
    settings: &Settings,
    limit: usize,
    json: bool,
) -> Result<Option<Previewed>, RelayError> {
    let cdc = settings.cdc().ok_or_else(|| {
        RelayError::misconfigured(
            "preview reads a replication slot: it applies to --mode cdc only".to_owned(),
        )
    })?;
    let sql = crate::source::postgres::Database::of(settings)
        .connect()
        .await?;
    let slot = catalog::slot_state(&sql, &cdc.slot).await.map_err(|e| {
        RelayError::postgres("reading the replication slots", e, || {
            "the role needs the REPLICATION attribute".into()
        })
    })?;
    if slot.is_none() {
        return Ok(None);
    }
    // PostgreSQL ends a peek at the end of the transaction in which the count is reached;
    // a transaction of one event is a Begin, an Insert and a Commit (and a Relation once).
    let changes = i32::try_from(limit.saturating_mul(3).saturating_add(16)).unwrap_or(i32::MAX);
    let rows = sql
        .query(
            "SELECT lsn::text, data FROM pg_logical_slot_peek_binary_changes($1, NULL, $2, \
             'proto_version', '1', 'publication_names', $3)",
            &[&cdc.slot, &changes, &cdc.publication],
        )
        .await
        .map_err(|e| {
            if e.code() == Some(&tokio_postgres::error::SqlState::OBJECT_IN_USE) {
                return RelayError::SlotBusy {
                    slot: cdc.slot.clone(),
                    detail: format!(
                        "a running relay holds slot {}; preview reads a slot no one streams from: stop the relay, or \
                         preview a copy made with SELECT pg_copy_logical_replication_slot('{}', 'preview_copy') and \
                         --slot preview_copy",
                        cdc.slot, cdc.slot
                    ),
                };
            }
            RelayError::postgres("peeking at the slot's pending changes", e, || {
                "the role needs the REPLICATION attribute".into()
            })
        })?;
    let mut router = Router::new(settings.router.clone());
    let mut found = Previewed {
        events: 0,
        dead_letters: 0,
    };
    let mut commit = Lsn::ZERO;
    // The source block of the change events transforms before the EventRouter read.
    let (mut xid, mut commit_time, mut last_commit) = (None, None, None);
    for row in rows {
        if found.events + found.dead_letters >= limit {
            break;
        }
        let lsn = Lsn::parse(row.get::<_, &str>(0)).unwrap_or(Lsn::ZERO);
        let data = Bytes::from(row.get::<_, Vec<u8>>(1));
        let message = pgoutput::decode(data).map_err(|e| RelayError::Undecodable {
            lsn,
            error: e.to_string(),
        })?;
        match &message {
            // The end-to-end canary is no event.
            LogicalMessage::Message(m) if m.prefix == crate::source::canary::PREFIX => continue,
            LogicalMessage::Begin(begin) => {
                commit = begin.final_lsn;
                xid = Some(begin.xid);
                commit_time = Some(crate::pg_time::epoch_micros(begin.commit_time_micros));
            }
            LogicalMessage::Commit(c) => last_commit = Some(c.end_lsn.as_u64()),
            LogicalMessage::Insert(_) if router.wants_position() => {
                router.set_position(outbox_router::SourcePosition {
                    lsn: lsn.as_u64(),
                    xid,
                    commit_time_us: commit_time,
                    last_commit_lsn: last_commit,
                    snapshot: None,
                    transaction: None,
                })
            }
            LogicalMessage::Relation(relation)
                if router.wants_column_facts()
                    && router.is_outbox_table(&relation.namespace, &relation.name) =>
            {
                let table = TableName {
                    schema: relation.namespace.clone(),
                    name: relation.name.clone(),
                };
                let facts = catalog::column_facts(&sql, &table).await?;
                router.set_column_facts(&table, facts);
            }
            _ => {}
        }
        let outcome = router.route(&message);
        match route::triage(outcome, Some(lsn))? {
            // The router never makes canaries (the stream does).
            None | Some(Routed::Canary { .. }) => {}
            Some(Routed::Record(record)) => {
                found.events += 1;
                print_record(&record, lsn, commit, None, json);
            }
            Some(Routed::Invalid(invalid)) => {
                found.dead_letters += 1;
                let reason = invalid.reason.clone();
                let letter = DeadLetter::from_invalid_row(invalid, Some(lsn));
                // The relay's dead-letter topic, or Kafka Connect's dead-letter queue.
                let topic = letter.topic(&settings.kafka.dead_letter_topic.as_str().into());
                let record = letter.to_record(&topic);
                print_record(&record, lsn, commit, Some(&reason), json);
            }
        }
    }
    Ok(Some(found))
}

fn text(bytes: Option<&[u8]>) -> serde_json::Value {
    match bytes {
        None => serde_json::Value::Null,
        Some(b) => match std::str::from_utf8(b) {
            Ok(s) => s.into(),
            Err(_) => format!("(binary, {} bytes)", b.len()).into(),
        },
    }
}

fn print_record(
    record: &OutboxRecord,
    lsn: Lsn,
    commit: Lsn,
    dead_letter: Option<&str>,
    json: bool,
) {
    let headers: serde_json::Map<String, serde_json::Value> = record
        .headers
        .iter()
        .map(|(k, v)| (k.to_string(), text(v.as_deref())))
        .collect();
    let key = text(record.key.as_deref());
    let value = text(record.value.as_deref());
    if json {
        println!(
            "{}",
            serde_json::json!({
                "lsn": lsn.to_string(),
                "commit_lsn": commit.to_string(),
                "topic": &*record.topic,
                "partition": record.partition,
                "key": key,
                "headers": headers,
                "value": value,
                "timestamp_ms": record.timestamp_ms,
                "dead_letter": dead_letter.is_some(),
            })
        );
        return;
    }
    let shown = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    match dead_letter {
        Some(reason) => println!("{lsn}  DEAD LETTER -> {}: {reason}", record.topic),
        None => println!("{lsn}  {}", record.topic),
    }
    println!("  key      {}", shown(&key));
    if let Some(p) = record.partition {
        println!("  partition {p}");
    }
    for (k, v) in &headers {
        println!("  header   {k}={}", shown(v));
    }
    match &value {
        serde_json::Value::Null => println!("  value    null (tombstone)"),
        v => println!("  value    {}", shown(v)),
    }
}
