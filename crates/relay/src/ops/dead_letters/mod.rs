//! `outbox-relay dead-letters list | replay`: the dead-letter topic, read from its beginning to
//! its end as it is when the command starts.
//!
//! `replay` sends each selected dead letter again:
//! - a row the relay could not route (it carries the row, `outbox-relay.source.row`) is routed
//!   again by the router of the current configuration, the one `run` builds: after a fix it
//!   goes where `run` would now send it, with the key, headers and value `run` would give it;
//! - any other dead letter (refused by the broker, older than the row header, or Kafka
//!   Connect's `errors.deadletterqueue` record) goes back to its original topic with its key,
//!   payload and headers, less the dead-letter ones.
//!
//! Idempotent: each replayed dead letter is recorded in a compacted marker topic under
//! `<dead-letter topic>/<partition>/<offset>`, in the same Kafka transaction as the record it
//! replayed, so a record is never in Kafka without its marker (nor a marker without its
//! record). The marker topic is read (read_committed) before anything is sent, and the dead
//! letters it names are skipped. A dead letter that cannot be replayed is reported and left
//! as it is: nothing is dead-lettered again.
//!
//! `letter.rs` is the pure part (what a dead letter says, filters, where it goes), `kafka.rs`
//! the reading and the transactional producer.

mod kafka;
mod kept;
pub mod letter;

use crate::config::{RunOptions, Settings};
use crate::error::RelayError;
use letter::{Filter, Letter, Reroute, Since, Target};
use outbox_router::{OutboxRecord, TableName};
use std::collections::{BTreeSet, HashMap};
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Debug, clap::Args)]
pub struct DeadLettersArgs {
    #[command(subcommand)]
    pub command: DeadLettersCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum DeadLettersCommand {
    /// Show the dead-letter topic's records (partition/offset, time, original topic, key,
    /// source table, LSN, reason), from its beginning to its end as it is now, and exit.
    /// Takes `run`'s settings (the dead-letter topic, the broker and its security settings).
    List(ListArgs),

    /// Send the selected dead letters again, routed with the current configuration: a row the
    /// relay could not route goes where `run` would now send it (after a fix); any other dead
    /// letter (refused by the broker, or Kafka Connect's errors.deadletterqueue record) goes
    /// back to its original topic with its key, headers and payload. Each is sent once: a
    /// compacted marker topic records it in the same Kafka transaction. Replayed events arrive
    /// after the events of their key written since. Exit codes: 0 every selected dead letter
    /// is replayed (or was before), 1 some cannot be (listed on stderr) or an error, 2 a bad
    /// argument.
    Replay(ReplayArgs),
}

#[derive(Debug, clap::Args)]
pub struct Selection {
    /// Only dead letters whose reason contains this text (in any case).
    #[arg(help_heading = "Dead letters", long, value_name = "TEXT")]
    pub reason: Option<String>,
    /// Only dead letters written at or after this time: RFC 3339 (2026-05-01T12:00:00Z) or a
    /// duration back from now (2h, 30m, 1d).
    #[arg(help_heading = "Dead letters", long, value_name = "TIME|DURATION", value_parser = Since::parse)]
    pub since: Option<Since>,
    /// Only dead letters of this original topic (the topic they were meant for).
    #[arg(help_heading = "Dead letters", long, value_name = "TOPIC")]
    pub topic: Option<String>,
    /// One JSON object per line instead of text.
    #[arg(help_heading = "Dead letters", long)]
    pub json: bool,
}

impl Selection {
    fn filter(&self) -> Filter {
        Filter {
            reason: self.reason.clone(),
            since_ms: self.since.map(|s| s.epoch_ms(now_ms())),
            topic: self.topic.clone(),
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub run: RunOptions,
    #[command(flatten)]
    pub selection: Selection,
}

#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    #[command(flatten)]
    pub run: RunOptions,
    #[command(flatten)]
    pub selection: Selection,
    /// Compacted topic that records each replayed dead letter (created when missing).
    /// Default: `<dead-letter topic>.replayed`.
    #[arg(help_heading = "Dead letters", long, value_name = "TOPIC", value_parser = topic_name)]
    pub marker_topic: Option<String>,
    /// Print what would go where (topic, key, headers, value) and produce nothing.
    #[arg(help_heading = "Dead letters", long)]
    pub dry_run: bool,
}

fn topic_name(text: &str) -> Result<String, String> {
    outbox_router::validate_topic_name(text).map(|_| text.to_owned())
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl DeadLettersArgs {
    /// The `run` options the command reads its settings from.
    pub fn run_options(&self) -> RunOptions {
        match &self.command {
            DeadLettersCommand::List(list) => list.run.clone(),
            DeadLettersCommand::Replay(replay) => replay.run.clone(),
        }
    }
}

/// Runs `dead-letters list` or `replay` with `settings` (of [`DeadLettersArgs::run_options`]);
/// returns the exit code.
pub fn main(
    args: DeadLettersArgs,
    settings: Settings,
    runtime: tokio::runtime::Runtime,
) -> Result<ExitCode, RelayError> {
    let selection = match &args.command {
        DeadLettersCommand::List(list) => &list.selection,
        DeadLettersCommand::Replay(replay) => &replay.selection,
    };
    let filter = selection.filter();
    match &args.command {
        DeadLettersCommand::List(list) => runtime
            .block_on(list_letters(&settings, &filter, list.selection.json))
            .map(|()| ExitCode::SUCCESS),
        DeadLettersCommand::Replay(replay) => {
            let dead_letter_topic = &settings.kafka.dead_letter_topic;
            let marker_topic = replay
                .marker_topic
                .clone()
                .unwrap_or_else(|| format!("{dead_letter_topic}.replayed"));
            runtime
                .block_on(replay_letters(
                    &settings,
                    &filter,
                    &marker_topic,
                    replay.dry_run,
                    replay.selection.json,
                ))
                .map(|summary| {
                    summary.print(replay.dry_run, replay.selection.json);
                    if summary.not_replayable == 0 {
                        ExitCode::SUCCESS
                    } else {
                        ExitCode::FAILURE
                    }
                })
        }
    }
}

/// The dead letters of the configured topic that `filter` selects, and how many it holds;
/// `None` when the topic does not exist.
async fn read_letters(
    settings: &Settings,
    filter: &Filter,
) -> Result<Option<(Vec<Letter>, usize)>, RelayError> {
    let (kafka, filter) = (settings.kafka.clone(), filter.clone());
    tokio::task::spawn_blocking(move || {
        kafka::read_topic(&kafka, &kafka.dead_letter_topic, |record| {
            Some(Letter::parse(record)).filter(|l| filter.matches(l))
        })
    })
    .await
    .expect("reading the dead-letter topic")
}

async fn list_letters(settings: &Settings, filter: &Filter, json: bool) -> Result<(), RelayError> {
    let topic = &settings.kafka.dead_letter_topic;
    let Some((mut letters, total)) = read_letters(settings, filter).await? else {
        if !json {
            println!("no dead letters: topic {topic} does not exist");
        }
        return Ok(());
    };
    kept::find_rows(settings, &mut letters).await?;
    if json {
        for letter in &letters {
            println!("{}", list_json(topic, letter));
        }
        return Ok(());
    }
    let rows: Vec<[String; 8]> = letters
        .iter()
        .map(|l| {
            [
                format!("{}/{}", l.partition, l.offset),
                time(l.timestamp_ms).unwrap_or_else(|| "-".into()),
                l.original_topic.clone().unwrap_or_else(|| "-".into()),
                shown(l.key.as_deref()),
                l.table.clone().unwrap_or_else(|| "-".into()),
                l.lsn.clone().unwrap_or_else(|| "-".into()),
                whole_event(l),
                l.reason.clone().unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    let titles = [
        "PARTITION/OFFSET",
        "TIME",
        "ORIGINAL TOPIC",
        "KEY",
        "TABLE",
        "LSN",
        "WHOLE EVENT",
        "REASON",
    ];
    let mut widths = titles.map(str::len);
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: &[&str]| {
        let mut text = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                text.push_str(cell);
            } else {
                text.push_str(&format!("{cell:<width$}  ", width = widths[i]));
            }
        }
        println!("{text}");
    };
    line(&titles);
    for row in &rows {
        line(&row.each_ref().map(String::as_str));
    }
    println!(
        "{} dead letter(s) shown of {total} in {topic}",
        letters.len()
    );
    Ok(())
}

fn list_json(topic: &str, l: &Letter) -> serde_json::Value {
    serde_json::json!({
        "topic": topic,
        "partition": l.partition,
        "offset": l.offset,
        "timestamp": time(l.timestamp_ms),
        "timestamp_ms": l.timestamp_ms,
        "format": l.format.label(),
        "reason": l.reason,
        "original_topic": l.original_topic,
        "key": text(l.key.as_deref()),
        "id": l.event_id(),
        "table": l.table,
        "lsn": l.lsn,
        "payload_left_out": l.original_size,
        "has_row": matches!(l.row, Some(Ok(_))) && l.found.is_none(),
        "whole_event": whole_event(l),
    })
}

/// Where the whole event of a dead letter is: `letter` (it carries the row, or the record
/// as it was), the table that keeps its row, or `missing: why`.
fn whole_event(l: &Letter) -> String {
    match &l.found {
        Some(Ok(place)) => place.clone(),
        Some(Err(why)) => format!("missing: {why}"),
        None if l.original_size.is_some() && !matches!(l.row, Some(Ok(_))) => {
            "missing: its payload was left out".into()
        }
        None => "letter".into(),
    }
}

/// An epoch-millisecond time in RFC 3339 (UTC).
fn time(ms: Option<i64>) -> Option<String> {
    ms.and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .map(|t| t.to_string())
}

/// Bytes as text for JSON: UTF-8 as it is, anything else described.
fn text(bytes: Option<&[u8]>) -> serde_json::Value {
    match bytes {
        None => serde_json::Value::Null,
        Some(b) => match std::str::from_utf8(b) {
            Ok(s) => s.into(),
            Err(_) => format!("(binary, {} bytes)", b.len()).into(),
        },
    }
}

fn shown(bytes: Option<&[u8]>) -> String {
    match text(bytes) {
        serde_json::Value::Null => "null".into(),
        serde_json::Value::String(s) => s,
        other => other.to_string(),
    }
}

#[derive(Debug, Default)]
struct Summary {
    replayed: usize,
    skipped: usize,
    not_replayable: usize,
}

impl Summary {
    fn print(&self, dry_run: bool, json: bool) {
        if json {
            println!(
                "{}",
                serde_json::json!({
                    "summary": {
                        "dry_run": dry_run,
                        "replayed": self.replayed,
                        "skipped": self.skipped,
                        "not_replayable": self.not_replayable,
                    }
                })
            );
        } else {
            println!(
                "{} {}, skipped (already replayed) {}, not replayable {}",
                if dry_run { "would replay" } else { "replayed" },
                self.replayed,
                self.skipped,
                self.not_replayable
            );
        }
    }
}

async fn replay_letters(
    settings: &Settings,
    filter: &Filter,
    marker_topic: &str,
    dry_run: bool,
    json: bool,
) -> Result<Summary, RelayError> {
    let dead_letter_topic = settings.kafka.dead_letter_topic.clone();
    let mut summary = Summary::default();
    // Which topic of that name the letters are read from: the markers name it.
    let id_of_topic = || {
        let (kafka, topic) = (settings.kafka.clone(), dead_letter_topic.clone());
        async move {
            tokio::task::spawn_blocking(move || kafka::topic_id(&kafka, &topic))
                .await
                .expect("describing the dead-letter topic")
        }
    };
    let owned_topic_id = id_of_topic().await?;
    let Some((letters, _)) = read_letters(settings, filter).await? else {
        eprintln!("no dead letters: topic {dead_letter_topic} does not exist");
        return Ok(summary);
    };
    if id_of_topic().await? != owned_topic_id {
        return Err(RelayError::BrokerUnavailable(anyhow::anyhow!(
            "the dead-letter topic {dead_letter_topic} was deleted and made again while it was read: replay again"
        )));
    }
    let topic_id = owned_topic_id.as_deref();
    // A replay fences every earlier one of this dead-letter topic (init_transactions)
    // before it reads what they recorded: one still running can commit nothing after that.
    let replayer = if dry_run {
        None
    } else {
        let (kafka, dlq, markers) = (
            settings.kafka.clone(),
            dead_letter_topic.clone(),
            marker_topic.to_owned(),
        );
        Some(
            tokio::task::spawn_blocking(move || kafka::Replayer::new(&kafka, &dlq, &markers))
                .await
                .expect("starting the replay's producer")?,
        )
    };
    let kafka = settings.kafka.clone();
    let markers = {
        let marker_topic = marker_topic.to_owned();
        tokio::task::spawn_blocking(move || {
            kafka::read_topic(&kafka, &marker_topic, |m| {
                let at = m.timestamp_ms;
                m.value.as_ref().and(m.key.map(|k| (k.to_vec(), at)))
            })
        })
        .await
        .expect("reading the marker topic")?
    };
    let replayed: HashMap<Vec<u8>, Option<i64>> = markers
        .map(|(keys, _)| keys.into_iter().collect())
        .unwrap_or_default();
    let mut reroute = Reroute::new(settings.router.clone());
    let mut pending: Vec<Letter> = letters
        .into_iter()
        .filter(|l| {
            let done = l.replayed(&dead_letter_topic, topic_id, &replayed);
            summary.skipped += done as usize;
            !done
        })
        .collect();
    // The whole rows of events whose letter cannot give them back (kept.rs).
    kept::find_rows(settings, &mut pending).await?;
    if reroute.router_mut().wants_column_facts() {
        column_types(settings, &pending, &mut reroute).await?;
    }
    let mut planned: Vec<(Letter, OutboxRecord)> = Vec::with_capacity(pending.len());
    let not_replayable = |letter: &Letter, why: &str| {
        eprintln!(
            "not replayable: {}{}: {why}",
            letter.marker_key(&dead_letter_topic, topic_id),
            letter
                .event_id()
                .map(|id| format!(" (id {id})"))
                .unwrap_or_default()
        );
    };
    for letter in pending {
        match letter::target(&letter, &mut reroute) {
            Target::Record(record) => planned.push((letter, record)),
            Target::NotReplayable(why) => {
                not_replayable(&letter, &why);
                summary.not_replayable += 1;
            }
        }
    }
    if dry_run {
        for (letter, record) in &planned {
            print_planned(
                &letter.marker_key(&dead_letter_topic, topic_id),
                record,
                json,
            );
        }
        summary.replayed = planned.len();
        return Ok(summary);
    }
    // The topics are created as `run` creates them (partitions, replication, topic.creation.*).
    let topics: BTreeSet<Arc<str>> = planned.iter().map(|(_, r)| r.topic.clone()).collect();
    let mut refused = Vec::new();
    if !topics.is_empty() {
        use crate::deliver::Producer as _;
        let mut creator = crate::deliver::KafkaProducer::new(&settings.kafka)?;
        for topic in topics {
            if let crate::deliver::Topic::Refused(why) = creator.ensure_topic(&topic).await? {
                refused.push((topic, why));
            }
        }
        kafka::create_marker_topic(&settings.kafka, marker_topic).await?;
        // What `run` would dead-letter before sending it (larger than its topic takes, …).
        planned.retain(|(letter, record)| {
            let why = match refused.iter().find(|(t, _)| *t == record.topic) {
                Some((_, why)) => why.clone(),
                None => match creator.refuses(record) {
                    Some((why, _)) => why,
                    None => return true,
                },
            };
            not_replayable(letter, &why);
            summary.not_replayable += 1;
            false
        });
    }
    if planned.is_empty() {
        return Ok(summary);
    }
    let progress = progress_bar(planned.len() as u64);
    let bar = progress.clone();
    let topic_id = owned_topic_id.clone();
    let sent = tokio::task::spawn_blocking(move || -> Result<(usize, usize), RelayError> {
        let mut replayer = replayer.expect("made above for a replay that is not a dry run");
        let (mut committed, mut refused) = (0, 0);
        for (letter, record) in &planned {
            let from = letter.marker_key(&dead_letter_topic, topic_id.as_deref());
            if let Err(why) = replayer.send(record, &from)? {
                bar.suspend(|| eprintln!("not replayable: {from}: {why}"));
                refused += 1;
                continue;
            }
            if replayer.open() >= TRANSACTION_SIZE {
                let batch = replayer.open();
                let refused_now = replayer.commit()?;
                committed += batch - refused_now.len();
                refused += report_refused(&bar, refused_now);
                bar.set_position((committed + refused) as u64);
            }
        }
        let batch = replayer.open();
        let refused_now = replayer.commit()?;
        committed += batch - refused_now.len();
        refused += report_refused(&bar, refused_now);
        bar.set_position((committed + refused) as u64);
        Ok((committed, refused))
    })
    .await
    .expect("replaying");
    progress.finish_and_clear();
    let (replayed, refused) = sent?;
    summary.replayed = replayed;
    summary.not_replayable += refused;
    Ok(summary)
}

/// Says which records the broker refused in a replay transaction; how many.
fn report_refused(bar: &indicatif::ProgressBar, refused: Vec<(String, String)>) -> usize {
    for (from, why) in &refused {
        bar.suspend(|| eprintln!("not replayable: {from}: {why}"));
    }
    refused.len()
}

/// Dead letters replayed (with their markers) in one transaction.
const TRANSACTION_SIZE: usize = 500;

/// For Kafka Connect output: the catalog's column types and facts of each table whose rows are
/// routed again, as `run` reads them (PostgreSQL is asked only then).
async fn column_types(
    settings: &Settings,
    pending: &[Letter],
    reroute: &mut Reroute,
) -> Result<(), RelayError> {
    let tables: BTreeSet<&str> = pending
        .iter()
        .filter(|l| matches!(l.row, Some(Ok(_))))
        .filter_map(|l| l.table.as_deref())
        .collect();
    if tables.is_empty() {
        return Ok(());
    }
    let client = crate::source::postgres::Database::of(settings)
        .connect()
        .await?;
    for table in tables {
        let Ok(table) = TableName::parse(table) else {
            continue;
        };
        if !crate::source::catalog::table_exists(&client, &table).await? {
            continue;
        }
        let relation = crate::source::sql_rows::relation(&client, &table, 1).await?;
        reroute.set_types(&table, &relation);
        let facts = crate::source::catalog::column_facts(&client, &table).await?;
        reroute.router_mut().set_column_facts(&table, facts);
    }
    Ok(())
}

fn progress_bar(length: u64) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(length);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "replaying {bar:40} {pos}/{len} dead letters ({eta} left)",
    ) {
        bar.set_style(style);
    }
    bar
}

fn print_planned(from: &str, record: &OutboxRecord, json: bool) {
    let headers: serde_json::Map<String, serde_json::Value> = record
        .headers
        .iter()
        .map(|(k, v)| (k.to_string(), text(v.as_deref())))
        .collect();
    if json {
        println!(
            "{}",
            serde_json::json!({
                "dead_letter": from,
                "topic": &*record.topic,
                "partition": record.partition,
                "key": text(record.key.as_deref()),
                "headers": headers,
                "value": text(record.value.as_deref()),
                "timestamp_ms": record.timestamp_ms,
            })
        );
        return;
    }
    println!("{from} -> {}", record.topic);
    println!("  key      {}", shown(record.key.as_deref()));
    if let Some(p) = record.partition {
        println!("  partition {p}");
    }
    for (k, v) in &record.headers {
        println!("  header   {k}={}", shown(v.as_deref()));
    }
    match &record.value {
        None => println!("  value    null (tombstone)"),
        Some(v) => println!("  value    {}", shown(Some(v))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_and_keys_text() {
        assert_eq!(
            time(Some(1_700_000_000_123)).as_deref(),
            Some("2023-11-14T22:13:20.123Z")
        );
        assert_eq!(time(None), None);
        assert_eq!(shown(Some(b"o-1")), "o-1");
        assert_eq!(shown(Some(&[0xff, 0xfe])), "(binary, 2 bytes)");
        assert_eq!(shown(None), "null");
        assert!(topic_name("a b").is_err());
        assert_eq!(topic_name("dlq.replayed").as_deref(), Ok("dlq.replayed"));
    }

    #[test]
    fn a_listed_dead_letter_says_what_a_user_filters_on() {
        let letter = Letter::parse(letter::Consumed {
            partition: 1,
            offset: 4,
            timestamp_ms: Some(1_700_000_000_000),
            key: Some("o-1".into()),
            value: None,
            headers: vec![
                ("id".into(), Some("e-1".into())),
                (
                    crate::deliver::dead_letter::REASON.into(),
                    Some("too large".into()),
                ),
                (
                    crate::deliver::dead_letter::ORIGINAL_TOPIC.into(),
                    Some("Order.events".into()),
                ),
                (
                    crate::deliver::dead_letter::ORIGINAL_SIZE.into(),
                    Some("2000000".into()),
                ),
            ],
        });
        assert_eq!(letter.format, letter::Format::Relay);
        let json = list_json("dlq", &letter);
        assert_eq!(json["partition"], 1);
        assert_eq!(json["offset"], 4);
        assert_eq!(json["timestamp"], "2023-11-14T22:13:20Z");
        assert_eq!(json["reason"], "too large");
        assert_eq!(json["original_topic"], "Order.events");
        assert_eq!(json["key"], "o-1");
        assert_eq!(json["id"], "e-1");
        assert_eq!(json["payload_left_out"], "2000000");
        assert_eq!(json["has_row"], false);
    }
}
