//! `outbox-relay-cost CASE PAYLOAD_BYTES EVENTS`: routes EVENTS Inserts of the case through
//! [`route_events`] after one to warm the router's caches. Run under
//! `valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*route_events*'` by
//! `scripts/cost-check.sh`: the instructions counted, over EVENTS, are one event's cost.

use outbox_relay_cost::{decode_and_route, insert_message, route_events, Case};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let parsed = match args.as_slice() {
        [case, size, events] => Case::from_name(case)
            .zip(size.parse::<usize>().ok().filter(|s| *s >= 16))
            .zip(events.parse::<usize>().ok()),
        _ => None,
    };
    let Some(((case, size), events)) = parsed else {
        eprintln!(
            "usage: outbox-relay-cost CASE PAYLOAD_BYTES EVENTS (CASE: {}; PAYLOAD_BYTES at least 16)",
            Case::ALL.map(Case::name).join(", ")
        );
        return ExitCode::from(2);
    };
    let mut router = case.router();
    let message = insert_message(size);
    decode_and_route(&mut router, &message);
    let bytes = route_events(&mut router, &message, events);
    println!("{} {size} {events} {bytes}", case.name());
    ExitCode::SUCCESS
}
