//! The part of Kafka Connect's REST API that deploy scripts, UIs and health checks use
//! (`ConnectorsResource`, `ConnectorPluginsResource`, `RootResource`), answering with
//! Connect's JSON shapes and its error body `{"error_code": …, "message": …}`.

use super::herder::{Herder, Refusal, Target};
use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

const POSTGRES_CONNECTOR: &str = "io.debezium.connector.postgresql.PostgresConnector";

pub fn routes(herder: Arc<Herder>) -> Router {
    Router::new()
        .route("/", get(root))
        .route("/connector-plugins", get(plugins))
        .route("/connector-plugins/{class}/config/validate", put(validate))
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
        .with_state(herder)
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

async fn root() -> Json<Value> {
    Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "commit": option_env!("OUTBOX_RELAY_GIT_SHA").unwrap_or("unknown"),
        "kafka_cluster_id": Value::Null,
    }))
}

async fn plugins() -> Json<Value> {
    Json(json!([{
        "class": POSTGRES_CONNECTOR,
        "type": "source",
        "version": env!("CARGO_PKG_VERSION"),
    }]))
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
    if !class.ends_with("PostgresConnector") {
        return error(
            400,
            format!(
                "Connector plugin {class} is not one outbox-relay runs; use {POSTGRES_CONNECTOR}"
            ),
        );
    }
    let name = config.get("name").cloned().unwrap_or_default();
    let errors = match herder.validate(&name, &config) {
        Ok(_) => Vec::new(),
        Err(errors) => errors,
    };
    // One entry per option, with the errors attributed to the option they name.
    let configs: Vec<Value> = config
        .iter()
        .map(|(key, value)| {
            let mine: Vec<&String> = errors
                .iter()
                .filter(|e| e.starts_with(&format!("{key}:")) || e.starts_with(&format!("{key}=")) || e.starts_with(&format!("{key} ")))
                .collect();
            json!({
                "definition": { "name": key },
                "value": { "name": key, "value": value, "recommended_values": [], "errors": mine, "visible": true },
            })
        })
        .collect();
    Json(json!({
        "name": class,
        "error_count": errors.len(),
        "groups": [],
        "configs": configs,
        "errors": errors,
    }))
    .into_response()
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
                entry.insert("status".into(), s);
            }
        }
        if expand.iter().any(|e| e == "info") {
            if let Ok(i) = herder.info(&name) {
                entry.insert("info".into(), i);
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
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, format!("/connectors/{name}"))],
        Json(info),
    )
        .into_response())
}

async fn info(State(herder): State<Arc<Herder>>, Path(name): Path<String>) -> Result<Json<Value>> {
    herder.info(&name).map(Json)
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
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(info)).into_response())
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
    herder.put(&name, config, None).map(|(_, info)| Json(info))
}

async fn delete(State(herder): State<Arc<Herder>>, Path(name): Path<String>) -> Result<StatusCode> {
    herder.delete(&name).map(|()| StatusCode::NO_CONTENT)
}

async fn status(
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
) -> Result<Json<Value>> {
    herder.status(&name).map(Json)
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
    herder.task_status(&name, task).map(Json)
}

async fn pause(State(herder): State<Arc<Herder>>, Path(name): Path<String>) -> Result<StatusCode> {
    herder
        .set_target(&name, Target::Paused)
        .map(|()| StatusCode::ACCEPTED)
}

async fn resume(State(herder): State<Arc<Herder>>, Path(name): Path<String>) -> Result<StatusCode> {
    herder
        .set_target(&name, Target::Started)
        .map(|()| StatusCode::ACCEPTED)
}

async fn stop(State(herder): State<Arc<Herder>>, Path(name): Path<String>) -> Result<StatusCode> {
    herder
        .set_target(&name, Target::Stopped)
        .map(|()| StatusCode::ACCEPTED)
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
    herder.restart(&name, query.only_failed)?;
    let status = herder.status(&name)?;
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

async fn topics(
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
) -> Result<Json<Value>> {
    herder.topics(&name).map(Json)
}
