//! Kafka's config providers, as Kafka Connect expands them before a connector sees its
//! configuration: `${file:PATH:KEY}` (a key of a properties file), `${directory:DIR:FILE}`
//! (a file's whole content; Kafka's DirectoryConfigProvider), `${env:NAME}` (an environment
//! variable), declared with `config.providers=file,...` and
//! `config.providers.<name>.class=org.apache.kafka.common.config.provider.<Class>` in the
//! worker's configuration only, as in Kafka Connect: whoever may submit a connector
//! configuration must not be able to declare a provider that reads the worker's files or
//! environment (`load_config` refuses a connector configuration that tries). The values
//! providers expand are returned to the caller, which hides them from every message.
//!
//! The variable syntax is Kafka's `ConfigTransformer.DEFAULT_PATTERN` (since KAFKA-8363),
//! `\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}`: provider up to the first colon, an optional path up
//! to the next, the key up to the first `}`. Where Kafka would leave a variable as it is (a
//! provider that is not declared or has a class the relay does not have, a key the file does
//! not have, a path outside `allowed.paths`), the relay refuses with the configuration key and
//! the fix: a literal `${file:...}` sent as a password fails much later, with a message that
//! does not say why. A declared provider no variable uses is never an error (a worker file may
//! declare Kubernetes or Vault providers for other connectors).

use regex::Regex;
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::sync::LazyLock;

const FILE: &str = "org.apache.kafka.common.config.provider.FileConfigProvider";
const DIRECTORY: &str = "org.apache.kafka.common.config.provider.DirectoryConfigProvider";
const ENV: &str = "org.apache.kafka.common.config.provider.EnvVarConfigProvider";

static VARIABLE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}").expect("valid pattern"));

#[derive(Debug, Clone)]
enum Kind {
    File,
    Directory,
    Env {
        allowlist: Regex,
    },
    /// Declared, but not one of Kafka's own three (or with no class): refused when used.
    Unavailable(String),
}

#[derive(Debug, Clone)]
struct Provider {
    kind: Kind,
    /// `allowed.paths` (KIP-993): files and directories outside these are refused.
    allowed_paths: Option<Vec<PathBuf>>,
}

/// The providers a configuration declares, by name.
#[derive(Debug, Clone, Default)]
pub struct Providers(BTreeMap<String, Provider>);

impl Providers {
    /// The providers `entries` declares (`config.providers`, `config.providers.<n>.class`,
    /// `config.providers.<n>.param.*`).
    pub fn declared_in(entries: &BTreeMap<String, String>) -> Result<Self, String> {
        let mut out = BTreeMap::new();
        let Some(names) = entries.get("config.providers") else {
            return Ok(Self(out));
        };
        for name in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let key = format!("config.providers.{name}.class");
            let param = |p: &str| entries.get(&format!("config.providers.{name}.param.{p}"));
            let Some(class) = entries.get(&key) else {
                out.insert(
                    name.to_owned(),
                    Provider {
                        kind: Kind::Unavailable(format!(
                            "config.providers names {name:?} but {key} is not set"
                        )),
                        allowed_paths: None,
                    },
                );
                continue;
            };
            let kind = match class.trim() {
                FILE => Kind::File,
                DIRECTORY => Kind::Directory,
                ENV => {
                    let pattern = param("allowlist.pattern").map_or(".*", String::as_str);
                    // Java's Matcher.matches(): the whole name.
                    let allowlist = Regex::new(&format!("^(?:{pattern})$")).map_err(|e| {
                        format!("config.providers.{name}.param.allowlist.pattern: {e}")
                    })?;
                    Kind::Env { allowlist }
                }
                other => Kind::Unavailable(format!(
                    "{key}: {other} is not a provider outbox-relay has; it expands Kafka's \
                     FileConfigProvider, DirectoryConfigProvider and EnvVarConfigProvider \
                     (mount the secret as a file and use ${{file:...}} or ${{directory:...}})"
                )),
            };
            let allowed_paths = param("allowed.paths")
                .map(|list| {
                    list.split(',')
                        .map(str::trim)
                        .filter(|p| !p.is_empty())
                        .map(|p| {
                            let p = Path::new(p);
                            if p.is_absolute() {
                                Ok(normalize(p))
                            } else {
                                Err(format!(
                                    "config.providers.{name}.param.allowed.paths: {} is not an absolute path",
                                    p.display()
                                ))
                            }
                        })
                        .collect::<Result<Vec<_>, _>>()
                })
                .transpose()?
                // Kafka: an empty allowed.paths restricts nothing.
                .filter(|paths| !paths.is_empty());
            out.insert(
                name.to_owned(),
                Provider {
                    kind,
                    allowed_paths,
                },
            );
        }
        Ok(Self(out))
    }

    /// Expands every variable in every value (not in the `config.providers*` keys, which
    /// are then dropped), reading files and the environment through `env`; each value a
    /// variable stood for, and each whole value that held one, is added to `hidden`.
    pub fn expand(
        &self,
        entries: &mut BTreeMap<String, String>,
        env: &dyn Fn(&str) -> Option<String>,
        hidden: &mut Vec<String>,
    ) -> Result<(), String> {
        entries.retain(|k, _| !is_declaration(k));
        for (key, value) in entries.iter_mut() {
            if VARIABLE.is_match(value) {
                *value = self
                    .expand_value(value, env, hidden)
                    .map_err(|e| format!("{key}: {e}"))?;
                hidden.push(value.clone());
            }
        }
        Ok(())
    }

    fn expand_value(
        &self,
        value: &str,
        env: &dyn Fn(&str) -> Option<String>,
        hidden: &mut Vec<String>,
    ) -> Result<String, String> {
        let mut out = String::with_capacity(value.len());
        let mut last = 0;
        for found in VARIABLE.captures_iter(value) {
            let whole = found.get(0).expect("group 0");
            let name = &found[1];
            let path = found.get(3).map_or("", |m| m.as_str());
            let key = &found[4];
            let provider = self.0.get(name).ok_or_else(|| {
                format!(
                    "{} names the config provider {name:?}, which the worker configuration does not \
                     declare (config.providers={name} and config.providers.{name}.class in the worker config)",
                    whole.as_str()
                )
            })?;
            out.push_str(&value[last..whole.start()]);
            let expanded = provider
                .get(path, key, env)
                .map_err(|e| format!("{}: {e}", whole.as_str()))?;
            out.push_str(&expanded);
            hidden.push(expanded);
            last = whole.end();
        }
        out.push_str(&value[last..]);
        Ok(out)
    }
}

/// Whether `key` declares a config provider (`config.providers`, `config.providers.*`).
pub fn is_declaration(key: &str) -> bool {
    key == "config.providers" || key.starts_with("config.providers.")
}

impl Provider {
    fn get(
        &self,
        path: &str,
        key: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<String, String> {
        match &self.kind {
            Kind::Unavailable(why) => Err(why.clone()),
            Kind::Env { allowlist } => {
                if !path.is_empty() {
                    return Err(format!(
                        "the env provider takes no path (${{env:NAME}}), not {path:?}"
                    ));
                }
                if !allowlist.is_match(key) {
                    return Err(format!("{key} is not allowed by allowlist.pattern"));
                }
                env(key).ok_or_else(|| format!("the environment variable {key} is not set"))
            }
            Kind::File => {
                let file = self.allowed(path)?;
                let text = std::fs::read_to_string(&file)
                    .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
                super::properties::parse_properties(&text)
                    .remove(key)
                    .ok_or_else(|| format!("{} has no key {key:?}", file.display()))
            }
            Kind::Directory => {
                let dir = self.allowed(path)?;
                if key.contains('/') || key == ".." || key == "." {
                    return Err(format!("{key:?} is not a file name"));
                }
                let file = dir.join(key);
                // Kafka reads regular files only, the whole content as UTF-8, untrimmed.
                if !std::fs::metadata(&file).is_ok_and(|m| m.is_file()) {
                    return Err(format!("{} is not a file", file.display()));
                }
                std::fs::read_to_string(&file)
                    .map_err(|e| format!("cannot read {}: {e}", file.display()))
            }
        }
    }

    fn allowed(&self, path: &str) -> Result<PathBuf, String> {
        if path.is_empty() {
            return Err("no path: ${provider:PATH:KEY}".into());
        }
        let p = Path::new(path);
        let Some(allowed) = &self.allowed_paths else {
            return Ok(p.to_path_buf());
        };
        let absolute = normalize(p);
        if !p.is_absolute() || !allowed.iter().any(|a| absolute.starts_with(a)) {
            return Err(format!(
                "{path} is outside allowed.paths ({})",
                allowed
                    .iter()
                    .map(|a| a.display().to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            ));
        }
        Ok(absolute)
    }
}

/// `a/./b/../c` → `a/c`, as Java's `Path.normalize()` (no symlinks resolved).
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn file_directory_and_env_variables_expand_as_kafka_connect_does() {
        let dir = tempfile::tempdir().unwrap();
        let props = dir.path().join("db.properties");
        std::fs::write(&props, "user=relay\npassword = s3:cr=t\n").unwrap();
        std::fs::write(dir.path().join("token"), "abc\n").unwrap();
        let mut entries = config(&[
            ("config.providers", "file, dir,env"),
            ("config.providers.file.class", FILE),
            ("config.providers.dir.class", DIRECTORY),
            ("config.providers.env.class", ENV),
            (
                "database.password",
                &format!("${{file:{}:password}}", props.display()),
            ),
            (
                "database.user",
                &format!("x-${{file:{}:user}}-y", props.display()),
            ),
            (
                "sasl",
                &format!("t=${{dir:{}:token}}", dir.path().display()),
            ),
            ("home", "${env:HOME_DIR}"),
            ("route.topic.replacement", "${routedByValue}.events"),
        ]);
        let env = |name: &str| (name == "HOME_DIR").then(|| "/home/relay".to_owned());
        let mut hidden = Vec::new();
        Providers::declared_in(&entries.clone())
            .unwrap()
            .expand(&mut entries, &env, &mut hidden)
            .unwrap();
        assert_eq!(entries["database.password"], "s3:cr=t");
        assert_eq!(entries["database.user"], "x-relay-y");
        // DirectoryConfigProvider: the file's whole content, trailing newline included.
        assert_eq!(entries["sasl"], "t=abc\n");
        assert_eq!(entries["home"], "/home/relay");
        // No colon: not a variable (the EventRouter's own placeholder).
        assert_eq!(
            entries["route.topic.replacement"],
            "${routedByValue}.events"
        );
        assert!(!entries.keys().any(|k| k.starts_with("config.providers")));
        // What each variable stood for, and each whole value that held one, is to be hidden.
        for value in [
            "s3:cr=t",
            "relay",
            "x-relay-y",
            "abc\n",
            "t=abc\n",
            "/home/relay",
        ] {
            assert!(hidden.iter().any(|h| h == value), "{value:?} in {hidden:?}");
        }
        assert!(!hidden.iter().any(|h| h.contains("routedByValue")));
    }

    #[test]
    fn the_pattern_splits_provider_path_and_key_as_kafkas_does() {
        // Kafka's lazy groups: the path ends at the second colon, the key takes the rest.
        let c = VARIABLE.captures("${file:/a:b:c}").unwrap();
        assert_eq!((&c[1], &c[3], &c[4]), ("file", "/a", "b:c"));
        let c = VARIABLE.captures("${env:NAME}").unwrap();
        assert_eq!((&c[1], c.get(3).is_none(), &c[4]), ("env", true, "NAME"));
        // No part crosses a `}`: the EventRouter's placeholder before a variable stays.
        let c = VARIABLE
            .captures("${routedByValue}.events.${env:STAGE}")
            .unwrap();
        assert_eq!((&c[1], &c[4]), ("env", "STAGE"));
        let mut e = config(&[("r", "${routedByValue}.events.${env:STAGE}")]);
        let declared = config(&[
            ("config.providers", "env"),
            ("config.providers.env.class", ENV),
        ]);
        let env = |name: &str| (name == "STAGE").then(|| "prod".to_owned());
        Providers::declared_in(&declared)
            .unwrap()
            .expand(&mut e, &env, &mut Vec::new())
            .unwrap();
        assert_eq!(e["r"], "${routedByValue}.events.prod");
    }

    #[test]
    fn what_kafka_would_leave_unexpanded_is_refused_with_the_key_and_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let props = dir.path().join("p.properties");
        std::fs::write(&props, "a=1\n").unwrap();
        let declared = config(&[
            ("config.providers", "file,env"),
            ("config.providers.file.class", FILE),
            (
                "config.providers.file.param.allowed.paths",
                &dir.path().display().to_string(),
            ),
            ("config.providers.env.class", ENV),
            ("config.providers.env.param.allowlist.pattern", "DB_.*"),
        ]);
        let providers = Providers::declared_in(&declared).unwrap();
        let expand = |value: String| {
            let mut e = config(&[("database.password", &value)]);
            providers
                .expand(&mut e, &no_env, &mut Vec::new())
                .unwrap_err()
        };
        let err = expand("${vault:secret/db:password}".into());
        assert!(
            err.starts_with("database.password: ") && err.contains("config.providers=vault"),
            "{err}"
        );
        let err = expand(format!("${{file:{}:b}}", props.display()));
        assert!(err.contains("has no key \"b\""), "{err}");
        let err = expand("${file:/etc/passwd:root}".into());
        assert!(err.contains("outside allowed.paths"), "{err}");
        let escape = format!("${{file:{}/../../etc/passwd:root}}", dir.path().display());
        assert!(expand(escape).contains("outside allowed.paths"));
        assert!(expand("${env:HOME}".into()).contains("allowlist.pattern"));
        assert!(expand("${env:DB_PASSWORD}".into()).contains("is not set"));

        // Declared but unusable providers are refused only where a variable uses them.
        let unknown = config(&[
            ("config.providers", "vault,file"),
            (
                "config.providers.vault.class",
                "io.confluent.VaultConfigProvider",
            ),
        ]);
        let providers = Providers::declared_in(&unknown).unwrap();
        let mut unused = config(&[("a", "plain")]);
        providers
            .expand(&mut unused, &no_env, &mut Vec::new())
            .unwrap();
        let mut used = config(&[("database.password", "${vault:db:pw}")]);
        let err = providers
            .expand(&mut used, &no_env, &mut Vec::new())
            .unwrap_err();
        assert!(
            err.contains("config.providers.vault.class: io.confluent.VaultConfigProvider"),
            "{err}"
        );
        let mut used = config(&[("database.password", "${file:/x:pw}")]);
        let err = providers
            .expand(&mut used, &no_env, &mut Vec::new())
            .unwrap_err();
        assert!(
            err.contains("config.providers.file.class is not set"),
            "{err}"
        );

        // An empty allowed.paths restricts nothing (Kafka's AllowedPaths).
        let open = config(&[
            ("config.providers", "file"),
            ("config.providers.file.class", FILE),
            ("config.providers.file.param.allowed.paths", ""),
        ]);
        let mut e = config(&[("k", &format!("${{file:{}:a}}", props.display()))]);
        Providers::declared_in(&open)
            .unwrap()
            .expand(&mut e, &no_env, &mut Vec::new())
            .unwrap();
        assert_eq!(e["k"], "1");
    }

    #[test]
    fn declarations_are_recognised_by_their_keys() {
        assert!(is_declaration("config.providers"));
        assert!(is_declaration("config.providers.f.class"));
        assert!(is_declaration("config.providers.f.param.allowed.paths"));
        assert!(!is_declaration("config.providersx"));
        assert!(!is_declaration("database.password"));
    }
}
