//! A schema registry client for the Avro converters: Confluent's REST API (Confluent Schema
//! Registry, Apicurio's `ccompat` API, Karapace, Redpanda) as Confluent's serializer calls it,
//! and Apicurio Registry 2.x's own API as Apicurio's converter calls it. Blocking (the router
//! is synchronous); each schema is asked for once and its id cached.
//!
//! What the relay does with an answer: unreachable, timed out or 5xx → the registry is
//! unavailable (the session stops and resumes; nothing is dead-lettered); 401/403 → the
//! credentials are wrong (exit, naming the option but never its value); anything else
//! refused (409 incompatible, 422 invalid, 404 not registered) → the record's problem.

use crate::secret::Secret;
use outbox_router::connect::{Lookup, RegistryError, SchemaFormat, SchemaRegistry, SchemaText};
use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

/// Which REST API the registry is spoken to with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `POST /subjects/{subject}/versions`, `POST /subjects/{subject}`,
    /// `GET /subjects/{subject}/versions/latest`: the schema id.
    Confluent,
    /// Apicurio Registry 2.x (`/apis/registry/v2`), artifacts in group `default`: the
    /// artifact version's global id, or its content id (`apicurio.registry.use-id=contentId`).
    Apicurio { content_id: bool },
}

pub struct RegistryClient {
    api: Api,
    /// The base URL, without a trailing slash.
    base: String,
    /// The `Authorization` header's value.
    authorization: Option<Secret>,
    /// The option the credentials came from, for an error that must name it.
    credentials_option: Option<String>,
    agent: ureq::Agent,
    ids: Mutex<HashMap<IdKey, u64>>,
}

impl fmt::Debug for RegistryClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegistryClient")
            .field("api", &self.api)
            .field("base", &self.base)
            .field("authorization", &self.authorization.as_ref().map(|_| "***"))
            .finish()
    }
}

/// How the client authenticates.
pub enum Credentials {
    None,
    /// `user:password` (`basic.auth.user.info`).
    Basic {
        user_info: Secret,
        option: String,
    },
    /// A bearer token (`bearer.auth.token`).
    Bearer {
        token: Secret,
        option: String,
    },
}

impl RegistryClient {
    /// A client of the registry at `url` (the first of a comma-separated list).
    pub fn new(api: Api, url: &str, credentials: Credentials) -> Result<Self, String> {
        let base = url
            .split(',')
            .map(str::trim)
            .find(|u| !u.is_empty())
            .ok_or("no schema registry URL")?
            .trim_end_matches('/')
            .to_owned();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(format!("{base:?} is not an http:// or https:// URL"));
        }
        if base.split("//").nth(1).is_some_and(|rest| {
            rest.split('/')
                .next()
                .is_some_and(|authority| authority.contains('@'))
        }) {
            return Err(
                "credentials in the schema registry URL are not supported; use basic.auth.user.info"
                    .into(),
            );
        }
        use base64::Engine;
        let (authorization, credentials_option) = match credentials {
            Credentials::None => (None, None),
            Credentials::Basic { user_info, option } => (
                Some(Secret::new(format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(user_info.expose())
                ))),
                Some(option),
            ),
            Credentials::Bearer { token, option } => (
                Some(Secret::new(format!("Bearer {}", token.expose()))),
                Some(option),
            ),
        };
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(10)))
            .timeout_global(Some(Duration::from_secs(30)))
            .build();
        Ok(Self {
            api,
            base,
            authorization,
            credentials_option,
            agent: ureq::Agent::new_with_config(config),
            ids: Mutex::new(HashMap::new()),
        })
    }

    /// One request: the status and the body.
    fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<(&str, &[(&str, &str)])>,
    ) -> Result<(u16, String), RegistryError> {
        let url = format!("{}{path}", self.base);
        let unavailable = |e: ureq::Error| {
            RegistryError::Unavailable(format!("schema registry at {}: {e}", self.base))
        };
        let response = match body {
            None => {
                let mut request = self.agent.get(&url).header("Accept", "application/json");
                if let Some(auth) = &self.authorization {
                    request = request.header("Authorization", auth.expose());
                }
                request.call()
            }
            Some((body, headers)) => {
                let mut request = self.agent.post(&url).header("Accept", "application/json");
                if method == "POST" {
                    for (k, v) in headers {
                        request = request.header(*k, *v);
                    }
                }
                if let Some(auth) = &self.authorization {
                    request = request.header("Authorization", auth.expose());
                }
                request.send(body)
            }
        };
        let mut response = response.map_err(unavailable)?;
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().map_err(unavailable)?;
        Ok((status, text))
    }

    fn ask(
        &self,
        subject: &str,
        schema: &SchemaText<'_>,
        lookup: Lookup,
    ) -> Result<u64, RegistryError> {
        let subject_path = percent_encoding::utf8_percent_encode(subject, SEGMENT).to_string();
        let schema_body = confluent_body(schema);
        let confluent = [("Content-Type", "application/vnd.schemaregistry.v1+json")];
        let (status, body, id_field) = match self.api {
            Api::Confluent => {
                let (status, body) = match lookup {
                    Lookup::Register => self.call(
                        "POST",
                        &format!("/subjects/{subject_path}/versions"),
                        Some((&schema_body, &confluent)),
                    )?,
                    Lookup::Find => self.call(
                        "POST",
                        &format!("/subjects/{subject_path}"),
                        Some((&schema_body, &confluent)),
                    )?,
                    Lookup::Latest => self.call(
                        "GET",
                        &format!("/subjects/{subject_path}/versions/latest"),
                        None,
                    )?,
                };
                (status, body, "id")
            }
            Api::Apicurio { content_id } => {
                // `apicurio.registry.url` is the API root (`…/apis/registry/v2`).
                let artifacts = "/groups/default/artifacts";
                let json = [("Content-Type", "application/json")];
                let (status, body) = match lookup {
                    Lookup::Register => self.call(
                        "POST",
                        &format!("{artifacts}?ifExists=RETURN_OR_UPDATE&canonical=false"),
                        Some((
                            schema.text,
                            &[
                                ("Content-Type", "application/json"),
                                ("X-Registry-ArtifactId", subject),
                                ("X-Registry-ArtifactType", schema.format.name()),
                            ],
                        )),
                    )?,
                    Lookup::Find => self.call(
                        "POST",
                        &format!("{artifacts}/{subject_path}/meta?canonical=false"),
                        Some((schema.text, &json)),
                    )?,
                    Lookup::Latest => {
                        self.call("GET", &format!("{artifacts}/{subject_path}/meta"), None)?
                    }
                };
                (
                    status,
                    body,
                    if content_id { "contentId" } else { "globalId" },
                )
            }
        };
        match status {
            200..=299 => serde_json::from_str::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v.get(id_field).and_then(serde_json::Value::as_u64))
                .ok_or_else(|| {
                    RegistryError::Unavailable(format!(
                        "schema registry at {} answered without an {id_field}",
                        self.base
                    ))
                }),
            401 | 403 => Err(RegistryError::Unauthorized(format!(
                "schema registry at {} refused the credentials (HTTP {status}){}",
                self.base,
                match &self.credentials_option {
                    Some(option) => format!("; check {option}"),
                    None =>
                        "; set basic.auth.credentials.source=USER_INFO and basic.auth.user.info"
                            .into(),
                }
            ))),
            408 | 429 | 500..=599 => Err(RegistryError::Unavailable(format!(
                "schema registry at {} answered HTTP {status}: {}",
                self.base,
                message(&body)
            ))),
            _ => Err(RegistryError::Rejected(format!(
                "subject {subject}: schema registry answered HTTP {status}: {}",
                message(&body)
            ))),
        }
    }

    /// Runs `f`, a blocking call, off the async runtime's worker when there is one.
    fn blocking<T>(f: impl FnOnce() -> T) -> T {
        match tokio::runtime::Handle::try_current() {
            Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(f)
            }
            _ => f(),
        }
    }
}

/// What an id is cached under: the subject, and the schema as sent (its text and references).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct IdKey {
    subject: String,
    format: SchemaFormat,
    schema: String,
    lookup: Lookup,
}

/// The body of Confluent's register and look-up requests: `schemaType` only when it is not
/// Avro, and `references` only when there are some, as Confluent's client sends them.
fn confluent_body(schema: &SchemaText<'_>) -> String {
    let mut body = serde_json::Map::new();
    if schema.format != SchemaFormat::Avro {
        body.insert("schemaType".into(), schema.format.name().into());
    }
    if !schema.references.is_empty() {
        body.insert(
            "references".into(),
            schema
                .references
                .iter()
                .map(|r| {
                    serde_json::json!({ "name": r.name, "subject": r.subject, "version": r.version })
                })
                .collect(),
        );
    }
    body.insert("schema".into(), schema.text.into());
    serde_json::Value::Object(body).to_string()
}

/// The registry's error message (`{"error_code":…,"message":…}`), else the body.
fn message(body: &str) -> String {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(str::to_owned))
        .unwrap_or_else(|| body.chars().take(300).collect())
}

/// A path segment: everything but unreserved characters escaped.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

impl SchemaRegistry for RegistryClient {
    fn id(
        &self,
        subject: &str,
        schema: &SchemaText<'_>,
        lookup: Lookup,
    ) -> Result<u64, RegistryError> {
        let key = IdKey {
            subject: subject.to_owned(),
            format: schema.format,
            schema: if lookup == Lookup::Latest {
                String::new()
            } else {
                confluent_body(schema)
            },
            lookup,
        };
        if let Some(id) = self.ids.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return Ok(*id);
        }
        let id = Self::blocking(|| self.ask(subject, schema, lookup))?;
        self.ids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, id);
        Ok(id)
    }
}
