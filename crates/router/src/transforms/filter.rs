//! `Filter`: the record is dropped (with a predicate: the records it matches).

use super::{Entry, Options, Side, Transformation};
use crate::connect::ConnectRecord;
use std::sync::Arc;

pub(super) const ENTRY: Entry = Entry {
    class: "org.apache.kafka.connect.transforms.Filter",
    sides: false,
    parse,
    doc: "the record dropped (with a predicate: the records it matches)",
};

#[derive(Debug)]
struct Filter;

fn parse(_: &Options<'_>, _: Option<Side>) -> Result<Arc<dyn Transformation>, String> {
    Ok(Arc::new(Filter))
}

impl Transformation for Filter {
    fn apply(&self, _: ConnectRecord, _: i64) -> Result<Option<ConnectRecord>, String> {
        Ok(None)
    }
}
