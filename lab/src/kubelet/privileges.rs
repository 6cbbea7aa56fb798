//! What a container may do, as the kubelet and containerd set it up from the pod spec:
//! its user, its capabilities (containerd's defaults, less `drop`, plus `add`; all of
//! them when privileged) and which of /proc and /sys it may write. Client models read it
//! (fdctl's permission checks), and so does the lab's nsenter (whose process may enter
//! whose mount namespace).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Container, Pod};

/// containerd's default capabilities of a container (pkg/oci/spec.go `defaultUnixCaps`).
const DEFAULT_CAPS: [&str; 14] = [
    "CHOWN",
    "DAC_OVERRIDE",
    "FSETID",
    "FOWNER",
    "MKNOD",
    "NET_RAW",
    "SETGID",
    "SETUID",
    "SETFCAP",
    "SETPCAP",
    "NET_BIND_SERVICE",
    "SYS_CHROOT",
    "KILL",
    "AUDIT_WRITE",
];

#[derive(Debug, Clone, PartialEq)]
pub struct Privileges {
    pub uid: i64,
    pub caps: BTreeSet<String>,
    /// `securityContext.privileged`: /proc/sys, /proc/irq, /sys and the cgroup tree are
    /// the container's to write.
    pub privileged: bool,
    /// `securityContext.procMount: Unmasked`: the kubelet asks for no read-only /proc
    /// paths (kubernetes pkg/securitycontext/util.go `ConvertToRuntimeReadonlyPaths`).
    pub unmasked_proc: bool,
}

impl Privileges {
    pub fn of(pod: &Pod, c: &Container) -> Privileges {
        let sc = c.security_context.as_ref();
        let uid = sc
            .and_then(|s| s.run_as_user)
            .or_else(|| {
                pod.spec
                    .as_ref()
                    .and_then(|s| s.security_context.as_ref())
                    .and_then(|s| s.run_as_user)
            })
            // Unset: the image's user; the lab takes it to be root.
            .unwrap_or(0);
        let privileged = sc.and_then(|s| s.privileged).unwrap_or(false);
        let mut caps: BTreeSet<String> = DEFAULT_CAPS.iter().map(|c| c.to_string()).collect();
        if let Some(c) = sc.and_then(|s| s.capabilities.as_ref()) {
            for d in c.drop.iter().flatten() {
                if d == "ALL" {
                    caps.clear();
                }
                caps.remove(d.trim_start_matches("CAP_"));
            }
            caps.extend(
                c.add
                    .iter()
                    .flatten()
                    .map(|a| a.trim_start_matches("CAP_").to_string()),
            );
        }
        if privileged {
            caps.insert("ALL".into());
        }
        let unmasked_proc = sc.and_then(|s| s.proc_mount.as_deref()) == Some("Unmasked");
        Privileges {
            uid,
            caps,
            privileged,
            unmasked_proc,
        }
    }

    /// Whether a path under /proc/sys or /proc/irq may be opened for writing. The
    /// kubelet asks the runtime to mount them read-only in a container that is not
    /// privileged (`defaultReadonlyPaths`: /proc/bus, /proc/fs, /proc/irq, /proc/sys,
    /// /proc/sysrq-trigger, kubernetes pkg/securitycontext/util.go @v1.34).
    pub fn proc_writable(&self) -> bool {
        self.privileged || self.unmasked_proc
    }

    /// Whether /sys (and the cgroup tree under it) may be written: containerd mounts
    /// sysfs and cgroupfs `ro` unless the container is privileged (oci/spec.go
    /// `populateDefaultUnixSpec`, CRI `WithPrivileged`).
    pub fn sys_writable(&self) -> bool {
        self.privileged
    }

    /// Whether the container has `cap` (every capability, when privileged).
    pub fn has(&self, cap: &str) -> bool {
        self.caps.contains("ALL") || self.caps.contains(cap)
    }
}
