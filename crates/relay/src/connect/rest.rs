//! The part of Kafka Connect's REST API that deploy scripts, UIs and health checks use
//! (`ConnectorsResource`, `ConnectorPluginsResource`, `RootResource`), answering with
//! Connect's JSON shapes and its error body `{"error_code": …, "message": …}`.

use super::herder::{Herder, Info, Refusal, State as ConnectorState, Status, Target};
use super::listeners::Serves;
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

const POSTGRES_CONNECTOR: &str = "io.debezium.connector.postgresql.PostgresConnector";

/// The largest request body the API reads (a connector configuration is a few KiB).
pub const MAX_BODY: usize = 1 << 20;

/// Which endpoints one listener serves, and whether requests must authenticate.
pub fn routes(
    herder: Arc<Herder>,
    serves: Serves,
    auth: Option<Arc<super::auth::BasicAuth>>,
) -> Router {
    let mut router = Router::new();
    if serves != Serves::Admin {
        router = router.merge(api());
    }
    if serves != Serves::Api {
        router = router.merge(admin());
    }
    let mut router = router.with_state(herder);
    if let Some(auth) = auth {
        // After routing, as Connect's filter: an unknown path is a 404 either way.
        router = router.route_layer(middleware::from_fn_with_state(auth, authenticate));
    }
    router
        .fallback(|| async { error(404, "HTTP 404 Not Found") })
        .method_not_allowed_fallback(|| async { error(405, "HTTP 405 Method Not Allowed") })
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(middleware::from_fn(connect_errors))
}

fn api() -> Router<Arc<Herder>> {
    Router::new()
        .route("/", get(root))
        .route("/openapi.json", get(openapi))
        .route("/connector-plugins", get(plugins))
        .route("/connector-plugins/{class}/config/validate", put(validate))
        .route("/connector-plugins/{class}/config", get(plugin_config))
        .route("/connectors", get(list).post(create))
        // The tutorial POSTs to `/connectors/` (Jersey ignores the trailing slash).
        .route("/connectors/", get(list).post(create))
        .route("/connectors/{name}", get(info).delete(delete))
        .route(
            "/connectors/{name}/config",
            get(config).put(put_config).patch(patch_config),
        )
        .route("/connectors/{name}/status", get(status))
        .route("/connectors/{name}/tasks", get(tasks))
        .route("/connectors/{name}/tasks/{task}/status", get(task_status))
        .route(
            "/connectors/{name}/tasks/{task}/restart",
            post(restart_task),
        )
        .route("/connectors/{name}/pause", put(pause))
        .route("/connectors/{name}/resume", put(resume))
        .route("/connectors/{name}/stop", put(stop))
        .route("/connectors/{name}/restart", post(restart))
        .route("/connectors/{name}/topics", get(topics))
        .route("/connectors/{name}/topics/reset", put(reset_topics))
        .route(
            "/connectors/{name}/offsets",
            get(offsets).patch(alter_offsets).delete(reset_offsets),
        )
        .route("/health", get(health))
}

fn admin() -> Router<Arc<Herder>> {
    Router::new()
        .route("/admin/loggers", get(loggers))
        .route("/admin/loggers/{name}", get(logger).put(set_logger))
}

/// `JaasBasicAuthFilter`: 401 with Connect's text unless the request carries a known user
/// and its password.
async fn authenticate(
    State(auth): State<Arc<super::auth::BasicAuth>>,
    request: Request,
    next: Next,
) -> Response {
    let header = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.as_bytes());
    if auth.allows(header) {
        next.run(request).await
    } else {
        (StatusCode::UNAUTHORIZED, super::auth::UNAUTHORIZED).into_response()
    }
}

/// Every error in Connect's shape (`{"error_code", "message"}`): the router's and the
/// extractors' own answers (unknown path, wrong method, a body that is not JSON, too big,
/// or of the wrong type, a path parameter that does not parse) are plain text; a handler
/// that panics answers 500 instead of dropping the connection. The 401 keeps Connect's text.
async fn connect_errors(request: Request, next: Next) -> Response {
    use futures::FutureExt;
    let response = match std::panic::AssertUnwindSafe(next.run(request))
        .catch_unwind()
        .await
    {
        Ok(response) => response,
        Err(_) => return error(500, "the request failed inside the worker; see its log"),
    };
    // A body of the wrong type (axum's 422) is a bad request, as Connect has no 422.
    let status = match response.status() {
        StatusCode::UNPROCESSABLE_ENTITY => StatusCode::BAD_REQUEST,
        status => status,
    };
    let json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if json
        || status == StatusCode::UNAUTHORIZED
        || !(status.is_client_error() || status.is_server_error())
    {
        return response;
    }
    let text = axum::body::to_bytes(response.into_body(), 64 << 10)
        .await
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&text).trim().to_owned();
    let standard = format!(
        "HTTP {} {}",
        status.as_u16(),
        status.canonical_reason().unwrap_or_default()
    );
    let message = match status {
        StatusCode::NOT_FOUND
        | StatusCode::METHOD_NOT_ALLOWED
        | StatusCode::UNSUPPORTED_MEDIA_TYPE => standard,
        StatusCode::PAYLOAD_TOO_LARGE => format!("Request body larger than {MAX_BODY} bytes"),
        _ if text.is_empty() => standard,
        _ => text,
    };
    error(status.as_u16(), message)
}

/// `GET /openapi.json`: the API this worker serves, for clients and fuzzers.
async fn openapi() -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        include_str!("openapi.json"),
    )
        .into_response()
}

/// `GET /health` (KIP-1017): the worker answers once it has restored its connectors from
/// the config topic, which is before the REST API listens. Per-connector readiness is on the
/// metrics address's `/ready`.
async fn health() -> Json<Value> {
    Json(json!({
        "status": "healthy",
        "message": "Worker has completed startup and is ready to handle requests.",
    }))
}

/// `GET /admin/loggers` (`LoggingResource.listLoggers`): the root logger and every logger
/// whose level was set, `{"level", "last_modified"}` each.
async fn loggers() -> Json<Value> {
    Json(json!(crate::ops::loggers::current().all()))
}

async fn logger(Path(name): Path<String>) -> Response {
    match crate::ops::loggers::current().level(&name) {
        Some(level) => Json(json!(level)).into_response(),
        None => error(404, format!("Logger {name} not found.")),
    }
}

#[derive(serde::Deserialize)]
struct Scope {
    scope: Option<String>,
}

/// `PUT /admin/loggers/{name}` with `{"level": …}`: this worker's loggers under the name
/// (200, the loggers changed), or with `?scope=cluster` every worker's (204).
async fn set_logger(
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
    Query(scope): Query<Scope>,
    Json(body): Json<Map<String, Value>>,
) -> Response {
    let Some(text) = body.get("level").and_then(Value::as_str) else {
        return error(
            400,
            "Desired 'level' parameter was not specified in request.",
        );
    };
    let Some(level) = crate::ops::loggers::parse_level(text) else {
        return error(404, format!("invalid log level '{text}'."));
    };
    // Connect takes an unknown scope for `worker` (and logs it).
    let cluster = scope
        .scope
        .as_deref()
        .is_some_and(|s| s.eq_ignore_ascii_case("cluster"));
    if cluster {
        match herder.set_cluster_logger_level(&name, text).await {
            Ok(()) => StatusCode::NO_CONTENT.into_response(),
            Err(refusal) => refusal.into_response(),
        }
    } else {
        Json(json!(crate::ops::loggers::set(&name, level))).into_response()
    }
}

/// Connect's error body.
fn error(status: u16, message: impl Into<String>) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        code,
        Json(json!({ "error_code": status, "message": message.into() })),
    )
        .into_response()
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        error(self.status, self.message)
    }
}

type Result<T> = std::result::Result<T, Refusal>;

async fn root(State(herder): State<Arc<Herder>>) -> Json<Value> {
    let cluster = herder.known_cluster_id();
    Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "commit": option_env!("OUTBOX_RELAY_GIT_SHA").unwrap_or("unknown"),
        "kafka_cluster_id": cluster,
    }))
}

#[derive(serde::Deserialize)]
struct PluginsQuery {
    #[serde(rename = "connectorsOnly")]
    connectors_only: Option<bool>,
}

/// `GET /connector-plugins` (`ConnectorPluginsResource.listConnectorPlugins`): the connector;
/// with `connectorsOnly=false` also every transformation, predicate and converter a
/// configuration may name, from the registries the configuration is parsed with.
async fn plugins(Query(query): Query<PluginsQuery>) -> Json<Value> {
    let mut plugins: Vec<(&str, String)> = vec![("source", POSTGRES_CONNECTOR.to_owned())];
    if query.connectors_only == Some(false) {
        plugins.extend(
            crate::debezium::CONVERTERS
                .iter()
                .map(|c| ("converter", (*c).to_owned())),
        );
        plugins.extend(
            crate::debezium::HEADER_CONVERTERS
                .iter()
                .map(|c| ("header_converter", (*c).to_owned())),
        );
        plugins.push(("transformation", EVENT_ROUTER.to_owned()));
        plugins.push((
            "transformation",
            "io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent"
                .to_owned(),
        ));
        plugins.extend(
            outbox_router::transforms::supported_classes()
                .into_iter()
                .map(|c| ("transformation", c)),
        );
        plugins.extend(
            crate::debezium::PREDICATES
                .iter()
                .map(|c| ("predicate", (*c).to_owned())),
        );
    }
    Json(Value::Array(
        plugins
            .into_iter()
            .map(|(kind, class)| {
                json!({ "class": class, "type": kind, "version": env!("CARGO_PKG_VERSION") })
            })
            .collect(),
    ))
}

const EVENT_ROUTER: &str = "io.debezium.transforms.outbox.EventRouter";

/// `GET /connector-plugins/{class}/config` (KIP-769): the definitions (Connect's
/// `ConfigKeyInfo`) of the connector's options, or of the EventRouter's, from the option
/// catalog the configurations are read with. Another plugin's options are not described
/// here (404, saying so), a class nobody knows neither (404, as Connect answers).
async fn plugin_config(Path(class): Path<String>) -> Response {
    use crate::debezium::Applies;
    let short = |c: &str| c.rsplit('.').next().unwrap_or(c).to_owned();
    let wanted: &[Applies] = if class == POSTGRES_CONNECTOR
        || short(&class) == short(POSTGRES_CONNECTOR)
        || short(&class) == "Postgres"
    {
        &[
            Applies::Connector,
            Applies::ConnectorOrWorker,
            Applies::Relay,
        ]
    } else if class == EVENT_ROUTER || class == "EventRouter" {
        &[Applies::EventRouter]
    } else if crate::debezium::CONVERTERS.contains(&class.as_str())
        || crate::debezium::HEADER_CONVERTERS.contains(&class.as_str())
        || crate::debezium::PREDICATES.contains(&class.as_str())
        || outbox_router::transforms::lookup(&class).is_some()
    {
        return error(
            404,
            format!("outbox-relay applies {class} but does not describe its options here; see docs/debezium-compatibility.md"),
        );
    } else {
        return error(404, format!("Unknown plugin {class}."));
    };
    let configs: Vec<Value> = crate::debezium::CATALOG
        .iter()
        .filter(|spec| wanted.contains(&spec.applies))
        .enumerate()
        .map(|(order, spec)| {
            config_key_info(
                spec.name,
                spec.applies.group(),
                spec.default,
                &format!("{}; outbox-relay: {}", spec.doc, spec.treatment_text()),
                order,
            )
        })
        .collect();
    Json(Value::Array(configs)).into_response()
}

/// Connect's `ConfigKeyInfo` of an option.
fn config_key_info(
    name: &str,
    group: &str,
    default: Option<&str>,
    documentation: &str,
    order: usize,
) -> Value {
    json!({
        "name": name,
        "type": "STRING",
        "required": false,
        "default_value": default,
        "importance": "MEDIUM",
        "documentation": documentation,
        "group": group,
        "width": "MEDIUM",
        "display_name": name,
        "dependents": [],
        "order": order,
    })
}

/// A JSON object of strings, as Connect reads a configuration (numbers and booleans are
/// taken as their text).
fn string_map(value: &Map<String, Value>) -> BTreeMap<String, String> {
    value
        .iter()
        .filter_map(|(k, v)| {
            let text = match v {
                Value::String(s) => s.clone(),
                Value::Null => return None,
                other => other.to_string(),
            };
            Some((k.clone(), text))
        })
        .collect()
}

async fn validate(
    State(herder): State<Arc<Herder>>,
    Path(class): Path<String>,
    Json(body): Json<Map<String, Value>>,
) -> Response {
    let config = string_map(&body);
    // ConnectorPluginsResource.validateConfigs: the body names the class; the path must
    // agree with it (a trailing "Connector" aside).
    let Some(included) = config.get("connector.class").cloned() else {
        return error(
            400,
            format!("Connector config {config:?} contains no connector type"),
        );
    };
    let normalized = |c: &str| c.strip_suffix("Connector").unwrap_or(c).to_owned();
    if !normalized(&included).ends_with(&normalized(&class)) {
        return error(
            400,
            format!("Included connector type {included} does not match request type {class}"),
        );
    }
    let name = config.get("name").cloned().unwrap_or_default();
    // As Debezium's connector: the database is asked only once the options are valid.
    let (errors, database) = match herder.validate(&name, &config) {
        Ok(settings) => (Vec::new(), database_errors(&settings).await),
        Err(errors) => (errors, Vec::new()),
    };
    // One entry per option (ConfigValueInfo), each error under the option it names first
    // (`key: …` or `key=value …`); an error naming no given option gets an entry of its own.
    let owner = |e: &str| -> String {
        e.split([':', '=', ' '])
            .next()
            .unwrap_or_default()
            .trim()
            .to_owned()
    };
    // Connect shows the value of an option of type PASSWORD as "[hidden]".
    let mut values: BTreeMap<String, (Option<String>, Vec<String>)> = config
        .iter()
        .map(|(k, v)| (k.clone(), (Some(shown_value(k, v)), Vec::new())))
        .collect();
    for e in &errors {
        values
            .entry(owner(e))
            .or_insert_with(|| (None, Vec::new()))
            .1
            .push(e.clone());
    }
    for (option, e) in &database {
        values
            .entry((*option).to_owned())
            .or_insert_with(|| (None, Vec::new()))
            .1
            .push(e.clone());
    }
    // Each option's definition (ConfigKeyInfo) from the option catalog: its group, its
    // default, its documentation line and what outbox-relay does with it; null for an option
    // outbox-relay does not know.
    let configs: Vec<Value> = values
        .into_iter()
        .enumerate()
        .map(|(order, (key, (value, errors)))| {
            let definition = match crate::debezium::option_doc(&key, &config) {
                Some(d) => config_key_info(
                    &key,
                    d.group,
                    d.default,
                    &format!("{}; outbox-relay: {}", d.doc, d.treatment),
                    order,
                ),
                None => Value::Null,
            };
            json!({
                "definition": definition,
                "value": { "name": key, "value": value, "recommended_values": [], "errors": errors, "visible": true },
            })
        })
        .collect();
    Json(json!({
        "name": included,
        "error_count": errors.len() + database.len(),
        "groups": [],
        "configs": configs,
    }))
    .into_response()
}

/// What the preflight finds wrong in the database for `settings`, each under the connector
/// option it concerns (Debezium files connection problems under `database.hostname`).
async fn database_errors(settings: &crate::config::Settings) -> Vec<(&'static str, String)> {
    use crate::source::preflight::{self, Concern, Finding};
    const WITHIN: std::time::Duration = std::time::Duration::from_secs(20);
    let Ok(findings) = tokio::time::timeout(WITHIN, preflight::postgres(settings)).await else {
        return vec![(
            "database.hostname",
            format!(
                "PostgreSQL did not answer within {} s; check database.hostname and database.port",
                WITHIN.as_secs()
            ),
        )];
    };
    findings
        .into_iter()
        .filter_map(|finding| match finding {
            Finding::Holds(_) => None,
            Finding::Fails(concern, problem) => {
                let option = match concern {
                    Concern::Connection | Concern::Server | Concern::Kafka => "database.hostname",
                    Concern::Role => "database.user",
                    Concern::Tables => "table.include.list",
                    Concern::Publication => "publication.name",
                    Concern::Slot => "slot.name",
                };
                // Without a value a config provider expanded (a host, a user).
                Some((option, hidden(settings, &problem.to_string())))
            }
        })
        .collect()
}

/// `text` without the values `settings`' config providers expanded.
fn hidden(settings: &crate::config::Settings, text: &str) -> String {
    match &settings.preset {
        Some(preset) => preset.hidden.apply(text),
        None => text.to_owned(),
    }
}

/// An option's value as validate shows it: `[hidden]` for a password, a schema registry URL
/// with the password of its user-info hidden (basic.auth.credentials.source=URL).
fn shown_value(key: &str, value: &str) -> String {
    if is_password(key) {
        "[hidden]".to_owned()
    } else if key.ends_with("schema.registry.url") {
        crate::registry_client::shown_url(value)
    } else {
        value.to_owned()
    }
}

/// Options of Kafka's type PASSWORD: `database.password`, `*.ssl.*.password`,
/// `sasl.jaas.config`, `ssl.keystore.key` and the like.
fn is_password(key: &str) -> bool {
    crate::secret::is_secret_key(key)
}

async fn list(State(herder): State<Arc<Herder>>, query: axum::extract::RawQuery) -> Json<Value> {
    // `expand` may repeat (`?expand=status&expand=info`).
    let expand: Vec<String> = query
        .0
        .unwrap_or_default()
        .split('&')
        .filter_map(|kv| kv.strip_prefix("expand="))
        .map(str::to_owned)
        .collect();
    let names = herder.names();
    if expand.is_empty() {
        return Json(json!(names));
    }
    let mut out = Map::new();
    for name in names {
        let mut entry = Map::new();
        if expand.iter().any(|e| e == "status") {
            if let Ok(s) = herder.status(&name) {
                entry.insert("status".into(), status_json(&s));
            }
        }
        if expand.iter().any(|e| e == "info") {
            if let Ok(i) = herder.info(&name) {
                entry.insert("info".into(), info_json(&i));
            }
        }
        out.insert(name, Value::Object(entry));
    }
    Json(Value::Object(out))
}

async fn create(State(herder): State<Arc<Herder>>, Json(body): Json<Value>) -> Result<Response> {
    let name = body["name"]
        .as_str()
        .filter(|n| !n.trim().is_empty())
        .ok_or(Refusal {
            status: 400,
            message: "Connector name must be a non-empty string".into(),
        })?
        .to_owned();
    let config = body["config"].as_object().cloned().unwrap_or_default();
    let initial = match body["initial_state"]
        .as_str()
        .map(str::to_ascii_uppercase)
        .as_deref()
    {
        None | Some("RUNNING") => Target::Started,
        Some("PAUSED") => Target::Paused,
        Some("STOPPED") => Target::Stopped,
        Some(other) => {
            return Err(Refusal {
                status: 400,
                message: format!("Invalid initial state {other}"),
            })
        }
    };
    let mut config = string_map(&config);
    if let Some(other) = config.get("name").filter(|n| **n != name) {
        return Err(Refusal {
            status: 400,
            message: format!("Connector name configuration ({other}) doesn't match connector name in the URL ({name})"),
        });
    }
    config.remove("name");
    let info = herder.create(&name, config, initial)?;
    herder.persist(&name).await?;
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, format!("/connectors/{name}"))],
        Json(info_json(&info)),
    )
        .into_response())
}

async fn info(State(herder): State<Arc<Herder>>, Path(name): Path<String>) -> Result<Json<Value>> {
    herder.info(&name).map(|i| Json(info_json(&i)))
}

async fn config(
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
) -> Result<Json<BTreeMap<String, String>>> {
    herder.config(&name).map(Json)
}

async fn put_config(
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
    Json(body): Json<Map<String, Value>>,
) -> Result<Response> {
    let mut config = string_map(&body);
    if let Some(other) = config.get("name").filter(|n| **n != name) {
        return Err(Refusal {
            status: 400,
            message: format!("Connector name configuration ({other}) doesn't match connector name in the URL ({name})"),
        });
    }
    config.remove("name");
    let (created, info) = herder.put(&name, config, None)?;
    herder.persist(&name).await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(info_json(&info))).into_response())
}

/// `PATCH …/config`: the given keys replace the stored ones; a null removes one.
async fn patch_config(
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
    Json(body): Json<Map<String, Value>>,
) -> Result<Json<Value>> {
    let mut config = herder.config(&name)?;
    for (key, value) in &body {
        match value {
            Value::Null => {
                config.remove(key);
            }
            Value::String(s) => {
                config.insert(key.clone(), s.clone());
            }
            other => {
                config.insert(key.clone(), other.to_string());
            }
        }
    }
    config.remove("name");
    let (_, info) = herder.put(&name, config, None)?;
    herder.persist(&name).await?;
    Ok(Json(info_json(&info)))
}

async fn delete(State(herder): State<Arc<Herder>>, Path(name): Path<String>) -> Result<StatusCode> {
    herder.delete(&name)?;
    herder.persist(&name).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn status(
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
) -> Result<Json<Value>> {
    herder.status(&name).map(|s| Json(status_json(&s)))
}

/// Connect's `ConnectorInfo` JSON: the configuration and the one task.
fn info_json(info: &Info) -> Value {
    json!({
        "name": info.name,
        "config": info.config,
        "tasks": [{ "connector": info.name, "task": 0 }],
        "type": "source",
    })
}

/// Connect's `ConnectorStateInfo` JSON; a stopped connector has no tasks.
fn status_json(status: &Status) -> Value {
    json!({
        "name": status.name,
        "connector": { "state": status.connector.name(), "worker_id": status.worker_id },
        "tasks": status.task.iter().map(|t| task_json(t, &status.worker_id)).collect::<Vec<_>>(),
        "type": "source",
    })
}

/// Connect's `TaskState` JSON of task 0, with its trace when it failed.
fn task_json(state: &ConnectorState, worker_id: &str) -> Value {
    let mut task = json!({"id": 0, "state": state.name(), "worker_id": worker_id});
    if let ConnectorState::Failed(trace) = state {
        task["trace"] = json!(trace);
    }
    task
}

async fn tasks(State(herder): State<Arc<Herder>>, Path(name): Path<String>) -> Result<Json<Value>> {
    let config = herder.config(&name)?;
    Ok(Json(
        json!([{ "id": { "connector": name, "task": 0 }, "config": config }]),
    ))
}

async fn task_status(
    State(herder): State<Arc<Herder>>,
    Path((name, task)): Path<(String, u32)>,
) -> Result<Json<Value>> {
    herder
        .task_status(&name, task)
        .map(|(state, worker)| Json(task_json(&state, &worker)))
}

async fn pause(State(herder): State<Arc<Herder>>, Path(name): Path<String>) -> Result<StatusCode> {
    herder.set_target(&name, Target::Paused)?;
    herder.persist(&name).await?;
    Ok(StatusCode::ACCEPTED)
}

async fn resume(State(herder): State<Arc<Herder>>, Path(name): Path<String>) -> Result<StatusCode> {
    herder.set_target(&name, Target::Started)?;
    herder.persist(&name).await?;
    Ok(StatusCode::ACCEPTED)
}

async fn stop(State(herder): State<Arc<Herder>>, Path(name): Path<String>) -> Result<StatusCode> {
    herder.set_target(&name, Target::Stopped)?;
    herder.persist(&name).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RestartQuery {
    #[serde(default)]
    include_tasks: bool,
    #[serde(default)]
    only_failed: bool,
}

/// `POST …/restart`: 204 without the query parameters (the connector object restarts),
/// 202 with the new status when tasks are included, as Connect answers.
async fn restart(
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
    Query(query): Query<RestartQuery>,
) -> Result<Response> {
    if !query.include_tasks && !query.only_failed {
        herder.info(&name)?;
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    // RestartPlan.restartConnectorStateInfo: what restarts shows RESTARTING.
    let failed = herder.failed(&name);
    let mut status = status_json(&herder.status(&name)?);
    herder.restart(&name, query.only_failed)?;
    if !query.only_failed || failed {
        status["connector"]["state"] = json!("RESTARTING");
        if query.include_tasks {
            if let Some(tasks) = status["tasks"].as_array_mut() {
                for task in tasks {
                    task["state"] = json!("RESTARTING");
                    task.as_object_mut().map(|t| t.remove("trace"));
                }
            }
        }
    }
    Ok((StatusCode::ACCEPTED, Json(status)).into_response())
}

async fn restart_task(
    State(herder): State<Arc<Herder>>,
    Path((name, task)): Path<(String, u32)>,
) -> Result<StatusCode> {
    herder.task_status(&name, task)?;
    herder
        .restart(&name, false)
        .map(|()| StatusCode::NO_CONTENT)
}

/// Connect does not check that the connector exists here. Topic tracking is not kept yet:
/// the list is empty.
/// `GET /connectors/{n}/topics` (`ActiveTopicsInfo`): the topics it wrote to since it was
/// created or reset.
async fn topics(State(herder): State<Arc<Herder>>, Path(name): Path<String>) -> Response {
    if !herder.worker_flag("topic.tracking.enable") {
        return error(403, "Topic tracking is disabled.");
    }
    let topics = herder.topics(&name);
    Json(json!({ name: { "topics": topics } })).into_response()
}

async fn reset_topics(State(herder): State<Arc<Herder>>, Path(name): Path<String>) -> Response {
    if !herder.worker_flag("topic.tracking.enable") {
        return error(403, "Topic tracking is disabled.");
    }
    if !herder.worker_flag("topic.tracking.allow.reset") {
        return error(403, "Topic tracking reset is disabled.");
    }
    herder.reset_topics(&name);
    StatusCode::ACCEPTED.into_response()
}

/// The slot's confirmed position in Debezium's offset shape (`PostgresPartition`,
/// `PostgresOffsetContext.getOffset`): what a restart resumes from.
async fn offsets(
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
) -> Result<Json<Value>> {
    let (_, settings) = herder.target_and_settings(&name)?;
    let position = slot_position(&settings).await?;
    Ok(Json(offsets_body(&settings, position)))
}

fn offsets_body(settings: &crate::config::Settings, position: Option<u64>) -> Value {
    let server = match &settings.router.output {
        outbox_router::Output::Connect(f) => f.topic_prefix.clone(),
        outbox_router::Output::Raw => String::new(),
    };
    let offsets: Vec<Value> = position
        .map(|lsn| {
            json!({
                "partition": { "server": server },
                "offset": { "lsn": lsn, "lsn_proc": lsn, "lsn_commit": lsn },
            })
        })
        .into_iter()
        .collect();
    json!({ "offsets": offsets })
}

async fn slot_position(settings: &crate::config::Settings) -> Result<Option<u64>> {
    let cdc = settings
        .cdc()
        .ok_or_else(|| Refusal::bad_request("polling mode keeps no offsets".into()))?;
    let unavailable = |e: String| Refusal {
        status: 500,
        message: hidden(settings, &e),
    };
    let client = crate::source::postgres::Database::of(settings)
        .connect()
        .await
        .map_err(|e| unavailable(e.to_string()))?;
    let state = crate::source::catalog::slot_state(&client, &cdc.slot)
        .await
        .map_err(|e| unavailable(crate::error::server_message(&e)))?;
    Ok(state
        .and_then(|s| s.confirmed_flush_lsn)
        .map(|l| l.as_u64()))
}

const NOT_STOPPED: &str = "Connectors must be in the STOPPED state before their offsets can be modified. \
    This can be done for the specified connector by issuing a 'PUT' request to the '/connectors/{name}/stop' endpoint";

/// `PATCH …/offsets` on a stopped connector: the slot moves forward to the given `lsn`;
/// PostgreSQL cannot move a slot back, so a smaller one is refused with the reason.
async fn alter_offsets(
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
    Json(body): Json<Value>,
) -> Result<Json<Value>> {
    let (target, settings) = herder.target_and_settings(&name)?;
    if target != Target::Stopped {
        return Err(Refusal::bad_request(NOT_STOPPED.replace("{name}", &name)));
    }
    let Some(offset) = body["offsets"].as_array().and_then(|o| o.first()) else {
        return Err(Refusal::bad_request(
            "Partitions / offsets need to be provided for an alter offsets request".into(),
        ));
    };
    let wanted = ["lsn", "lsn_proc", "lsn_commit"]
        .iter()
        .find_map(|k| offset["offset"][k].as_u64())
        .ok_or_else(|| {
            Refusal::bad_request(
                "the offset must give \"lsn\" (a WAL position as a number, as Debezium stores it)"
                    .into(),
            )
        })?;
    let current = slot_position(&settings).await?.unwrap_or(0);
    if wanted < current {
        return Err(Refusal::bad_request(format!(
            "the slot is at {current} and PostgreSQL cannot move a replication slot backwards: the WAL before it \
             is gone. To relay older events again, drop the slot and start the connector with snapshot.mode=initial"
        )));
    }
    let cdc = settings.cdc().expect("a slot position means CDC");
    crate::source::catalog::advance_slot(
        &crate::source::postgres::Database::of(&settings),
        &cdc.slot,
        pgoutput::Lsn::from_u64(wanted),
    )
    .await
    .map_err(|e| Refusal {
        status: 500,
        message: hidden(&settings, &e.to_string()),
    })?;
    Ok(Json(json!({
        "message": "The Connect framework-managed offsets for this connector have been altered successfully. However, if this connector manages offsets externally, they will need to be manually altered in the system that the connector uses."
    })))
}

/// `DELETE …/offsets`: resetting means going back to nothing, which a slot cannot do.
async fn reset_offsets(
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
) -> Result<Json<Value>> {
    let (target, _) = herder.target_and_settings(&name)?;
    if target != Target::Stopped {
        return Err(Refusal::bad_request(NOT_STOPPED.replace("{name}", &name)));
    }
    Err(Refusal::bad_request(
        "outbox-relay's offsets are its replication slot's position, which PostgreSQL cannot move backwards; \
         to start over, drop the slot (SELECT pg_drop_replication_slot(...)) and resume the connector"
            .into(),
    ))
}

#[cfg(test)]
mod password_tests {
    /// validate shows these as `[hidden]`: passwords, JAAS configs, key material and a
    /// schema registry's credentials.
    #[test]
    fn secrets_are_options_validate_hides() {
        for key in [
            "database.password",
            "producer.override.sasl.jaas.config",
            "value.converter.basic.auth.user.info",
            "key.converter.bearer.auth.token",
        ] {
            assert!(super::is_password(key), "{key}");
        }
        assert!(!super::is_password("value.converter.schema.registry.url"));
        assert_eq!(
            super::shown_value(
                "value.converter.schema.registry.url",
                "http://relay:s3cret@registry:8081"
            ),
            "http://relay:[hidden]@registry:8081"
        );
        assert_eq!(
            super::shown_value("key.converter.basic.auth.user.info", "u:p"),
            "[hidden]"
        );
    }
}
