//! `--debezium-config` / `--worker-config`: run from the connector JSON (or .properties)
//! a Debezium user POSTs to Kafka Connect today, and their worker's properties.

mod connector;
mod options;
mod producer;
mod properties;

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
    translate(&connector_config, worker_config.as_ref())
        .map_err(|e| invalid("debezium-config", format!("{}: {e}", connector.display())))
}
