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
use outbox_router::connect::{
    Lookup, RegistryError, SchemaFormat, SchemaReference, SchemaRegistry, SchemaText,
};
use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Which REST API the registry is spoken to with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `POST /subjects/{subject}/versions`, `POST /subjects/{subject}`,
    /// `GET /subjects/{subject}/versions/latest`: the schema id.
    Confluent,
    /// Apicurio Registry 2.x (`/apis/registry/v2`), artifacts in group `default`: the
    /// artifact version's global id, or its content id (`apicurio.registry.use-id=contentId`).
    /// An id is asked for again once `check_period` has passed since it was
    /// (`apicurio.registry.check-period-ms`: the converter's cache expires its entries).
    Apicurio {
        content_id: bool,
        check_period: Duration,
    },
}

pub struct RegistryClient {
    api: Api,
    /// The base URL, without a trailing slash and without user-info.
    base: String,
    /// The base URL as messages show it: a password in its user-info `[hidden]`.
    shown: String,
    /// The `Authorization` header's value.
    authorization: Option<Secret>,
    /// The option the credentials came from, for an error that must name it.
    credentials_option: Option<String>,
    agent: ureq::Agent,
    ids: Mutex<IdCache>,
    /// Apicurio's artifact group (`apicurio.registry.artifact.group-id`; `default`).
    group: String,
}

impl fmt::Debug for RegistryClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegistryClient")
            .field("api", &self.api)
            .field("base", &self.shown)
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
    /// `basic.auth.credentials.source=URL`: the user-info of the registry's URL, as it is
    /// written (Confluent's `UrlBasicAuthCredentialProvider` returns `URL.getUserInfo()`,
    /// which does not percent-decode); none when the URL has none.
    Url {
        option: String,
    },
}

/// A schema registry URL split at its user-info (`java.net.URL`'s reading: the authority up
/// to its `@`; more than one `@` is no user-info and no host).
struct SplitUrl<'a> {
    /// The URL without `user-info@`.
    bare: String,
    user_info: Option<&'a str>,
}

fn split_url(url: &str) -> Result<SplitUrl<'_>, String> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Ok(SplitUrl {
            bare: url.to_owned(),
            user_info: None,
        });
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    match authority.matches('@').count() {
        0 => Ok(SplitUrl {
            bare: url.to_owned(),
            user_info: None,
        }),
        1 => {
            let (user_info, host) = authority.split_once('@').expect("one @");
            Ok(SplitUrl {
                bare: format!("{scheme}://{host}{}", &rest[end..]),
                user_info: Some(user_info),
            })
        }
        _ => Err("a schema registry URL's authority has more than one '@'".into()),
    }
}

/// A schema registry URL (or a comma-separated list of them) as outbox-relay shows it:
/// the password of a URL's user-info replaced by `[hidden]` (`http://user:[hidden]@host`).
pub fn shown_url(urls: &str) -> String {
    urls.split(',')
        .map(|url| {
            let Some((scheme, rest)) = url.split_once("://") else {
                return url.to_owned();
            };
            let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
            match rest[..end].rfind('@') {
                None => url.to_owned(),
                Some(at) => {
                    let user = match rest[..at].split_once(':') {
                        Some((user, _)) => format!("{user}:[hidden]"),
                        None => "[hidden]".to_owned(),
                    };
                    format!("{scheme}://{user}{}", &rest[at..])
                }
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

impl RegistryClient {
    /// A client of the registry at `url` (the first of a comma-separated list).
    pub fn new(api: Api, url: &str, credentials: Credentials) -> Result<Self, String> {
        let first = url
            .split(',')
            .map(str::trim)
            .find(|u| !u.is_empty())
            .ok_or("no schema registry URL")?
            .trim_end_matches('/');
        let shown = shown_url(first);
        if !(first.starts_with("http://") || first.starts_with("https://")) {
            return Err(format!("{shown:?} is not an http:// or https:// URL"));
        }
        let split = split_url(first)?;
        let base = split.bare;
        if split.user_info.is_some() && api != Api::Confluent {
            return Err(
                "credentials in the registry URL are not supported; use apicurio.auth.username and apicurio.auth.password"
                    .into(),
            );
        }
        // Confluent's client reads the URL's user-info only with
        // basic.auth.credentials.source=URL (the request itself never carries it).
        let credentials = match credentials {
            Credentials::Url { option } => match split.user_info {
                Some(user_info) => Credentials::Basic {
                    user_info: Secret::new(user_info),
                    option,
                },
                None => Credentials::None,
            },
            other => other,
        };
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
            Credentials::Url { .. } => unreachable!("read from the URL above"),
        };
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(10)))
            .timeout_global(Some(Duration::from_secs(30)))
            .build();
        Ok(Self {
            api,
            base,
            shown,
            authorization,
            credentials_option,
            agent: ureq::Agent::new_with_config(config),
            ids: Mutex::new(IdCache::default()),
            group: "default".into(),
        })
    }

    /// Apicurio's artifacts in `group` (`apicurio.registry.artifact.group-id`), not `default`.
    pub fn in_group(self, group: &str) -> Self {
        Self {
            group: group.to_owned(),
            ..self
        }
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
            RegistryError::Unavailable(format!("schema registry at {}: {e}", self.shown))
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

    /// Refuses a subject's latest version (id `id`) unless it writes the record's own bytes
    /// (see [`writes_as_the_record`]). Confluent's API gives the version's schema with its id;
    /// Apicurio's metadata does not, so its content is read by the id.
    fn check_latest(
        &self,
        subject: &str,
        schema: &SchemaText<'_>,
        id: u64,
        answer: Option<&serde_json::Value>,
    ) -> Result<(), RegistryError> {
        let (option, writes_alike) = match self.api {
            Api::Confluent => {
                let version = answer.map(LatestVersion::confluent);
                (
                    "use.latest.version",
                    version.is_some_and(|v| writes_as_the_record(&v, schema)),
                )
            }
            Api::Apicurio { content_id, .. } => {
                let kind = if content_id {
                    "contentIds"
                } else {
                    "globalIds"
                };
                let (status, text) = self.call("GET", &format!("/ids/{kind}/{id}"), None)?;
                let what = || {
                    format!(
                        "schema registry at {} answered HTTP {status} for the content of {kind} {id}: {}",
                        self.shown,
                        message(&text)
                    )
                };
                match status {
                    200..=299 => {}
                    401 | 403 => return Err(RegistryError::Unauthorized(what())),
                    408 | 429 | 500..=599 => return Err(RegistryError::Unavailable(what())),
                    _ => return Err(RegistryError::Rejected(what())),
                }
                let format = answer
                    .and_then(|a| a.get("type"))
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("AVRO");
                let version = LatestVersion {
                    format,
                    text: &text,
                    references: Vec::new(),
                };
                (
                    "apicurio.registry.find-latest",
                    writes_as_the_record(&version, schema),
                )
            }
        };
        if writes_alike {
            return Ok(());
        }
        Err(RegistryError::Rejected(format!(
            "{option}: {NOT_THE_LATEST} {subject} (id {id}) is not the record's schema, nor one that writes the \
             record's bytes; the converter would write the record with that schema, outbox-relay writes a record only \
             with its own: register the record's schema as the subject's latest version, or set {option}=false"
        )))
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
            Api::Apicurio { content_id, .. } => {
                // `apicurio.registry.url` is the API root (`…/apis/registry/v2`).
                let artifacts = format!(
                    "/groups/{}/artifacts",
                    percent_encoding::utf8_percent_encode(&self.group, SEGMENT)
                );
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
            200..=299 => {
                let answer = serde_json::from_str::<serde_json::Value>(&body).ok();
                let id = answer
                    .as_ref()
                    .and_then(|v| v.get(id_field).and_then(serde_json::Value::as_u64))
                    .ok_or_else(|| {
                        RegistryError::Unavailable(format!(
                            "schema registry at {} answered without an {id_field}",
                            self.shown
                        ))
                    })?;
                if lookup == Lookup::Latest {
                    self.check_latest(subject, schema, id, answer.as_ref())?;
                }
                Ok(id)
            }
            401 | 403 => Err(RegistryError::Unauthorized(format!(
                "schema registry at {} refused the credentials (HTTP {status}){}",
                self.shown,
                match &self.credentials_option {
                    Some(option) => format!("; check {option}"),
                    None =>
                        "; set basic.auth.credentials.source=USER_INFO and basic.auth.user.info, \
                         or basic.auth.credentials.source=URL and user:password@ in the URL"
                            .into(),
                }
            ))),
            408 | 429 | 500..=599 => Err(RegistryError::Unavailable(format!(
                "schema registry at {} answered HTTP {status}: {}",
                self.shown,
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

/// What an id is cached under: the subject (none where Apicurio's converter shares ids by
/// content), the record's schema as sent, and how it was asked for. Borrowed from the record's schema: a look-up that finds its id copies nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct IdKey<'a> {
    subject: &'a str,
    format: SchemaFormat,
    text: &'a str,
    references: &'a [SchemaReference],
    lookup: Lookup,
}

/// An [`IdKey`] held by the cache.
#[derive(Debug)]
struct CachedKey {
    subject: String,
    format: SchemaFormat,
    text: String,
    references: Vec<SchemaReference>,
    lookup: Lookup,
}

impl CachedKey {
    fn of(key: IdKey<'_>) -> Self {
        CachedKey {
            subject: key.subject.to_owned(),
            format: key.format,
            text: key.text.to_owned(),
            references: key.references.to_vec(),
            lookup: key.lookup,
        }
    }

    fn key(&self) -> IdKey<'_> {
        IdKey {
            subject: &self.subject,
            format: self.format,
            text: &self.text,
            references: &self.references,
            lookup: self.lookup,
        }
    }
}

/// A registry's answer that is kept: an id, or why the latest version cannot be used.
type Answer = Result<u64, String>;

/// The ids asked for: under each key's hash, the keys with that hash, their ids and when
/// they were asked for.
#[derive(Debug, Default)]
struct IdCache {
    hasher: std::hash::RandomState,
    ids: HashMap<u64, Vec<(CachedKey, Answer, Instant)>>,
}

impl IdCache {
    /// The id cached under `key`, unless it was asked for `expiry` or longer before `now`.
    fn get(&self, key: IdKey<'_>, now: Instant, expiry: Option<Duration>) -> Option<Answer> {
        use std::hash::BuildHasher;
        self.ids
            .get(&self.hasher.hash_one(key))?
            .iter()
            .find(|(cached, _, _)| cached.key() == key)
            .filter(|(_, _, at)| expiry.is_none_or(|e| now.saturating_duration_since(*at) < e))
            .map(|(_, id, _)| id.clone())
    }

    fn insert(&mut self, key: IdKey<'_>, id: Answer, now: Instant) {
        use std::hash::BuildHasher;
        let same_hash = self.ids.entry(self.hasher.hash_one(key)).or_default();
        match same_hash
            .iter_mut()
            .find(|(cached, _, _)| cached.key() == key)
        {
            Some((_, cached_id, at)) => (*cached_id, *at) = (id, now),
            None => same_hash.push((CachedKey::of(key), id, now)),
        }
    }
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

/// What the refusal of a record whose subject's latest version writes other bytes says, after
/// the option's name (it is cached as an id is: the converters keep the latest version they
/// read).
const NOT_THE_LATEST: &str = "the latest version of subject";

/// A subject's latest version: its schema type's name, its text and its references
/// (name, subject, version).
struct LatestVersion<'a> {
    format: &'a str,
    text: &'a str,
    references: Vec<(&'a str, &'a str, i64)>,
}

impl<'a> LatestVersion<'a> {
    /// A version as Confluent's API gives it (`schema`, `schemaType`, `references`).
    fn confluent(version: &'a serde_json::Value) -> Self {
        let text = |v: &'a serde_json::Value, key| v.get(key).and_then(|t| t.as_str());
        Self {
            format: text(version, "schemaType").unwrap_or("AVRO"),
            text: text(version, "schema").unwrap_or(""),
            references: version
                .get("references")
                .and_then(|r| r.as_array())
                .map(|refs| {
                    refs.iter()
                        .map(|r| {
                            (
                                text(r, "name").unwrap_or(""),
                                text(r, "subject").unwrap_or(""),
                                r.get("version").and_then(|v| v.as_i64()).unwrap_or(-1),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default(),
        }
    }
}

/// Whether the serializer, writing the record with a subject's latest version (as
/// Confluent's does under `use.latest.version` and Apicurio's under `find-latest`), writes the
/// record's own bytes: the same schema type and references, and
/// - Avro: the same Parsing Canonical Form (the writer reads the record's fields by position;
///   docs, defaults, aliases and properties do not change the bytes);
/// - JSON Schema: the same document, compared parsed (a registry gives it back without the
///   spaces it was sent with);
/// - Protobuf: the same text without its white space (a registry prints it again; the
///   message indexes are computed against the version's text).
fn writes_as_the_record(version: &LatestVersion<'_>, schema: &SchemaText<'_>) -> bool {
    let ours: Vec<(&str, &str, i64)> = schema
        .references
        .iter()
        .map(|r| (r.name.as_str(), r.subject.as_str(), i64::from(r.version)))
        .collect();
    let same_text = match schema.format {
        SchemaFormat::Avro => {
            let form = |t: &str| outbox_router::connect::parsing_canonical_form(t).ok();
            form(version.text).is_some() && form(version.text) == form(schema.text)
        }
        SchemaFormat::Json => {
            serde_json::from_str::<serde_json::Value>(version.text).ok()
                == serde_json::from_str::<serde_json::Value>(schema.text).ok()
        }
        SchemaFormat::Protobuf => {
            let bare = |t: &str| t.split_whitespace().collect::<String>();
            bare(version.text) == bare(schema.text)
        }
    };
    version.format == schema.format.name() && version.references == ours && same_text
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
            // Apicurio's converter caches ids by schema content alone: a topic whose schema
            // another topic registered first gets that artifact's id, and registers nothing
            // (its latest version is still asked for by artifact).
            subject: match (self.api, lookup) {
                (Api::Apicurio { .. }, Lookup::Register | Lookup::Find) => "",
                _ => subject,
            },
            format: schema.format,
            // A subject's latest version too: its id is the record's only where that version
            // is the record's schema.
            text: schema.text,
            references: schema.references,
            lookup,
        };
        let expiry = match self.api {
            Api::Apicurio { check_period, .. } => Some(check_period),
            Api::Confluent => None,
        };
        let cached =
            self.ids
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(key, Instant::now(), expiry);
        if let Some(answer) = cached {
            return answer.map_err(RegistryError::Rejected);
        }
        let answer = match Self::blocking(|| self.ask(subject, schema, lookup)) {
            Ok(id) => Ok(id),
            Err(RegistryError::Rejected(m))
                if ["use.latest.version: ", "apicurio.registry.find-latest: "]
                    .iter()
                    .any(|option| m.starts_with(&format!("{option}{NOT_THE_LATEST}"))) =>
            {
                Err(m)
            }
            Err(e) => return Err(e),
        };
        self.ids.lock().unwrap_or_else(|e| e.into_inner()).insert(
            key,
            answer.clone(),
            Instant::now(),
        );
        answer.map_err(RegistryError::Rejected)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_credentials_are_read_as_written_and_never_shown() {
        // Confluent's UrlBasicAuthCredentialProvider: `URL.getUserInfo()`, not decoded.
        let client = RegistryClient::new(
            Api::Confluent,
            " http://us%40er:p%3Ass@registry:8081/ ,http://other:8081",
            Credentials::Url {
                option: "value.converter.schema.registry.url".into(),
            },
        )
        .unwrap();
        assert_eq!(client.base, "http://registry:8081");
        assert_eq!(client.shown, "http://us%40er:[hidden]@registry:8081");
        use base64::Engine;
        assert_eq!(
            client.authorization.as_ref().map(Secret::expose),
            Some(
                format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode("us%40er:p%3Ass")
                )
                .as_str()
            )
        );
        assert!(!format!("{client:?}").contains("p%3Ass"));
        // Without source=URL the user-info is not sent (nor kept in the requests' URL).
        let client = RegistryClient::new(
            Api::Confluent,
            "https://u:secret@registry/apis/ccompat/v7",
            Credentials::None,
        )
        .unwrap();
        assert_eq!(client.base, "https://registry/apis/ccompat/v7");
        assert!(client.authorization.is_none());
        // source=URL with a URL without user-info: no credentials.
        let client = RegistryClient::new(
            Api::Confluent,
            "http://registry:8081",
            Credentials::Url {
                option: "value.converter.schema.registry.url".into(),
            },
        )
        .unwrap();
        assert!(client.authorization.is_none());
        let e = RegistryClient::new(Api::Confluent, "ftp://u:secret@host", Credentials::None)
            .unwrap_err();
        assert!(!e.contains("secret"), "{e}");
        assert!(RegistryClient::new(Api::Confluent, "http://a@b@host", Credentials::None).is_err());
        assert!(RegistryClient::new(
            Api::Apicurio {
                content_id: false,
                check_period: Duration::from_secs(30),
            },
            "http://u:p@host/apis/registry/v2",
            Credentials::None
        )
        .is_err());
    }

    #[test]
    fn ids_are_cached_by_subject_schema_references_and_lookup() {
        let reference = SchemaReference {
            name: "other.proto".into(),
            subject: "other".into(),
            version: 1,
        };
        let key = |subject, text, references, lookup| IdKey {
            subject,
            format: SchemaFormat::Avro,
            text,
            references,
            lookup,
        };
        let mut cache = IdCache::default();
        let t0 = Instant::now();
        let registered = key("t-value", "\"string\"", &[], Lookup::Register);
        let at = |seconds| t0 + Duration::from_secs(seconds);
        cache.insert(registered, Ok(7), t0);
        assert_eq!(cache.get(registered, t0, None), Some(Ok(7)));
        for other in [
            key("u-value", "\"string\"", &[], Lookup::Register),
            key("t-value", "\"bytes\"", &[], Lookup::Register),
            key(
                "t-value",
                "\"string\"",
                std::slice::from_ref(&reference),
                Lookup::Register,
            ),
            key("t-value", "\"string\"", &[], Lookup::Find),
        ] {
            assert_eq!(cache.get(other, t0, None), None, "{other:?}");
        }
        cache.insert(registered, Ok(8), t0);
        assert_eq!(cache.get(registered, t0, None), Some(Ok(8)));
        // Apicurio's converter asks again once its check period has passed.
        let period = Some(Duration::from_secs(30));
        assert_eq!(cache.get(registered, at(29), period), Some(Ok(8)));
        assert_eq!(cache.get(registered, at(30), period), None);
        cache.insert(registered, Ok(9), at(31));
        assert_eq!(cache.get(registered, at(32), period), Some(Ok(9)));
    }

    #[test]
    fn the_latest_version_is_used_only_where_it_writes_the_records_bytes() {
        let avro = SchemaText::avro(r#"{"type": "record", "name": "V", "fields": []}"#);
        let latest =
            |v: serde_json::Value| writes_as_the_record(&LatestVersion::confluent(&v), &avro);
        // Given back without spaces, or with docs and properties: the same bytes.
        assert!(latest(serde_json::json!({
            "id": 3, "schema": r#"{"type":"record","name":"V","fields":[]}"#
        })));
        assert!(latest(serde_json::json!({
            "id": 3, "schema": r#"{"type":"record","name":"V","doc":"v","fields":[],"connect.version":2}"#
        })));
        // Another schema, another type, a reference more: not.
        assert!(!latest(serde_json::json!({
            "id": 4, "schema": r#"{"type":"record","name":"V","fields":[{"name":"a","type":"int"}]}"#
        })));
        assert!(!latest(serde_json::json!({
            "id": 3, "schemaType": "JSON", "schema": r#"{"type":"record","name":"V","fields":[]}"#
        })));
        assert!(!latest(serde_json::json!({
            "id": 3, "schema": r#"{"type":"record","name":"V","fields":[]}"#,
            "references": [{"name": "a.proto", "subject": "a", "version": 1}]
        })));
        let proto = SchemaText {
            format: SchemaFormat::Protobuf,
            text: "syntax = \"proto3\";\n\nmessage V {\n  string a = 1;\n}\n",
            references: &[],
        };
        let printed_again = serde_json::json!({
            "id": 5, "schemaType": "PROTOBUF",
            "schema": "syntax = \"proto3\";\nmessage V {\n    string a = 1;\n}"
        });
        assert!(writes_as_the_record(
            &LatestVersion::confluent(&printed_again),
            &proto
        ));
    }

    #[test]
    fn shown_urls_hide_passwords() {
        assert_eq!(
            shown_url("http://user:pw@host:1/x?y=a@b,https://h2,http://token@h3"),
            "http://user:[hidden]@host:1/x?y=a@b,https://h2,http://[hidden]@h3"
        );
    }
}
