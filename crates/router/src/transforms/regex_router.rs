//! `RegexRouter`: `regex` must match the whole topic (`Matcher.matches()`), which is then
//! `replaceFirst(replacement)`, Java's regular expressions and replacement syntax.

use super::{Entry, Options, Side, Transformation};
use crate::connect::ConnectRecord;
use crate::topic::TopicTemplate;
use std::sync::Arc;

pub(super) const ENTRY: Entry = Entry {
    class: "org.apache.kafka.connect.transforms.RegexRouter",
    sides: false,
    parse,
    doc: "the topic rewritten where `regex` matches all of it (`replacement`, Java's syntax)",
};

#[derive(Debug)]
struct RegexRouter(TopicTemplate);

fn parse(o: &Options<'_>, _: Option<Side>) -> Result<Arc<dyn Transformation>, String> {
    let template = TopicTemplate::with_regex(&o.required("regex")?, &o.required("replacement")?)
        .map_err(|e| format!("{}: {e}", o.key("regex")))?;
    Ok(Arc::new(RegexRouter(template)))
}

impl Transformation for RegexRouter {
    fn apply(&self, mut record: ConnectRecord, _: i64) -> Result<Option<ConnectRecord>, String> {
        let topic = self.0.render(&record.topic);
        if *topic != *record.topic {
            record.topic = topic.into();
        }
        Ok(Some(record))
    }
}
