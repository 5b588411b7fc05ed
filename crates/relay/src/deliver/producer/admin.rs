//! Topic administration for the producer: the topics the relay creates (partitions,
//! replication, `topic.creation.*` configs) and waits for, their partition counts, and the
//! limits and rules their configs set (DescribeConfigs, read again as they come due). Sending
//! and delivery reports are `mod.rs`'s; this file is everything the admin client does.

use super::*;

/// How the relay creates a topic.
struct TopicSpec {
    partitions: i32,
    replication_factor: i32,
    /// Every config it is created with.
    configs: Vec<(String, String)>,
    /// Those that `topic.creation.*` asked for.
    theirs: Vec<(String, String)>,
}

/// Creates `topic` as `spec` says: whether this request created it (false: it existed
/// already, another creator's), or what its refusal means.
async fn create_topic(
    admin: &AdminClient<DefaultClientContext>,
    topic: &str,
    spec: &TopicSpec,
) -> Result<bool, TopicRefusal> {
    let mut new_topic = NewTopic::new(
        topic,
        spec.partitions,
        TopicReplication::Fixed(spec.replication_factor),
    );
    for (key, value) in &spec.configs {
        new_topic = new_topic.set(key, value);
    }
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let results = admin
        .create_topics(&[new_topic], &options)
        .await
        .map_err(|e| {
            TopicRefusal::Fatal(RelayError::BrokerUnavailable(anyhow!(
                "creating topic {topic}: {e}"
            )))
        })?;
    let mut created = false;
    for result in results {
        match result {
            Ok(_) => {
                created = true;
                tracing::info!(
                    topic,
                    partitions = spec.partitions,
                    configs = ?spec.theirs,
                    "created topic"
                )
            }
            Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((_, code)) => {
                return Err(topic_refusal(
                    topic,
                    code,
                    spec.partitions,
                    spec.replication_factor,
                ))
            }
        }
    }
    Ok(created)
}

/// Makes sure `topic` exists, off the delivery path: a topic that exists needs no
/// CreateTopics permission; one created by another meanwhile is as good.
async fn make_sure_of(
    admin: &AdminClient<DefaultClientContext>,
    producer: RdProducer,
    topic: &str,
    spec: &TopicSpec,
) -> Result<(), TopicRefusal> {
    let counts = partition_counts(producer, Some(topic.to_owned())).await;
    if counts.is_some_and(|counts| counts.contains_key(topic)) {
        return Ok(());
    }
    create_topic(admin, topic, spec).await.map(|_| ())
}

/// The partition count of `topic`, or of every topic of the cluster (`None`), from one
/// metadata request; topics that do not exist (or have no partitions) are left out.
async fn partition_counts(
    producer: RdProducer,
    topic: Option<String>,
) -> Option<HashMap<String, i32>> {
    tokio::task::spawn_blocking(move || {
        let metadata = producer
            .client()
            .fetch_metadata(topic.as_deref(), Duration::from_secs(10))
            .ok()?;
        Some(
            metadata
                .topics()
                .iter()
                .filter(|t| t.error().is_none() && !t.partitions().is_empty())
                .map(|t| (t.name().to_owned(), t.partitions().len() as i32))
                .collect(),
        )
    })
    .await
    .ok()
    .flatten()
}

/// A DescribeConfigs request the broker will refuse again however often it is asked. In
/// practice librdkafka raises `UnsupportedFeature` for a broker too old for the request; a
/// topic the relay may not describe comes back without entries (rdkafka has no per-topic
/// error), not as one of these.
fn never_answers_describe_configs(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::ClusterAuthorizationFailed
            | RDKafkaErrorCode::TopicAuthorizationFailed
            | RDKafkaErrorCode::UnsupportedVersion
            | RDKafkaErrorCode::UnsupportedFeature
            | RDKafkaErrorCode::InvalidRequest
            | RDKafkaErrorCode::SecurityDisabled
    )
}

/// Topics per DescribeConfigs request when many are read again at once.
const DESCRIBE_CHUNK: usize = 500;

/// How long the cluster's topic list is trusted to say which topics exist.
const CLUSTER_TOPICS_TTL: Duration = Duration::from_secs(30);

impl KafkaProducer {
    /// What the broker says of each of `topics`' configs, in one DescribeConfigs request
    /// (learning on the way their `max.message.bytes`, which are compacted and their timestamp
    /// windows), and whether a topic went unanswered (a topic created a moment ago may not
    /// have reached the broker that answers yet).
    ///
    /// A broker that cannot answer DescribeConfigs (too old) is asked once per producer: no
    /// stall per topic, no stall per re-read. A topic the relay may not describe is answered
    /// without entries, and asked for again less and less often. A request that fails
    /// otherwise (a timeout under load, a broker restarting) leaves those topics' rules as they
    /// were, to be asked for again; until the next try is due (5 s, doubled per further
    /// failure, at most a minute) no request is sent at all, so that a slow broker does not
    /// hold the delivery stage once per new topic.
    async fn describe_topics(&mut self, topics: &[Arc<str>]) -> (Vec<(Arc<str>, Configs)>, bool) {
        let all = |configs: Configs| (topics.iter().map(|t| (t.clone(), configs)).collect(), false);
        if !self.describe_configs_works || topics.is_empty() {
            return all(Configs::Read(None));
        }
        if let Some((since, failures)) = self.describe_configs_failing {
            if since.elapsed() <= topic_rules::retry_wait(failures) {
                return all(Configs::Postponed);
            }
        }
        let options = AdminOptions::new().request_timeout(Some(Duration::from_secs(5)));
        let resources: Vec<ResourceSpecifier<'_>> =
            topics.iter().map(|t| ResourceSpecifier::Topic(t)).collect();
        let results = match self.admin.describe_configs(&resources, &options).await {
            Ok(results) => results,
            Err(KafkaError::AdminOp(code)) if never_answers_describe_configs(code) => {
                self.describe_configs_works = false;
                tracing::warn!(topic = &*topics[0], error = %code, "cannot read topics' max.message.bytes (DescribeConfigs); records \
                    are not checked against it and batches keep librdkafka's batch.size: grant DESCRIBE_CONFIGS on the \
                    topics, or keep their max.message.bytes at or above batch.size");
                return all(Configs::Read(None));
            }
            Err(e) => {
                let failures = match self.describe_configs_failing {
                    Some((_, failures)) => failures.saturating_add(1),
                    None => {
                        tracing::warn!(topic = &*topics[0], error = %e, "reading topics' configs (DescribeConfigs) failed; \
                            asking again in a few seconds, and until then a topic not read yet is not checked against its \
                            max.message.bytes, compaction or timestamp window (the broker judges its records)");
                        1
                    }
                };
                self.describe_configs_failing = Some((std::time::Instant::now(), failures));
                return all(Configs::Unanswered);
            }
        };
        if self.describe_configs_failing.take().is_some() {
            tracing::info!("the broker answers DescribeConfigs again");
        }
        // Results come in the order asked. rdkafka hands a resource the broker refused (a
        // topic it does not know yet, one the relay may not describe) back as one without
        // entries: a topic always has entries (every config, defaults included), so none
        // means no answer for that topic.
        let mut unanswered = false;
        let configs = topics
            .iter()
            .enumerate()
            .map(|(i, topic)| {
                let configs = match results.get(i) {
                    Some(Ok(resource)) if !resource.entries.is_empty() => {
                        self.wait_for_created = true;
                        Configs::Read(
                            self.rules
                                .learn(topic, |name| resource.get(name)?.value.clone()),
                        )
                    }
                    _ => {
                        unanswered = true;
                        Configs::Unanswered
                    }
                };
                (topic.clone(), configs)
            })
            .collect();
        (configs, unanswered)
    }

    /// Learns `topic`'s record size limit and rules (see [`Self::learned`]). A topic the
    /// relay just created (`created`) that the answering broker does not know yet is asked
    /// again for up to 3 s: its first records would otherwise go out unchecked, and a record
    /// its timestamp window refuses would fail its whole batch at the broker. Any other topic
    /// left unanswered is asked again later (see [`TopicRules::due`]). Once a created topic
    /// stayed unanswered that long (the relay may create topics but not describe them), later
    /// ones are not waited for until some topic is answered.
    async fn learn_limit(&mut self, topic: &Arc<str>, created: bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(3);
        loop {
            let (configs, unanswered) = self.describe_topics(std::slice::from_ref(topic)).await;
            let wait = unanswered && created && self.wait_for_created;
            if wait
                && self.describe_configs_failing.is_none()
                && std::time::Instant::now() < deadline
            {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            if wait && self.describe_configs_failing.is_none() {
                self.wait_for_created = false;
                tracing::warn!(
                    topic = &**topic,
                    "the broker answers DescribeConfigs for this topic without its configs 3 s after it was created \
                     (the relay may not describe it?): its records are not checked against its max.message.bytes, \
                     compaction or timestamp window until it does; grant DESCRIBE_CONFIGS on the topics"
                );
            }
            for (topic, configs) in configs {
                self.learned(&topic, configs);
            }
            return;
        }
    }

    /// Reads again, together, the configs of every known topic whose rules are due (stale,
    /// or their last read got no answer), and the partition counts of the stale ones: thousands
    /// of topics cost a request per chunk of them a minute, not two round trips per topic.
    async fn refresh_due_topics(&mut self) {
        let mut due: Vec<Arc<str>> = Vec::new();
        let mut stale: Vec<Arc<str>> = Vec::new();
        for topic in &self.known_topics {
            match self.rules.due(topic) {
                Some(Due::Refresh) => {
                    due.push(topic.clone());
                    stale.push(topic.clone());
                }
                Some(Due::Retry) => due.push(topic.clone()),
                None => {}
            }
        }
        for chunk in due.chunks(DESCRIBE_CHUNK) {
            for (topic, configs) in self.describe_topics(chunk).await.0 {
                self.learned(&topic, configs);
            }
        }
        if !stale.is_empty() && self.read_cluster_topics().await {
            for topic in &stale {
                let count = self
                    .cluster_topics
                    .as_ref()
                    .and_then(|(_, all)| all.get(&**topic).copied());
                if let Some(count) = count {
                    self.learned_partitions(topic, count);
                }
            }
        }
    }

    /// What the broker said of `topic`'s configs, for the rules and the producer.
    fn learned(&mut self, topic: &Arc<str>, configs: Configs) {
        match configs {
            Configs::Read(limit) => self.learned_limit(topic, limit),
            Configs::Unanswered => self.rules.unanswered(topic),
            Configs::Postponed => self.rules.postponed(topic),
        }
    }

    /// What `topic`'s size limit means for the producer: smaller batches when it is below
    /// the batch size (a batch larger than the limit is refused whole, every record in it).
    fn learned_limit(&mut self, topic: &Arc<str>, limit: Option<usize>) {
        let Some(limit) = limit else {
            self.rules.forget_limit(topic);
            return;
        };
        // batch.size 0 is refused by librdkafka; a limit that small refuses every record anyway.
        let limit = limit.max(1);
        let current = self.wanted_batch_size.unwrap_or(self.batch_size);
        debug_assert!(current > 0);
        if limit < current {
            tracing::info!(
                topic = &**topic,
                max_message_bytes = limit,
                batch_size = self.batch_size,
                "the topic takes smaller record batches than the producer builds: building batches of at most max.message.bytes"
            );
            self.wanted_batch_size = Some(limit);
        }
    }

    /// Reads every topic of the cluster and its partition count (one metadata request);
    /// false when the broker does not answer.
    async fn read_cluster_topics(&mut self) -> bool {
        match self.partition_counts_of(None).await {
            Some(all) => {
                self.cluster_topics = Some((std::time::Instant::now(), all));
                true
            }
            None => false,
        }
    }

    /// `topic`'s partition count if the cluster's topic list (read at most every
    /// [`CLUSTER_TOPICS_TTL`]) has it; else asked for it alone.
    async fn existing_partitions(&mut self, topic: &str) -> Option<i32> {
        let fresh = self
            .cluster_topics
            .as_ref()
            .is_some_and(|(read, _)| read.elapsed() < CLUSTER_TOPICS_TTL);
        if !fresh {
            self.read_cluster_topics().await;
        }
        let listed = self
            .cluster_topics
            .as_ref()
            .and_then(|(_, all)| all.get(topic).copied());
        match listed {
            Some(count) => Some(count),
            // Created since the list was read, or missing.
            None => self.topic_partitions(topic).await,
        }
    }

    /// The topic's partition count, or `None` when it does not exist (or the broker does
    /// not answer).
    async fn topic_partitions(&self, topic: &str) -> Option<i32> {
        self.partition_counts_of(Some(topic.to_owned()))
            .await?
            .remove(topic)
    }

    /// See [`partition_counts`].
    async fn partition_counts_of(&self, topic: Option<String>) -> Option<HashMap<String, i32>> {
        partition_counts(self.producer.clone(), topic).await
    }

    /// How `topic` is created: `topic.creation.*` applies to the routed topics, not to the
    /// dead-letter topic (a compacted dead-letter topic would lose the rows it keeps); the
    /// relay's own configs unless those name them.
    fn creation_of(&self, topic: &str) -> TopicSpec {
        let none = Vec::new();
        let (partitions, replication_factor, theirs) = if *topic == *self.settings.dead_letter_topic
        {
            (self.partitions, self.replication_factor, &none[..])
        } else {
            self.settings
                .topic_creation
                .for_topic(topic, self.partitions, self.replication_factor)
        };
        let configs = topic_configs(replication_factor)
            .into_iter()
            .filter(|(k, _)| !theirs.iter().any(|(t, _)| t == k))
            .map(|(k, v)| (k.to_owned(), v))
            .chain(theirs.iter().cloned())
            .collect();
        TopicSpec {
            partitions,
            replication_factor,
            configs,
            theirs: theirs.to_vec(),
        }
    }

    /// Records `topic`'s partition count; a change under a running relay is logged (its keys
    /// move partitions).
    fn learned_partitions(&mut self, topic: &Arc<str>, count: i32) {
        self.latest_counts.insert(topic.clone(), count);
        if let Some(before) = self.partition_counts.insert(topic.clone(), count) {
            if before != count {
                tracing::warn!(topic = &**topic, before, now = count, "the topic's partition count changed: keys now map to other partitions (Kafka keeps no per-key order across such a change); with --exactly-once the relay keeps choosing partitions with the count it started with until the next session");
                self.partition_counts.insert(topic.clone(), before);
            }
        }
    }

    /// `topic`, known to exist.
    fn ready(&self, topic: &str) -> Topic {
        Topic::Ready {
            partitions: self.partition_counts.get(topic).copied(),
            rebuild: self.wanted_batch_size.is_some(),
        }
    }

    /// Creates `topic` unless this producer already saw it. Topics that exist need no
    /// CreateTopics permission (and some brokers do not implement that API at all).
    pub(super) async fn ensure_topic_now(&mut self, topic: &Arc<str>) -> Result<Topic, RelayError> {
        if self.known_topics.contains(topic) {
            if self.rules.due(topic).is_some() {
                self.refresh_due_topics().await;
            }
            return Ok(self.ready(topic));
        }
        if let Some(reason) = self.refused_topics.get(topic) {
            return Ok(Topic::Refused(reason.clone()));
        }
        if let Some(count) = self.existing_partitions(topic).await {
            self.learned_partitions(topic, count);
            self.learn_limit(topic, false).await;
            self.known_topics.insert(topic.clone());
            return Ok(self.ready(topic));
        }
        let spec = self.creation_of(topic);
        let partitions = spec.partitions;
        let created = match create_topic(&self.admin, topic, &spec).await {
            Ok(created) => created,
            Err(TopicRefusal::ThisTopic(reason)) => {
                self.refused_topics.insert(topic.clone(), reason.clone());
                return Ok(Topic::Refused(reason));
            }
            Err(TopicRefusal::Fatal(e)) => return Err(e),
        };
        // A topic this relay created has the count it asked for; read back the count the
        // broker chose (asked for its default, -1) or another creator's.
        let known = created && partitions > 0;
        if known {
            self.learned_partitions(topic, partitions);
        }
        for _ in 0..(if known { 0 } else { 50 }) {
            if let Some(count) = self.topic_partitions(topic).await {
                self.learned_partitions(topic, count);
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.learn_limit(topic, true).await;
        self.known_topics.insert(topic.clone());
        Ok(self.ready(topic))
    }

    /// Makes sure `topic` exists in a task of its own: `None` while that is under way,
    /// then whether it does (the reason when not; the next call tries again). Once it does,
    /// [`Self::ensure_topic`] finds it without waiting for a CreateTopics request, which may
    /// take a minute while the cluster has no controller.
    pub(super) fn ensure_topic_in_background_now(
        &mut self,
        topic: &Arc<str>,
    ) -> Option<Result<(), String>> {
        if self.known_topics.contains(topic) {
            return Some(Ok(()));
        }
        if let Some(reason) = self.refused_topics.get(topic) {
            return Some(Err(reason.clone()));
        }
        if let Some(task) = self.creating.get_mut(topic) {
            let result = match task.try_recv() {
                Err(tokio::sync::oneshot::error::TryRecvError::Empty) => return None,
                Ok(result) => result,
                Err(tokio::sync::oneshot::error::TryRecvError::Closed) => {
                    Err(TopicRefusal::Fatal(RelayError::BrokerUnavailable(anyhow!(
                        "creating topic {topic}: the task ended without an answer"
                    ))))
                }
            };
            self.creating.remove(topic);
            return Some(result.map_err(|refusal| match refusal {
                TopicRefusal::ThisTopic(reason) => {
                    self.refused_topics.insert(topic.clone(), reason.clone());
                    reason
                }
                TopicRefusal::Fatal(e) => e.to_string(),
            }));
        }
        let (tell, answer) = tokio::sync::oneshot::channel();
        self.creating.insert(topic.clone(), answer);
        let spec = self.creation_of(topic);
        let (admin, producer, topic) = (self.admin.clone(), self.producer.clone(), topic.clone());
        tokio::spawn(async move {
            let _ = tell.send(make_sure_of(&admin, producer, &topic, &spec).await);
        });
        None
    }
}

/// A topic of `cleanup.policy` `policy`, created when missing.
pub async fn create_topic_if_missing(
    client: &rdkafka::ClientConfig,
    topic: &str,
    partitions: i32,
    replication: i32,
    policy: &str,
) -> Result<(), String> {
    let admin: rdkafka::admin::AdminClient<rdkafka::client::DefaultClientContext> = client
        .create()
        .map_err(|e| format!("Kafka admin client: {e}"))?;
    let new = rdkafka::admin::NewTopic::new(
        topic,
        partitions,
        rdkafka::admin::TopicReplication::Fixed(replication),
    )
    .set("cleanup.policy", policy);
    let timeout = std::time::Duration::from_secs(30);
    let options = rdkafka::admin::AdminOptions::new()
        .operation_timeout(Some(timeout))
        .request_timeout(Some(timeout));
    let results = tokio::time::timeout(timeout, admin.create_topics([&new], &options))
        .await
        .map_err(|_| format!("creating {topic}: no answer within {} s", timeout.as_secs()))?
        .map_err(|e| format!("creating {topic}: {e}"))?;
    for result in results {
        match result {
            Ok(_) => tracing::info!(%topic, "created"),
            Err((_, rdkafka::types::RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((_, code)) => return Err(format!("creating {topic}: {code}")),
        }
    }
    Ok(())
}
