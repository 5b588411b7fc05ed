//! The typed messages of pgoutput protocol version 1.

use crate::Lsn;
use bytes::Bytes;

/// One decoded pgoutput message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogicalMessage {
    Begin(Begin),
    Commit(Commit),
    Origin(Origin),
    Relation(Relation),
    Type(TypeMessage),
    Insert(Insert),
    Update(Update),
    Delete(Delete),
    Truncate(Truncate),
    Message(LogicalDecodingMessage),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Begin {
    /// LSN of the transaction's commit record.
    pub final_lsn: Lsn,
    /// Microseconds since 2000-01-01 UTC.
    pub commit_time_micros: i64,
    pub xid: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    pub flags: u8,
    /// LSN of the commit record.
    pub commit_lsn: Lsn,
    /// LSN just past the commit record: the position to confirm once the transaction is safe.
    pub end_lsn: Lsn,
    pub commit_time_micros: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub commit_lsn: Lsn,
    pub name: String,
}

/// Describes a table; sent before the first change to it in a session and after every
/// change of its definition, so a relay must re-read column positions on every Relation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relation {
    pub relation_id: u32,
    pub namespace: String,
    pub name: String,
    pub replica_identity: ReplicaIdentity,
    pub columns: Vec<Column>,
}

impl Relation {
    /// Position of the column named `name`, if the table has it.
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplicaIdentity {
    Default,
    Nothing,
    Full,
    Index,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// Bit 1: the column is part of the replica identity key.
    pub flags: u8,
    pub name: String,
    pub type_oid: u32,
    pub type_modifier: i32,
}

impl Column {
    pub fn is_key(&self) -> bool {
        self.flags & 1 == 1
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeMessage {
    pub type_oid: u32,
    pub namespace: String,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Insert {
    pub relation_id: u32,
    pub new_tuple: TupleData,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Update {
    pub relation_id: u32,
    /// Old key columns, sent when the replica identity key changed.
    pub key_tuple: Option<TupleData>,
    /// The whole old row, with REPLICA IDENTITY FULL.
    pub old_tuple: Option<TupleData>,
    pub new_tuple: TupleData,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delete {
    pub relation_id: u32,
    pub key_tuple: Option<TupleData>,
    pub old_tuple: Option<TupleData>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncate {
    /// Bit 1: CASCADE; bit 2: RESTART IDENTITY.
    pub options: u8,
    pub relation_ids: Vec<u32>,
}

/// A message written with `pg_logical_emit_message()`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogicalDecodingMessage {
    pub transactional: bool,
    pub lsn: Lsn,
    pub prefix: String,
    pub content: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TupleData {
    pub columns: Vec<ColumnValue>,
}

/// One column of a row. Text and binary values are slices of the replication message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnValue {
    Null,
    /// A TOASTed value that did not change (UPDATE only); its value is not sent.
    UnchangedToast,
    /// The value in PostgreSQL's text output format.
    Text(Bytes),
    /// The value in the type's binary send format (only with `binary 'true'`).
    Binary(Bytes),
}

impl ColumnValue {
    /// The raw bytes of a text or binary value; `None` for NULL and unchanged TOAST.
    pub fn bytes(&self) -> Option<&Bytes> {
        match self {
            ColumnValue::Text(b) | ColumnValue::Binary(b) => Some(b),
            ColumnValue::Null | ColumnValue::UnchangedToast => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, ColumnValue::Null)
    }
}
