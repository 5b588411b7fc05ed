//! Arbitrary bytes through the decoder and the router: errors are fine, panics are bugs.
//! Run: cd crates/pgoutput/fuzz && cargo +nightly fuzz run decode -- -max_total_time=60
#![no_main]

use libfuzzer_sys::fuzz_target;
use outbox_router::{Router, RouterConfig};

fuzz_target!(|data: &[u8]| {
    let mut router = Router::new(RouterConfig::default());
    // Several messages in one input, split on a marker byte, so that a Relation can be
    // followed by rows of it.
    for part in data.split(|b| *b == 0xFF) {
        if let Ok(message) = pgoutput::decode(bytes::Bytes::copy_from_slice(part)) {
            let _ = router.route(&message);
        }
    }
});
