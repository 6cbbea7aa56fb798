//! Ports blocked on a node, as a firewall between the machines would block them
//! (`valtune-lab fault block`): a connection to that port at the node's address or at a
//! pod's on it is dropped (the caller waits for its own timeout: an iptables DROP) or
//! refused (an iptables REJECT with a TCP reset: connection refused).
//!
//! The lab enforces it where it listens itself: the processes it plays serve through
//! [`Firewall::listen`], and a real program's declared port is served by a forwarder
//! that does (sim/sidecars/forward.rs). One liberty: every process of the lab connects
//! from this machine's 127.0.0.1, so the lab cannot tell a connection's source node and
//! blocks the port for every caller, the pod's own programs included.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Block {
    /// Packets dropped: the caller waits until it gives up.
    Drop,
    /// Refused: connection refused at once.
    Reject,
}

/// The blocked ports, per node.
#[derive(Debug, Clone)]
pub struct Firewall {
    rules: Arc<RwLock<BTreeMap<(String, u16), Block>>>,
    changed: watch::Sender<u64>,
}

impl Default for Firewall {
    fn default() -> Self {
        Firewall {
            rules: Arc::default(),
            changed: watch::Sender::new(0),
        }
    }
}

impl Firewall {
    pub fn set(&self, node: &str, port: u16, block: Option<Block>) {
        {
            let mut r = self.rules.write().expect("lock");
            match block {
                Some(b) => r.insert((node.into(), port), b),
                None => r.remove(&(node.into(), port)),
            };
        }
        self.changed.send_modify(|n| *n += 1);
    }

    pub fn rules(&self) -> BTreeMap<(String, u16), Block> {
        self.rules.read().expect("lock").clone()
    }

    pub fn rule(&self, node: &str, port: u16) -> Option<Block> {
        self.rules
            .read()
            .expect("lock")
            .get(&(node.to_string(), port))
            .copied()
    }

    /// A listener for `addr` on `node` that keeps the node's rules: while its port is
    /// refused it does not listen (connections are refused), while dropped it takes
    /// connections and never answers them.
    pub fn listen(&self, node: &str, addr: SocketAddr) -> Guarded {
        Guarded {
            firewall: self.clone(),
            node: node.into(),
            addr,
            listener: None,
            changed: self.changed.subscribe(),
        }
    }
}

/// A listener kept by the firewall's rules (an axum [`axum::serve::Listener`]).
pub struct Guarded {
    firewall: Firewall,
    node: String,
    addr: SocketAddr,
    listener: Option<TcpListener>,
    changed: watch::Receiver<u64>,
}

/// Holds a dropped connection unanswered for as long as a caller would wait.
fn hold(stream: TcpStream) {
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(600)).await;
        drop(stream);
    });
}

impl Guarded {
    /// Binds at once (the address may still be held by the pod's previous process for a
    /// moment): whether it listens.
    pub async fn bind(&mut self) -> bool {
        if self.firewall.rule(&self.node, self.addr.port()) == Some(Block::Reject) {
            return true;
        }
        for _ in 0..40 {
            match TcpListener::bind(self.addr).await {
                Ok(l) => {
                    self.listener = Some(l);
                    return true;
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        }
        tracing::warn!(addr = %self.addr, "could not listen");
        false
    }

    /// The next connection the rules let through.
    pub async fn accept_allowed(&mut self) -> std::io::Result<(TcpStream, SocketAddr)> {
        loop {
            match self.firewall.rule(&self.node, self.addr.port()) {
                Some(Block::Reject) => {
                    // Not listening: the kernel refuses.
                    self.listener = None;
                    let _ = self.changed.changed().await;
                    continue;
                }
                _ if self.listener.is_none() => {
                    self.listener = Some(TcpListener::bind(self.addr).await?);
                }
                _ => {}
            }
            let l = self.listener.as_ref().expect("bound");
            tokio::select! {
                r = l.accept() => {
                    let (stream, peer) = r?;
                    if self.firewall.rule(&self.node, self.addr.port()) == Some(Block::Drop) {
                        hold(stream);
                        continue;
                    }
                    return Ok((stream, peer));
                }
                _ = self.changed.changed() => {}
            }
        }
    }
}

impl axum::serve::Listener for Guarded {
    type Io = TcpStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.accept_allowed().await {
                Ok(c) => return c,
                Err(e) => {
                    tracing::warn!(addr = %self.addr, error = %e, "accepting");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Through, refused, dropped (held unanswered), through again.
    #[tokio::test]
    async fn a_blocked_port_is_refused_or_dropped_and_lifted() {
        let fw = Firewall::default();
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let mut g = fw.listen("n1", addr);
        assert!(g.bind().await);
        let server = tokio::spawn(async move {
            loop {
                let (mut s, _) = g.accept_allowed().await.unwrap();
                let _ = s.write_all(b"hi").await;
            }
        });
        let said = || async {
            let mut s = TcpStream::connect(addr).await?;
            let mut buf = [0u8; 2];
            tokio::time::timeout(Duration::from_millis(500), s.read_exact(&mut buf))
                .await
                .map_err(|_| std::io::Error::other("timed out"))??;
            Ok::<_, std::io::Error>(buf)
        };
        assert_eq!(said().await.unwrap(), *b"hi");
        fw.set("n1", port, Some(Block::Reject));
        tokio::time::sleep(Duration::from_millis(50)).await;
        let e = said().await.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused, "{e}");
        fw.set("n1", port, Some(Block::Drop));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(said().await.unwrap_err().to_string(), "timed out");
        // Another node's rule changes nothing here.
        fw.set("n1", port, None);
        fw.set("n2", port, Some(Block::Reject));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(said().await.unwrap(), *b"hi");
        server.abort();
    }
}
