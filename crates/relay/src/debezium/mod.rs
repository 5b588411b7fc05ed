//! `--debezium-config` / `--worker-config`: run from the connector JSON (or .properties)
//! a Debezium user POSTs to Kafka Connect today, and their worker's properties.

mod connector;
mod converters;
pub(crate) mod option_catalog;
mod options;
mod parsers;
mod producer;
mod properties;
mod providers;

pub use connector::translate;
pub use option_catalog::{describe, Applies, Spec, CATALOG};
pub use parsers::{CONVERTERS, HEADER_CONVERTERS, PREDICATES};
pub use producer::worker_client;
pub use properties::{parse, parse_properties, read_file, RawConfig};

#[cfg(test)]
mod tests;

/// The Debezium release whose records outbox-relay writes (the change events' `source.version`).
pub const DEBEZIUM_VERSION: &str = "3.6.1.Final";

/// Reads the connector configuration at `connector` (and the worker's at `worker`) into the
/// native settings they mean.
pub fn load(
    connector: &std::path::Path,
    worker: Option<&std::path::Path>,
) -> Result<crate::config::Preset, crate::config::ConfigError> {
    use crate::config::invalid;
    let connector_config = read_file(connector).map_err(|e| invalid("debezium-config", e))?;
    let worker_config = match worker {
        Some(p) => Some(read_file(p).map_err(|e| invalid("worker-config", e))?),
        None => None,
    };
    load_config(connector_config, worker_config)
        .map_err(|e| invalid("debezium-config", format!("{}: {e}", connector.display())))
}

/// A connector configuration (and its worker's) as Kafka Connect reads them: config
/// providers (declared in the worker configuration only) expanded, then translated into the
/// native settings they mean. No error quotes a value a provider expanded: the preset
/// carries them (`Preset::hidden`) so that later messages hide them too.
pub fn load_config(
    mut connector_config: RawConfig,
    mut worker_config: Option<RawConfig>,
) -> Result<crate::config::Preset, String> {
    use providers::Providers;
    // Kafka Connect builds providers from the worker's configuration alone: a connector
    // configuration (which anyone who reaches the REST API may submit) that declares one
    // would read the worker's files or environment.
    if let Some(key) = connector_config
        .entries
        .keys()
        .find(|k| providers::is_declaration(k))
    {
        return Err(format!(
            "{key}: config providers are declared in the worker configuration only, as in Kafka Connect \
             (move config.providers and config.providers.* there); nothing in this connector \
             configuration was expanded"
        ));
    }
    let env = |name: &str| std::env::var(name).ok();
    let mut hidden = Vec::new();
    let mut providers = Providers::default();
    if let Some(w) = worker_config.as_mut() {
        providers =
            Providers::declared_in(&w.entries).map_err(|e| format!("worker config: {e}"))?;
        providers
            .expand(&mut w.entries, &env, &mut hidden)
            .map_err(|e| format!("worker config: {e}"))?;
    }
    providers.expand(&mut connector_config.entries, &env, &mut hidden)?;
    let hidden = crate::secret::Redaction::new(hidden);
    let mut preset =
        translate(&connector_config, worker_config.as_ref()).map_err(|e| hidden.apply(&e))?;
    preset.hidden = hidden;
    Ok(preset)
}

/// A worker configuration as the worker itself reads it: its own config providers expanded
/// (Kafka Connect's `WorkerConfig`), and the values they stood for, to hide.
pub fn expand_worker(
    mut worker: RawConfig,
) -> Result<(RawConfig, crate::secret::Redaction), String> {
    let env = |name: &str| std::env::var(name).ok();
    let mut hidden = Vec::new();
    providers::Providers::declared_in(&worker.entries)?.expand(
        &mut worker.entries,
        &env,
        &mut hidden,
    )?;
    Ok((worker, crate::secret::Redaction::new(hidden)))
}

/// What the option catalog says of `key` in a connector configuration (`entries`): its
/// group, its documentation line, and what outbox-relay does with it. A transform's option
/// (before or after the EventRouter) is described by that transform's registry entry. `None` for an
/// option outbox-relay does not know.
pub fn option_doc(
    key: &str,
    entries: &std::collections::BTreeMap<String, String>,
) -> Option<OptionDoc> {
    const EVENT_ROUTER: &str = "io.debezium.transforms.outbox.EventRouter";
    let class_of = |alias: &str| {
        entries
            .get(&format!("transforms.{alias}.type"))
            .map(|c| c.trim())
    };
    let router = entries
        .iter()
        .find(|(k, v)| {
            k.starts_with("transforms.") && k.ends_with(".type") && v.trim() == EVENT_ROUTER
        })
        .and_then(|(k, _)| k.strip_prefix("transforms.")?.strip_suffix(".type"))
        .unwrap_or("outbox");
    if let Some(rest) = key.strip_prefix("transforms.") {
        if let Some((alias, option)) = rest.split_once('.') {
            if alias != router {
                let class = class_of(alias).unwrap_or_default();
                if let Some((entry, _)) = outbox_router::transforms::lookup(class) {
                    return Some(OptionDoc {
                        group: "Transforms",
                        doc: format!("{}: {}", entry.class, entry.doc),
                        treatment: format!("applied ({option} of transform {alias})"),
                        default: None,
                    });
                }
            }
        }
    }
    let spec = option_catalog::describe(key, router)?;
    Some(OptionDoc {
        group: spec.applies.group(),
        doc: spec.doc.to_owned(),
        treatment: spec.treatment_text(),
        default: spec.default,
    })
}

/// What the option catalog says of one option.
pub struct OptionDoc {
    /// Connect's `group`: where the option applies.
    pub group: &'static str,
    pub doc: String,
    /// Applied, accepted without effect, or refused (and why).
    pub treatment: String,
    pub default: Option<&'static str>,
}
