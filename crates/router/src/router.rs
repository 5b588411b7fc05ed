use crate::config::{InvalidOperation, Output, Placement, RouterConfig, TableName};
use crate::connect::ColumnFacts;
use crate::kafka_record::{InvalidRow, OutboxRecord, PendingRecord, RouteOutcome};
use crate::topic::validate_topic_name;
use bytes::Bytes;
use pgoutput::{ColumnValue, DecodeError, Insert, LogicalMessage, RawColumn, Relation, TupleData};
use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

/// Column positions of one outbox table, computed from its latest Relation message.
#[derive(Debug, Clone)]
struct TablePlan {
    table: String,
    id: Result<usize, String>,
    key: Result<usize, String>,
    payload: Result<usize, String>,
    route_by: Result<usize, String>,
    /// (position or missing column name, header name)
    headers: Vec<(Result<usize, String>, Arc<str>)>,
    /// Position of the `partition` placement's column.
    partition: Option<Result<usize, String>>,
    /// Column typing for Kafka Connect output; `None` in raw mode.
    connect: Option<connect_record::ConnectPlan>,
}

/// Routes the decoded pgoutput stream. Keep one per replication session: PostgreSQL
/// sends a Relation before the first row of each table in a session.
#[derive(Debug)]
pub struct Router {
    config: RouterConfig,
    id_header: Arc<str>,
    /// relation id -> plan, `None` for tables that are not outbox tables.
    relations: HashMap<u32, Option<TablePlan>>,
    /// The latest Relation message of each outbox table, to re-plan when facts change.
    outbox_relations: HashMap<u32, Relation>,
    /// `schema.table` -> catalog facts (nullability, defaults) for Connect schemas.
    facts: HashMap<String, Vec<ColumnFacts>>,
    topics: TopicCache,
    /// The envelope schema names Debezium's EventRouter would keep (Connect output).
    envelope_names: connect_record::EnvelopeNames,
    /// Where the Debezium mode's direct way writes keys and values.
    direct_out: connect_record::WriteBuffer,
    /// Column positions of the Insert being routed by [`Router::route_message`] (reused).
    positions: Vec<RawColumn>,
    /// Where the change being routed is, for the change events of the transforms before
    /// the EventRouter ([`Router::set_position`]).
    position: SourcePosition,
    /// The time, in milliseconds since the epoch, a Connect record without a timestamp of its
    /// own is produced at (read only for Connect output; a test fixes it).
    clock: fn() -> i64,
}

/// The system clock, in milliseconds since the epoch.
fn system_clock() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// routing value -> topic name (or why it is invalid), so that the template is rendered
/// and validated once per aggregate type, not once per event. Cleared when it grows large.
#[derive(Debug, Default)]
pub(crate) struct TopicCache(HashMap<Bytes, Result<Arc<str>, String>>);

const TOPIC_CACHE_LIMIT: usize = 10_000;

impl Router {
    pub fn new(config: RouterConfig) -> Self {
        Self {
            config,
            id_header: "id".into(),
            relations: HashMap::default(),
            outbox_relations: HashMap::default(),
            facts: HashMap::default(),
            topics: TopicCache::default(),
            envelope_names: Default::default(),
            direct_out: Default::default(),
            positions: Vec::new(),
            position: SourcePosition::default(),
            clock: system_clock,
        }
    }

    /// Reads the time a Connect record without a timestamp of its own is produced at from
    /// `clock` (a fixed one in tests and benchmarks).
    pub fn with_clock(mut self, clock: fn() -> i64) -> Self {
        self.clock = clock;
        self
    }

    /// Whether transforms run before the EventRouter: the relay then tells the router where
    /// each change is ([`Router::set_position`]) before routing it.
    pub fn wants_position(&self) -> bool {
        self.config.before.is_some()
    }

    /// Where the next change routed is (its LSN, transaction, commit time).
    pub fn set_position(&mut self, position: SourcePosition) {
        self.position = position;
    }

    /// Whether `table` is one of the outbox tables.
    pub fn is_outbox_table(&self, schema: &str, name: &str) -> bool {
        self.config
            .tables
            .iter()
            .any(|t| t.schema == schema && t.name == name)
            || self
                .config
                .table_patterns
                .iter()
                .any(|p| p.matches(schema, name))
    }

    /// Whether records are typed from catalog facts ([`Router::set_column_facts`]): the
    /// relay then looks them up before routing each Relation message of an outbox table.
    pub fn wants_column_facts(&self) -> bool {
        matches!(self.config.output, Output::Connect(_))
    }

    /// Catalog facts (nullability, defaults) of an outbox table's columns, which Kafka
    /// Connect schemas carry and pgoutput does not send.
    pub fn set_column_facts(&mut self, table: &TableName, facts: Vec<ColumnFacts>) {
        self.facts.insert(table.to_string(), facts);
        let relations: Vec<Relation> = self.outbox_relations.values().cloned().collect();
        for relation in relations {
            self.on_relation(&relation);
        }
    }

    /// Why rows of `relation` could not be written as Kafka Connect would (a column the
    /// routing reads has a type Debezium does not map), given the table's catalog facts;
    /// `None` when every column the routing reads is mapped. For `check` and start-up,
    /// before anything streams.
    pub fn column_problem(
        &mut self,
        relation: &Relation,
        facts: Vec<ColumnFacts>,
    ) -> Option<String> {
        let table = TableName {
            schema: relation.namespace.clone(),
            name: relation.name.clone(),
        };
        self.facts.insert(table.to_string(), facts);
        self.on_relation(relation);
        self.relations
            .get(&relation.relation_id)?
            .as_ref()?
            .connect
            .as_ref()?
            .problem()
            .map(str::to_owned)
    }

    /// Finishes what a routing step made: the transforms configured before the EventRouter
    /// (on an outbox row's change event, which the EventRouter then routes), those after it,
    /// then the converters, applied to a Connect record, as through a Kafka Connect worker's
    /// chain. A record a step filtered out is [`RouteOutcome::Ignored`]; one a step or
    /// converter fails on is [`RouteOutcome::Invalid`], dead-lettered with the reason. Every
    /// public `route*`, `heartbeat` and `transaction_record` call returns through it, so none
    /// returns [`RouteOutcome::Connect`].
    pub(crate) fn finish(&mut self, outcome: RouteOutcome) -> RouteOutcome {
        let RouteOutcome::Connect(pending) = outcome else {
            return outcome;
        };
        // The time a record without a timestamp of its own is produced at.
        let now_ms = (self.clock)();
        let PendingRecord {
            record,
            mut dead,
            event,
        } = *pending;
        let Output::Connect(format) = &self.config.output else {
            unreachable!("only a Connect output makes Connect records")
        };
        // The record before the transforms, which a failure's dead letter or log shows.
        let errors = &format.errors;
        let keep_original = errors.log_messages || errors.dead_letter_queue.is_some();
        let mut record = record;
        if let Some(before) = &self.config.before {
            // The transforms before the EventRouter see the change event an outbox row came
            // from, and the connector's own records (heartbeats, transaction metadata)
            // themselves; the EventRouter then routes what they made of the change event.
            if event.is_some() {
                change_event::stamp(&mut record, now_ms);
            }
            let original = keep_original.then(|| record.clone());
            let topic = record.topic.clone();
            record = match before.chain.apply(record, now_ms) {
                Ok(Some(out)) => out,
                Ok(None) => return RouteOutcome::Ignored,
                Err(error) => {
                    dead.original_topic.get_or_insert_with(|| topic.to_string());
                    return tolerance::failed(
                        format,
                        original.as_ref(),
                        tolerance::Failure {
                            stage: "TRANSFORMATION",
                            class: &error.class,
                            message: error.to_string(),
                        },
                        dead,
                    );
                }
            };
            if let Some(at) = event {
                let plan = self
                    .relations
                    .get(&at.relation_id)
                    .and_then(|p| p.as_ref()?.connect.as_ref());
                let Some(plan) = plan else {
                    dead.reason =
                        format!("relation {} is no longer an outbox table", at.relation_id);
                    return RouteOutcome::Invalid(dead);
                };
                match plan.route_event(
                    record,
                    format,
                    &self.config,
                    &mut self.topics,
                    &mut self.envelope_names,
                    dead,
                ) {
                    RouteOutcome::Connect(pending) => {
                        (record, dead) = (pending.record, pending.dead);
                    }
                    other => return other,
                }
            }
        }
        let original = keep_original.then(|| record.clone());
        let topic = record.topic.clone();
        match self.config.chain.apply(record, now_ms) {
            Ok(Some(record)) => connect_record::convert(record, original.as_ref(), format, || dead),
            Ok(None) => RouteOutcome::Ignored,
            Err(error) => {
                // The topic the EventRouter gave it.
                dead.original_topic.get_or_insert_with(|| topic.to_string());
                let message = error.to_string();
                tolerance::failed(
                    format,
                    original.as_ref(),
                    tolerance::Failure {
                        stage: "TRANSFORMATION",
                        class: &error.class,
                        message,
                    },
                    dead,
                )
            }
        }
    }

    /// A record of the connector's own (a heartbeat, a transaction's BEGIN or END), left for
    /// [`Self::transformed`]; its dead letter, if a transform or converter fails on it, names
    /// `what` as its source.
    fn connect_record(&self, record: crate::connect::ConnectRecord, what: &str) -> RouteOutcome {
        RouteOutcome::Connect(Box::new(PendingRecord {
            event: None,
            dead: InvalidRow {
                reason: String::new(),
                table: what.to_owned(),
                original_topic: Some(record.topic.to_string()),
                key: None,
                value: None,
                event_id: None,
                row: None,
                connect_dlq: None,
            },
            record,
        }))
    }

    /// The Kafka record a routing call made (tests).
    #[cfg(test)]
    pub(crate) fn converted(outcome: Option<RouteOutcome>) -> OutboxRecord {
        match outcome {
            Some(RouteOutcome::Record(record)) => record,
            other => panic!("not a record: {other:?}"),
        }
    }

    /// Feeds one decoded message; returns what, if anything, to produce.
    pub fn route(&mut self, message: &LogicalMessage) -> RouteOutcome {
        let outcome = self.route_unfinished(message);
        self.finish(outcome)
    }

    /// [`Self::route`] before [`Self::finish`].
    fn route_unfinished(&mut self, message: &LogicalMessage) -> RouteOutcome {
        match message {
            LogicalMessage::Relation(relation) => {
                self.on_relation(relation);
                RouteOutcome::Ignored
            }
            LogicalMessage::Insert(insert) => self.route_insert_unfinished(insert, true),
            LogicalMessage::Update(update) => match self.relations.get(&update.relation_id) {
                Some(Some(plan)) => unexpected_update(&self.config, &plan.table),
                _ => RouteOutcome::Ignored,
            },
            // UPDATE, DELETE and TRUNCATE of the outbox are not events: cleanup jobs
            // delete relayed rows. Begin/Commit are handled by the relay's tracker.
            _ => RouteOutcome::Ignored,
        }
    }

    pub fn on_relation(&mut self, relation: &Relation) {
        let plan = self
            .is_outbox_table(&relation.namespace, &relation.name)
            .then(|| self.plan(relation));
        if plan.is_some() {
            self.outbox_relations
                .insert(relation.relation_id, relation.clone());
        }
        self.relations.insert(relation.relation_id, plan);
    }

    /// Where the routing finds each column it reads in `relation`'s rows.
    fn plan(&self, relation: &Relation) -> TablePlan {
        let find = |column: &str| {
            relation
                .column_index(column)
                .ok_or_else(|| column.to_owned())
        };
        let table = TableName {
            schema: relation.namespace.clone(),
            name: relation.name.clone(),
        }
        .to_string();
        let connect = match &self.config.output {
            Output::Raw => None,
            Output::Connect(format) => Some(connect_record::ConnectPlan::new(
                relation,
                self.facts
                    .get(&table)
                    .map(Vec::as_slice)
                    .unwrap_or_default(),
                &self.config,
                format,
            )),
        };
        TablePlan {
            table,
            connect,
            partition: self
                .config
                .additional
                .iter()
                .find(|f| f.placement == Placement::Partition)
                .map(|f| find(&f.column)),
            id: find(&self.config.id_column),
            key: find(&self.config.key_column),
            payload: find(&self.config.payload_column),
            route_by: find(&self.config.route_by_column),
            headers: self
                .config
                .additional
                .iter()
                .filter(|f| f.placement == Placement::Header)
                .filter(|f| {
                    !self.config.ignore_missing_additional
                        || relation.column_index(&f.column).is_some()
                })
                .map(|f| (find(&f.column), f.alias.clone()))
                .collect(),
        }
    }

    /// Routes one Insert; returns what, if anything, to produce.
    pub fn route_insert(&mut self, insert: &Insert) -> RouteOutcome {
        let outcome = self.route_insert_unfinished(insert, true);
        self.finish(outcome)
    }

    /// `direct`: whether the Debezium mode's direct way may be tried (not again where it
    /// was tried on the message already).
    fn route_insert_unfinished(&mut self, insert: &Insert, direct: bool) -> RouteOutcome {
        let plan = match self.relations.get(&insert.relation_id) {
            Some(Some(plan)) => plan,
            Some(None) => return RouteOutcome::Ignored,
            // pgoutput always sends a Relation first; a row of an unknown relation means
            // the stream is out of step. Dead-letter it rather than guess.
            None => {
                return RouteOutcome::Invalid(InvalidRow {
                    reason: format!(
                        "row of relation {} arrived before its Relation message",
                        insert.relation_id
                    ),
                    table: format!("relation-{}", insert.relation_id),
                    original_topic: None,
                    key: None,
                    value: None,
                    event_id: None,
                    row: None,
                    connect_dlq: None,
                })
            }
        };
        let columns = &insert.new_tuple.columns;
        if let Some(connect) = &plan.connect {
            let RouterConfig {
                output: Output::Connect(format),
                ..
            } = &self.config
            else {
                unreachable!("a Connect plan exists only for Connect output")
            };
            if let Some(record) = direct
                .then(|| {
                    connect.route_direct(
                        &insert.new_tuple,
                        format,
                        &self.config,
                        &mut self.topics,
                        &mut self.direct_out,
                    )
                })
                .flatten()
            {
                return RouteOutcome::Record(record);
            }
            let outcome = connect.route(
                columns,
                &plan.table,
                format,
                &self.config,
                &mut self.topics,
                &mut self.envelope_names,
                self.config.has_transforms(),
                self.config.before.as_ref().map(|_| &self.position),
            );
            return self.with_row(outcome, insert.relation_id, &insert.new_tuple);
        }
        let outcome = self.route_raw(insert.relation_id, &insert.new_tuple);
        self.with_row(outcome, insert.relation_id, &insert.new_tuple)
    }

    /// An invalid row's outcome with the row itself (column names and text), for the dead
    /// letter that lets it be routed again after a fix; any other outcome as it is.
    fn with_row(
        &self,
        outcome: RouteOutcome,
        relation_id: u32,
        row: &impl RowColumns,
    ) -> RouteOutcome {
        let (mut invalid, pending) = match outcome {
            RouteOutcome::Invalid(invalid) => (invalid, None),
            // The dead letter it becomes if a transform or converter fails on it.
            RouteOutcome::Connect(pending) => {
                let PendingRecord {
                    record,
                    dead,
                    event,
                } = *pending;
                (dead, Some((record, event)))
            }
            other => return other,
        };
        invalid.row = self
            .outbox_relations
            .get(&relation_id)
            .and_then(|relation| {
                if relation.columns.len() != row.len() {
                    return None;
                }
                relation
                    .columns
                    .iter()
                    .enumerate()
                    .map(|(i, column)| match row.get(i)? {
                        ColumnRef::Null => Some((column.name.clone(), None)),
                        ColumnRef::Value(_) => Some((column.name.clone(), Some(row.owned(i)))),
                        ColumnRef::UnchangedToast => None,
                    })
                    .collect()
            });
        match pending {
            None => RouteOutcome::Invalid(invalid),
            Some((record, event)) => RouteOutcome::Connect(Box::new(PendingRecord {
                record,
                event,
                dead: invalid,
            })),
        }
    }

    /// Where each column of the Insert [`Self::route_message`] last read is in its message
    /// (empty after any other message): what else needs that row's columns reads them there,
    /// without decoding the message again.
    pub fn last_insert_columns(&self) -> &[RawColumn] {
        &self.positions
    }

    /// Routes an Insert straight from its pgoutput bytes: the relay's hot path. Column
    /// positions are read into a reused buffer and only the columns a record needs are
    /// sliced out of `message` (one reference count each), natively and on the Debezium
    /// mode's direct way; anything else (a Connect record the direct way leaves, another
    /// message, a malformed one) goes through [`pgoutput::decode`].
    pub fn route_message(&mut self, message: &Bytes) -> Result<RouteOutcome, DecodeError> {
        let mut positions = std::mem::take(&mut self.positions);
        let outcome = match pgoutput::decode_insert_columns(message, &mut positions)? {
            Some(relation_id) if matches!(self.relations.get(&relation_id), Some(Some(plan)) if plan.connect.is_none()) =>
            {
                let row = MessageRow {
                    message,
                    columns: &positions,
                };
                let outcome = self.route_raw(relation_id, &row);
                self.with_row(outcome, relation_id, &row)
            }
            // Another table's row: nothing to decode.
            Some(relation_id) if matches!(self.relations.get(&relation_id), Some(None)) => {
                RouteOutcome::Ignored
            }
            // The Debezium mode: the direct way reads the message's positions too.
            Some(relation_id) => {
                let row = MessageRow {
                    message,
                    columns: &positions,
                };
                match self.route_direct(relation_id, &row) {
                    Some(record) => RouteOutcome::Record(record),
                    None => match pgoutput::decode(message.clone())? {
                        // The direct way declined it: the general way, without trying it again.
                        LogicalMessage::Insert(insert) => {
                            self.route_insert_unfinished(&insert, false)
                        }
                        other => self.route_unfinished(&other),
                    },
                }
            }
            None => self.route_unfinished(&pgoutput::decode(message.clone())?),
        };
        self.positions = positions;
        Ok(self.finish(outcome))
    }

    /// The Debezium mode's record written the direct way, where its Connect plan has one
    /// and the row takes it (see `connect_record.rs`).
    fn route_direct(&mut self, relation_id: u32, row: &impl RowColumns) -> Option<OutboxRecord> {
        let Some(Some(plan)) = self.relations.get(&relation_id) else {
            return None;
        };
        let (Some(connect), Output::Connect(format)) = (&plan.connect, &self.config.output) else {
            return None;
        };
        connect.route_direct(
            row,
            format,
            &self.config,
            &mut self.topics,
            &mut self.direct_out,
        )
    }

    /// The native record: column text as it is. Column values are borrowed, and cloned
    /// into the record only; the dead-letter context is built only for an invalid row.
    fn route_raw(&mut self, relation_id: u32, row: &impl RowColumns) -> RouteOutcome {
        let Some(Some(plan)) = self.relations.get(&relation_id) else {
            return RouteOutcome::Ignored;
        };
        let value_at = |position: &Result<usize, String>| -> Result<Option<usize>, String> {
            let position = *position
                .as_ref()
                .map_err(|missing| format!("column {missing:?} is missing from the table"))?;
            match row.get(position) {
                Some(ColumnRef::Null) => Ok(None),
                Some(ColumnRef::Value(_)) => Ok(Some(position)),
                Some(ColumnRef::UnchangedToast) => Err("unchanged TOAST value in an INSERT".into()),
                None => Err(format!(
                    "row has {} columns, expected at least {}",
                    row.len(),
                    position + 1
                )),
            }
        };
        let text = |position: usize| match row.get(position) {
            Some(ColumnRef::Value(v)) => v,
            _ => &[],
        };
        let key = value_at(&plan.key);
        let payload = value_at(&plan.payload);
        let event_id = value_at(&plan.id);
        let invalid = |reason: String, original_topic: Option<String>| {
            let owned =
                |v: &Result<Option<usize>, String>| v.clone().ok().flatten().map(|p| row.owned(p));
            RouteOutcome::Invalid(InvalidRow {
                reason,
                table: plan.table.clone(),
                original_topic,
                key: owned(&key),
                value: owned(&payload),
                event_id: owned(&event_id),
                row: None,
                connect_dlq: None,
            })
        };
        let routing = match value_at(&plan.route_by) {
            Ok(Some(v)) => text(v),
            Ok(None) => {
                return invalid(
                    format!("routing column {:?} is NULL", self.config.route_by_column),
                    None,
                )
            }
            Err(e) => return invalid(e, None),
        };
        let mut headers = Vec::with_capacity(1 + plan.headers.len());
        match &event_id {
            Ok(Some(id)) => headers.push((self.id_header.clone(), Some(row.owned(*id)))),
            // Debezium writes no header for a NULL id; neither do we.
            Ok(None) => {}
            Err(e) => return invalid(e.clone(), None),
        }
        for (position, name) in &plan.headers {
            match value_at(position) {
                Ok(Some(v)) => headers.push((name.clone(), Some(row.owned(v)))),
                Ok(None) => {}
                Err(e) => return invalid(e, None),
            }
        }
        let (key_value, value) = match (&key, &payload) {
            (Ok(k), Ok(v)) => (k.map(|p| row.owned(p)), *v),
            (Err(e), _) | (_, Err(e)) => return invalid(e.clone(), None),
        };
        if value.is_none() && !self.config.tombstone_on_null_payload {
            return invalid("payload is NULL and tombstones are disabled".into(), None);
        }
        let value = match value {
            Some(v) if self.config.expand_json_payload => {
                match crate::json_compact::expand_json(text(v)) {
                    Ok(expanded) => Some(expanded),
                    Err(e) => {
                        return invalid(
                            format!("payload is not JSON and JSON expansion is on: {e}"),
                            None,
                        )
                    }
                }
            }
            other => other.map(|p| row.owned(p)),
        };
        let partition = match &plan.partition {
            None => None,
            Some(position) => match value_at(position).map(|v| v.map(|p| parse_partition(text(p))))
            {
                Ok(Some(Ok(p))) => Some(p),
                Ok(None) => None,
                Ok(Some(Err(e))) | Err(e) => return invalid(e, None),
            },
        };
        let topic = match self.topics.topic_for(routing, &self.config) {
            Ok(topic) => topic,
            Err((reason, topic)) => return invalid(reason, topic),
        };
        RouteOutcome::Record(OutboxRecord {
            topic,
            key: key_value,
            value,
            headers,
            partition,
            timestamp_ms: None,
        })
    }
}

/// One column of a row, borrowed.
enum ColumnRef<'a> {
    Null,
    UnchangedToast,
    Value(&'a [u8]),
}

/// Column access for the native path and the Debezium mode's direct way: a decoded tuple, or
/// positions in the message.
trait RowColumns {
    fn len(&self) -> usize;
    fn get(&self, position: usize) -> Option<ColumnRef<'_>>;
    /// The column's value as a shared slice (called only for a present value).
    fn owned(&self, position: usize) -> Bytes;
    /// Whether the column's value came in binary format.
    fn binary(&self, position: usize) -> bool;
}

impl RowColumns for TupleData {
    fn len(&self) -> usize {
        self.columns.len()
    }
    fn get(&self, position: usize) -> Option<ColumnRef<'_>> {
        self.columns.get(position).map(|c| match c {
            ColumnValue::Null => ColumnRef::Null,
            ColumnValue::UnchangedToast => ColumnRef::UnchangedToast,
            ColumnValue::Text(b) | ColumnValue::Binary(b) => ColumnRef::Value(b),
        })
    }
    fn owned(&self, position: usize) -> Bytes {
        match &self.columns[position] {
            ColumnValue::Text(b) | ColumnValue::Binary(b) => b.clone(),
            _ => Bytes::new(),
        }
    }
    fn binary(&self, position: usize) -> bool {
        matches!(self.columns.get(position), Some(ColumnValue::Binary(_)))
    }
}

struct MessageRow<'a> {
    message: &'a Bytes,
    columns: &'a [RawColumn],
}

impl RowColumns for MessageRow<'_> {
    fn len(&self) -> usize {
        self.columns.len()
    }
    fn get(&self, position: usize) -> Option<ColumnRef<'_>> {
        self.columns.get(position).map(|c| match c {
            RawColumn::Null => ColumnRef::Null,
            RawColumn::UnchangedToast => ColumnRef::UnchangedToast,
            RawColumn::Text(r) | RawColumn::Binary(r) => ColumnRef::Value(&self.message[r.clone()]),
        })
    }
    fn owned(&self, position: usize) -> Bytes {
        match &self.columns[position] {
            RawColumn::Text(r) | RawColumn::Binary(r) => self.message.slice(r.clone()),
            _ => Bytes::new(),
        }
    }
    fn binary(&self, position: usize) -> bool {
        matches!(self.columns.get(position), Some(RawColumn::Binary(_)))
    }
}

/// A partition number from a column's text.
fn parse_partition(text: &[u8]) -> Result<i32, String> {
    std::str::from_utf8(text)
        .ok()
        .and_then(|t| t.parse::<i32>().ok())
        .filter(|p| *p >= 0)
        .ok_or_else(|| {
            format!(
                "partition column value {:?} is not a partition number",
                String::from_utf8_lossy(text)
            )
        })
}

impl TopicCache {
    pub(crate) fn topic_for(
        &mut self,
        routing: &[u8],
        config: &RouterConfig,
    ) -> Result<Arc<str>, (String, Option<String>)> {
        let with_topic = |reason: String| {
            let topic = std::str::from_utf8(routing)
                .ok()
                .map(|t| config.topic_template.render(t));
            (reason, topic)
        };
        if let Some(cached) = self.0.get(routing) {
            return cached.clone().map_err(with_topic);
        }
        let computed = match std::str::from_utf8(routing) {
            Err(_) => Err("routing value is not valid UTF-8".to_owned()),
            Ok(text) if text.trim().is_empty() => Err(format!(
                "routing column {:?} is empty",
                config.route_by_column
            )),
            Ok(text) => {
                let topic = config.topic_template.render(text);
                validate_topic_name(&topic).map(|_| Arc::<str>::from(topic))
            }
        };
        if self.0.len() >= TOPIC_CACHE_LIMIT {
            self.0.clear();
        }
        self.0
            .insert(Bytes::copy_from_slice(routing), computed.clone());
        computed.map_err(|reason| {
            let topic = std::str::from_utf8(routing)
                .ok()
                .map(|t| config.topic_template.render(t));
            (reason, topic)
        })
    }
}

/// What the EventRouter does with an UPDATE of outbox table `table`:
/// `table.op.invalid.behavior`.
fn unexpected_update(config: &RouterConfig, table: &str) -> RouteOutcome {
    match config.on_update {
        InvalidOperation::Ignore => RouteOutcome::Ignored,
        InvalidOperation::Warn | InvalidOperation::Error => RouteOutcome::SkippedUpdate {
            table: table.to_owned(),
            error: config.on_update == InvalidOperation::Error,
        },
        InvalidOperation::Fatal => RouteOutcome::Fatal(format!(
            "an UPDATE of outbox table {table} and table.op.invalid.behavior=fatal; outbox rows must only be inserted (and deleted)"
        )),
    }
}

mod change_event;
mod connect_record;
#[cfg(test)]
mod connect_tests;
mod heartbeat;
mod notification;
pub use notification::{java_hash_set_order, Notification};
mod message_record;
mod tolerance;
mod transaction;
pub use change_event::{change_event_topic, BeforeRouter, SourcePosition};
pub use transaction::TransactionMark;
#[cfg(test)]
mod tests;
