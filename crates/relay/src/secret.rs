//! A value that must never appear in logs, errors or `--help` (passwords, URLs with them).

use serde::Deserialize;
use std::fmt;
use std::str::FromStr;

#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

/// Whether an option's value is a secret, never shown: Kafka's PASSWORD options
/// (`database.password`, `*.ssl.*.password`, `sasl.jaas.config`, `ssl.keystore.key`), a schema
/// registry's credentials, and librdkafka's secret properties (`sasl.password`,
/// `ssl.key.password`, `ssl.key.pem`, `sasl.oauthbearer.client.secret`, …).
pub fn is_secret_key(key: &str) -> bool {
    let key = key.trim().to_ascii_lowercase();
    key.ends_with("password")
        || key.ends_with("sasl.jaas.config")
        || key.ends_with("ssl.keystore.key")
        || key.ends_with("ssl.key.pem")
        || key.ends_with("ssl_key.pem")
        || key.ends_with("client.secret")
        || key.ends_with("sasl.oauthbearer.config")
        || key.ends_with("passphrase")
        || key.contains("private.key")
        // A schema registry's credentials (Confluent's converters type them PASSWORD).
        || key.ends_with("basic.auth.user.info")
        || key.ends_with("bearer.auth.token")
}

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }
    /// The real value, for the one place that needs it (a connection).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl Secret {
    /// Serialises the value itself: only for merging configuration layers in memory
    /// (`RunOptions::merge_file`), never for output; `Debug` stays redacted.
    pub fn serialize_for_merge<S: serde::Serializer>(
        value: &Option<Secret>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.serialize_some(&value.as_ref().map(|s| s.0.as_str()))
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl FromStr for Secret {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Self(s.to_owned()))
    }
}

/// The values config providers expanded into a configuration (`${file:…}`, `${env:…}`, …):
/// never shown. An error about an option whose value came from a provider names the option
/// and the problem; `apply` puts `[hidden]` where the value would have been.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Redaction(std::sync::Arc<Vec<String>>);

impl Redaction {
    /// Hides `values` (empty ones and blanks hide nothing).
    pub fn new(values: impl IntoIterator<Item = String>) -> Self {
        let mut all: Vec<String> = Vec::new();
        for value in values {
            // The value as it is, trimmed (a parser's view), and as `{:?}` escapes it.
            let escaped = format!("{value:?}");
            let escaped = escaped[1..escaped.len() - 1].to_owned();
            for form in [value.trim().to_owned(), escaped, value] {
                if !form.trim().is_empty() && !all.contains(&form) {
                    all.push(form);
                }
            }
        }
        // Longest first: a value that contains another is hidden whole.
        all.sort_by_key(|v| std::cmp::Reverse(v.len()));
        Self(std::sync::Arc::new(all))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `text` with every hidden value replaced by `[hidden]`.
    pub fn apply(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for value in self.0.iter() {
            if out.contains(value.as_str()) {
                out = out.replace(value.as_str(), "[hidden]");
            }
        }
        out
    }
}

/// Values hidden from every log line the process writes: the `connect` worker's and its
/// connectors' provider-expanded values, registered as each configuration is expanded.
static IN_LOGS: std::sync::RwLock<Vec<Redaction>> = std::sync::RwLock::new(Vec::new());

/// Values this short are not hidden in logs (a `1` or a `true` from a provider would erase
/// every digit and word like it; they carry no secret worth the garbling).
const SHORTEST_HIDDEN_IN_LOGS: usize = 4;

impl Redaction {
    /// Hides these values from every log line written from now on (see [`LogWriter`]).
    pub fn hide_in_logs(&self) {
        let long: Vec<String> = self
            .0
            .iter()
            .filter(|v| v.trim().chars().count() >= SHORTEST_HIDDEN_IN_LOGS)
            .cloned()
            .collect();
        if long.is_empty() {
            return;
        }
        let hidden = Redaction(std::sync::Arc::new(long));
        let mut all = IN_LOGS.write().unwrap_or_else(|p| p.into_inner());
        if !all.contains(&hidden) {
            all.push(hidden);
        }
    }
}

/// `line` without any value hidden from logs.
fn redact_log_line(line: &str) -> std::borrow::Cow<'_, str> {
    let all = IN_LOGS.read().unwrap_or_else(|p| p.into_inner());
    if all.is_empty()
        || !all
            .iter()
            .any(|r| r.0.iter().any(|v| line.contains(v.as_str())))
    {
        return std::borrow::Cow::Borrowed(line);
    }
    let mut out = line.to_owned();
    for r in all.iter() {
        out = r.apply(&out);
    }
    std::borrow::Cow::Owned(out)
}

/// The log output (stderr): each log line leaves without the values [`Redaction::hide_in_logs`]
/// registered, whichever code wrote it (the relay's, librdkafka's, a library's).
pub struct LogWriter;

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        std::io::stderr().write_all(redact_log_line(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

impl fmt::Debug for Redaction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Redaction({} values)", self.0.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value registered for the logs is hidden from every line written after, whoever
    /// wrote it; values too short to hide without garbling the logs are left.
    #[test]
    fn values_hidden_in_logs_leave_no_trace_in_a_line() {
        Redaction::new(["db-secret-host.internal".to_owned(), "1".to_owned()]).hide_in_logs();
        assert_eq!(
            redact_log_line(
                "connecting to postgres://relay@db-secret-host.internal:5432 (attempt 1)"
            ),
            "connecting to postgres://relay@[hidden]:5432 (attempt 1)"
        );
        assert_eq!(redact_log_line("nothing here"), "nothing here");
    }

    #[test]
    fn a_hidden_value_never_survives_in_any_form() {
        let r = Redaction::new(["s3 cr\"et\n".to_owned(), String::new(), "  ".to_owned()]);
        assert_eq!(
            r.apply("connector.class: s3 cr\"et is not Debezium's"),
            "connector.class: [hidden] is not Debezium's"
        );
        assert_eq!(
            r.apply(r#"bad value "s3 cr\"et\n""#),
            r#"bad value "[hidden]""#
        );
        assert_eq!(r.apply("nothing to hide"), "nothing to hide");
        assert!(!Redaction::default().apply("x").contains("hidden"));
        assert_eq!(format!("{r:?}"), "Redaction(3 values)");
    }
}
