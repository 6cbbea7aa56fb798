//! A running pod as a kubelet sees it: its spec, its address, the env of each container
//! (literal values, ConfigMap and Secret references, the downward API), the files of the
//! ConfigMaps and Secrets mounted into it, the node's local volumes its claims are bound
//! to, and the `$(VAR)` references in its args. The lab's models read pods only through
//! this: never valtune's own resources.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::PathBuf;

use anyhow::Context;
use k8s_openapi::api::core::v1::{ConfigMap, Container, PersistentVolumeClaim, Pod, Secret};
use kube::api::Api;
use kube::{Client, ResourceExt};

#[derive(Debug, Clone)]
pub struct PodView {
    pub pod: Pod,
    pub name: String,
    pub namespace: String,
    pub ip: IpAddr,
    pub node: String,
    /// The ports the pod's containers declare: what `localhost:PORT` reaches in the pod.
    pub ports: BTreeSet<u16>,
    /// Ports whose listener is bound to the pod's loopback alone (an RPC bound to
    /// 127.0.0.1): `localhost:PORT` reaches them on the pod's loopback
    /// ([`PodView::loopback`]), not on its IP.
    pub loopback_ports: BTreeSet<u16>,
    /// The node's machine, as its kubelet knows it.
    pub machine: Machine,
    config_maps: BTreeMap<String, BTreeMap<String, String>>,
    secrets: BTreeMap<String, BTreeMap<String, String>>,
    /// What the lab's registry says is inside the images (a kubelet has pulled them).
    pub registry: Vec<crate::topology::ImageEntry>,
    /// The PersistentVolume each of the pod's claim volumes is bound to (pod volume name
    /// -> PV name), as the kubelet mounts it.
    pub claims: BTreeMap<String, String>,
    /// Where the node's local volumes keep their files (`<lab>/nodes/<node>/volumes`),
    /// one directory per PersistentVolume; None: the files are not kept.
    pub volumes_root: Option<PathBuf>,
    /// The node's own filesystem, where its hostPath volumes are (outliving pods).
    pub node_root: Option<std::path::PathBuf>,
    /// Where the kubelet keeps the files of the pod's own volumes (downward API), gone
    /// with the pod; None: not kept.
    pub pod_dir: Option<PathBuf>,
}

/// What a kubelet knows of its machine beyond the Node object: its memory and swap, its
/// swap behaviour, and what the admin prepared (lab/topology*.yaml).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Machine {
    pub memory: u128,
    pub prepared: crate::topology::Prepared,
    /// The load of the chain it follows, when it varies.
    pub chain_load: Option<crate::topology::ChainLoad>,
    /// How fast its cores are against the seeds' machines (topology `speed`); None: 1.
    pub speed: Option<f64>,
}

impl Machine {
    /// The machine of a node of the topology.
    pub fn of(node: &crate::topology::LabNode) -> Machine {
        Machine {
            memory: parse_bytes(&node.memory).unwrap_or(0),
            prepared: node.prepared.clone(),
            chain_load: node.chain_load,
            speed: Some(node.speed),
        }
    }

    pub fn swap(&self) -> u128 {
        self.prepared
            .swap
            .as_deref()
            .and_then(parse_bytes)
            .unwrap_or(0)
    }

    /// Whether the kubelet gives Burstable containers swap (`LimitedSwap`).
    pub fn limited_swap(&self) -> bool {
        self.prepared.swap_behavior.as_deref() == Some("LimitedSwap") && self.swap() > 0
    }
}

fn containers(pod: &Pod) -> impl Iterator<Item = &Container> {
    let spec = pod.spec.as_ref();
    spec.into_iter().flat_map(|s| {
        s.init_containers
            .iter()
            .flatten()
            .chain(s.containers.iter())
    })
}

impl PodView {
    /// Reads what the pod references (its ConfigMaps and Secrets), as a kubelet would.
    pub async fn load(client: &Client, pod: &Pod) -> anyhow::Result<PodView> {
        let namespace = pod.namespace().unwrap_or_default();
        let ip: IpAddr = pod
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.as_ref())
            .context("the pod has no IP yet")?
            .parse()
            .context("the pod's IP")?;
        let mut cm_names = BTreeSet::new();
        let mut secret_names = BTreeSet::new();
        for c in containers(pod) {
            for e in c.env.iter().flatten() {
                if let Some(r) = e.value_from.as_ref() {
                    if let Some(k) = &r.config_map_key_ref {
                        cm_names.insert(k.name.clone());
                    }
                    if let Some(k) = &r.secret_key_ref {
                        secret_names.insert(k.name.clone());
                    }
                }
            }
            for f in c.env_from.iter().flatten() {
                if let Some(r) = &f.config_map_ref {
                    cm_names.insert(r.name.clone());
                }
                if let Some(r) = &f.secret_ref {
                    secret_names.insert(r.name.clone());
                }
            }
        }
        let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &namespace);
        let mut claims = BTreeMap::new();
        for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
            if let Some(c) = &v.persistent_volume_claim
                && let Some(pv) = pvcs
                    .get_opt(&c.claim_name)
                    .await?
                    .and_then(|c| c.spec?.volume_name)
            {
                claims.insert(v.name.clone(), pv);
            }
            if let Some(cm) = &v.config_map {
                cm_names.insert(cm.name.clone());
            }
            if let Some(s) = v.secret.as_ref().and_then(|s| s.secret_name.clone()) {
                secret_names.insert(s);
            }
        }
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
        let mut config_maps = BTreeMap::new();
        for name in cm_names {
            if let Some(cm) = cms.get_opt(&name).await? {
                config_maps.insert(name, cm.data.unwrap_or_default());
            }
        }
        let secrets_api: Api<Secret> = Api::namespaced(client.clone(), &namespace);
        let mut secrets = BTreeMap::new();
        for name in secret_names {
            if let Some(s) = secrets_api.get_opt(&name).await? {
                let mut data: BTreeMap<String, String> = s
                    .data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
                    .collect();
                data.extend(s.string_data.unwrap_or_default());
                secrets.insert(name, data);
            }
        }
        let mut view = PodView::new(pod.clone(), ip, config_maps, secrets);
        view.claims = claims;
        Ok(view)
    }

    pub fn new(
        pod: Pod,
        ip: IpAddr,
        config_maps: BTreeMap<String, BTreeMap<String, String>>,
        secrets: BTreeMap<String, BTreeMap<String, String>>,
    ) -> PodView {
        let ports = containers(&pod)
            .flat_map(|c| c.ports.iter().flatten())
            .map(|p| p.container_port as u16)
            .collect();
        PodView {
            name: pod.name_any(),
            namespace: pod.namespace().unwrap_or_default(),
            node: pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .unwrap_or_default(),
            pod,
            ip,
            ports,
            loopback_ports: BTreeSet::new(),
            machine: Machine::default(),
            config_maps,
            secrets,
            registry: Vec::new(),
            claims: BTreeMap::new(),
            volumes_root: None,
            node_root: None,
            pod_dir: None,
        }
    }

    /// Where a downward API volume's files are on this machine.
    fn downward_dir(&self, volume: &str) -> Option<PathBuf> {
        Some(self.pod_dir.as_ref()?.join("volumes").join(volume))
    }

    /// Writes the files of the pod's downward API volumes (`metadata.annotations`,
    /// `metadata.labels`, and the single fields), as the kubelet does at the pod's start
    /// and again on its sync after the pod changes: `key="value"` lines sorted by key,
    /// the value quoted as Go's `%q` (kubernetes pkg/fieldpath `FormatMap`).
    pub fn write_downward(&self) -> std::io::Result<()> {
        let volumes = self
            .pod
            .spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten());
        for v in volumes {
            let (Some(d), Some(dir)) = (&v.downward_api, self.downward_dir(&v.name)) else {
                continue;
            };
            std::fs::create_dir_all(&dir)?;
            for item in d.items.iter().flatten() {
                let Some(f) = &item.field_ref else { continue };
                let text = match f.field_path.as_str() {
                    "metadata.annotations" => format_map(self.pod.metadata.annotations.as_ref()),
                    "metadata.labels" => format_map(self.pod.metadata.labels.as_ref()),
                    other => self.field(other).unwrap_or_default(),
                };
                let path = dir.join(&item.path);
                let tmp = path.with_extension("tmp");
                std::fs::write(&tmp, text)?;
                std::fs::rename(&tmp, &path)?;
            }
        }
        Ok(())
    }

    /// A container path as it is on this machine, for a program of the pod the lab runs
    /// here (as [`PodView::local_addr`] does for addresses): a path on a claim's volume is
    /// in the node's volume directory, a downward API volume's file in the pod's
    /// directory. Anything else (a ConfigMap's or Secret's file, a path of another
    /// container) is left as it is. A `--flag=PATH` argument has its PATH mapped.
    pub fn local_path(&self, c: &Container, text: &str) -> String {
        let (head, path) = match text.split_once('=') {
            Some((h, p)) if h.starts_with('-') => (format!("{h}="), p),
            _ => (String::new(), text),
        };
        let volumes = self
            .pod
            .spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten());
        let volumes: Vec<_> = volumes.collect();
        for m in c.volume_mounts.iter().flatten() {
            let base = m.mount_path.trim_end_matches('/');
            let Some(rest) = path.strip_prefix(base) else {
                continue;
            };
            if !(rest.is_empty() || rest.starts_with('/')) {
                continue;
            }
            let Some(v) = volumes.iter().find(|v| v.name == m.name) else {
                continue;
            };
            let dir = if v.downward_api.is_some() {
                self.downward_dir(&v.name)
            } else if v.persistent_volume_claim.is_some() {
                self.volume_dir(c, base)
            } else {
                None
            };
            if let Some(dir) = dir {
                let _ = std::fs::create_dir_all(&dir);
                return format!("{head}{}{rest}", dir.display());
            }
        }
        text.to_string()
    }

    /// The directory on the node that a container's path is on, when that path is on a
    /// claim's local volume: the files a process writes there outlive its pod, as on the
    /// machine's NVMe.
    pub fn volume_dir(&self, c: &Container, path: &str) -> Option<PathBuf> {
        let root = self.volumes_root.as_ref()?;
        c.volume_mounts.iter().flatten().find_map(|m| {
            let rest = path.strip_prefix(&m.mount_path)?.trim_start_matches('/');
            let pv = self.claims.get(&m.name)?;
            let sub = m.sub_path.as_deref().unwrap_or("");
            Some(root.join(pv).join(sub).join(rest))
        })
    }

    /// The address standing for the pod's own 127.0.0.1 (the node's, under host
    /// networking): [`crate::net::loopback_of`] its IP; the IP itself outside a lab's
    /// networks (unit tests).
    pub fn loopback(&self) -> IpAddr {
        crate::net::loopback_of(self.ip).unwrap_or(self.ip)
    }

    /// The addresses a listener bound to `bind` is reached at: its pod's IP and loopback
    /// for 0.0.0.0 (every address of its network namespace), the loopback for a 127.x
    /// address, the IP for the pod's own IP; none for an address the pod does not have
    /// (the bind fails: EADDRNOTAVAIL).
    pub fn listen_addrs(&self, bind: IpAddr) -> Vec<IpAddr> {
        if bind.is_unspecified() {
            vec![self.ip, self.loopback()]
        } else if bind.is_loopback() && bind != self.ip {
            vec![self.loopback()]
        } else if bind == self.ip {
            vec![self.ip]
        } else {
            Vec::new()
        }
    }

    /// The pod's volumes as its spec lists them.
    pub fn volumes(&self) -> Vec<k8s_openapi::api::core::v1::Volume> {
        self.pod
            .spec
            .as_ref()
            .and_then(|s| s.volumes.clone())
            .unwrap_or_default()
    }

    /// Whether the pod uses the node's network namespace (`hostNetwork`).
    pub fn host_network(&self) -> bool {
        self.pod
            .spec
            .as_ref()
            .and_then(|s| s.host_network)
            .unwrap_or(false)
    }

    /// What the lab's registry says of a container's image.
    pub fn image(&self, c: &Container) -> Option<&crate::topology::ImageEntry> {
        let name = c.image.as_deref()?;
        self.registry.iter().find(|i| i.image == name)
    }

    /// A container's environment, resolved.
    pub fn env(&self, c: &Container) -> BTreeMap<String, String> {
        let mut env = BTreeMap::new();
        for f in c.env_from.iter().flatten() {
            let prefix = f.prefix.clone().unwrap_or_default();
            let data = f
                .config_map_ref
                .as_ref()
                .and_then(|r| self.config_maps.get(&r.name))
                .or_else(|| {
                    f.secret_ref
                        .as_ref()
                        .and_then(|r| self.secrets.get(&r.name))
                });
            for (k, v) in data.into_iter().flatten() {
                env.insert(format!("{prefix}{k}"), v.clone());
            }
        }
        for e in c.env.iter().flatten() {
            let value = match (&e.value, &e.value_from) {
                (Some(v), _) => Some(expand(v, &env)),
                (None, Some(from)) => {
                    if let Some(k) = &from.config_map_key_ref {
                        self.config_maps
                            .get(&k.name)
                            .and_then(|d| d.get(&k.key))
                            .cloned()
                    } else if let Some(k) = &from.secret_key_ref {
                        self.secrets
                            .get(&k.name)
                            .and_then(|d| d.get(&k.key))
                            .cloned()
                    } else if let Some(f) = &from.field_ref {
                        self.field(&f.field_path)
                    } else {
                        None
                    }
                }
                (None, None) => Some(String::new()),
            };
            if let Some(v) = value {
                env.insert(e.name.clone(), v);
            }
        }
        env
    }

    /// The downward API fields a kubelet fills in.
    fn field(&self, path: &str) -> Option<String> {
        match path {
            "metadata.name" => Some(self.name.clone()),
            "metadata.namespace" => Some(self.namespace.clone()),
            "status.podIP" | "status.hostIP" => Some(self.ip.to_string()),
            "spec.nodeName" => Some(self.node.clone()),
            _ => None,
        }
    }

    /// The command line a container runs: command then args, `$(VAR)` expanded.
    pub fn command_line(&self, c: &Container) -> Vec<String> {
        let env = self.env(c);
        c.command
            .iter()
            .flatten()
            .chain(c.args.iter().flatten())
            .map(|a| expand(a, &env))
            .collect()
    }

    /// The files of a ConfigMap or Secret volume (key: content), if it is one.
    pub fn volume_files(
        &self,
        v: &k8s_openapi::api::core::v1::Volume,
    ) -> Option<&BTreeMap<String, String>> {
        if let Some(cm) = &v.config_map {
            self.config_maps.get(&cm.name)
        } else {
            self.secrets.get(v.secret.as_ref()?.secret_name.as_ref()?)
        }
    }

    /// The content of a file mounted into the container from a ConfigMap or Secret.
    /// On a claim's volume, a symbolic link is followed as in the container.
    pub fn file(&self, c: &Container, path: &str) -> Option<String> {
        self.mounted_file(c, path)
            .or_else(|| self.volume_file(c, path, 8))
    }

    fn mounted_file(&self, c: &Container, path: &str) -> Option<String> {
        let volumes = self.pod.spec.as_ref()?.volumes.as_ref()?;
        for m in c.volume_mounts.iter().flatten() {
            let rest = match &m.sub_path {
                Some(sub) if path == m.mount_path => sub.as_str(),
                Some(_) => continue,
                None => match path.strip_prefix(&m.mount_path) {
                    Some(r) => r.trim_start_matches('/'),
                    None => continue,
                },
            };
            let v = volumes.iter().find(|v| v.name == m.name)?;
            let data = if let Some(cm) = &v.config_map {
                self.config_maps.get(&cm.name)
            } else if let Some(s) = v.secret.as_ref().and_then(|s| s.secret_name.as_ref()) {
                self.secrets.get(s)
            } else {
                None
            };
            if let Some(content) = data.and_then(|d| d.get(rest)) {
                return Some(content.clone());
            }
        }
        None
    }

    /// A file on a claim's volume, following a symbolic link there as the container
    /// would: a link's target is a path of the container (a Secret's file, say).
    fn volume_file(&self, c: &Container, path: &str, hops: u8) -> Option<String> {
        let local = self.volume_dir(c, path)?;
        match std::fs::read_link(&local) {
            Ok(target) if hops > 0 => {
                let target = target.to_str()?;
                if target.starts_with('/') {
                    self.mounted_file(c, target)
                        .or_else(|| self.volume_file(c, target, hops - 1))
                } else {
                    std::fs::read_to_string(local.parent()?.join(target)).ok()
                }
            }
            Ok(_) => None,
            Err(_) => std::fs::read_to_string(&local).ok(),
        }
    }

    /// Where a container's path is on the node, when a hostPath volume holds it (the
    /// kubelet made a `DirectoryOrCreate` one at the pod's start): None for the pod's own
    /// volumes (claims and emptyDirs, gone with it, or wiped before the next claim).
    pub fn host_dir(&self, c: &Container, path: &str) -> Option<std::path::PathBuf> {
        let root = self.node_root.as_ref()?;
        let volumes = self.pod.spec.as_ref()?.volumes.as_ref()?;
        for m in c.volume_mounts.iter().flatten() {
            let Some(rest) = path.strip_prefix(m.mount_path.trim_end_matches('/')) else {
                continue;
            };
            if !(rest.is_empty() || rest.starts_with('/')) {
                continue;
            }
            let host = volumes
                .iter()
                .find(|v| v.name == m.name)
                .and_then(|v| v.host_path.as_ref())?;
            let dir = root
                .join(host.path.trim_start_matches('/'))
                .join(rest.trim_start_matches('/'));
            if host.type_.as_deref() == Some("DirectoryOrCreate") {
                let _ = std::fs::create_dir_all(&dir);
            }
            return dir.is_dir().then_some(dir);
        }
        None
    }

    /// A container's memory limit in bytes.
    pub fn memory_limit(c: &Container) -> Option<u128> {
        let q = c.resources.as_ref()?.limits.as_ref()?.get("memory")?;
        parse_bytes(&q.0)
    }

    /// An address a program of the pod uses, as it is on this machine: the pod's own
    /// listeners (`localhost:P`, `127.0.0.1:P`, `:P`, `0.0.0.0:P` for a port P of the pod)
    /// are on the pod's IP, except a listener bound to its loopback alone
    /// (`loopback_ports`), reached there; anything else is left as it is. (One liberty:
    /// `127.0.0.1:P` of a listener bound to the pod's IP alone reaches it, as it would
    /// not in a real pod; no rendering relies on that.)
    pub fn local_addr(&self, text: &str) -> String {
        let mut out = text.to_string();
        for port in &self.loopback_ports {
            let to = format!("{}:{port}", self.loopback());
            for from in [format!("localhost:{port}"), format!("127.0.0.1:{port}")] {
                out = out.replace(&from, &to);
            }
        }
        for port in &self.ports {
            let to = format!("{}:{port}", self.ip);
            for from in [
                format!("localhost:{port}"),
                format!("127.0.0.1:{port}"),
                format!("0.0.0.0:{port}"),
            ] {
                out = out.replace(&from, &to);
            }
            // A listen address of just ":PORT" (every interface of the pod).
            if out == format!(":{port}") || out.ends_with(&format!("=:{port}")) {
                out = format!("{}{to}", &out[..out.len() - format!(":{port}").len()]);
            }
        }
        out
    }
}

/// A map as the kubelet writes it into a downward API file (pkg/fieldpath `FormatMap`:
/// sorted `key=%q` lines).
fn format_map(m: Option<&BTreeMap<String, String>>) -> String {
    let lines: Vec<String> = m
        .into_iter()
        .flatten()
        .map(|(k, v)| {
            let mut q = String::from("\"");
            for ch in v.chars() {
                match ch {
                    '"' => q.push_str("\\\""),
                    '\\' => q.push_str("\\\\"),
                    '\n' => q.push_str("\\n"),
                    '\t' => q.push_str("\\t"),
                    c => q.push(c),
                }
            }
            q.push('"');
            format!("{k}={q}")
        })
        .collect();
    lines.join("\n")
}

/// `$(VAR)` references, as the kubelet expands them (`$$` escapes).
fn expand(s: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(r) = after.strip_prefix('$') {
            out.push('$');
            rest = r;
        } else if let Some(close) = after.strip_prefix('(').and_then(|r| r.find(')')) {
            let name = &after[1..1 + close];
            match env.get(name) {
                Some(v) => out.push_str(v),
                None => out.push_str(&rest[i..i + 3 + close]),
            }
            rest = &after[close + 2..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// Bytes of a Kubernetes quantity (the forms memory limits are written in).
pub fn parse_bytes(q: &str) -> Option<u128> {
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(q.len());
    let (num, suffix) = q.split_at(split);
    let value: f64 = num.parse().ok()?;
    let mult: f64 = match suffix {
        "" => 1.0,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        _ => return None,
    };
    Some((value * mult).round() as u128)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> PodView {
        let pod: Pod = serde_saphyr::from_str(
            "metadata: {name: t-1, namespace: ns}\nspec:\n  nodeName: bm-01\n  volumes:\n  - {name: cfg, configMap: {name: t-1-config}}\n  containers:\n  - name: validator\n    image: x\n    args: ['--config', '/etc/fd/config.toml', '--rpc=$(RPC)', '$$(LITERAL)']\n    env:\n    - {name: RPC, value: '8899'}\n    - {name: POD, valueFrom: {fieldRef: {fieldPath: metadata.name}}}\n    - {name: KEY, valueFrom: {secretKeyRef: {name: jwt, key: secret}}}\n    ports: [{containerPort: 8899}]\n    volumeMounts: [{name: cfg, mountPath: /etc/fd}]\n  - name: exporter\n    image: y\n    ports: [{containerPort: 9256}]\n",
        )
        .unwrap();
        PodView::new(
            pod,
            "127.9.9.200".parse().unwrap(),
            BTreeMap::from([(
                "t-1-config".to_string(),
                BTreeMap::from([("config.toml".to_string(), "[layout]\n".to_string())]),
            )]),
            BTreeMap::from([(
                "jwt".to_string(),
                BTreeMap::from([("secret".to_string(), "0xabc".to_string())]),
            )]),
        )
    }

    /// A pair member's pieces as the kubelet gives them: the pod's annotations in a
    /// downward API file (sorted, Go-quoted), rewritten when they change; a link on the
    /// claim's volume to a Secret's path read as the container reads it; a sidecar's
    /// `--flag=PATH` on those volumes mapped here, any other path left as it is.
    #[test]
    fn downward_files_links_on_a_claim_and_local_paths() {
        let root = std::env::temp_dir().join(format!("pv-downward-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let pod: Pod = serde_saphyr::from_str(
            "metadata: {name: a, namespace: ns, annotations: {z: '1', valtune.dev/identity-request: '7 take \"x\"'}}\nspec:\n  nodeName: vv\n  volumes:\n  - {name: ledger, persistentVolumeClaim: {claimName: a-ledger}}\n  - {name: staked, secret: {secretName: staked}}\n  - {name: podinfo, downwardAPI: {items: [{path: annotations, fieldRef: {fieldPath: metadata.annotations}}]}}\n  containers:\n  - name: validator\n    image: x\n    volumeMounts: [{name: ledger, mountPath: /mnt/ledger}, {name: staked, mountPath: /etc/valtune/staked}]\n  - name: agent\n    image: python\n    volumeMounts: [{name: ledger, mountPath: /mnt/ledger}, {name: podinfo, mountPath: /etc/podinfo}]\n",
        )
        .unwrap();
        let mut v = PodView::new(
            pod,
            "127.9.9.201".parse().unwrap(),
            BTreeMap::new(),
            BTreeMap::from([(
                "staked".to_string(),
                BTreeMap::from([("keypair".to_string(), "[1,2]".to_string())]),
            )]),
        );
        v.claims.insert("ledger".into(), "pv-1".into());
        v.volumes_root = Some(root.join("volumes"));
        v.pod_dir = Some(root.join("pod"));
        let spec = v.pod.spec.clone().unwrap();
        let (validator, agent) = (&spec.containers[0], &spec.containers[1]);

        v.write_downward().unwrap();
        let file = root.join("pod/volumes/podinfo/annotations");
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "valtune.dev/identity-request=\"7 take \\\"x\\\"\"\nz=\"1\""
        );
        assert_eq!(
            v.local_path(agent, "--request=/etc/podinfo/annotations"),
            format!("--request={}", file.display())
        );
        let ledger = v.local_path(agent, "/mnt/ledger");
        assert_eq!(ledger, root.join("volumes/pv-1/").display().to_string());
        assert_eq!(
            v.local_path(agent, "--staked=/etc/valtune/staked/keypair"),
            "--staked=/etc/valtune/staked/keypair"
        );

        std::os::unix::fs::symlink(
            "/etc/valtune/staked/keypair",
            root.join("volumes/pv-1/id.json"),
        )
        .unwrap();
        assert_eq!(
            v.file(validator, "/mnt/ledger/id.json").as_deref(),
            Some("[1,2]")
        );
        std::os::unix::fs::symlink("/etc/valtune/nothing", root.join("volumes/pv-1/gone.json"))
            .unwrap();
        assert_eq!(v.file(validator, "/mnt/ledger/gone.json"), None);

        v.pod.metadata.annotations = Some(BTreeMap::from([("z".to_string(), "2".to_string())]));
        v.write_downward().unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "z=\"2\"");
        let _ = std::fs::remove_dir_all(&root);
    }

    /// A path on a claim's volume is a directory of that PersistentVolume on the node; a
    /// ConfigMap's path, or any without a kept root, is none.
    #[test]
    fn a_path_on_a_claim_is_on_the_nodes_volume() {
        let mut v = view();
        let c = v.pod.spec.as_mut().unwrap().containers.get_mut(0).unwrap();
        c.volume_mounts
            .as_mut()
            .unwrap()
            .push(serde_saphyr::from_str("{name: ledger, mountPath: /mnt/ledger}").unwrap());
        let c = c.clone();
        assert_eq!(v.volume_dir(&c, "/mnt/ledger/tip"), None);
        v.volumes_root = Some("/lab/nodes/bm-01/volumes".into());
        v.claims.insert("ledger".into(), "bm-01-nvme0".into());
        assert_eq!(
            v.volume_dir(&c, "/mnt/ledger/tip"),
            Some("/lab/nodes/bm-01/volumes/bm-01-nvme0/tip".into())
        );
        assert_eq!(v.volume_dir(&c, "/etc/fd/config.toml"), None);
    }

    #[test]
    fn env_and_args_resolve_as_the_kubelet_resolves_them() {
        let v = view();
        let c = &v.pod.spec.as_ref().unwrap().containers[0];
        let env = v.env(c);
        assert_eq!(env["POD"], "t-1");
        assert_eq!(env["KEY"], "0xabc");
        assert_eq!(
            v.command_line(c),
            vec![
                "--config",
                "/etc/fd/config.toml",
                "--rpc=8899",
                "$(LITERAL)"
            ]
        );
        assert_eq!(
            v.file(c, "/etc/fd/config.toml").as_deref(),
            Some("[layout]\n")
        );
        assert_eq!(v.file(c, "/etc/fd/other.toml"), None);
    }

    #[test]
    fn the_pods_own_listeners_are_on_its_ip() {
        let v = view();
        assert_eq!(
            v.local_addr("-rpc-url=http://127.0.0.1:8899"),
            "-rpc-url=http://127.9.9.200:8899"
        );
        assert_eq!(
            v.local_addr("-web.listen-address=:9256"),
            "-web.listen-address=127.9.9.200:9256"
        );
        assert_eq!(v.local_addr(":9256"), "127.9.9.200:9256");
        // Not a port of the pod: somewhere else, left alone.
        assert_eq!(
            v.local_addr("http://127.0.0.1:9090/api/v1/write"),
            "http://127.0.0.1:9090/api/v1/write"
        );
    }

    /// An RPC bound to 127.0.0.1 is on the pod's loopback: its own programs reach it
    /// there, and nothing listens at its IP; 0.0.0.0 is both; another address none.
    #[test]
    fn a_listener_on_the_loopback_is_off_the_pods_ip() {
        let mut v = view();
        v.ip = "127.20.9.7".parse().unwrap();
        let lo: IpAddr = "127.148.9.7".parse().unwrap();
        assert_eq!(v.loopback(), lo);
        assert_eq!(v.listen_addrs("127.0.0.1".parse().unwrap()), vec![lo]);
        assert_eq!(v.listen_addrs("0.0.0.0".parse().unwrap()), vec![v.ip, lo]);
        assert_eq!(v.listen_addrs(v.ip), vec![v.ip]);
        assert!(v.listen_addrs("10.0.0.7".parse().unwrap()).is_empty());
        v.ports.insert(8899);
        v.loopback_ports.insert(8899);
        assert_eq!(
            v.local_addr("-rpc-url=http://127.0.0.1:8899"),
            "-rpc-url=http://127.148.9.7:8899"
        );
    }

    #[test]
    fn memory_limits_parse() {
        assert_eq!(parse_bytes("128Gi"), Some(128 << 30));
        assert_eq!(parse_bytes("1.5Ti"), Some(1536 << 30));
        assert_eq!(parse_bytes("512G"), Some(512_000_000_000));
        assert_eq!(parse_bytes("lots"), None);
    }
}
