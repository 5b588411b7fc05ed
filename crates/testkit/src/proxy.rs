//! A TCP proxy on loopback for network-fault tests: it forwards connections to a target
//! and can *stall* the ones open now — they stay open but nothing passes any more, as with a
//! silently dead network path (a half-open connection) — while new connections still work.

use anyhow::Result;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub struct TcpProxy {
    address: SocketAddr,
    /// Connections with a number below this are stalled.
    stalled_below: Arc<AtomicU64>,
    next: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl TcpProxy {
    /// Listens on a free loopback port and forwards to `target`.
    pub async fn start(target: SocketAddr) -> Result<TcpProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let stalled_below = Arc::new(AtomicU64::new(0));
        let next = Arc::new(AtomicU64::new(0));
        let (stall, counter) = (stalled_below.clone(), next.clone());
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let number = counter.fetch_add(1, Ordering::SeqCst);
                let stall = stall.clone();
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(target).await {
                        let (cr, cw) = client.into_split();
                        let (sr, sw) = server.into_split();
                        let up = pump(cr, sw, number, stall.clone());
                        let down = pump(sr, cw, number, stall);
                        let _ = tokio::join!(up, down);
                    }
                });
            }
        });
        Ok(TcpProxy {
            address,
            stalled_below,
            next,
            task,
        })
    }

    pub fn port(&self) -> u16 {
        self.address.port()
    }

    /// Every connection open now stops passing data (without closing); later ones work.
    pub fn stall_open_connections(&self) {
        self.stalled_below
            .store(self.next.load(Ordering::SeqCst), Ordering::SeqCst);
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    number: u64,
    stalled_below: Arc<AtomicU64>,
) {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if number < stalled_below.load(Ordering::SeqCst) {
            // Swallow everything from now on, keeping both sockets open.
            loop {
                if matches!(from.read(&mut buffer).await, Ok(0) | Err(_)) {
                    std::future::pending::<()>().await;
                }
            }
        }
        if to.write_all(&buffer[..n]).await.is_err() {
            return;
        }
    }
}
