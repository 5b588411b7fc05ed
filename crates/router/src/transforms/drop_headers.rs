//! `DropHeaders`: every header named in `headers`.

use super::{Entry, Options, Side, Transformation};
use crate::connect::ConnectRecord;
use std::sync::Arc;

pub(super) const ENTRY: Entry = Entry {
    class: "org.apache.kafka.connect.transforms.DropHeaders",
    sides: false,
    parse,
    doc: "every header named in `headers` removed",
};

#[derive(Debug)]
struct DropHeaders(Vec<String>);

fn parse(o: &Options<'_>, _: Option<Side>) -> Result<Arc<dyn Transformation>, String> {
    o.required("headers")?;
    Ok(Arc::new(DropHeaders(o.list("headers"))))
}

impl Transformation for DropHeaders {
    fn apply(&self, mut record: ConnectRecord, _: i64) -> Result<Option<ConnectRecord>, String> {
        record
            .headers
            .retain(|h| !self.0.iter().any(|n| *h.name == **n));
        Ok(Some(record))
    }
}
