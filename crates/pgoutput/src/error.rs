use thiserror::Error;

/// Why a pgoutput message could not be decoded. Offsets are byte positions in the message.
///
/// A decode error means the replication stream carried bytes this decoder does not
/// understand: the relay stops without confirming the LSN, so nothing is skipped.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    #[error("pgoutput message ended early: {what} missing at byte {offset}")]
    UnexpectedEnd { what: &'static str, offset: usize },
    #[error("unknown pgoutput message tag {:?} (0x{tag:02x}) at byte {offset}: is the slot using proto_version 1?", *tag as char)]
    UnknownMessage { tag: u8, offset: usize },
    #[error("expected {what}, found {:?} (0x{found:02x}) at byte {offset}", *found as char)]
    UnexpectedTag {
        what: &'static str,
        found: u8,
        offset: usize,
    },
    #[error("negative {what} ({value}) at byte {offset}")]
    NegativeLength {
        what: &'static str,
        value: i64,
        offset: usize,
    },
    #[error("{what} at byte {offset} is not valid UTF-8")]
    InvalidUtf8 { what: &'static str, offset: usize },
    #[error("{count} unexpected trailing bytes after the pgoutput message at byte {offset}")]
    TrailingBytes { count: usize, offset: usize },
}
