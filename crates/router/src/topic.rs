use crate::error::ConfigError;

const PLACEHOLDER: &str = "${routedByValue}";

/// A topic name template such as `${routedByValue}.events` or `outbox.event.${routedByValue}`,
/// optionally applied through a `route.topic.regex` like Kafka Connect's RegexRouter.
#[derive(Debug, Clone)]
pub struct TopicTemplate {
    prefix: String,
    suffix: Option<String>,
    regex: Option<TopicRegex>,
}

/// `route.topic.regex` + `route.topic.replacement` with Java's `Matcher.matches()` /
/// `replaceFirst` semantics: the whole routing value must match, else it is the topic.
#[derive(Debug, Clone)]
struct TopicRegex {
    regex: regex::Regex,
    /// The replacement in the regex crate's syntax.
    replacement: String,
}

impl PartialEq for TopicTemplate {
    fn eq(&self, other: &Self) -> bool {
        self.prefix == other.prefix
            && self.suffix == other.suffix
            && self
                .regex
                .as_ref()
                .map(|r| (r.regex.as_str(), &r.replacement))
                == other
                    .regex
                    .as_ref()
                    .map(|r| (r.regex.as_str(), &r.replacement))
    }
}

impl Eq for TopicTemplate {}

/// Debezium's default `route.topic.regex`.
pub const DEFAULT_TOPIC_REGEX: &str = "(?<routedByValue>.*)";

impl TopicTemplate {
    /// A template applied through `regex`; the default regex is the plain template.
    pub fn with_regex(regex: &str, replacement: &str) -> Result<Self, ConfigError> {
        if regex == DEFAULT_TOPIC_REGEX {
            return Self::parse(replacement);
        }
        let compiled = regex::Regex::new(&format!("^(?:{regex})$"))
            .map_err(|e| ConfigError::InvalidRegex(regex.to_owned(), e.to_string()))?;
        let replacement = java_replacement(replacement, &compiled)
            .map_err(|e| ConfigError::InvalidRegex(regex.to_owned(), e))?;
        Ok(Self {
            prefix: String::new(),
            suffix: None,
            regex: Some(TopicRegex {
                regex: compiled,
                replacement,
            }),
        })
    }

    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let template = match text.split_once(PLACEHOLDER) {
            Some((prefix, suffix)) if !suffix.contains(PLACEHOLDER) => Self {
                prefix: prefix.to_owned(),
                suffix: Some(suffix.to_owned()),
                regex: None,
            },
            Some(_) => return Err(ConfigError::InvalidTemplate(text.to_owned())),
            None => Self {
                prefix: text.to_owned(),
                suffix: None,
                regex: None,
            },
        };
        if template.suffix.is_none() && validate_topic_name(text).is_err() {
            return Err(ConfigError::InvalidTemplate(text.to_owned()));
        }
        Ok(template)
    }

    pub fn render(&self, routed_by_value: &str) -> String {
        if let Some(r) = &self.regex {
            return match r.regex.captures(routed_by_value) {
                Some(captures) => {
                    let mut topic = String::new();
                    captures.expand(&r.replacement, &mut topic);
                    topic
                }
                None => routed_by_value.to_owned(),
            };
        }
        match &self.suffix {
            Some(suffix) => {
                let mut s =
                    String::with_capacity(self.prefix.len() + routed_by_value.len() + suffix.len());
                s.push_str(&self.prefix);
                s.push_str(routed_by_value);
                s.push_str(suffix);
                s
            }
            None => self.prefix.clone(),
        }
    }
}

/// Java's replacement syntax (`${name}`, `$1`, `\$` for a literal) in the regex crate's
/// (`${name}`, `${1}`, `$$`).
fn java_replacement(java: &str, regex: &regex::Regex) -> Result<String, String> {
    let groups = regex.captures_len() - 1;
    let mut out = String::new();
    let mut chars = java.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('$') => out.push_str("$$"),
                Some(other) => out.push(other),
                None => return Err("replacement ends with a lone backslash".into()),
            },
            '$' => match chars.next() {
                Some('{') => {
                    let name: String = chars.by_ref().take_while(|c| *c != '}').collect();
                    if regex.capture_names().flatten().all(|n| n != name) {
                        return Err(format!("replacement names group {name:?}, which the regex does not have"));
                    }
                    out.push_str(&format!("${{{name}}}"));
                }
                Some(d) if d.is_ascii_digit() => {
                    // Java reads further digits while they still name an existing group.
                    let mut number = d.to_digit(10).unwrap_or(0) as usize;
                    while let Some(next) = chars.peek().and_then(|c| c.to_digit(10)) {
                        let longer = number * 10 + next as usize;
                        if longer > groups {
                            break;
                        }
                        number = longer;
                        chars.next();
                    }
                    if number > groups {
                        return Err(format!("replacement refers to group {number}, the regex has {groups}"));
                    }
                    out.push_str(&format!("${{{number}}}"));
                }
                _ => return Err("a '$' in the replacement must be followed by {name} or a group number (write \\$ for a dollar sign)".into()),
            },
            other => out.push(other),
        }
    }
    Ok(out)
}

/// Kafka's rule for topic names: 1 to 249 characters of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn validate_topic_name(topic: &str) -> Result<(), String> {
    if topic.is_empty() {
        return Err("topic name is empty".into());
    }
    if topic == "." || topic == ".." {
        return Err(format!("topic name {topic:?} is not allowed"));
    }
    if topic.len() > 249 {
        return Err(format!(
            "topic name is {} characters long, Kafka allows 249",
            topic.len()
        ));
    }
    if let Some(c) = topic
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "topic name {topic:?} contains {c:?}; Kafka allows only [a-zA-Z0-9._-]"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_debezium_templates() {
        assert_eq!(
            TopicTemplate::parse("${routedByValue}.events")
                .unwrap()
                .render("Order"),
            "Order.events"
        );
        assert_eq!(
            TopicTemplate::parse("outbox.event.${routedByValue}")
                .unwrap()
                .render("Order"),
            "outbox.event.Order"
        );
        assert_eq!(
            TopicTemplate::parse("all-events").unwrap().render("Order"),
            "all-events"
        );
        assert!(TopicTemplate::parse("${routedByValue}.${routedByValue}").is_err());
        assert!(TopicTemplate::parse("bad topic").is_err());
    }

    #[test]
    fn regex_routing_like_kafka_connect_regex_router() {
        let t = TopicTemplate::with_regex(
            "(?<kind>order|invoice)_(?<version>v\\d+)",
            "events.${kind}.$2",
        )
        .unwrap();
        assert_eq!(t.render("order_v2"), "events.order.v2");
        // No whole match: the routing value itself is the topic (RegexRouter).
        assert_eq!(t.render("customer_v1"), "customer_v1");
        assert_eq!(t.render("xorder_v2"), "xorder_v2");
        let d = TopicTemplate::with_regex(DEFAULT_TOPIC_REGEX, "outbox.event.${routedByValue}")
            .unwrap();
        assert_eq!(d.render("Order"), "outbox.event.Order");
        assert!(TopicTemplate::with_regex("(?=x).*", "a").is_err());
        assert!(TopicTemplate::with_regex("(.*)", "${missing}").is_err());
        assert!(TopicTemplate::with_regex("(.*)", "$2").is_err());
        assert_eq!(
            TopicTemplate::with_regex("(.*)", "\\$$1")
                .unwrap()
                .render("a"),
            "$a"
        );
    }

    #[test]
    fn topic_names_follow_kafka_rules() {
        assert!(validate_topic_name("Order.events").is_ok());
        assert!(validate_topic_name("a-b_c.9").is_ok());
        assert!(validate_topic_name("").is_err());
        assert!(validate_topic_name("..").is_err());
        assert!(validate_topic_name("Order events")
            .unwrap_err()
            .contains("' '"));
        assert!(validate_topic_name("Bestellung.ä").is_err());
        assert!(validate_topic_name(&"x".repeat(250)).is_err());
        assert!(validate_topic_name(&"x".repeat(249)).is_ok());
    }
}
