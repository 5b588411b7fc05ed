//! Log levels that change while the process runs. `RUST_LOG` sets them at start;
//! `outbox-relay connect` changes them through `/admin/loggers`, as Kafka Connect's
//! `LoggingResource` changes log4j's: a logger name is a dotted namespace, setting one sets
//! every logger under it, and `root` sets them all.
//!
//! Names are tracing targets written with dots (`outbox_relay_core.deliver`). The names a
//! Debezium user already types mean the code that does that job here: `io.debezium…` is the
//! relay (`outbox_relay_core`), `org.apache.kafka.connect…` its Connect worker
//! (`outbox_relay_core::connect`), other `org.apache.kafka…` the Kafka client (librdkafka).

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::{reload, EnvFilter, Registry};

pub const ROOT: &str = "root";

/// Namespaces `GET /admin/loggers/{name}` knows besides those set explicitly.
const KNOWN: &[&str] = &[
    "outbox_relay",
    "io.debezium",
    "org.apache.kafka",
    "rdkafka",
    "librdkafka",
    "pgwire_replication",
    "tokio_postgres",
];

/// A logger's level as Connect reports it (`LoggerLevel`): `last_modified` in milliseconds
/// since the epoch, none when set at start.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LoggerLevel {
    pub level: String,
    pub last_modified: Option<i64>,
}

/// The levels in effect: the root level, explicitly set namespaces, and whatever else
/// `RUST_LOG` said (span and field directives), kept as written.
#[derive(Debug, Clone)]
pub struct Levels {
    root: LevelFilter,
    explicit: BTreeMap<String, (LevelFilter, Option<i64>)>,
    verbatim: Vec<String>,
}

/// log4j's level names (any case), as tracing's: FATAL is ERROR, ALL is TRACE.
pub fn parse_level(text: &str) -> Option<LevelFilter> {
    Some(match text.trim().to_ascii_uppercase().as_str() {
        "OFF" => LevelFilter::OFF,
        "FATAL" | "ERROR" => LevelFilter::ERROR,
        "WARN" => LevelFilter::WARN,
        "INFO" => LevelFilter::INFO,
        "DEBUG" => LevelFilter::DEBUG,
        "TRACE" | "ALL" => LevelFilter::TRACE,
        _ => return None,
    })
}

fn level_name(level: LevelFilter) -> String {
    level.to_string().to_ascii_uppercase()
}

/// The tracing target a logger name stands for.
fn target(name: &str) -> String {
    let under = |prefix: &str| {
        name == prefix
            || name
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with('.'))
    };
    if under("org.apache.kafka.connect") {
        "outbox_relay_core::connect".into()
    } else if under("io.debezium") {
        "outbox_relay_core".into()
    } else if under("org.apache.kafka") {
        "librdkafka".into()
    } else {
        name.replace('.', "::")
    }
}

impl Levels {
    /// The levels a `RUST_LOG`-style directive list sets.
    pub fn parse(directives: &str) -> Self {
        let mut levels = Levels {
            root: LevelFilter::ERROR,
            explicit: BTreeMap::new(),
            verbatim: Vec::new(),
        };
        for directive in directives
            .split(',')
            .map(str::trim)
            .filter(|d| !d.is_empty())
        {
            if let Some(level) = parse_level(directive) {
                levels.root = level;
                continue;
            }
            match directive.split_once('=') {
                Some((name, level))
                    if !name.contains(['[', '{']) && parse_level(level).is_some() =>
                {
                    let level = parse_level(level).expect("checked");
                    levels
                        .explicit
                        .insert(name.replace("::", "."), (level, None));
                }
                None if !directive.contains(['[', '{']) => {
                    // A bare target: every level.
                    levels
                        .explicit
                        .insert(directive.replace("::", "."), (LevelFilter::TRACE, None));
                }
                _ => levels.verbatim.push(directive.to_owned()),
            }
        }
        levels
    }

    /// The directives for an `EnvFilter`: the root level, what was kept as written, then each
    /// namespace (more specific targets win in `EnvFilter`, as child loggers in log4j).
    pub fn directives(&self) -> String {
        let mut out = vec![self.root.to_string()];
        out.extend(self.verbatim.iter().cloned());
        for (name, (level, _)) in &self.explicit {
            out.push(format!("{}={level}", target(name)));
        }
        out.join(",")
    }

    /// `GET /admin/loggers`: the root logger and every logger whose level was set.
    pub fn all(&self) -> BTreeMap<String, LoggerLevel> {
        let mut all: BTreeMap<_, _> = self
            .explicit
            .iter()
            .map(|(name, (level, modified))| {
                (
                    name.clone(),
                    LoggerLevel {
                        level: level_name(*level),
                        last_modified: *modified,
                    },
                )
            })
            .collect();
        all.insert(
            ROOT.into(),
            LoggerLevel {
                level: level_name(self.root),
                last_modified: None,
            },
        );
        all
    }

    /// `GET /admin/loggers/{name}`: its level, or the one it inherits; `None` for a name
    /// nothing here logs under.
    pub fn level(&self, name: &str) -> Option<LoggerLevel> {
        if name.eq_ignore_ascii_case(ROOT) {
            return Some(self.all().remove(ROOT).expect("root"));
        }
        if let Some((level, modified)) = self.explicit.get(name) {
            return Some(LoggerLevel {
                level: level_name(*level),
                last_modified: *modified,
            });
        }
        let known = KNOWN.iter().any(|k| name.starts_with(k));
        if !known {
            return None;
        }
        // The nearest namespace above it that was set, else the root's.
        let inherited = self
            .explicit
            .iter()
            .filter(|(n, _)| name.starts_with(&format!("{n}.")))
            .max_by_key(|(n, _)| n.len())
            .map(|(_, (level, _))| *level)
            .unwrap_or(self.root);
        Some(LoggerLevel {
            level: level_name(inherited),
            last_modified: None,
        })
    }

    /// `PUT /admin/loggers/{name}`: sets `namespace` and every logger set under it (`root`:
    /// all of them), at `now` (ms); the names changed, sorted.
    pub fn set(&mut self, namespace: &str, level: LevelFilter, now: i64) -> Vec<String> {
        let mut changed = Vec::new();
        if namespace.eq_ignore_ascii_case(ROOT) {
            self.root = level;
            for (name, entry) in self.explicit.iter_mut() {
                *entry = (level, Some(now));
                changed.push(name.clone());
            }
            changed.push(ROOT.into());
        } else {
            for (name, entry) in self.explicit.iter_mut() {
                if name.starts_with(namespace) {
                    *entry = (level, Some(now));
                    changed.push(name.clone());
                }
            }
            if !self.explicit.contains_key(namespace) {
                self.explicit
                    .insert(namespace.to_owned(), (level, Some(now)));
                changed.push(namespace.to_owned());
            }
        }
        changed.sort();
        changed
    }
}

struct Live {
    handle: reload::Handle<EnvFilter, Registry>,
    levels: Mutex<Levels>,
}

static LIVE: OnceLock<Live> = OnceLock::new();

/// The filter the process starts with, which [`set`] can change later.
pub fn layer(directives: &str) -> reload::Layer<EnvFilter, Registry> {
    let levels = Levels::parse(directives);
    let filter = EnvFilter::try_new(levels.directives()).unwrap_or_else(|_| EnvFilter::new("info"));
    let (layer, handle) = reload::Layer::new(filter);
    let _ = LIVE.set(Live {
        handle,
        levels: Mutex::new(levels),
    });
    layer
}

/// The levels in effect now.
pub fn current() -> Levels {
    match LIVE.get() {
        Some(live) => live.levels.lock().unwrap().clone(),
        None => Levels::parse("info"),
    }
}

/// Sets a namespace's level in this process: the loggers changed.
pub fn set(namespace: &str, level: LevelFilter) -> Vec<String> {
    let Some(live) = LIVE.get() else {
        return Vec::new();
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default();
    let mut levels = live.levels.lock().unwrap();
    let changed = levels.set(namespace, level, now);
    match EnvFilter::try_new(levels.directives()) {
        Ok(filter) => {
            if let Err(e) = live.handle.reload(filter) {
                tracing::warn!("log levels not changed: {e}");
            }
        }
        Err(e) => tracing::warn!("log levels not changed: {e}"),
    }
    tracing::info!(logger = namespace, level = %level, "log level set");
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_log_becomes_loggers_and_back() {
        let levels = Levels::parse("info,rdkafka=warn,pgwire_replication=off,outbox_relay_core::deliver=debug,x[span]=trace");
        assert_eq!(
            levels.directives(),
            "info,x[span]=trace,outbox_relay_core::deliver=debug,pgwire_replication=off,rdkafka=warn"
        );
        let all = levels.all();
        assert_eq!(all["root"].level, "INFO");
        assert_eq!(all["rdkafka"].level, "WARN");
        assert_eq!(all["outbox_relay_core.deliver"].level, "DEBUG");
        assert_eq!(all["pgwire_replication"].level, "OFF");
    }

    /// As Connect's Loggers: a namespace sets the loggers under it, root sets all; unset
    /// names inherit from the nearest set namespace; unknown names are not found.
    #[test]
    fn setting_a_namespace_as_connect_does() {
        let mut levels = Levels::parse("info,io.debezium.connector=warn");
        assert_eq!(
            levels.set("io.debezium", parse_level("debug").unwrap(), 7),
            ["io.debezium", "io.debezium.connector"]
        );
        assert_eq!(
            levels.level("io.debezium.connector.postgresql"),
            Some(LoggerLevel {
                level: "DEBUG".into(),
                last_modified: None
            })
        );
        assert_eq!(levels.level("io.debezium").unwrap().last_modified, Some(7));
        assert_eq!(levels.level("com.example"), None);
        assert_eq!(levels.level("rdkafka").unwrap().level, "INFO");
        assert!(levels
            .directives()
            .ends_with("outbox_relay_core=debug,outbox_relay_core=debug"));
        assert_eq!(
            levels.set("ROOT", parse_level("fatal").unwrap(), 9),
            ["io.debezium", "io.debezium.connector", "root"]
        );
        assert_eq!(levels.all()["root"].level, "ERROR");
        assert_eq!(parse_level("verbose"), None);
    }

    #[test]
    fn connect_names_mean_the_code_doing_that_job() {
        assert_eq!(
            target("io.debezium.connector.postgresql"),
            "outbox_relay_core"
        );
        assert_eq!(
            target("org.apache.kafka.connect.runtime"),
            "outbox_relay_core::connect"
        );
        assert_eq!(target("org.apache.kafka.clients"), "librdkafka");
        assert_eq!(
            target("outbox_relay_core.deliver"),
            "outbox_relay_core::deliver"
        );
    }
}
