//! The pod's IP in front of a real program's own port: the program listens at the pod's
//! loopback twin (spawn.rs), and what the node's firewall lets through
//! (crate::kubelet::firewall) is passed on to it, byte for byte, both ways.

use std::net::SocketAddr;

use k8s_openapi::api::core::v1::Container;
use tracing::warn;

use super::PodView;
use crate::kubelet::firewall::Guarded;

/// The ports the container declares that its command line listens on at the pod's IP
/// (after the lab's address mapping, pod_view.rs `local_addr`): the ones the lab can put
/// behind the firewall. A port it listens on some other way is left as it is.
pub fn own_ports(view: &PodView, c: &Container) -> Vec<u16> {
    let line: Vec<String> = view
        .command_line(c)
        .iter()
        .map(|a| view.local_addr(a))
        .collect();
    c.ports
        .iter()
        .flatten()
        .filter_map(|p| u16::try_from(p.container_port).ok())
        .filter(|p| {
            let at = format!("{}:{p}", view.ip);
            line.iter().any(|a| a.contains(&at))
        })
        .collect()
}

/// Forwards connections from `front` to `back` until aborted.
pub async fn run(mut front: Guarded, back: SocketAddr) {
    if !front.bind().await {
        return;
    }
    loop {
        let (mut inbound, _) = match front.accept_allowed().await {
            Ok(c) => c,
            Err(e) => {
                warn!(%back, error = %e, "forwarding");
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                continue;
            }
        };
        tokio::spawn(async move {
            // Not listening (yet, or any more): the caller sees its connection closed.
            if let Ok(mut outbound) = tokio::net::TcpStream::connect(back).await {
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::firewall::{Block, Firewall};
    use std::collections::BTreeMap;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn only_ports_the_command_line_listens_on_at_the_pods_ip_are_forwarded() {
        let pod: k8s_openapi::api::core::v1::Pod = serde_saphyr::from_str(
            "metadata: {name: p, namespace: ns}\nspec:\n  containers:\n  - name: agent\n    args: ['--listen=$(POD_IP):8901', '--peer=http://127.9.9.9:8901']\n    env: [{name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}]\n    ports: [{containerPort: 8901}, {containerPort: 9000}]\n",
        )
        .unwrap();
        let view = PodView::new(
            pod,
            "127.7.7.7".parse().unwrap(),
            BTreeMap::new(),
            BTreeMap::new(),
        );
        let c = view.pod.spec.as_ref().unwrap().containers[0].clone();
        assert_eq!(own_ports(&view, &c), vec![8901]);
    }

    #[tokio::test]
    async fn what_the_firewall_lets_through_reaches_the_program() {
        let free = || {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let (front, back) = (free(), free());
        let program = tokio::net::TcpListener::bind(back).await.unwrap();
        tokio::spawn(async move {
            loop {
                let (mut s, _) = program.accept().await.unwrap();
                let mut buf = [0u8; 4];
                s.read_exact(&mut buf).await.unwrap();
                s.write_all(&buf).await.unwrap();
            }
        });
        let fw = Firewall::default();
        let task = tokio::spawn(run(fw.listen("n", front), back));
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let echo = || async {
            let mut s = tokio::net::TcpStream::connect(front).await?;
            s.write_all(b"ping").await?;
            let mut buf = [0u8; 4];
            s.read_exact(&mut buf).await?;
            Ok::<_, std::io::Error>(buf)
        };
        assert_eq!(echo().await.unwrap(), *b"ping");
        fw.set("n", front.port(), Some(Block::Reject));
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(echo().await.is_err());
        task.abort();
    }
}
