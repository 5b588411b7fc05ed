//! What a panic leaves behind for whoever reports it: its message, its place and a
//! backtrace, as Kafka Connect reports the stack trace of a task that threw.

use std::cell::RefCell;
use std::sync::Once;

thread_local! {
    /// The last panic on this thread, as the hook saw it.
    static LAST: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Makes every later panic keep its trace for [`trace`] (the default hook still prints it).
pub fn record_traces() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let backtrace = std::backtrace::Backtrace::force_capture();
            LAST.with(|last| *last.borrow_mut() = Some(format!("{info}\n{backtrace}")));
            previous(info);
        }));
    });
}

/// The trace of the panic this thread just caught (`payload` from `catch_unwind`): what the
/// hook recorded, or the payload's message alone.
pub fn trace(payload: &(dyn std::any::Any + Send)) -> String {
    LAST.with(|last| last.borrow_mut().take())
        .unwrap_or_else(|| {
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".into());
            format!("panicked: {message}")
        })
}
