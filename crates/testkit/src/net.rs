use std::net::TcpListener;
use std::time::{Duration, Instant};

/// Ports below Linux's ephemeral range (`ip_local_port_range`, 32768-60999 by default).
const PORTS: std::ops::Range<u16> = 20_000..32_768;

/// A loopback port that was free a moment ago, for a server a test starts.
///
/// Not one the kernel hands out for `bind(0)`: those come from the ephemeral range, where
/// every outgoing connection (Kafka clients, PostgreSQL connections) also takes its local
/// port, so a port chosen there could be taken before the server binds it ("Address already
/// in use"). A random port below that range instead, never the same one twice in a process.
pub fn free_port() -> u16 {
    use std::hash::{BuildHasher, RandomState};
    use std::sync::Mutex;
    static GIVEN: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    let random = RandomState::new();
    for attempt in 0u32..1_000 {
        let n = random.hash_one((std::process::id(), attempt, Instant::now()));
        let port = PORTS.start + (n % u64::from(PORTS.end - PORTS.start)) as u16;
        let mut given = GIVEN.lock().unwrap();
        if given.contains(&port) || TcpListener::bind(("127.0.0.1", port)).is_err() {
            continue;
        }
        given.push(port);
        return port;
    }
    panic!("no free loopback port in {PORTS:?} after 1,000 tries")
}

/// Waits until something accepts TCP connections on `127.0.0.1:port`.
pub fn wait_for_port(port: u16, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}
