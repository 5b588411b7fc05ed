//! `TimestampRouter`: the topic becomes `topic.format` with `${topic}` and `${timestamp}`
//! (the record's timestamp in `timestamp.format`, UTC). Kafka's defaults:
//! `${topic}-${timestamp}`, `yyyyMMdd`.

use super::{DateFormat, Entry, Options, Side, Transformation};
use crate::connect::ConnectRecord;
use std::sync::Arc;

pub(super) const ENTRY: Entry = Entry {
    class: "org.apache.kafka.connect.transforms.TimestampRouter",
    sides: false,
    parse,
    doc: "the topic named after the record's time (`topic.format`, `timestamp.format`)",
};

#[derive(Debug)]
struct TimestampRouter {
    topic_format: String,
    timestamp: DateFormat,
}

fn parse(o: &Options<'_>, _: Option<Side>) -> Result<Arc<dyn Transformation>, String> {
    Ok(Arc::new(TimestampRouter {
        topic_format: o
            .get("topic.format")
            .unwrap_or_else(|| "${topic}-${timestamp}".into()),
        timestamp: DateFormat::parse(
            &o.get("timestamp.format")
                .unwrap_or_else(|| "yyyyMMdd".into()),
        )
        .map_err(|e| format!("{}: {e}", o.key("timestamp.format")))?,
    }))
}

impl Transformation for TimestampRouter {
    fn apply(
        &self,
        mut record: ConnectRecord,
        now_ms: i64,
    ) -> Result<Option<ConnectRecord>, String> {
        // The record keeps the time its topic was named after.
        let millis = *record.timestamp_ms.get_or_insert(now_ms);
        record.topic = self
            .topic_format
            .replace("${topic}", &record.topic)
            .replace("${timestamp}", &self.timestamp.format(millis))
            .into();
        Ok(Some(record))
    }
}
