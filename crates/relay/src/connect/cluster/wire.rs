//! What the workers of a group tell each other through the group coordinator: each
//! member's metadata in its JoinGroup (the worker's id and the connectors it runs) and each
//! member's assignment in the leader's SyncGroup. Versioned JSON: a worker of another
//! version, or a Kafka Connect worker, never takes it for its own (the protocol name differs,
//! and the coordinator refuses a group whose members share no protocol).

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The group's protocol type, as Kafka Connect's workers name theirs.
pub const PROTOCOL_TYPE: &str = "connect";
/// The one protocol outbox-relay's workers speak (Connect's are `eager`, `compatible` and
/// `sessioned`, whose metadata differ).
pub const PROTOCOL_NAME: &str = "outbox-relay-cooperative-1";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metadata {
    /// The worker's id: its advertised REST URL.
    pub worker: String,
    pub running: BTreeSet<String>,
    /// The last assignment of the whole group this worker received: a new leader starts from
    /// the freshest, so that a departed worker's connectors are held for it whoever leads.
    #[serde(default)]
    pub last: Option<Whole>,
}

/// The group's assignment, by worker, in one generation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Whole {
    pub generation: i32,
    pub by_worker: BTreeMap<String, BTreeSet<String>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assigned {
    /// The leader's worker id (where Connect forwards requests).
    pub leader: String,
    pub connectors: BTreeSet<String>,
    #[serde(default)]
    pub whole: Option<Whole>,
}

pub fn encode<T: Serialize>(value: &T) -> bytes::Bytes {
    bytes::Bytes::from(serde_json::to_vec(value).expect("plain data serializes"))
}

pub fn decode<T: for<'a> Deserialize<'a>>(bytes: &[u8]) -> Result<T, String> {
    serde_json::from_slice(bytes)
        .map_err(|e| format!("a group member's data that is not outbox-relay's: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_and_assignments_round_trip() {
        let m = Metadata {
            worker: "http://10.0.0.1:8083".into(),
            running: ["a".to_owned(), "b".to_owned()].into(),
            last: Some(Whole {
                generation: 3,
                by_worker: [("w".to_owned(), ["a".to_owned()].into())].into(),
            }),
        };
        assert_eq!(decode::<Metadata>(&encode(&m)).unwrap(), m);
        let a = Assigned {
            leader: "http://10.0.0.2:8083".into(),
            connectors: ["c".to_owned()].into(),
            whole: None,
        };
        assert_eq!(decode::<Assigned>(&encode(&a)).unwrap(), a);
        assert!(decode::<Metadata>(b"\x00\x01binary").is_err());
    }
}
