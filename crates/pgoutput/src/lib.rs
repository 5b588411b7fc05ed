//! A pure decoder for PostgreSQL's `pgoutput` logical replication protocol, version 1.
//!
//! Input is the payload of one `XLogData` message (one pgoutput message); output is a
//! typed [`LogicalMessage`] whose column values and message contents are slices of the
//! input [`Bytes`]: decoding never copies a payload.
//!
//! Every message of protocol version 1 is decoded: Begin, Commit, Origin, Relation, Type,
//! Insert, Update, Delete, Truncate and (logical decoding) Message, and every tuple column
//! kind: null, unchanged TOAST, text and binary. Malformed input returns a [`DecodeError`]
//! naming what was wrong and where; it never panics (see `fuzz/` and the property tests).
//!
//! Reference: <https://www.postgresql.org/docs/15/protocol-logicalrep-message-formats.html>

mod error;
mod lsn;
mod message;
mod reader;

pub use error::DecodeError;
pub use lsn::{Lsn, LsnParseError};
pub use message::{
    Begin, Column, ColumnValue, Commit, Delete, Insert, LogicalDecodingMessage, LogicalMessage,
    Origin, Relation, ReplicaIdentity, Truncate, TupleData, TypeMessage, Update,
};

use bytes::Bytes;
use reader::Reader;

/// Decodes one pgoutput message (the `data` of an `XLogData` frame).
pub fn decode(data: Bytes) -> Result<LogicalMessage, DecodeError> {
    let mut r = Reader::new(&data);
    let tag = r.u8("message tag")?;
    let message = match tag {
        b'B' => LogicalMessage::Begin(Begin {
            final_lsn: Lsn::from_u64(r.u64("Begin.final_lsn")?),
            commit_time_micros: r.i64("Begin.commit_time")?,
            xid: r.u32("Begin.xid")?,
        }),
        b'C' => LogicalMessage::Commit(Commit {
            flags: r.u8("Commit.flags")?,
            commit_lsn: Lsn::from_u64(r.u64("Commit.commit_lsn")?),
            end_lsn: Lsn::from_u64(r.u64("Commit.end_lsn")?),
            commit_time_micros: r.i64("Commit.commit_time")?,
        }),
        b'O' => LogicalMessage::Origin(Origin {
            commit_lsn: Lsn::from_u64(r.u64("Origin.commit_lsn")?),
            name: r.cstring("Origin.name")?,
        }),
        b'R' => LogicalMessage::Relation(decode_relation(&mut r)?),
        b'Y' => LogicalMessage::Type(TypeMessage {
            type_oid: r.u32("Type.oid")?,
            namespace: r.cstring("Type.namespace")?,
            name: r.cstring("Type.name")?,
        }),
        b'I' => {
            let relation_id = r.u32("Insert.relation_id")?;
            r.expect_tag(b'N', "Insert new-tuple marker 'N'")?;
            LogicalMessage::Insert(Insert {
                relation_id,
                new_tuple: decode_tuple(&mut r)?,
            })
        }
        b'U' => decode_update(&mut r)?,
        b'D' => {
            let relation_id = r.u32("Delete.relation_id")?;
            let kind = r.u8("Delete tuple marker")?;
            let tuple = decode_tuple(&mut r)?;
            let (key_tuple, old_tuple) = match kind {
                b'K' => (Some(tuple), None),
                b'O' => (None, Some(tuple)),
                other => {
                    return Err(DecodeError::UnexpectedTag {
                        what: "Delete tuple marker 'K' or 'O'",
                        found: other,
                        offset: r.offset() - 1,
                    })
                }
            };
            LogicalMessage::Delete(Delete {
                relation_id,
                key_tuple,
                old_tuple,
            })
        }
        b'T' => {
            let count = r.u32("Truncate.relation_count")?;
            let options = r.u8("Truncate.options")?;
            // Each id takes 4 bytes: refuse counts the input cannot hold before allocating.
            if (count as usize).saturating_mul(4) > r.remaining() {
                return Err(DecodeError::UnexpectedEnd {
                    what: "Truncate.relation_ids",
                    offset: r.offset(),
                });
            }
            let mut relation_ids = Vec::with_capacity(count as usize);
            for _ in 0..count {
                relation_ids.push(r.u32("Truncate.relation_id")?);
            }
            LogicalMessage::Truncate(Truncate {
                options,
                relation_ids,
            })
        }
        b'M' => {
            let flags = r.u8("Message.flags")?;
            let lsn = Lsn::from_u64(r.u64("Message.lsn")?);
            let prefix = r.cstring("Message.prefix")?;
            let len = r.len_i32("Message.content_length")?;
            let content = r.bytes(len, "Message.content")?;
            LogicalMessage::Message(LogicalDecodingMessage {
                transactional: flags & 1 == 1,
                lsn,
                prefix,
                content,
            })
        }
        other => {
            return Err(DecodeError::UnknownMessage {
                tag: other,
                offset: 0,
            })
        }
    };
    r.finish()?;
    Ok(message)
}

fn decode_relation(r: &mut Reader) -> Result<Relation, DecodeError> {
    let relation_id = r.u32("Relation.id")?;
    let namespace = r.cstring("Relation.namespace")?;
    let name = r.cstring("Relation.name")?;
    let replica_identity = match r.u8("Relation.replica_identity")? {
        b'd' => ReplicaIdentity::Default,
        b'n' => ReplicaIdentity::Nothing,
        b'f' => ReplicaIdentity::Full,
        b'i' => ReplicaIdentity::Index,
        other => {
            return Err(DecodeError::UnexpectedTag {
                what: "Relation.replica_identity 'd', 'n', 'f' or 'i'",
                found: other,
                offset: r.offset() - 1,
            })
        }
    };
    let count = r.count_i16("Relation.column_count")?;
    // A column takes at least 10 bytes (flags, empty name, type oid, type modifier).
    if count.saturating_mul(10) > r.remaining() {
        return Err(DecodeError::UnexpectedEnd {
            what: "Relation.columns",
            offset: r.offset(),
        });
    }
    let mut columns = Vec::with_capacity(count);
    for _ in 0..count {
        columns.push(Column {
            flags: r.u8("Relation.column.flags")?,
            name: r.cstring("Relation.column.name")?,
            type_oid: r.u32("Relation.column.type_oid")?,
            type_modifier: r.i32("Relation.column.type_modifier")?,
        });
    }
    Ok(Relation {
        relation_id,
        namespace,
        name,
        replica_identity,
        columns,
    })
}

fn decode_update(r: &mut Reader) -> Result<LogicalMessage, DecodeError> {
    let relation_id = r.u32("Update.relation_id")?;
    let mut key_tuple = None;
    let mut old_tuple = None;
    let mut marker = r.u8("Update tuple marker")?;
    if marker == b'K' || marker == b'O' {
        let tuple = decode_tuple(r)?;
        if marker == b'K' {
            key_tuple = Some(tuple);
        } else {
            old_tuple = Some(tuple);
        }
        marker = r.u8("Update new-tuple marker 'N'")?;
    }
    if marker != b'N' {
        return Err(DecodeError::UnexpectedTag {
            what: "Update tuple marker 'K', 'O' or 'N'",
            found: marker,
            offset: r.offset() - 1,
        });
    }
    Ok(LogicalMessage::Update(Update {
        relation_id,
        key_tuple,
        old_tuple,
        new_tuple: decode_tuple(r)?,
    }))
}

fn decode_tuple(r: &mut Reader) -> Result<TupleData, DecodeError> {
    let mut columns = Vec::with_capacity(r.peek_count_i16());
    for_each_column(r, |r, column| {
        columns.push(match column {
            RawColumn::Null => ColumnValue::Null,
            RawColumn::UnchangedToast => ColumnValue::UnchangedToast,
            RawColumn::Text(range) => ColumnValue::Text(r.data_slice(range)),
            RawColumn::Binary(range) => ColumnValue::Binary(r.data_slice(range)),
        })
    })?;
    Ok(TupleData { columns })
}

/// Where one column of a tuple lies in the message ([`decode_insert_columns`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RawColumn {
    Null,
    UnchangedToast,
    Text(std::ops::Range<usize>),
    Binary(std::ops::Range<usize>),
}

/// The hot path for the relay: an Insert message's relation id, with the positions of its
/// new tuple's columns written into `columns` (cleared first, reused across calls) instead
/// of a slice of the buffer per column. Validates exactly what [`decode`] validates; any
/// other message is `Ok(None)`.
pub fn decode_insert_columns(
    data: &Bytes,
    columns: &mut Vec<RawColumn>,
) -> Result<Option<u32>, DecodeError> {
    columns.clear();
    let mut r = Reader::new(data);
    if r.u8("message tag")? != b'I' {
        return Ok(None);
    }
    let relation_id = r.u32("Insert.relation_id")?;
    r.expect_tag(b'N', "Insert new-tuple marker 'N'")?;
    for_each_column(&mut r, |_, column| columns.push(column))?;
    r.finish()?;
    Ok(Some(relation_id))
}

fn for_each_column<'a>(
    r: &mut Reader<'a>,
    mut f: impl FnMut(&Reader<'a>, RawColumn),
) -> Result<(), DecodeError> {
    let count = r.count_i16("TupleData.column_count")?;
    // Every column takes at least its one-byte kind.
    if count > r.remaining() {
        return Err(DecodeError::UnexpectedEnd {
            what: "TupleData.columns",
            offset: r.offset(),
        });
    }
    for _ in 0..count {
        let kind = r.u8("TupleData.column.kind")?;
        let column = match kind {
            b'n' => RawColumn::Null,
            b'u' => RawColumn::UnchangedToast,
            b't' => {
                let len = r.len_i32("TupleData.column.length")?;
                RawColumn::Text(r.range(len, "TupleData.column.text")?)
            }
            b'b' => {
                let len = r.len_i32("TupleData.column.length")?;
                RawColumn::Binary(r.range(len, "TupleData.column.binary")?)
            }
            other => {
                return Err(DecodeError::UnexpectedTag {
                    what: "TupleData column kind 'n', 'u', 't' or 'b'",
                    found: other,
                    offset: r.offset() - 1,
                })
            }
        };
        f(r, column);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
