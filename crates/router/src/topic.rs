use crate::config::ConfigError;

const PLACEHOLDER: &str = "${routedByValue}";

/// A topic name template such as `${routedByValue}.events` or `outbox.event.${routedByValue}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicTemplate {
    prefix: String,
    suffix: Option<String>,
}

impl TopicTemplate {
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let template = match text.split_once(PLACEHOLDER) {
            Some((prefix, suffix)) if !suffix.contains(PLACEHOLDER) => Self {
                prefix: prefix.to_owned(),
                suffix: Some(suffix.to_owned()),
            },
            Some(_) => return Err(ConfigError::InvalidTemplate(text.to_owned())),
            None => Self {
                prefix: text.to_owned(),
                suffix: None,
            },
        };
        if template.suffix.is_none() && validate_topic_name(text).is_err() {
            return Err(ConfigError::InvalidTemplate(text.to_owned()));
        }
        Ok(template)
    }

    pub fn render(&self, routed_by_value: &str) -> String {
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
