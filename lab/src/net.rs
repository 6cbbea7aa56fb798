//! Addresses for a lab: free loopback ports, and a pod network inside 127.0.0.0/8 that no
//! other lab on this machine uses (two labs, or CI beside a session, never collide).

use std::hash::{BuildHasher, Hasher};
use std::io::Write;
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};

use anyhow::Context;

/// A port nobody listens on right now (the kernel picks it).
pub fn free_port() -> anyhow::Result<u16> {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("binding a free port")?;
    Ok(l.local_addr()?.port())
}

/// A random number from the std hasher's per-process random keys (no RNG dependency).
pub fn random() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish()
}

/// A /24 inside 127.0.0.0/8 reserved for one lab by a lock file naming the lab's dir.
#[derive(Debug, Clone, PartialEq)]
pub struct PodNetwork {
    pub a: u8,
    pub b: u8,
    pub lock: PathBuf,
}

impl PodNetwork {
    pub fn cidr(&self) -> String {
        format!("127.{}.{}.0/24", self.a, self.b)
    }
    /// The range kwok hands pod IPs out from: .2 to .126, clear of the network address
    /// and of the nodes' addresses.
    pub fn kwok_cidr(&self) -> String {
        format!("127.{}.{}.2/25", self.a, self.b)
    }
    /// kwok's fallback node address (every node has its own: [`PodNetwork::node_ips`]).
    pub fn node_ip(&self) -> String {
        format!("127.{}.{}.1", self.a, self.b)
    }
    /// Each node's own InternalIP, from .128 up, so host-network pods on different nodes
    /// get different addresses, as on a real cluster.
    pub fn node_ips(&self) -> impl Iterator<Item = String> + '_ {
        (128..=254).map(|d| format!("127.{}.{}.{d}", self.a, self.b))
    }
}

/// The address that stands for a pod's own 127.0.0.1 (its network namespace's loopback;
/// the node's, for a host-network pod, whose IP is the node's): the pod IP 127.A.B.D's
/// twin 127.(A+128).B.D, in the /24 reserved beside the pod network
/// ([`reserve_pod_network`]). So a process bound to 127.0.0.1 is reachable by its own
/// pod's programs and not at the pod's IP, as in a real pod. None for an address outside
/// a lab's pod networks.
pub fn loopback_of(ip: std::net::IpAddr) -> Option<std::net::IpAddr> {
    match ip {
        std::net::IpAddr::V4(v4) => {
            let [o0, a, b, d] = v4.octets();
            (o0 == 127 && (16..128).contains(&a))
                .then(|| std::net::IpAddr::V4(Ipv4Addr::new(127, a + 128, b, d)))
        }
        std::net::IpAddr::V6(_) => None,
    }
}

/// The lock of the loopback twin of the pod network locked by `lock` (`127.A.B`).
fn twin_lock(lock: &Path) -> Option<PathBuf> {
    let name = lock.file_name()?.to_str()?;
    let mut parts = name.split('.');
    let (_, a, b) = (
        parts.next()?,
        parts.next()?.parse::<u8>().ok()?,
        parts.next()?,
    );
    Some(lock.with_file_name(format!("127.{}.{b}", a.checked_add(128)?)))
}

fn locks_dir() -> PathBuf {
    std::env::temp_dir().join("valtune-lab-networks")
}

/// Reserves a free /24, and its twin for the pods' loopbacks ([`loopback_of`]), both by
/// lock files, so no lab (of this build or an older one) takes either. A lock whose lab
/// dir has no state file any more is stale and reused.
pub fn reserve_pod_network(lab_dir: &Path) -> anyhow::Result<PodNetwork> {
    let dir = locks_dir();
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    for _ in 0..64 {
        let r = random();
        // 127.0.x.x and 127.1.x.x are left to other loopback users; 127.128 up are the
        // loopbacks' twins.
        let a = 16 + (r % 112) as u8;
        let b = (r >> 8) as u8;
        let lock = dir.join(format!("127.{a}.{b}"));
        let twin = dir.join(format!("127.{}.{b}", a + 128));
        let create = |path: &Path| {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(path)
        };
        match create(&lock) {
            Ok(mut f) => {
                writeln!(f, "{}", lab_dir.display())?;
                match create(&twin) {
                    Ok(mut t) => {
                        writeln!(t, "{}", lab_dir.display())?;
                        return Ok(PodNetwork { a, b, lock });
                    }
                    Err(_) => {
                        // An older lab's pod network, or a stale twin: try another.
                        let _ = std::fs::remove_file(&lock);
                        let owner = std::fs::read_to_string(&twin).unwrap_or_default();
                        if !Path::new(owner.trim()).join("state.json").exists() {
                            let _ = std::fs::remove_file(&twin);
                        }
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let owner = std::fs::read_to_string(&lock).unwrap_or_default();
                let owner = Path::new(owner.trim());
                if !owner.join("state.json").exists() {
                    let _ = std::fs::remove_file(&lock);
                }
            }
            Err(e) => return Err(e).with_context(|| format!("creating {}", lock.display())),
        }
    }
    anyhow::bail!(
        "no free pod network in 127.0.0.0/8 after 64 tries; remove stale locks in {}",
        dir.display()
    )
}

pub fn release_pod_network(lock: &Path) {
    if let Some(twin) = twin_lock(lock) {
        let _ = std::fs::remove_file(twin);
    }
    let _ = std::fs::remove_file(lock);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_labs_get_different_networks() {
        let d1 = std::env::temp_dir().join("valtune-net-test-1");
        let d2 = std::env::temp_dir().join("valtune-net-test-2");
        for d in [&d1, &d2] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::write(d.join("state.json"), "{}").unwrap();
        }
        let n1 = reserve_pod_network(&d1).unwrap();
        let n2 = reserve_pod_network(&d2).unwrap();
        assert_ne!(n1.cidr(), n2.cidr());
        assert!(n1.cidr().starts_with("127."));
        let twin = twin_lock(&n1.lock).unwrap();
        assert!(twin.exists());
        let pod: std::net::IpAddr = format!("127.{}.{}.7", n1.a, n1.b).parse().unwrap();
        assert_eq!(
            loopback_of(pod).unwrap().to_string(),
            format!("127.{}.{}.7", n1.a + 128, n1.b)
        );
        release_pod_network(&n1.lock);
        assert!(!twin.exists());
        release_pod_network(&n2.lock);
        for d in [&d1, &d2] {
            std::fs::remove_dir_all(d).unwrap();
        }
    }

    #[test]
    fn free_ports_are_distinct_and_bindable() {
        let p = free_port().unwrap();
        TcpListener::bind((Ipv4Addr::LOCALHOST, p)).unwrap();
    }
}
