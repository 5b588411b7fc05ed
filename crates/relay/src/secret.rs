//! A value that must never appear in logs, errors or `--help` (passwords, URLs with them).

use serde::Deserialize;
use std::fmt;
use std::str::FromStr;

#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

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

impl fmt::Debug for Redaction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Redaction({} values)", self.0.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
