//! `--debezium-config` / `--worker-config`: run from the connector JSON (or .properties)
//! a Debezium user POSTs to Kafka Connect today, and their worker's properties.

mod connector;
mod options;
mod producer;
mod properties;
mod providers;

pub use connector::translate;
pub use properties::{parse, read_file, RawConfig};

#[cfg(test)]
mod tests;

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
/// providers expanded, then translated into the native settings they mean.
pub fn load_config(
    mut connector_config: RawConfig,
    mut worker_config: Option<RawConfig>,
) -> Result<crate::config::Preset, String> {
    use providers::Providers;
    let env = |name: &str| std::env::var(name).ok();
    // Kafka Connect expands ${provider:path:key} with the worker's providers first; a
    // connector config may declare more (for names the worker does not).
    let mut providers = Providers::default();
    if let Some(w) = worker_config.as_mut() {
        providers =
            Providers::declared_in(&w.entries).map_err(|e| format!("worker config: {e}"))?;
        providers
            .expand(&mut w.entries, &env)
            .map_err(|e| format!("worker config: {e}"))?;
    }
    let providers = providers.or_else(Providers::declared_in(&connector_config.entries)?);
    providers.expand(&mut connector_config.entries, &env)?;
    translate(&connector_config, worker_config.as_ref())
}
