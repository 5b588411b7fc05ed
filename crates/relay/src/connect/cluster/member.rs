//! A worker's membership of its group, through the group coordinator of the Kafka cluster,
//! as Kafka Connect's `WorkerGroupMember` holds it: FindCoordinator, then JoinGroup and
//! SyncGroup each rebalance (the leader assigns, `assign.rs`), and Heartbeat in between; a
//! LeaveGroup when the worker stops. The connection speaks Kafka's protocol itself
//! (`kafka-protocol` encodes the messages): librdkafka's consumer groups assign partitions
//! only, never a worker's connectors.

use super::assign::{Leader, Member};
use super::transport::{Mechanism, Scram, Security, Stream};
use super::wire::{self, Assigned, Metadata, Whole};
use super::ClusterSettings;
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, FindCoordinatorResponse, GroupId,
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    LeaveGroupResponse, RequestHeader, ResponseHeader, SaslAuthenticateRequest,
    SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse, SyncGroupRequest,
    SyncGroupResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{watch, Notify};

/// What the member asks of, and tells, the worker it belongs to (the herder).
pub trait Assignee: Send + Sync + 'static {
    /// Every registered connector (the leader assigns them all).
    fn connectors(&self) -> BTreeSet<String>;
    /// The connectors this worker runs now (its JoinGroup metadata).
    fn running(&self) -> BTreeSet<String>;
    /// This worker's connectors from now on.
    fn assigned(&self, connectors: BTreeSet<String>, generation: i32);
    /// As the leader: the connectors no worker runs in `generation` (held for a departed
    /// worker), whose states it records as UNASSIGNED.
    fn unassigned(&self, connectors: BTreeSet<String>, generation: i32);
}

/// The membership as the worker's metrics and status see it.
#[derive(Debug, Default)]
pub struct Membership {
    pub generation: i32,
    pub leader: Option<String>,
    pub rebalances: u64,
    pub last_rebalance: Option<Instant>,
    pub connectors: usize,
}

/// Shared between the member's task and the worker.
#[derive(Default)]
pub struct Handle {
    /// The set of connectors changed: the leader starts a rebalance to assign it.
    pub connectors_changed: Notify,
    pub membership: Mutex<Membership>,
}

const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
const CLIENT_ID: &str = "outbox-relay-connect";

// Kafka's error codes the member acts on (`org.apache.kafka.common.protocol.Errors`).
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const NOT_COORDINATOR: i16 = 16;
const ILLEGAL_GENERATION: i16 = 22;
const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
const UNKNOWN_MEMBER_ID: i16 = 25;
const INVALID_SESSION_TIMEOUT: i16 = 26;
const REBALANCE_IN_PROGRESS: i16 = 27;
const GROUP_AUTHORIZATION_FAILED: i16 = 30;
const MEMBER_ID_REQUIRED: i16 = 79;

/// One connection to a broker.
struct Conn {
    stream: Box<dyn Stream>,
    correlation: i32,
    versions: HashMap<i16, (i16, i16)>,
}

impl Conn {
    async fn open(address: &str, security: &Security) -> Result<Self, String> {
        let stream = tokio::time::timeout(REQUEST_TIMEOUT, security.connect(address))
            .await
            .map_err(|_| {
                format!("connecting to {address}: no answer within {REQUEST_TIMEOUT:?}")
            })??;
        let mut conn = Conn {
            stream,
            correlation: 0,
            versions: HashMap::new(),
        };
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("outbox-relay"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        // A broker older than ApiVersions v3 (Kafka 2.4) answers in v0, which does not decode.
        let answer: ApiVersionsResponse = conn
            .call(ApiKey::ApiVersions, 3, &request, REQUEST_TIMEOUT)
            .await
            .map_err(|e| {
                format!("{address}: {e} (the group membership needs Kafka 2.4 or later)")
            })?;
        if answer.error_code != 0 {
            return Err(format!(
                "{address} refused ApiVersions (error {}): a Kafka broker of 2.4 or later is needed",
                answer.error_code
            ));
        }
        conn.versions = answer
            .api_keys
            .iter()
            .map(|k| (k.api_key, (k.min_version, k.max_version)))
            .collect();
        if let Some(sasl) = &security.sasl {
            conn.authenticate(sasl.mechanism, sasl)
                .await
                .map_err(|e| format!("{address}: {e} (check the worker's sasl.* settings)"))?;
        }
        Ok(conn)
    }

    /// SaslHandshake, then SaslAuthenticate rounds (KIP-152).
    async fn authenticate(
        &mut self,
        mechanism: Mechanism,
        sasl: &super::transport::Sasl,
    ) -> Result<(), String> {
        let handshake: SaslHandshakeResponse = self
            .call(
                ApiKey::SaslHandshake,
                1,
                &SaslHandshakeRequest::default()
                    .with_mechanism(StrBytes::from_static_str(mechanism.name())),
                REQUEST_TIMEOUT,
            )
            .await?;
        if handshake.error_code != 0 {
            return Err(format!(
                "the broker does not enable sasl.mechanism={} (it offers {:?})",
                mechanism.name(),
                handshake
                    .mechanisms
                    .iter()
                    .map(|m| m.to_string())
                    .collect::<Vec<_>>()
            ));
        }
        let version = self.version(ApiKey::SaslAuthenticate, (0, 2))?;
        let (user, password) = sasl.credentials();
        match mechanism {
            Mechanism::Plain => {
                self.sasl_round(version, format!("\0{user}\0{password}").into_bytes())
                    .await?;
            }
            Mechanism::ScramSha256 | Mechanism::ScramSha512 => {
                let nonce = base64::Engine::encode(
                    &base64::engine::general_purpose::STANDARD,
                    rand::random::<[u8; 24]>(),
                );
                let mut scram = Scram::new(mechanism, user, password, nonce);
                let first = self
                    .sasl_round(version, scram.client_first().into_bytes())
                    .await?;
                let last = scram.client_final(&String::from_utf8_lossy(&first))?;
                let server_final = self.sasl_round(version, last.into_bytes()).await?;
                scram.verify_server_final(&String::from_utf8_lossy(&server_final))?;
            }
        }
        Ok(())
    }

    async fn sasl_round(&mut self, version: i16, bytes: Vec<u8>) -> Result<Bytes, String> {
        let answer: SaslAuthenticateResponse = self
            .call(
                ApiKey::SaslAuthenticate,
                version,
                &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(bytes)),
                REQUEST_TIMEOUT,
            )
            .await?;
        if answer.error_code != 0 {
            return Err(format!(
                "Authentication failed: {}",
                answer
                    .error_message
                    .map(|m| m.to_string())
                    .unwrap_or_else(|| format!("error {}", answer.error_code))
            ));
        }
        Ok(answer.auth_bytes)
    }

    /// The highest version of `key` both sides speak, within `ours`.
    fn version(&self, key: ApiKey, ours: (i16, i16)) -> Result<i16, String> {
        let (min, max) = self
            .versions
            .get(&(key as i16))
            .copied()
            .ok_or_else(|| format!("the broker does not offer {key:?}"))?;
        let v = ours.1.min(max);
        if v < ours.0 || v < min {
            return Err(format!(
                "the broker speaks {key:?} versions {min}..={max}, outbox-relay {}..={}",
                ours.0, ours.1
            ));
        }
        Ok(v)
    }

    async fn call<Q, R>(
        &mut self,
        key: ApiKey,
        version: i16,
        request: &Q,
        timeout: Duration,
    ) -> Result<R, String>
    where
        Q: Encodable + HeaderVersion,
        R: Decodable + HeaderVersion,
    {
        self.correlation = self.correlation.wrapping_add(1);
        let header = RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation)
            .with_client_id(Some(StrBytes::from_static_str(CLIENT_ID)));
        let mut buf = BytesMut::with_capacity(256);
        buf.put_i32(0);
        header
            .encode(&mut buf, Q::header_version(version))
            .and_then(|()| request.encode(&mut buf, version))
            .map_err(|e| format!("encoding {key:?}: {e}"))?;
        let length = i32::try_from(buf.len() - 4).expect("a small request");
        buf[..4].copy_from_slice(&length.to_be_bytes());
        let exchange = async {
            self.stream.write_all(&buf).await?;
            let mut size = [0u8; 4];
            self.stream.read_exact(&mut size).await?;
            let size = i32::from_be_bytes(size);
            if !(0..=64 << 20).contains(&size) {
                return Err(std::io::Error::other(format!("a response of {size} bytes")));
            }
            let mut body = vec![0u8; size as usize];
            self.stream.read_exact(&mut body).await?;
            Ok(Bytes::from(body))
        };
        let mut body = tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| format!("{key:?}: no answer within {timeout:?}"))?
            .map_err(|e| format!("{key:?}: {e}"))?;
        let answer_header = ResponseHeader::decode(&mut body, R::header_version(version))
            .map_err(|e| format!("decoding {key:?}: {e}"))?;
        if answer_header.correlation_id != self.correlation {
            return Err(format!("{key:?}: an answer to another request"));
        }
        R::decode(&mut body, version).map_err(|e| format!("decoding {key:?}: {e}"))
    }
}

/// Why the session with the coordinator ended.
enum Ended {
    /// Find the coordinator again (it moved, or the connection broke).
    Rediscover(String),
    /// The worker is stopping.
    Stopped,
}

/// Holds the worker's membership until `stop`, rejoining through every failure.
pub async fn run(
    settings: ClusterSettings,
    security: Security,
    bootstrap: Vec<String>,
    worker: String,
    assignee: Arc<dyn Assignee>,
    handle: Arc<Handle>,
    mut stop: watch::Receiver<bool>,
) {
    let mut member = State {
        settings,
        worker,
        member_id: String::new(),
        last: None,
        leader: Leader::default(),
        assignee,
        handle,
    };
    let mut backoff = Duration::from_millis(200);
    loop {
        if *stop.borrow() {
            return;
        }
        let ended = match find_coordinator(&bootstrap, &member.settings.group_id, &security).await {
            Ok(conn) => {
                backoff = Duration::from_millis(200);
                member.session(conn, &mut stop).await
            }
            Err(e) => Ended::Rediscover(e),
        };
        match ended {
            Ended::Stopped => return,
            Ended::Rediscover(why) => {
                tracing::warn!(group = %member.settings.group_id, "group coordinator: {why}");
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = stopped(&mut stop) => return,
                }
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
}

async fn find_coordinator(
    bootstrap: &[String],
    group: &str,
    security: &Security,
) -> Result<Conn, String> {
    let mut last = String::from("no bootstrap.servers");
    for address in bootstrap {
        let mut conn = match Conn::open(address, security).await {
            Ok(c) => c,
            Err(e) => {
                last = e;
                continue;
            }
        };
        let version = conn.version(ApiKey::FindCoordinator, (1, 4))?;
        let request = if version >= 4 {
            FindCoordinatorRequest::default()
                .with_coordinator_keys(vec![StrBytes::from_string(group.to_owned())])
        } else {
            FindCoordinatorRequest::default().with_key(StrBytes::from_string(group.to_owned()))
        };
        let answer: FindCoordinatorResponse = match conn
            .call(ApiKey::FindCoordinator, version, &request, REQUEST_TIMEOUT)
            .await
        {
            Ok(a) => a,
            Err(e) => {
                last = e;
                continue;
            }
        };
        let (error, host, port) = if version >= 4 {
            match answer.coordinators.first() {
                Some(c) => (c.error_code, c.host.to_string(), c.port),
                None => return Err(format!("no coordinator for group {group} in the answer")),
            }
        } else {
            (answer.error_code, answer.host.to_string(), answer.port)
        };
        if error != 0 {
            return Err(match error {
                GROUP_AUTHORIZATION_FAILED => format!(
                    "group.id {group}: not authorized (grant the worker's principal Read on the group)"
                ),
                _ => format!("no coordinator for group {group} yet (error {error})"),
            });
        }
        let coordinator = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        return Conn::open(&coordinator, security).await;
    }
    Err(last)
}

struct State {
    settings: ClusterSettings,
    worker: String,
    member_id: String,
    /// The group's last assignment this worker received.
    last: Option<Whole>,
    leader: Leader,
    assignee: Arc<dyn Assignee>,
    handle: Arc<Handle>,
}

impl State {
    /// Joins, syncs and heartbeats with one coordinator until it must be found again.
    async fn session(&mut self, mut conn: Conn, stop: &mut watch::Receiver<bool>) -> Ended {
        let join_version = match conn.version(ApiKey::JoinGroup, (5, 7)) {
            Ok(v) => v,
            Err(e) => return Ended::Rediscover(e),
        };
        let sync_version = conn.version(ApiKey::SyncGroup, (3, 5)).unwrap_or(3);
        let heartbeat_version = conn.version(ApiKey::Heartbeat, (3, 4)).unwrap_or(3);
        let leave_version = conn.version(ApiKey::LeaveGroup, (3, 5)).unwrap_or(3);
        let group = GroupId(StrBytes::from_string(self.settings.group_id.clone()));
        let mut reason = "joining";
        'join: loop {
            if *stop.borrow() {
                self.leave(&mut conn, leave_version, &group).await;
                return Ended::Stopped;
            }
            let metadata = wire::encode(&Metadata {
                worker: self.worker.clone(),
                running: self.assignee.running(),
                last: self.last.clone(),
            });
            let request = JoinGroupRequest::default()
                .with_group_id(group.clone())
                .with_session_timeout_ms(millis(self.settings.session_timeout))
                .with_rebalance_timeout_ms(millis(self.settings.rebalance_timeout))
                .with_member_id(StrBytes::from_string(self.member_id.clone()))
                .with_protocol_type(StrBytes::from_static_str(wire::PROTOCOL_TYPE))
                .with_protocols(vec![JoinGroupRequestProtocol::default()
                    .with_name(StrBytes::from_static_str(wire::PROTOCOL_NAME))
                    .with_metadata(metadata)])
                .with_reason(Some(StrBytes::from_static_str(reason)));
            let joined: JoinGroupResponse = match conn
                .call(
                    ApiKey::JoinGroup,
                    join_version,
                    &request,
                    self.settings.rebalance_timeout + REQUEST_TIMEOUT,
                )
                .await
            {
                Ok(j) => j,
                Err(e) => return Ended::Rediscover(e),
            };
            match joined.error_code {
                0 => {}
                MEMBER_ID_REQUIRED => {
                    self.member_id = joined.member_id.to_string();
                    continue 'join;
                }
                UNKNOWN_MEMBER_ID | ILLEGAL_GENERATION => {
                    self.member_id.clear();
                    continue 'join;
                }
                REBALANCE_IN_PROGRESS => continue 'join,
                COORDINATOR_LOAD_IN_PROGRESS | COORDINATOR_NOT_AVAILABLE | NOT_COORDINATOR => {
                    return Ended::Rediscover(format!("JoinGroup: error {}", joined.error_code))
                }
                INCONSISTENT_GROUP_PROTOCOL => {
                    tracing::error!(
                        group = %self.settings.group_id,
                        "group.id {} is held by members that do not speak outbox-relay's group protocol \
                         (Kafka Connect workers?): give outbox-relay's workers a group.id of their own",
                        self.settings.group_id
                    );
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_secs(10)) => continue 'join,
                        _ = stopped(stop) => return Ended::Stopped,
                    }
                }
                INVALID_SESSION_TIMEOUT => {
                    tracing::error!(
                        "session.timeout.ms={} is outside the brokers' group.min.session.timeout.ms and \
                         group.max.session.timeout.ms",
                        self.settings.session_timeout.as_millis()
                    );
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_secs(10)) => continue 'join,
                        _ = stopped(stop) => return Ended::Stopped,
                    }
                }
                GROUP_AUTHORIZATION_FAILED => {
                    return Ended::Rediscover(format!(
                        "group.id {}: not authorized",
                        self.settings.group_id
                    ))
                }
                code => return Ended::Rediscover(format!("JoinGroup: error {code}")),
            }
            self.member_id = joined.member_id.to_string();
            let generation = joined.generation_id;
            let leading = joined.leader == joined.member_id;
            let mut rebalance_at = None;
            let assignments = if leading {
                let mut freshest: Option<Whole> = self.last.clone();
                let members: Vec<Member> = joined
                    .members
                    .iter()
                    .map(|m| {
                        let meta = wire::decode::<Metadata>(&m.metadata).unwrap_or_else(|e| {
                            tracing::warn!(member = %m.member_id, "{e}");
                            Metadata {
                                worker: m.member_id.to_string(),
                                running: BTreeSet::new(),
                                last: None,
                            }
                        });
                        if let Some(last) = &meta.last {
                            if freshest
                                .as_ref()
                                .is_none_or(|f| f.generation < last.generation)
                            {
                                freshest = Some(last.clone());
                            }
                        }
                        Member {
                            member_id: m.member_id.to_string(),
                            worker: meta.worker,
                            running: meta.running,
                        }
                    })
                    .collect();
                if let Some(freshest) = freshest {
                    self.leader
                        .remember(freshest.generation, freshest.by_worker);
                }
                let all = self.assignee.connectors();
                let assignment = self.leader.assign(
                    &members,
                    &all,
                    self.settings.scheduled_rebalance_delay,
                    Instant::now(),
                );
                let placed: BTreeSet<&String> = assignment.by_member.values().flatten().collect();
                let unplaced = all
                    .iter()
                    .filter(|c| !placed.contains(c))
                    .cloned()
                    .collect();
                self.assignee.unassigned(unplaced, generation);
                rebalance_at = assignment
                    .rebalance_in
                    .map(|d| tokio::time::Instant::now() + d);
                tracing::info!(
                    generation,
                    members = members.len(),
                    assignment = ?assignment.by_member,
                    "leading the group's rebalance"
                );
                self.leader.made_in(generation);
                let whole = Whole {
                    generation,
                    by_worker: self.leader.previous().clone(),
                };
                assignment
                    .by_member
                    .into_iter()
                    .map(|(member_id, connectors)| {
                        SyncGroupRequestAssignment::default()
                            .with_member_id(StrBytes::from_string(member_id))
                            .with_assignment(wire::encode(&Assigned {
                                leader: self.worker.clone(),
                                connectors,
                                whole: Some(whole.clone()),
                            }))
                    })
                    .collect()
            } else {
                Vec::new()
            };
            let request = SyncGroupRequest::default()
                .with_group_id(group.clone())
                .with_generation_id(generation)
                .with_member_id(StrBytes::from_string(self.member_id.clone()))
                .with_protocol_type(Some(StrBytes::from_static_str(wire::PROTOCOL_TYPE)))
                .with_protocol_name(Some(StrBytes::from_static_str(wire::PROTOCOL_NAME)))
                .with_assignments(assignments);
            let synced: SyncGroupResponse = match conn
                .call(
                    ApiKey::SyncGroup,
                    sync_version,
                    &request,
                    self.settings.rebalance_timeout + REQUEST_TIMEOUT,
                )
                .await
            {
                Ok(s) => s,
                Err(e) => return Ended::Rediscover(e),
            };
            match synced.error_code {
                0 => {}
                REBALANCE_IN_PROGRESS | ILLEGAL_GENERATION => {
                    reason = "rebalancing";
                    continue 'join;
                }
                UNKNOWN_MEMBER_ID => {
                    self.member_id.clear();
                    continue 'join;
                }
                code => return Ended::Rediscover(format!("SyncGroup: error {code}")),
            }
            let assigned = if synced.assignment.is_empty() {
                None
            } else {
                match wire::decode::<Assigned>(&synced.assignment) {
                    Ok(a) => Some(a),
                    Err(e) => {
                        tracing::warn!("{e}");
                        None
                    }
                }
            };
            let (leader, connectors) = match assigned {
                Some(a) => {
                    if a.whole.is_some() {
                        self.last = a.whole;
                    }
                    (Some(a.leader), a.connectors)
                }
                None => (None, BTreeSet::new()),
            };
            {
                let mut m = self.handle.membership.lock().unwrap();
                m.generation = generation;
                m.leader = leader;
                m.rebalances += 1;
                m.last_rebalance = Some(Instant::now());
                m.connectors = connectors.len();
            }
            tracing::info!(generation, connectors = ?connectors, "assigned");
            self.assignee.assigned(connectors, generation);

            // Heartbeats until a rebalance.
            let heartbeat = self.settings.heartbeat_interval;
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(heartbeat) => {}
                    _ = self.handle.connectors_changed.notified(), if leading => {
                        reason = "the connectors changed";
                        continue 'join;
                    }
                    _ = sleep_until(rebalance_at), if leading && rebalance_at.is_some() => {
                        reason = "scheduled.rebalance.max.delay.ms ended";
                        continue 'join;
                    }
                    _ = stopped(stop) => {
                        self.leave(&mut conn, leave_version, &group).await;
                        return Ended::Stopped;
                    }
                }
                let request = HeartbeatRequest::default()
                    .with_group_id(group.clone())
                    .with_generation_id(generation)
                    .with_member_id(StrBytes::from_string(self.member_id.clone()));
                let beat: HeartbeatResponse = match conn
                    .call(
                        ApiKey::Heartbeat,
                        heartbeat_version,
                        &request,
                        REQUEST_TIMEOUT,
                    )
                    .await
                {
                    Ok(b) => b,
                    Err(e) => return Ended::Rediscover(e),
                };
                match beat.error_code {
                    0 => {}
                    REBALANCE_IN_PROGRESS | ILLEGAL_GENERATION => {
                        reason = "rebalancing";
                        continue 'join;
                    }
                    UNKNOWN_MEMBER_ID => {
                        // Evicted (silent past session.timeout.ms): its connectors were given
                        // to others. It stops them, as a Connect worker revokes everything
                        // when it loses its membership, and joins anew.
                        self.member_id.clear();
                        self.assignee.assigned(BTreeSet::new(), generation);
                        reason = "the coordinator forgot this member";
                        continue 'join;
                    }
                    code => return Ended::Rediscover(format!("Heartbeat: error {code}")),
                }
            }
        }
    }

    async fn leave(&mut self, conn: &mut Conn, version: i16, group: &GroupId) {
        if self.member_id.is_empty() {
            return;
        }
        let request = LeaveGroupRequest::default()
            .with_group_id(group.clone())
            .with_members(vec![MemberIdentity::default()
                .with_member_id(StrBytes::from_string(self.member_id.clone()))
                .with_reason(Some(StrBytes::from_static_str("the worker stops")))]);
        let left: Result<LeaveGroupResponse, _> = conn
            .call(
                ApiKey::LeaveGroup,
                version,
                &request,
                Duration::from_secs(5),
            )
            .await;
        if let Err(e) = left {
            tracing::debug!("LeaveGroup: {e}");
        }
    }
}

/// Until `stop` turns true (or its sender is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn millis(d: Duration) -> i32 {
    i32::try_from(d.as_millis()).unwrap_or(i32::MAX)
}
