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
    /// The regex anchored at both ends (Java `matches()`).
    whole: regex::Regex,
    /// The regex as it is (Java `find()`, which `replaceFirst` uses).
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
        let ascii = java_ascii_classes(regex);
        let invalid = |e: regex::Error| ConfigError::InvalidRegex(regex.to_owned(), e.to_string());
        let whole = regex::Regex::new(&format!("^(?:{ascii})$")).map_err(invalid)?;
        let find = regex::Regex::new(&ascii).map_err(invalid)?;
        let replacement = java_replacement(replacement, &find)
            .map_err(|e| ConfigError::InvalidRegex(regex.to_owned(), e))?;
        Ok(Self {
            prefix: String::new(),
            suffix: None,
            regex: Some(TopicRegex {
                whole,
                regex: find,
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
            // EventRouterDelegate: `if (matcher.matches()) matcher.replaceFirst(...)`, and
            // replaceFirst replaces the leftmost *find*, which may be shorter than the whole
            // value (`a|ab` on "ab" finds "a": the rest is kept).
            if !r.whole.is_match(routed_by_value) {
                return routed_by_value.to_owned();
            }
            let Some(captures) = r.regex.captures(routed_by_value) else {
                return routed_by_value.to_owned();
            };
            let found = captures.get(0).expect("group 0 is the match");
            let mut topic = routed_by_value[..found.start()].to_owned();
            captures.expand(&r.replacement, &mut topic);
            topic.push_str(&routed_by_value[found.end()..]);
            return topic;
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

/// A Java regular expression that must match a whole string (`Pattern.matches`), with
/// Java's ASCII `\\d \\w \\s \\b`.
pub(crate) fn java_whole_match(pattern: &str) -> Result<regex::Regex, String> {
    regex::Regex::new(&format!("^(?:{})$", java_ascii_classes(pattern))).map_err(|e| {
        format!("{pattern:?} is not a regular expression outbox-relay reads as Java does: {e}")
    })
}

/// Java's `\\d \\w \\s \\b` (and their negations) are ASCII-only unless
/// UNICODE_CHARACTER_CLASS is set; the regex crate's are Unicode. The pattern with those
/// escapes spelled as ASCII classes, inside and outside character classes.
fn java_ascii_classes(pattern: &str) -> String {
    const DIGIT: &str = "0-9";
    const WORD: &str = "a-zA-Z_0-9";
    const SPACE: &str = " \\t\\n\\x0B\\f\\r";
    let mut out = String::with_capacity(pattern.len());
    let mut depth = 0usize;
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let Some(next) = chars.next() else {
                    out.push(c);
                    break;
                };
                let class = match next.to_ascii_lowercase() {
                    'd' => Some(DIGIT),
                    'w' => Some(WORD),
                    's' => Some(SPACE),
                    _ => None,
                };
                match (class, next.is_ascii_uppercase(), depth > 0) {
                    (Some(set), false, true) => out.push_str(set),
                    (Some(set), false, false) => out.push_str(&format!("[{set}]")),
                    (Some(set), true, _) => out.push_str(&format!("[^{set}]")),
                    (None, _, false) if next == 'b' || next == 'B' => {
                        out.push_str(&format!("(?-u:\\{next})"))
                    }
                    _ => {
                        out.push(c);
                        out.push(next);
                    }
                }
            }
            '[' => {
                depth += 1;
                out.push(c);
                // A `]` right after `[` or `[^` is a literal.
                if chars.peek() == Some(&'^') {
                    out.push(chars.next().expect("peeked"));
                }
                if chars.peek() == Some(&']') {
                    out.push_str("\\]");
                    chars.next();
                }
            }
            ']' if depth > 0 => {
                depth -= 1;
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
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

    /// EventRouterDelegate: `matcher.matches()` then `matcher.replaceFirst(replacement)`.
    /// replaceFirst re-runs `find()`, whose leftmost match may end before the value does
    /// (the rest is kept), and Java's `\\d \\w \\s \\b` are ASCII-only (java.util.regex.Pattern,
    /// without UNICODE_CHARACTER_CLASS).
    #[test]
    fn regex_routing_is_java_matches_then_replace_first_with_ascii_classes() {
        let t = TopicTemplate::with_regex("(a|ab)", "X").unwrap();
        assert_eq!(t.render("ab"), "Xb", "the find is \"a\"; \"b\" stays");
        let t = TopicTemplate::with_regex("(\\w+)-(\\d+)", "t.$1.$2").unwrap();
        assert_eq!(t.render("order-42"), "t.order.42");
        // Arabic-Indic digits and accented letters are not \\d / \\w in Java.
        assert_eq!(t.render("order-\u{0664}\u{0662}"), "order-\u{0664}\u{0662}");
        assert_eq!(t.render("caf\u{e9}-1"), "caf\u{e9}-1");
        let t = TopicTemplate::with_regex("[\\w.]+\\s?[^\\d]", "ok").unwrap();
        assert_eq!(t.render("a.b x"), "ok");
        assert_eq!(t.render("a.b 1"), "a.b 1");
        let t = TopicTemplate::with_regex("[]a]+", "ok").unwrap();
        assert_eq!(t.render("]a"), "ok");
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
