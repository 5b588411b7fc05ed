//! The connectors of one `connect` worker: their configurations as registered (unexpanded,
//! as Kafka Connect keeps them), their target states, and the relay pipeline each runs.

use super::cluster::member::{Assignee, Handle};
use super::cluster::status::{self as status_topic, StatusTopic, Written};
use super::cluster::ClusterSettings;
use super::store::{Decides, Follower, Stored};
use crate::debezium::RawConfig;
use crate::metrics::Metrics;
use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

pub use super::store::Target;

/// A connector's state or its task's, as Connect names them (`AbstractStatus.State`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    Running,
    Paused,
    Stopped,
    Unassigned,
    /// Failed, with the trace Connect reports.
    Failed(String),
}

impl State {
    /// As Connect writes it.
    pub fn name(&self) -> &'static str {
        match self {
            State::Running => "RUNNING",
            State::Paused => "PAUSED",
            State::Stopped => "STOPPED",
            State::Unassigned => "UNASSIGNED",
            State::Failed(_) => "FAILED",
        }
    }
}

/// What `GET …/status` reports of a connector (Connect's `ConnectorStateInfo`), before it
/// is written as JSON: the connector's state, its one task's (none while stopped), and the
/// worker that runs them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub name: String,
    pub connector: State,
    pub task: Option<State>,
    pub worker_id: String,
}

/// What `GET /connectors/{n}` reports (Connect's `ConnectorInfo`): one task, always.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Info {
    pub name: String,
    pub config: BTreeMap<String, String>,
}

/// A request the worker refuses, as Connect answers it: HTTP status and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub message: String,
}

impl Refusal {
    fn not_found(name: &str) -> Self {
        Self::missing(format!("Connector {name} not found"))
    }

    /// A 404 with the wording of the endpoint (Connect's differ: "No status found for
    /// connector …", "Unknown connector …").
    pub fn missing(message: String) -> Self {
        Refusal {
            status: 404,
            message,
        }
    }

    pub fn bad_request(message: String) -> Self {
        Refusal {
            status: 400,
            message,
        }
    }

    fn invalid(errors: &[String]) -> Self {
        Refusal {
            status: 400,
            message: format!(
                "Connector configuration is invalid and contains the following {} error(s):\n{}\n\
                 You can also find the above list of errors at the endpoint `/connector-plugins/{{connectorType}}/config/validate`",
                errors.len(),
                errors.join("\n")
            ),
        }
    }
}

/// One running pipeline: stop it with `stop`; `failure` holds why it ended, if it failed.
struct Pipeline {
    stop: watch::Sender<bool>,
    thread: std::thread::JoinHandle<()>,
    metrics: Arc<Metrics>,
    /// The topics it wrote to (Connect's active topics).
    written: Arc<crate::deliver::WrittenTopics>,
    failure: Arc<Mutex<Option<String>>>,
    /// Its `topic.prefix`: Debezium's offset partition (`{"server": …}`).
    server: String,
}

struct Connector {
    /// As registered: config providers not expanded (`GET …/config` shows them so).
    config: BTreeMap<String, String>,
    target: Target,
    pipeline: Option<Pipeline>,
    /// The topics its earlier pipelines wrote to (Connect's active topics), until reset.
    topics: std::collections::BTreeSet<String>,
}

impl Connector {
    /// Its pipeline, to retire; the topics it wrote to stay with the connector.
    fn take_pipeline(&mut self) -> Option<Pipeline> {
        let pipeline = self.pipeline.take()?;
        self.topics.extend(pipeline.written.take());
        Some(pipeline)
    }
}

/// The worker's connectors.
pub struct Herder {
    /// As written (config providers unexpanded): each connector's configuration is
    /// expanded together with it.
    worker: Option<RawConfig>,
    /// The worker's own Kafka client settings (expanded, with its security settings).
    client: Option<rdkafka::ClientConfig>,
    cluster_id: std::sync::OnceLock<String>,
    worker_id: String,
    connectors: Mutex<BTreeMap<String, Connector>>,
    /// `config.storage.topic`, where registrations are kept (distributed mode).
    store: Option<Arc<super::store::ConfigTopic>>,
    /// Pipelines told to stop and not yet finished, by connector: the next pipeline of the
    /// same connector waits for them, so that it resumes from the position they recorded
    /// (a stopping pipeline records its last acknowledged position after it lets go of the
    /// slot) and nothing is relayed twice.
    retiring: Mutex<BTreeMap<String, Vec<std::thread::JoinHandle<()>>>>,
    /// Ends the thread following the config topic.
    unfollow: Arc<std::sync::atomic::AtomicBool>,
    follower: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// The cluster this worker is a member of, if any (`group.id`).
    cluster: Option<Cluster>,
}

/// A worker's part in a cluster: what its group's leader assigned it, and the status topic
/// every worker answers from.
pub struct Cluster {
    pub settings: ClusterSettings,
    pub handle: Arc<Handle>,
    pub status: Arc<StatusTopic>,
    /// The connectors this worker runs (none until its first assignment).
    assigned: Mutex<std::collections::BTreeSet<String>>,
    generation: std::sync::atomic::AtomicI32,
    /// What this worker last wrote under each status key.
    written: Mutex<BTreeMap<String, Option<Written>>>,
    /// As the group's leader: the connectors no worker runs (held for a departed worker),
    /// recorded UNASSIGNED.
    unassigned: Mutex<std::collections::BTreeSet<String>>,
    /// Deleted while this worker ran them: their records go.
    deleted: Mutex<std::collections::BTreeSet<String>>,
    /// The worker is stopping: no assignment starts anything any more.
    stopping: AtomicBool,
    /// The active-topic records this worker wrote, as (connector, topic).
    published_topics: Mutex<std::collections::BTreeSet<(String, String)>>,
}

impl Cluster {
    pub fn new(settings: ClusterSettings, status: StatusTopic) -> Self {
        Self {
            settings,
            handle: Arc::default(),
            status: Arc::new(status),
            assigned: Mutex::default(),
            generation: Default::default(),
            written: Mutex::default(),
            published_topics: Mutex::default(),
            unassigned: Mutex::default(),
            deleted: Mutex::default(),
            stopping: AtomicBool::new(false),
        }
    }
}

impl Herder {
    pub fn new(
        worker: Option<RawConfig>,
        client: Option<rdkafka::ClientConfig>,
        worker_id: String,
        store: Option<super::store::ConfigTopic>,
        cluster: Option<Cluster>,
    ) -> Self {
        Self {
            cluster,
            worker,
            client,
            cluster_id: Default::default(),
            worker_id,
            connectors: Mutex::new(BTreeMap::new()),
            store: store.map(Arc::new),
            retiring: Mutex::new(BTreeMap::new()),
            unfollow: Arc::default(),
            follower: Mutex::new(None),
        }
    }

    /// Writes what the worker knows of `name` to the config topic (its configuration and
    /// target state, or tombstones once it is deleted), when there is one.
    pub async fn persist(&self, name: &str) -> Result<(), Refusal> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        let current = self
            .connectors
            .lock()
            .unwrap()
            .get(name)
            .map(|c| (c.config.clone(), c.target));
        // The target state first, as Connect writes a new connector: a worker reading the
        // topic starts it in that state.
        let written = match current {
            Some((config, target)) => match store.put_target(name, target).await {
                Ok(()) => store.put_config(name, &config).await,
                Err(e) => Err(e),
            },
            None => store.delete(name).await,
        };
        written.map_err(|message| Refusal {
            status: 500,
            message,
        })
    }

    /// `PUT /admin/loggers/{namespace}?scope=cluster`: through the config topic to every
    /// worker (this one when it reads it back), or here alone without one.
    pub async fn set_cluster_logger_level(
        &self,
        namespace: &str,
        level: &str,
    ) -> Result<(), Refusal> {
        match &self.store {
            Some(store) => store
                .put_logger_level(namespace, level)
                .await
                .map_err(|message| Refusal {
                    status: 500,
                    message,
                }),
            None => {
                if let Some(level) = crate::ops::loggers::parse_level(level) {
                    crate::ops::loggers::set(namespace, level);
                }
                Ok(())
            }
        }
    }

    /// The connectors the config topic holds, registered and started (or left paused or
    /// stopped) as they were; then follows the topic, applying what other workers change.
    pub async fn restore(self: &Arc<Self>) -> Result<usize, String> {
        let Some(store) = &self.store else {
            return Ok(0);
        };
        let (known, end) = store.read().await?;
        let everything = Decides {
            config: true,
            target: true,
        };
        for (name, stored) in &known {
            self.changed(name, stored, everything);
        }
        let restored = self.names().len();
        let follower = store.follow(known, end, self.clone(), self.unfollow.clone())?;
        *self.follower.lock().unwrap() = Some(follower);
        Ok(restored)
    }

    /// The settings a configuration stands for, or every reason it cannot run.
    pub fn validate(
        &self,
        name: &str,
        config: &BTreeMap<String, String>,
    ) -> Result<crate::config::Settings, Vec<String>> {
        let raw = RawConfig {
            name: Some(name.to_owned()),
            entries: config.clone(),
        };
        let preset = crate::debezium::load_config(raw, self.worker.clone()).map_err(|e| vec![e])?;
        crate::config::Settings::resolve(connector_options().map_err(|e| vec![e])?, Some(preset))
            .map_err(|e| vec![e.to_string()])
    }

    pub fn names(&self) -> Vec<String> {
        self.connectors.lock().unwrap().keys().cloned().collect()
    }

    /// Registers a new connector and starts it (`POST /connectors`).
    pub fn create(
        &self,
        name: &str,
        config: BTreeMap<String, String>,
        initial: Target,
    ) -> Result<Info, Refusal> {
        // As DistributedHerder.doPutConnectorConfig: an invalid configuration is a 400
        // before an existing name is a 409.
        let mut named = config.clone();
        named.insert("name".into(), name.to_owned());
        self.validate(name, &named)
            .map_err(|errors| Refusal::invalid(&errors))?;
        if self.connectors.lock().unwrap().contains_key(name) {
            return Err(Refusal {
                status: 409,
                message: format!("Connector {name} already exists"),
            });
        }
        self.put(name, config, Some(initial)).map(|(_, info)| info)
    }

    /// Creates or replaces a connector's configuration (`PUT /connectors/{n}/config`):
    /// whether it was created, and its info.
    pub fn put(
        &self,
        name: &str,
        mut config: BTreeMap<String, String>,
        initial: Option<Target>,
    ) -> Result<(bool, Info), Refusal> {
        config.insert("name".into(), name.to_owned());
        let settings = self
            .validate(name, &config)
            .map_err(|errors| Refusal::invalid(&errors))?;
        let mut connectors = self.connectors.lock().unwrap();
        let created = !connectors.contains_key(name);
        let entry = connectors
            .entry(name.to_owned())
            .or_insert_with(|| Connector {
                config: BTreeMap::new(),
                target: initial.unwrap_or(Target::Started),
                pipeline: None,
                topics: Default::default(),
            });
        entry.config = config;
        if let Some(old) = entry.take_pipeline() {
            self.retire(name, old);
        }
        if entry.target == Target::Started && self.runs_here(name) {
            entry.pipeline = Some(self.launch(name, settings));
        }
        drop(connectors);
        if created {
            self.connectors_changed();
        }
        let connectors = self.connectors.lock().unwrap();
        let entry = connectors
            .get(name)
            .ok_or_else(|| Refusal::not_found(name))?;
        Ok((created, self.info_of(name, entry)))
    }

    pub fn info(&self, name: &str) -> Result<Info, Refusal> {
        let connectors = self.connectors.lock().unwrap();
        let entry = connectors
            .get(name)
            .ok_or_else(|| Refusal::not_found(name))?;
        Ok(self.info_of(name, entry))
    }

    pub fn config(&self, name: &str) -> Result<BTreeMap<String, String>, Refusal> {
        let connectors = self.connectors.lock().unwrap();
        let entry = connectors
            .get(name)
            .ok_or_else(|| Refusal::not_found(name))?;
        Ok(entry.config.clone())
    }

    /// Stops and forgets a connector (`DELETE /connectors/{n}`); its slot stays.
    pub fn delete(&self, name: &str) -> Result<(), Refusal> {
        let entry = self
            .connectors
            .lock()
            .unwrap()
            .remove(name)
            .ok_or_else(|| Refusal::not_found(name))?;
        if let Some(pipeline) = entry.pipeline {
            self.retire(name, pipeline);
        }
        if let Some(cluster) = &self.cluster {
            if cluster.assigned.lock().unwrap().remove(name) {
                cluster.deleted.lock().unwrap().insert(name.to_owned());
            }
        }
        self.connectors_changed();
        Ok(())
    }

    /// Pause, resume or stop: a paused or stopped connector's pipeline ends (at a
    /// transaction boundary) and its slot keeps its position.
    pub fn set_target(&self, name: &str, target: Target) -> Result<(), Refusal> {
        // One lock for the whole decision: concurrent pause, resume and PUT requests on one
        // connector are applied one after the other, and a resume never launches a second
        // pipeline beside a running one (an orphan would hold the slot for ever).
        let mut connectors = self.connectors.lock().unwrap();
        let entry = connectors
            .get_mut(name)
            .ok_or_else(|| Refusal::missing(format!("Unknown connector {name}")))?;
        match target {
            Target::Started if entry.pipeline.is_none() => {
                let settings = self
                    .validate(name, &entry.config)
                    .map_err(|errors| Refusal::invalid(&errors))?;
                entry.target = target;
                if self.runs_here(name) {
                    entry.pipeline = Some(self.launch(name, settings));
                }
            }
            Target::Started => entry.target = target,
            Target::Paused | Target::Stopped => {
                entry.target = target;
                if let Some(pipeline) = entry.take_pipeline() {
                    self.retire(name, pipeline);
                }
            }
        }
        Ok(())
    }

    /// Restarts the connector's pipeline (`POST …/restart`, `…/tasks/0/restart`); with
    /// `only_failed`, only a failed one.
    pub fn restart(&self, name: &str, only_failed: bool) -> Result<(), Refusal> {
        if self.connectors.lock().unwrap().contains_key(name) && !self.runs_here(name) {
            return self.restart_elsewhere(name, only_failed);
        }
        self.restart_here(name, only_failed)
    }

    /// A restart of a connector another worker runs: the request reaches it through the
    /// config topic. None runs it (a rebalance is under way, or it is held for a departed
    /// worker): 409, as Connect answers while a rebalance is expected.
    fn restart_elsewhere(&self, name: &str, only_failed: bool) -> Result<(), Refusal> {
        let running = self.cluster.as_ref().is_some_and(|c| {
            c.status
                .get(&status_topic::connector_key(name))
                .is_some_and(|w| w.state != State::Unassigned.name())
        });
        let store = self
            .store
            .clone()
            .filter(|_| running)
            .ok_or_else(|| Refusal {
                status: 409,
                message: "Request cannot be completed because a rebalance is expected".into(),
            })?;
        let name = name.to_owned();
        tokio::spawn(async move {
            if let Err(e) = store.put_restart(&name, only_failed).await {
                tracing::error!(connector = %name, "restart request: {e}");
            }
        });
        Ok(())
    }

    /// Restarts the connector's pipeline in this worker (if it runs it here).
    fn restart_here(&self, name: &str, only_failed: bool) -> Result<(), Refusal> {
        // One lock, as set_target: a concurrent pause or PUT is applied before or after.
        let mut connectors = self.connectors.lock().unwrap();
        let entry = connectors
            .get_mut(name)
            .ok_or_else(|| Refusal::not_found(name))?;
        if !self.runs_here(name) {
            return Ok(());
        }
        let failed = entry
            .pipeline
            .as_ref()
            .is_some_and(|p| p.failure.lock().unwrap().is_some());
        if entry.target != Target::Started || (only_failed && !failed) {
            return Ok(());
        }
        let settings = self
            .validate(name, &entry.config)
            .map_err(|errors| Refusal::invalid(&errors))?;
        if let Some(old) = entry.take_pipeline() {
            self.retire(name, old);
        }
        entry.pipeline = Some(self.launch(name, settings));
        Ok(())
    }

    /// `GET /connectors/{n}/topics`: the topics the connector wrote to since it was
    /// created or its topics were reset (none for a connector this worker does not know, as
    /// in Connect).
    pub fn topics(&self, name: &str) -> Vec<String> {
        let connectors = self.connectors.lock().unwrap();
        let Some(entry) = connectors.get(name) else {
            return Vec::new();
        };
        if let Some(cluster) = &self.cluster {
            // As the status topic records them, whichever worker runs it.
            let mut topics = cluster.status.topics_of(name);
            topics.sort();
            return topics;
        }
        let mut topics = entry.topics.clone();
        if let Some(pipeline) = &entry.pipeline {
            topics.extend(pipeline.written.get());
        }
        topics.into_iter().collect()
    }

    /// `PUT /connectors/{n}/topics/reset`.
    pub fn reset_topics(&self, name: &str) {
        if let Some(cluster) = &self.cluster {
            // Tombstones for its records; the worker running it forgets them when it reads
            // them gone, and records the topics written next.
            let keys: Vec<String> = cluster
                .status
                .topics_of(name)
                .iter()
                .map(|t| status_topic::topic_key(t, name))
                .collect();
            let cluster_status = cluster.status.clone();
            tokio::spawn(async move {
                for key in keys {
                    if let Err(e) = cluster_status.put_raw(&key, None).await {
                        tracing::warn!("status topic: {e}");
                    }
                }
            });
            return;
        }
        let mut connectors = self.connectors.lock().unwrap();
        if let Some(entry) = connectors.get_mut(name) {
            entry.topics.clear();
            if let Some(pipeline) = &entry.pipeline {
                pipeline.written.take();
            }
        }
    }

    /// A worker option that is on unless set to `false` (`topic.tracking.enable`, …).
    pub fn worker_flag(&self, key: &str) -> bool {
        self.worker
            .as_ref()
            .and_then(|w| w.entries.get(key))
            .is_none_or(|v| !v.trim().eq_ignore_ascii_case("false"))
    }

    /// `GET /connectors/{n}/status` (Connect's `ConnectorStateInfo`).
    pub fn status(&self, name: &str) -> Result<Status, Refusal> {
        let connectors = self.connectors.lock().unwrap();
        let entry = connectors
            .get(name)
            .ok_or_else(|| Refusal::missing(format!("No status found for connector {name}")))?;
        match &self.cluster {
            // The cluster's truth, the same from every worker.
            Some(cluster) => Ok(cluster_status(cluster, name, entry.target)),
            None => Ok(self.status_of(name, entry)),
        }
    }

    /// A task's state (task 0 is the only one) and the worker running it.
    pub fn task_status(&self, name: &str, task: u32) -> Result<(State, String), Refusal> {
        let missing = || Refusal::missing(format!("No status found for task {name}-{task}"));
        let status = self.status(name).map_err(|_| missing())?;
        match status.task {
            Some(state) if task == 0 => Ok((state, status.worker_id)),
            _ => Err(missing()),
        }
    }

    /// Whether the connector's pipeline failed (for `onlyFailed` restarts).
    pub fn failed(&self, name: &str) -> bool {
        if let Some(cluster) = &self.cluster {
            return cluster_status(cluster, name, Target::Started)
                .task
                .is_some_and(|t| matches!(t, State::Failed(_)));
        }
        self.connectors
            .lock()
            .unwrap()
            .get(name)
            .and_then(|c| c.pipeline.as_ref())
            .is_some_and(|p| p.failure.lock().unwrap().is_some())
    }

    /// The target state and the settings of a connector (for the offsets endpoints).
    pub fn target_and_settings(
        &self,
        name: &str,
    ) -> Result<(Target, crate::config::Settings), Refusal> {
        let (target, config) = {
            let connectors = self.connectors.lock().unwrap();
            let entry = connectors
                .get(name)
                .ok_or_else(|| Refusal::not_found(name))?;
            (entry.target, entry.config.clone())
        };
        let settings = self
            .validate(name, &config)
            .map_err(|errors| Refusal::invalid(&errors))?;
        Ok((target, settings))
    }

    /// The Kafka cluster's id, as `GET /` reports it: asked of the worker's brokers once
    /// (Connect looks it up at start), until they first answer.
    pub fn cluster_id(&self) -> Option<String> {
        use rdkafka::admin::AdminClient;
        use rdkafka::client::DefaultClientContext;
        if let Some(id) = self.cluster_id.get() {
            return Some(id.clone());
        }
        let admin: AdminClient<DefaultClientContext> = self.client.as_ref()?.create().ok()?;
        let id = admin
            .inner()
            .fetch_cluster_id(std::time::Duration::from_secs(5))?;
        Some(self.cluster_id.get_or_init(|| id).clone())
    }

    /// The cluster id if it is known already (`GET /` never waits for the brokers).
    pub fn known_cluster_id(&self) -> Option<String> {
        self.cluster_id.get().cloned()
    }

    /// Whether this worker runs `name`: every connector for a worker of its own, those its
    /// group's leader assigned it in a cluster.
    fn runs_here(&self, name: &str) -> bool {
        self.cluster
            .as_ref()
            .is_none_or(|c| c.assigned.lock().unwrap().contains(name))
    }

    /// The set of connectors changed: in a cluster, the leader assigns it anew.
    fn connectors_changed(&self) {
        if let Some(cluster) = &self.cluster {
            cluster.handle.connectors_changed.notify_one();
        }
    }

    pub fn cluster(&self) -> Option<&Cluster> {
        self.cluster.as_ref()
    }

    /// Writes the states of the connectors this worker runs that changed since it last
    /// wrote them to the status topic (Connect's status listener writes each transition).
    pub async fn publish_status(&self) {
        let Some(cluster) = &self.cluster else {
            return;
        };
        let generation = cluster
            .generation
            .load(std::sync::atomic::Ordering::Relaxed);
        let assigned = cluster.assigned.lock().unwrap().clone();
        // (key, value, the connector it must still be assigned here for).
        let mut writes: Vec<(String, Option<Written>, Option<String>)> = Vec::new();
        // Deleted while this worker ran them: tombstones for their states and topics, as
        // Connect's DESTROYED becomes one.
        let deleted = std::mem::take(&mut *cluster.deleted.lock().unwrap());
        for name in &deleted {
            writes.push((status_topic::connector_key(name), None, None));
            writes.push((status_topic::task_key(name, 0), None, None));
            for topic in cluster.status.topics_of(name) {
                writes.push((status_topic::topic_key(&topic, name), None, None));
            }
        }
        // Held for a departed worker: UNASSIGNED (on the worker it ran on), not its last
        // RUNNING.
        let unassigned = std::mem::take(&mut *cluster.unassigned.lock().unwrap());
        for name in unassigned.difference(&assigned) {
            for key in [
                status_topic::connector_key(name),
                status_topic::task_key(name, 0),
            ] {
                let worker_id = cluster
                    .status
                    .get(&key)
                    .map_or_else(|| self.worker_id.clone(), |w| w.worker_id);
                let written = Written {
                    state: State::Unassigned.name().to_owned(),
                    trace: None,
                    worker_id,
                    generation,
                };
                writes.push((key, Some(written), None));
            }
        }
        {
            let connectors = self.connectors.lock().unwrap();
            for name in &assigned {
                let Some(entry) = connectors.get(name) else {
                    continue;
                };
                let status = self.status_of(name, entry);
                let written = |state: &State| Written {
                    state: state.name().to_owned(),
                    trace: match state {
                        State::Failed(trace) => Some(trace.clone()),
                        _ => None,
                    },
                    worker_id: self.worker_id.clone(),
                    generation,
                };
                writes.push((
                    status_topic::connector_key(name),
                    Some(written(&status.connector)),
                    Some(name.clone()),
                ));
                writes.push((
                    status_topic::task_key(name, 0),
                    status.task.as_ref().map(written),
                    Some(name.clone()),
                ));
            }
        }
        if self.worker_flag("topic.tracking.enable") {
            self.publish_topics(cluster, &assigned).await;
        }
        // The generation alone changing is no transition.
        let strip = |w: Option<Written>| w.map(|w| (w.state, w.trace, w.worker_id));
        for (key, value, for_connector) in writes {
            // Revoked meanwhile: its new worker writes its states.
            if for_connector
                .as_ref()
                .is_some_and(|c| !cluster.assigned.lock().unwrap().contains(c))
            {
                continue;
            }
            // Written already, and the topic says so (another worker's write, such as the
            // leader's UNASSIGNED while this one was away, is overwritten).
            let cached = cluster.written.lock().unwrap().get(&key).cloned();
            let wanted = strip(value.clone());
            if cached.is_some_and(|c| strip(c) == wanted)
                && strip(cluster.status.get(&key)) == wanted
            {
                continue;
            }
            match cluster.status.put(&key, value.as_ref()).await {
                Ok(()) => {
                    cluster.written.lock().unwrap().insert(key, value);
                }
                Err(e) => tracing::warn!("status topic: {e}"),
            }
        }
    }

    /// The worker is about to leave its group: no assignment starts anything any more, and
    /// every connector it runs is written UNASSIGNED (as Connect's status listener writes
    /// them as a worker shuts its tasks down), before the others take them over.
    pub async fn leaving(&self) {
        let Some(cluster) = &self.cluster else {
            return;
        };
        cluster
            .stopping
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let generation = cluster
            .generation
            .load(std::sync::atomic::Ordering::Relaxed);
        let assigned = std::mem::take(&mut *cluster.assigned.lock().unwrap());
        let written = Written {
            state: State::Unassigned.name().to_owned(),
            trace: None,
            worker_id: self.worker_id.clone(),
            generation,
        };
        for name in &assigned {
            for key in [
                status_topic::connector_key(name),
                status_topic::task_key(name, 0),
            ] {
                let put = cluster.status.put(&key, Some(&written));
                if let Ok(Err(e)) =
                    tokio::time::timeout(std::time::Duration::from_secs(5), put).await
                {
                    tracing::warn!("status topic: {e}");
                }
            }
        }
    }

    /// The confirmed position of each connector this worker streams, with its
    /// `topic.prefix` (Debezium's offset partition): `(name, server, lsn)`.
    pub fn positions(&self) -> Vec<(String, String, u64)> {
        let connectors = self.connectors.lock().unwrap();
        connectors
            .iter()
            .filter_map(|(name, c)| {
                let pipeline = c.pipeline.as_ref()?;
                let lsn = u64::try_from(pipeline.metrics.confirmed_lsn.get())
                    .ok()
                    .filter(|l| *l > 0)?;
                Some((name.clone(), pipeline.server.clone(), lsn))
            })
            .collect()
    }

    /// Records the topics the connectors running here wrote to (Connect's `TopicStatus`).
    async fn publish_topics(
        &self,
        cluster: &Cluster,
        assigned: &std::collections::BTreeSet<String>,
    ) {
        let mut new = Vec::new();
        {
            let connectors = self.connectors.lock().unwrap();
            let published = cluster.published_topics.lock().unwrap();
            for name in assigned {
                let Some(entry) = connectors.get(name) else {
                    continue;
                };
                let mut local = entry.topics.clone();
                if let Some(p) = &entry.pipeline {
                    local.extend(p.written.get());
                }
                for topic in local {
                    if !published.contains(&(name.clone(), topic.clone())) {
                        new.push((topic, name.clone()));
                    }
                }
            }
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or_default();
        for (topic, name) in new {
            let key = status_topic::topic_key(&topic, &name);
            let value = status_topic::topic_value(&topic, &name, now);
            match cluster.status.put_raw(&key, Some(value)).await {
                Ok(()) => {
                    cluster
                        .published_topics
                        .lock()
                        .unwrap()
                        .insert((name, topic));
                }
                Err(e) => tracing::warn!("status topic: {e}"),
            }
        }
    }

    /// A connector's active topics were reset (their records tombstoned, through any
    /// worker), read as the status topic is read: if it runs here, it forgets them, and the
    /// topics it writes to next are recorded again.
    pub fn topics_reset(&self, connector: &str) {
        let Some(cluster) = &self.cluster else {
            return;
        };
        let mut connectors = self.connectors.lock().unwrap();
        let Some(entry) = connectors.get_mut(connector) else {
            return;
        };
        if !cluster.assigned.lock().unwrap().contains(connector) {
            return;
        }
        entry.topics.clear();
        if let Some(p) = &entry.pipeline {
            p.written.take();
        }
        cluster
            .published_topics
            .lock()
            .unwrap()
            .retain(|(c, _)| c != connector);
    }

    /// Tells a pipeline to stop; the connector's next pipeline waits for it.
    fn retire(&self, name: &str, pipeline: Pipeline) {
        let _ = pipeline.stop.send(true);
        self.retiring
            .lock()
            .unwrap()
            .entry(name.to_owned())
            .or_default()
            .push(pipeline.thread);
    }

    /// Starts a connector's pipeline once its retiring ones have finished.
    fn launch(&self, name: &str, settings: crate::config::Settings) -> Pipeline {
        let predecessors = self
            .retiring
            .lock()
            .unwrap()
            .remove(name)
            .unwrap_or_default();
        start(settings, predecessors)
    }

    /// Stops every pipeline (the process is ending).
    pub async fn shutdown(&self) {
        self.unfollow
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let follower = self.follower.lock().unwrap().take();
        if let Some(follower) = follower {
            let _ = tokio::task::spawn_blocking(move || follower.join()).await;
        }
        let tasks: Vec<_> = {
            let mut connectors = self.connectors.lock().unwrap();
            let mut threads: Vec<_> = connectors
                .values_mut()
                .filter_map(|c| c.pipeline.take())
                .map(|p| {
                    let _ = p.stop.send(true);
                    p.thread
                })
                .collect();
            threads.extend(
                self.retiring
                    .lock()
                    .unwrap()
                    .values_mut()
                    .flat_map(std::mem::take),
            );
            threads
        };
        for thread in tasks {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }

    /// The worker's own series, as Connect's `connect-worker-metrics` and
    /// `connect-worker-rebalance-metrics` count them: the connectors it is given and the
    /// tasks it runs, and, in a cluster, its rebalances and the time since the last.
    fn worker_metrics(&self) -> String {
        let (connectors, tasks) = {
            let all = self.connectors.lock().unwrap();
            let given = all.keys().filter(|n| self.runs_here(n)).count();
            let running = all.values().filter(|c| c.pipeline.is_some()).count();
            (given, running)
        };
        let mut text = format!(
            "# HELP outbox_relay_connect_worker_connector_count The connectors this worker is given.\n\
             # TYPE outbox_relay_connect_worker_connector_count gauge\n\
             outbox_relay_connect_worker_connector_count {connectors}\n\
             # HELP outbox_relay_connect_worker_task_count The tasks this worker runs.\n\
             # TYPE outbox_relay_connect_worker_task_count gauge\n\
             outbox_relay_connect_worker_task_count {tasks}\n"
        );
        // The process's figures under the JVM names Debezium's dashboard charts, where a
        // connector serves Debezium's series.
        if self.connectors.lock().unwrap().values().any(|c| {
            c.pipeline
                .as_ref()
                .is_some_and(|p| p.metrics.debezium.enabled())
        }) {
            text.push_str(&crate::metrics::debezium::process_series());
        }
        if let Some(cluster) = &self.cluster {
            let m = cluster.handle.membership.lock().unwrap();
            let since = m
                .last_rebalance
                .map(|t| t.elapsed().as_secs_f64())
                .unwrap_or(f64::NAN);
            text.push_str(&format!(
                "# HELP outbox_relay_connect_worker_rebalances Rebalances this worker completed.\n\
                 # TYPE outbox_relay_connect_worker_rebalances counter\n\
                 outbox_relay_connect_worker_rebalances_total {}\n\
                 # HELP outbox_relay_connect_worker_seconds_since_rebalance Seconds since this worker's last rebalance.\n\
                 # TYPE outbox_relay_connect_worker_seconds_since_rebalance gauge\n\
                 outbox_relay_connect_worker_seconds_since_rebalance {since}\n\
                 # HELP outbox_relay_connect_worker_generation The group generation of this worker's assignment.\n\
                 # TYPE outbox_relay_connect_worker_generation gauge\n\
                 outbox_relay_connect_worker_generation {}\n",
                m.rebalances, m.generation
            ));
        }
        text
    }

    fn info_of(&self, name: &str, entry: &Connector) -> Info {
        Info {
            name: name.to_owned(),
            config: entry.config.clone(),
        }
    }

    fn status_of(&self, name: &str, entry: &Connector) -> Status {
        let (connector, task) = match (&entry.target, &entry.pipeline) {
            (Target::Paused, _) => (State::Paused, Some(State::Paused)),
            (Target::Stopped, _) => (State::Stopped, None),
            (Target::Started, None) => (State::Unassigned, Some(State::Unassigned)),
            (Target::Started, Some(pipeline)) => {
                let failure = pipeline.failure.lock().unwrap().clone();
                let task = match failure {
                    Some(trace) => State::Failed(trace),
                    // RUNNING once the task holds its slot, as Debezium's task is once its
                    // start() created or acquired it: what commits after that is relayed.
                    // Before, and while standing by for a slot another worker streams
                    // from, UNASSIGNED.
                    None if pipeline.metrics.active.get() == 1
                        && !pipeline.metrics.is_standing_by() =>
                    {
                        State::Running
                    }
                    None => State::Unassigned,
                };
                (State::Running, Some(task))
            }
        };
        Status {
            name: name.to_owned(),
            connector,
            task,
            worker_id: self.worker_id.clone(),
        }
    }
}

/// The metrics address of a `connect` worker: every connector's series, and ready when each
/// started connector streams or stands by for its slot (paused and stopped ones do what they
/// were asked), none failed.
impl crate::ops::http::Observed for Herder {
    fn metrics_text(&self) -> String {
        let mut texts: Vec<String> = self
            .connectors
            .lock()
            .unwrap()
            .values()
            .filter_map(|c| c.pipeline.as_ref())
            .map(|p| p.metrics.encode())
            .collect();
        texts.push(self.worker_metrics());
        crate::ops::http::merge_openmetrics(texts.iter().map(String::as_str))
    }

    fn ready(&self) -> Result<String, String> {
        let connectors = self.connectors.lock().unwrap();
        let mut ready = Vec::new();
        let mut not = Vec::new();
        for (name, c) in connectors.iter() {
            match (c.target, &c.pipeline) {
                (Target::Paused, _) => ready.push(format!("{name} paused")),
                (Target::Stopped, _) => ready.push(format!("{name} stopped")),
                (Target::Started, None) if !self.runs_here(name) => {
                    ready.push(format!("{name} on another worker"))
                }
                (Target::Started, None) => not.push(format!("{name} not started")),
                (Target::Started, Some(p)) => {
                    if let Some(trace) = p.failure.lock().unwrap().as_ref() {
                        not.push(format!("{name} failed: {trace}"));
                        continue;
                    }
                    let brief = |t: &str| {
                        t.trim_end()
                            .trim_start_matches("not ready: ")
                            .trim_start_matches("ready: ")
                            .to_owned()
                    };
                    match p.metrics.readiness() {
                        Ok(t) => ready.push(format!("{name} {}", brief(&t))),
                        Err(t) => not.push(format!("{name}: {}", brief(&t))),
                    }
                }
            }
        }
        if !not.is_empty() {
            Err(format!("not ready: {}\n", not.join(", ")))
        } else {
            let listed = if ready.is_empty() {
                "no connectors".to_owned()
            } else {
                ready.join(", ")
            };
            Ok(format!("ready: {listed}\n"))
        }
    }
}

/// The worker as a member of its group: it reports what it runs and runs what it is assigned.
impl Assignee for Herder {
    fn connectors(&self) -> std::collections::BTreeSet<String> {
        self.connectors.lock().unwrap().keys().cloned().collect()
    }

    fn running(&self) -> std::collections::BTreeSet<String> {
        self.cluster
            .as_ref()
            .map(|c| c.assigned.lock().unwrap().clone())
            .unwrap_or_default()
    }

    fn unassigned(&self, connectors: std::collections::BTreeSet<String>, _generation: i32) {
        if let Some(cluster) = &self.cluster {
            *cluster.unassigned.lock().unwrap() = connectors;
        }
    }

    fn assigned(&self, now: std::collections::BTreeSet<String>, generation: i32) {
        let Some(cluster) = &self.cluster else {
            return;
        };
        if cluster.stopping.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        cluster
            .generation
            .store(generation, std::sync::atomic::Ordering::Relaxed);
        let before = std::mem::replace(&mut *cluster.assigned.lock().unwrap(), now.clone());
        let mut connectors = self.connectors.lock().unwrap();
        for name in before.difference(&now) {
            // Revoked: it stops here (at a transaction boundary, its position recorded) and
            // starts on the worker it was given to, which waits for the slot.
            cluster.written.lock().unwrap().retain(|k, _| {
                k != &status_topic::connector_key(name) && k != &status_topic::task_key(name, 0)
            });
            if let Some(entry) = connectors.get_mut(name) {
                if let Some(pipeline) = entry.take_pipeline() {
                    tracing::info!(connector = %name, "revoked: stopping");
                    self.retire(name, pipeline);
                }
            }
        }
        // Every connector assigned here that should stream and does not: the new ones, and
        // any whose configuration could not be read at an earlier assignment.
        for name in &now {
            let Some(entry) = connectors.get_mut(name) else {
                continue;
            };
            if entry.target != Target::Started || entry.pipeline.is_some() {
                continue;
            }
            match self.validate(name, &entry.config) {
                Ok(settings) => {
                    tracing::info!(connector = %name, "assigned: starting");
                    entry.pipeline = Some(self.launch(name, settings));
                }
                Err(errors) => tracing::error!(
                    connector = %name,
                    "assigned, but its configuration is invalid: {}",
                    errors.join("; ")
                ),
            }
        }
    }
}

/// A connector's status as the status topic holds it. No state written yet: UNASSIGNED, as
/// a connector no worker has started is.
fn cluster_status(cluster: &Cluster, name: &str, target: Target) -> Status {
    let read = |w: Option<Written>| -> Option<(State, String)> {
        let w = w?;
        let state = match w.state.as_str() {
            "RUNNING" => State::Running,
            "PAUSED" => State::Paused,
            "STOPPED" => State::Stopped,
            "FAILED" => State::Failed(w.trace.unwrap_or_default()),
            _ => State::Unassigned,
        };
        Some((state, w.worker_id))
    };
    let connector = read(cluster.status.get(&status_topic::connector_key(name)));
    let task = read(cluster.status.get(&status_topic::task_key(name, 0)));
    let (connector, worker_id) = connector.unwrap_or((State::Unassigned, String::new()));
    let task = match (target, task) {
        (Target::Stopped, _) => None,
        (_, Some((state, _))) => Some(state),
        (_, None) => Some(State::Unassigned),
    };
    Status {
        name: name.to_owned(),
        connector,
        task,
        worker_id,
    }
}

/// What the config topic says now about a connector, applied here: registered, updated,
/// paused, resumed, stopped or deleted through another worker (or, at start, as stored).
impl Follower for Herder {
    fn restart_requested(&self, name: &str, only_failed: bool) {
        if !self.runs_here(name) {
            return;
        }
        tracing::info!(connector = %name, only_failed, "restart requested through the config topic");
        if let Err(refusal) = self.restart_here(name, only_failed) {
            tracing::error!(connector = %name, "restart request: {}", refusal.message);
        }
    }

    fn changed(&self, name: &str, stored: &Stored, decides: Decides) {
        let local = self
            .connectors
            .lock()
            .unwrap()
            .get(name)
            .map(|c| (c.config.clone(), c.target));
        let applied = match (&stored.config, local) {
            (None, Some(_)) if decides.config => self.delete(name).map(|()| "deleted"),
            (None, _) => Ok("unchanged"),
            (Some(_), None) if !decides.config => Ok("unchanged"),
            (Some(config), None) => {
                let mut config = config.clone();
                config.remove("name");
                let target = stored.target.unwrap_or(Target::Started);
                self.create(name, config, target).map(|_| "registered")
            }
            (Some(config), Some((current, target))) => {
                let mut named = config.clone();
                named.insert("name".into(), name.to_owned());
                let mut what = Ok("unchanged");
                if decides.config && named != current {
                    what = self.put(name, named, None).map(|_| "reconfigured");
                }
                match stored.target {
                    Some(wanted) if decides.target && wanted != target && what.is_ok() => self
                        .set_target(name, wanted)
                        .map(|()| "target state changed"),
                    _ => what,
                }
            }
        };
        match applied {
            Ok("unchanged") => {}
            Ok(what) => tracing::info!(connector = %name, "config topic: {what}"),
            Err(refusal) => tracing::error!(
                connector = %name,
                "config topic: not applied: {}",
                refusal.message
            ),
        }
    }
}

/// Starts a connector's pipeline in this process, on a thread of its own with its own
/// single-threaded runtime (as `run` drives one pipeline): connectors never share a
/// producer or stall each other.
fn start(
    settings: crate::config::Settings,
    predecessors: Vec<std::thread::JoinHandle<()>>,
) -> Pipeline {
    let hidden = settings
        .preset
        .as_ref()
        .map(|p| p.hidden.clone())
        .unwrap_or_default();
    // What its config providers expanded never reaches a log line or a metric label.
    hidden.hide_in_logs();
    let slot = settings.cdc().map(|c| hidden.apply(&c.slot));
    let metrics = Arc::new(Metrics::for_slot(slot.as_deref()));
    // The worker writes the process's own series once (`worker_metrics`).
    metrics.configure(&settings, false);
    metrics.hide_in_labels(hidden.clone());
    let written = Arc::new(crate::deliver::WrittenTopics::default());
    let (stop, stop_rx) = watch::channel(false);
    let failure = Arc::new(Mutex::new(None));
    let server = match &settings.router.output {
        outbox_router::Output::Connect(f) => f.topic_prefix.clone(),
        outbox_router::Output::Raw => String::new(),
    };
    let name = settings
        .preset
        .as_ref()
        .and_then(|p| p.connector_name.clone())
        .unwrap_or_default();
    let body = {
        let metrics = metrics.clone();
        let written = written.clone();
        move || {
            // Retired while it waited for its predecessors (a burst of pause, resume and
            // config changes): a later pipeline replaces it, so it never connects at all,
            // and the burst costs one restart, not one per request.
            if *stop_rx.borrow() {
                return Ok(());
            }
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("starting the connector's runtime: {e}"))?;
            runtime
                .block_on(async {
                    // The broker probe /ready reads, for the life of this pipeline.
                    let _probe =
                        crate::ops::http::spawn_broker_probe(&settings.kafka, metrics.clone())
                            .map(crate::supervisor::AbortOnDrop);
                    crate::supervisor::relay(&settings, metrics, written, stop_rx).await
                })
                .map_err(|e| e.to_string())
        }
    };
    let thread = spawn_task(name, predecessors, hidden, failure.clone(), body);
    Pipeline {
        stop,
        thread,
        metrics,
        written,
        failure,
        server,
    }
}

/// The relay's own options for every connector of this worker: the canary's, the
/// cleanup's and Debezium's metric names, from the worker's environment, parsed as `run`
/// parses them (`OUTBOX_RELAY_CANARY_*`, `OUTBOX_RELAY_CLEANUP*`,
/// `OUTBOX_RELAY_DEBEZIUM_METRICS`). A connector's `outbox.relay.cleanup*`
/// options apply where the environment sets nothing. The worker's other `OUTBOX_RELAY_*`
/// variables (a slot, a URL) would give every connector the same one: they are not read here.
fn connector_options() -> Result<crate::config::RunOptions, String> {
    crate::config::RunOptions::from_environment(&[
        "debezium-metrics",
        "canary-interval",
        "canary-max-age",
        "canary-topic",
        "canary-method",
        "canary-read-back",
        "cleanup",
        "cleanup-batch",
        "cleanup-interval",
        "cleanup-grace",
    ])
}

/// Runs a connector's task on a thread named after it, once its predecessors finished. How
/// it ends is kept in `failure`, as Kafka Connect keeps a task's: its error, or, if it
/// panics, the panic's message, place and backtrace (the task is FAILED, /ready red; the
/// worker and its other connectors go on).
fn spawn_task(
    name: String,
    predecessors: Vec<std::thread::JoinHandle<()>>,
    hidden: crate::secret::Redaction,
    failure: Arc<Mutex<Option<String>>>,
    body: impl FnOnce() -> Result<(), String> + Send + 'static,
) -> std::thread::JoinHandle<()> {
    crate::panics::record_traces();
    std::thread::Builder::new()
        .name(format!("connector-{name}"))
        .spawn(move || {
            for predecessor in predecessors {
                let _ = predecessor.join();
            }
            let result = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
                Ok(result) => result,
                Err(payload) => Err(crate::panics::trace(payload.as_ref())),
            };
            if let Err(e) = result {
                // Shown in the status and /ready: without a value a provider expanded.
                let e = hidden.apply(&e);
                tracing::error!(connector = %name, "{e}");
                *failure.lock().unwrap() = Some(e);
            }
        })
        .expect("a connector thread")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A task that panics is FAILED with the panic's message and place in its trace, as
    /// Kafka Connect reports a task that threw; one that fails says why; one that ends
    /// well leaves no failure.
    #[test]
    fn a_panicking_task_is_failed_with_its_trace() {
        let run = |body: Box<dyn FnOnce() -> Result<(), String> + Send>| {
            let failure = Arc::new(Mutex::new(None));
            spawn_task(
                "t".into(),
                Vec::new(),
                crate::secret::Redaction::default(),
                failure.clone(),
                body,
            )
            .join()
            .expect("the thread itself does not panic");
            let failure = failure.lock().unwrap().clone();
            failure
        };
        let trace = run(Box::new(|| panic!("index out of range in the router"))).unwrap();
        assert!(
            trace.contains("index out of range in the router"),
            "{trace}"
        );
        assert!(trace.contains("herder.rs"), "the place: {trace}");
        assert_eq!(
            run(Box::new(|| Err("slot is gone".into()))).as_deref(),
            Some("slot is gone")
        );
        assert_eq!(run(Box::new(|| Ok(()))), None);
    }
}
