//! `outbox-relay connect`: a Kafka Connect worker as far as deploy scripts, UIs and health
//! checks can tell. It speaks the part of Connect's REST API they use and runs each
//! registered Debezium PostgreSQL connector (with its Outbox EventRouter) as a relay
//! pipeline in this process: several connectors, several slots, one process.

pub mod auth;
pub mod cluster;
pub mod herder;
pub mod listeners;
pub mod rest;
pub mod store;

use crate::debezium::read_file;
use herder::{Herder, Target};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Debug, clap::Args)]
pub struct ConnectArgs {
    /// The Kafka Connect worker configuration (`connect-distributed.properties` or
    /// `connect-standalone.properties`): bootstrap.servers, converters, producer.*,
    /// config providers, listeners.
    #[arg(long, value_name = "FILE")]
    pub worker_config: Option<PathBuf>,
    /// Where the REST API listens, in place of the worker's `listeners`: HOST:PORT (plain
    /// HTTP) or http(s)://HOST:PORT [default: the worker's `listeners`, else http://:8083].
    #[arg(long, value_name = "HOST:PORT")]
    pub listen: Option<String>,
    /// Where /metrics (every connector's series, labelled by slot), /health and /ready (every
    /// started connector streaming or standing by, none failed) are served.
    #[arg(long, value_name = "HOST:PORT", default_value = crate::config::defaults::METRICS_ADDRESS)]
    pub metrics_address: String,
    /// Connector configurations (JSON as POSTed to Connect, or .properties) to run from the
    /// start, as `connect-standalone worker.properties connector.properties…` does.
    #[arg(value_name = "CONNECTOR_CONFIG")]
    pub connectors: Vec<PathBuf>,
}

/// Serves until `shutdown` turns true, then stops every connector.
pub async fn run(args: ConnectArgs, mut shutdown: tokio::sync::watch::Receiver<bool>) -> ExitCode {
    let raw_worker = match &args.worker_config {
        Some(path) => match read_file(path) {
            Ok(w) => Some(w),
            Err(e) => {
                eprintln!("error: worker-config: {e}");
                return ExitCode::from(2);
            }
        },
        None => None,
    };
    // The worker's own settings (listeners, TLS, authentication, its clients) with its config
    // providers expanded; connectors expand the raw file again with their own configuration.
    let (worker, worker_hidden) = match raw_worker
        .clone()
        .map(crate::debezium::expand_worker)
        .transpose()
    {
        Ok(Some((w, hidden))) => (w.entries, hidden),
        Ok(None) => Default::default(),
        Err(e) => {
            eprintln!("error: worker-config: {e}");
            return ExitCode::from(2);
        }
    };
    // Its expanded values never reach a log line, and errors from here on hide them.
    worker_hidden.hide_in_logs();
    let hide = |e: &dyn std::fmt::Display| worker_hidden.apply(&e.to_string());
    let servers = match bind(&worker, args.listen.as_deref()).await {
        Ok(servers) => servers,
        Err(e) => {
            eprintln!("error: worker-config: {}", hide(&e));
            return ExitCode::from(2);
        }
    };
    let auth = match auth::from_worker(&worker, std::env::var("KAFKA_OPTS").ok().as_deref()) {
        Ok(auth) => auth.map(Arc::new),
        Err(e) => {
            eprintln!("error: worker-config: {}", hide(&e));
            return ExitCode::from(2);
        }
    };
    if auth.is_none() {
        tracing::warn!(
            "the REST API has no authentication (rest.extension.classes is not set): anyone who reaches \
             its port can manage connectors; bind it to a trusted network or turn on BasicAuthSecurityRestExtension"
        );
    }
    let bound: Vec<_> = servers
        .iter()
        .map(|s| (s.listener.clone(), s.local))
        .collect();
    let worker_id = listeners::advertised(&worker, &bound);
    // The worker's own Kafka client settings (its stores read once), for the config topic and
    // the cluster id alike.
    let client = match crate::debezium::worker_client(&worker) {
        Ok(client) => client,
        Err(e) => {
            eprintln!("error: worker-config: {}", hide(&e));
            return ExitCode::from(2);
        }
    };
    let store = if raw_worker.is_some() {
        match store::ConfigTopic::open(&worker, client.as_ref()).await {
            Ok(store) => store,
            Err(e) => {
                eprintln!("error: worker-config: {}", hide(&e));
                return ExitCode::from(2);
            }
        }
    } else {
        None
    };
    // A cluster of workers (group.id and the config topic): the group's leader spreads the
    // connectors, and the status topic holds their states for every worker to answer from.
    let cluster_settings = match cluster::settings(&worker) {
        Ok(Some(settings)) if store.is_some() => {
            match cluster::transport::Security::of_worker(
                &worker,
                client.as_ref().expect("a config topic has a client"),
            ) {
                Err(why) => {
                    tracing::warn!(
                        "{why}: this worker runs every connector, standing by for the slots another \
                         worker streams from, and answers for itself"
                    );
                    None
                }
                Ok(security) => Some((settings, security)),
            }
        }
        Ok(_) => None,
        Err(e) => {
            eprintln!("error: worker-config: {}", hide(&e));
            return ExitCode::from(2);
        }
    };
    let status_stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut status_reader = None;
    let cluster = match (&cluster_settings, client.as_ref()) {
        (Some((settings, _)), Some(client)) => {
            let status = match cluster::status::StatusTopic::open(
                client,
                &settings.status_topic,
                settings.status_partitions,
                settings.status_replication,
            )
            .await
            {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("error: worker-config: status.storage.topic: {}", hide(&e));
                    return ExitCode::from(2);
                }
            };
            match status.follow(status_stop.clone()) {
                Ok(thread) => status_reader = Some(thread),
                Err(e) => {
                    eprintln!("error: reading status.storage.topic: {}", hide(&e));
                    return ExitCode::FAILURE;
                }
            }
            Some(herder::Cluster::new(settings.clone(), status))
        }
        _ => None,
    };
    let herder = Arc::new(Herder::new(
        raw_worker,
        client.clone(),
        worker_id.clone(),
        store,
        cluster,
    ));
    // A reset of a connector's topics through any worker reaches the one running it as the
    // status topic is read.
    if let Some(cluster) = herder.cluster() {
        let weak = Arc::downgrade(&herder);
        cluster.status.on_topics_reset(Box::new(move |connector| {
            if let Some(herder) = weak.upgrade() {
                herder.topics_reset(connector);
            }
        }));
    }
    // The cluster id `GET /` reports, looked up once the brokers answer.
    // A thread of its own: the process never waits for it at exit.
    std::thread::spawn({
        let herder = herder.clone();
        move || {
            for _ in 0..60 {
                if herder.cluster_id().is_some() {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
        }
    });
    match crate::ops::http::serve(&args.metrics_address, herder.clone() as _).await {
        Ok(address) => tracing::info!(%address, "serving /metrics, /health and /ready"),
        Err(e) => {
            eprintln!("error: {}", hide(&e));
            return ExitCode::from(2);
        }
    }
    match herder.restore().await {
        Ok(0) => {}
        Ok(n) => tracing::info!(connectors = n, "restored from the config topic"),
        Err(e) => {
            eprintln!("error: reading the config topic: {}", hide(&e));
            return ExitCode::FAILURE;
        }
    }
    // The group membership and the status writer, once the registrations are known.
    let (member_stop, member_stop_rx) = tokio::sync::watch::channel(false);
    let mut member = None;
    if let (Some((settings, security)), Some(cluster)) = (cluster_settings, herder.cluster()) {
        let bootstrap: Vec<String> = worker
            .get("bootstrap.servers")
            .map(|b| {
                b.split(',')
                    .map(|s| s.trim().to_owned())
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        tracing::info!(group = %settings.group_id, "joining the cluster's group");
        member = Some(tokio::spawn(cluster::member::run(
            settings,
            security,
            bootstrap,
            worker_id.clone(),
            herder.clone() as Arc<dyn cluster::member::Assignee>,
            cluster.handle.clone(),
            member_stop_rx,
        )));
        if let (Some(topic), Some(client)) = (&cluster.settings.offset_topic, client.as_ref()) {
            let settings = &cluster.settings;
            match cluster::offsets::OffsetTopic::open(
                client,
                topic,
                settings.offset_partitions,
                settings.offset_replication,
            )
            .await
            {
                Ok(offsets) => {
                    let herder = herder.clone();
                    let every = settings
                        .offset_flush_interval
                        .max(std::time::Duration::from_millis(100));
                    let mut stop = shutdown.clone();
                    tokio::spawn(async move {
                        loop {
                            tokio::select! {
                                _ = tokio::time::sleep(every) => {}
                                _ = stop.wait_for(|s| *s) => return,
                            }
                            offsets.flush(herder.positions()).await;
                        }
                    });
                }
                Err(e) => {
                    eprintln!("error: worker-config: offset.storage.topic: {}", hide(&e));
                    return ExitCode::from(2);
                }
            }
        }
        let herder = herder.clone();
        let mut stop = shutdown.clone();
        tokio::spawn(async move {
            loop {
                herder.publish_status().await;
                tokio::select! {
                    _ = tokio::time::sleep(std::time::Duration::from_millis(250)) => {}
                    _ = stop.wait_for(|s| *s) => return,
                }
            }
        });
    }
    for path in &args.connectors {
        let created = read_file(path).and_then(|raw| {
            let name = raw
                .name
                .clone()
                .or_else(|| raw.entries.get("name").cloned())
                .ok_or_else(|| format!("{}: the connector has no name", path.display()))?;
            herder
                .create(&name, raw.entries, Target::Started)
                .map_err(|r| format!("{}: {}", path.display(), r.message))
        });
        if let Err(e) = created {
            eprintln!("error: {}", hide(&e));
            return ExitCode::from(2);
        }
    }
    let mut served = Vec::new();
    for server in servers {
        let app = rest::routes(herder.clone(), server.listener.serves, auth.clone());
        let stop = {
            let mut shutdown = shutdown.clone();
            async move {
                let _ = shutdown.wait_for(|stop| *stop).await;
            }
        };
        let scheme = match server.listener.scheme {
            listeners::Scheme::Http => "http",
            listeners::Scheme::Https => "https",
        };
        tracing::info!(
            address = %server.local,
            scheme,
            serves = ?server.listener.serves,
            "Kafka Connect REST API listening"
        );
        served.push(match server.tls {
            None => tokio::spawn(async move {
                axum::serve(server.tcp, app)
                    .with_graceful_shutdown(stop)
                    .await
            }),
            Some(config) => {
                match listeners::TlsListener::new(server.tcp, config) {
                    Ok(tls) => tokio::spawn(async move {
                        axum::serve(tls, app).with_graceful_shutdown(stop).await
                    }),
                    Err(e) => {
                        eprintln!("error: REST API: {e}");
                        herder.shutdown().await;
                        return ExitCode::FAILURE;
                    }
                }
            }
        });
    }
    let _ = shutdown.wait_for(|stop| *stop).await;
    // Its connectors written UNASSIGNED, out of the group (the others take its connectors
    // after scheduled.rebalance.max.delay.ms), then its pipelines stopped.
    herder.leaving().await;
    let _ = member_stop.send(true);
    if let Some(mut member) = member {
        if tokio::time::timeout(std::time::Duration::from_secs(5), &mut member)
            .await
            .is_err()
        {
            member.abort();
        }
    }
    status_stop.store(true, std::sync::atomic::Ordering::Relaxed);
    if let Some(reader) = status_reader {
        let _ = tokio::task::spawn_blocking(move || reader.join()).await;
    }
    let mut failed = None;
    for server in served {
        match server.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failed = Some(e.to_string()),
            Err(e) => failed = Some(e.to_string()),
        }
    }
    herder.shutdown().await;
    match failed {
        None => ExitCode::SUCCESS,
        Some(e) => {
            eprintln!("error: REST API: {e}");
            ExitCode::FAILURE
        }
    }
}

/// One bound listener, with its TLS configuration when it is `https`.
struct Server {
    listener: listeners::Listener,
    tcp: tokio::net::TcpListener,
    local: std::net::SocketAddr,
    tls: Option<Arc<rustls::ServerConfig>>,
}

/// Every configured listener, bound (TLS configured first: a listener that cannot be served
/// as configured is not served at all).
async fn bind(
    worker: &BTreeMap<String, String>,
    listen: Option<&str>,
) -> Result<Vec<Server>, String> {
    let mut out = Vec::new();
    for listener in listeners::configured(worker, listen)? {
        let tls = match listener.scheme {
            listeners::Scheme::Https => Some(listeners::tls_config(worker, listener.serves)?),
            listeners::Scheme::Http => None,
        };
        let tcp = tokio::net::TcpListener::bind(&listener.address)
            .await
            .map_err(|e| format!("listen {}: {e}", listener.address))?;
        let local = tcp.local_addr().map_err(|e| e.to_string())?;
        out.push(Server {
            listener,
            tcp,
            local,
            tls,
        });
    }
    Ok(out)
}
