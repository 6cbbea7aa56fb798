//! What a kubelet offers pods: the machine's capacity less what its configuration
//! reserves, computed as the kubelet computes it, so a trial that cannot be scheduled on
//! the real machine a lab node stands for cannot be scheduled in the lab either.
//!
//! `allocatable = capacity - kubeReserved - systemReserved - evictionHard`, per resource
//! (kubernetes/website content/en/docs/tasks/administer-cluster/reserve-compute-resources.md),
//! and every pre-allocated hugepage pool comes off allocatable memory, not off capacity
//! (kubernetes/kubernetes pkg/kubelet/nodestatus/setters.go: "for every huge page
//! reservation, we need to remove it from allocatable memory"). The field names are
//! KubeletConfiguration's (kubernetes/kubelet v0.34.0 config/v1beta1/types.go), so a lab
//! node's `kubelet:` block is a subset of the one docs/prepare-cluster.md tells an admin
//! to write.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::sim::pod_view::parse_bytes;

const GI: u128 = 1 << 30;
const MI: u128 = 1 << 20;

/// The reservations of a node's kubelet (kubelet.config.k8s.io/v1beta1 field names).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct KubeletConfig {
    /// `none` (the kubelet's default) or `static` (exclusive cores for Guaranteed pods
    /// with whole CPUs).
    #[serde(default)]
    pub cpu_manager_policy: Option<String>,
    /// An explicit CPU list (`"0,96"`, `"0-1"`). It overrides the cpu of systemReserved
    /// and kubeReserved: the kubelet sets systemReserved.cpu to the list's size
    /// (kubernetes/kubernetes cmd/kubelet/app/server.go).
    #[serde(default, rename = "reservedSystemCPUs")]
    pub reserved_system_cpus: Option<String>,
    /// cpu, memory, ephemeral-storage. Default: nothing (types.go "Default: nil").
    #[serde(default)]
    pub system_reserved: BTreeMap<String, String>,
    #[serde(default)]
    pub kube_reserved: BTreeMap<String, String>,
    /// Hard eviction thresholds. Unset: the kubelet's defaults (memory.available 100Mi,
    /// nodefs.available 10%, nodefs.inodesFree 5%, imagefs.available 15%; types.go
    /// L550-559). Set: the signals not written are 0 (`mergeDefaultEvictionSettings`
    /// defaults to false), as on a real kubelet.
    #[serde(default)]
    pub eviction_hard: Option<BTreeMap<String, String>>,
}

/// What the machine has, as the kubelet reports it in `status.capacity`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Capacity {
    pub cpu_millis: u64,
    /// The kernel's MemTotal (the hugepage pools are still inside it).
    pub memory: u128,
    pub hugepages_1gi: u32,
    pub hugepages_2mi: u32,
    pub ephemeral_storage: u128,
}

/// What pods may request, as in `status.allocatable`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Allocatable {
    pub cpu_millis: u64,
    pub memory: u128,
    pub ephemeral_storage: u128,
}

impl KubeletConfig {
    /// Whole and fractional CPUs reserved for the system, in millicores.
    pub fn reserved_cpu_millis(&self) -> anyhow::Result<u64> {
        if let Some(list) = &self.reserved_system_cpus {
            return Ok(cpu_list_len(list)? * 1000);
        }
        let mut total = 0;
        for map in [&self.system_reserved, &self.kube_reserved] {
            if let Some(q) = map.get("cpu") {
                total += parse_millis(q)?;
            }
        }
        Ok(total)
    }

    /// The memory the hard eviction threshold keeps free, in bytes.
    fn eviction_memory(&self) -> anyhow::Result<u128> {
        match &self.eviction_hard {
            None => Ok(100 * MI),
            Some(m) => m
                .get("memory.available")
                .map(|q| bytes(q, "evictionHard memory.available"))
                .unwrap_or(Ok(0)),
        }
    }

    /// The disk the hard eviction threshold keeps free, in bytes of `capacity`.
    fn eviction_nodefs(&self, capacity: u128) -> anyhow::Result<u128> {
        let value = match &self.eviction_hard {
            None => "10%".to_string(),
            Some(m) => match m.get("nodefs.available") {
                Some(v) => v.clone(),
                None => return Ok(0),
            },
        };
        match value.strip_suffix('%') {
            Some(pct) => {
                let pct: f64 = pct
                    .parse()
                    .map_err(|_| anyhow::anyhow!("evictionHard nodefs.available: {value:?}"))?;
                Ok((capacity as f64 * pct / 100.0) as u128)
            }
            None => bytes(&value, "evictionHard nodefs.available"),
        }
    }

    fn reserved_bytes(&self, resource: &str) -> anyhow::Result<u128> {
        let mut total = 0;
        for (what, map) in [
            ("systemReserved", &self.system_reserved),
            ("kubeReserved", &self.kube_reserved),
        ] {
            if let Some(q) = map.get(resource) {
                total += bytes(q, &format!("{what} {resource}"))?;
            }
        }
        Ok(total)
    }

    /// Allocatable from capacity; refuses what a kubelet would refuse to start with.
    pub fn allocatable(&self, cap: &Capacity) -> anyhow::Result<Allocatable> {
        let cpu_reserved = self.reserved_cpu_millis()?;
        // pkg/kubelet/cm/cpumanager/cpu_manager.go: "[cpumanager] the static policy
        // requires systemreserved.cpu + kubereserved.cpu to be greater than zero".
        anyhow::ensure!(
            self.cpu_manager_policy.as_deref() != Some("static") || cpu_reserved > 0,
            "kubelet: cpuManagerPolicy static needs a CPU reservation (reservedSystemCPUs, or systemReserved/kubeReserved cpu): a kubelet without one refuses to start"
        );
        let hugepages = cap.hugepages_1gi as u128 * GI + cap.hugepages_2mi as u128 * 2 * MI;
        let memory_off = self.reserved_bytes("memory")? + self.eviction_memory()? + hugepages;
        let disk_off = self.reserved_bytes("ephemeral-storage")?
            + self.eviction_nodefs(cap.ephemeral_storage)?;
        let less = |have: u128, off: u128, what: &str| {
            have.checked_sub(off).ok_or_else(|| {
                anyhow::anyhow!("kubelet: the reservations and hugepages ({off} bytes) exceed the node's {what} ({have} bytes)")
            })
        };
        Ok(Allocatable {
            cpu_millis: cap.cpu_millis.checked_sub(cpu_reserved).ok_or_else(|| {
                anyhow::anyhow!(
                    "kubelet: {cpu_reserved}m of CPU reserved on a node of {}m",
                    cap.cpu_millis
                )
            })?,
            memory: less(cap.memory, memory_off, "memory")?,
            ephemeral_storage: less(cap.ephemeral_storage, disk_off, "ephemeral storage")?,
        })
    }
}

/// The size of a cpuset list such as `0,96` or `0-1,96-97`.
fn cpu_list_len(list: &str) -> anyhow::Result<u64> {
    let mut n = 0;
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || {
            anyhow::anyhow!(
                "kubelet: reservedSystemCPUs {list:?} is not a CPU list such as \"0,96\""
            )
        };
        n += match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u64, u64) =
                    (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                anyhow::ensure!(a <= b, bad());
                b - a + 1
            }
            None => {
                part.parse::<u64>().map_err(|_| bad())?;
                1
            }
        };
    }
    Ok(n)
}

fn parse_millis(q: &str) -> anyhow::Result<u64> {
    let bad = || anyhow::anyhow!("kubelet: {q:?} is not a CPU quantity such as 2 or 500m");
    match q.strip_suffix('m') {
        Some(m) => m.parse().map_err(|_| bad()),
        None => q
            .parse::<f64>()
            .map(|c| (c * 1000.0).round() as u64)
            .map_err(|_| bad()),
    }
}

fn bytes(q: &str, what: &str) -> anyhow::Result<u128> {
    parse_bytes(q).ok_or_else(|| anyhow::anyhow!("kubelet: {what}: {q:?} is not a quantity"))
}

/// A CPU quantity as the kubelet writes it: whole cores, or millicores.
pub fn format_cpu(millis: u64) -> String {
    if millis.is_multiple_of(1000) {
        (millis / 1000).to_string()
    } else {
        format!("{millis}m")
    }
}

/// A byte quantity as the kubelet writes memory: in Ki when it divides.
pub fn format_bytes(b: u128) -> String {
    if b.is_multiple_of(1024) {
        format!("{}Ki", b / 1024)
    } else {
        b.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(yaml: &str) -> KubeletConfig {
        serde_saphyr::from_str(yaml).unwrap()
    }

    /// r6a.metal as docs/prepare-cluster.md prepares it: 1536 GiB of RAM (MemTotal about
    /// 1/64 less), one core's two CPUs reserved, 64 1 GiB pages.
    fn r6a() -> Capacity {
        Capacity {
            cpu_millis: 192_000,
            memory: 1512 * GI,
            hugepages_1gi: 64,
            hugepages_2mi: 0,
            ephemeral_storage: 400 * GI,
        }
    }

    const PREPARED: &str = "cpuManagerPolicy: static\nreservedSystemCPUs: \"0,96\"\nsystemReserved: {memory: 8Gi}\nkubeReserved: {memory: 4Gi}\nevictionHard: {memory.available: 100Mi, nodefs.available: \"10%\", nodefs.inodesFree: \"5%\", imagefs.available: \"15%\"}\n";

    #[test]
    fn hugepages_and_reservations_come_off_allocatable_memory() {
        let a = config(PREPARED).allocatable(&r6a()).unwrap();
        assert_eq!(a.cpu_millis, 190_000);
        // 1512 - 8 - 4 - 64 GiB, less 100 MiB: about 1435.9 GiB.
        assert_eq!(a.memory, 1436 * GI - 100 * MI);
        assert_eq!(a.ephemeral_storage, 360 * GI);
        // So the paper's 1.5 TiB cannot be had, and 1400Gi can (sidecars beside it).
        assert!(a.memory < 1536 * GI && a.memory > 1400 * GI + GI);
        assert_eq!(format_cpu(a.cpu_millis), "190");
        assert_eq!(format_bytes(a.memory), "1505652736Ki");
    }

    #[test]
    fn the_kubelets_defaults_apply_when_nothing_is_written() {
        let a = KubeletConfig::default().allocatable(&r6a()).unwrap();
        assert_eq!(a.cpu_millis, 192_000);
        assert_eq!(a.memory, (1512 - 64) * GI - 100 * MI);
        assert_eq!(a.ephemeral_storage, 360 * GI);
        // A threshold map without memory.available sets it to 0, as the kubelet does.
        let c = config("evictionHard: {nodefs.available: 5%}");
        assert_eq!(c.allocatable(&r6a()).unwrap().memory, (1512 - 64) * GI);
    }

    #[test]
    fn cpu_reservations_add_up_or_come_from_the_list() {
        let c = config("systemReserved: {cpu: 500m}\nkubeReserved: {cpu: \"1\"}");
        assert_eq!(c.reserved_cpu_millis().unwrap(), 1500);
        assert_eq!(format_cpu(192_000 - 1500), "190500m");
        // The list wins over both (cmd/kubelet/app/server.go).
        let c = config("reservedSystemCPUs: 0-1,96-97\nsystemReserved: {cpu: \"8\"}");
        assert_eq!(c.reserved_cpu_millis().unwrap(), 4000);
        assert!(
            config("reservedSystemCPUs: 0,x")
                .reserved_cpu_millis()
                .is_err()
        );
    }

    #[test]
    fn the_static_policy_without_a_reservation_is_refused_as_the_kubelet_refuses_to_start() {
        let e = config("cpuManagerPolicy: static")
            .allocatable(&r6a())
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs a CPU reservation"), "{e}");
    }

    #[test]
    fn more_reserved_than_the_machine_has_is_refused() {
        let small = Capacity {
            memory: 8 * GI,
            ..r6a()
        };
        assert!(KubeletConfig::default().allocatable(&small).is_err());
    }
}
