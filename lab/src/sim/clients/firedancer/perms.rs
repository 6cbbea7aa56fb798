//! The permission checks fdctl makes before a command, with their messages
//! (firedancer-io/firedancer `src/app/platform/fd_cap_chk.c`,
//! `src/app/shared/boot/fd_boot.c` L320-338, `run_cmd_perm` in
//! `src/app/shared/commands/run/run.c` L41-65, the hugetlbfs stage's `init_perm`), against
//! what the container may do ([`Privileges`], from its pod spec).

use crate::kubelet::privileges::Privileges;

/// The lab's nodes give containers the lab topology's defaults: 1,000,000 open files
/// (soft and hard), unlimited locked memory, and Linux's default nice limit of 0.
const NOFILE: u64 = 1_000_000;
/// fdctl raises RLIMIT_NOFILE to CONFIGURE_NR_OPEN_FILES (configure.h).
const NR_OPEN_FILES: u64 = 1_024_000;

/// `fd_cap_chk_raise_rlimit`: a limit below the wanted value needs CAP_SYS_RESOURCE
/// (CAP_SYS_NICE will do for the nice limit).
fn rlimits(p: &Privileges, errors: &mut Vec<String>, name: &str) {
    if p.has("SYS_RESOURCE") {
        return;
    }
    if !p.has("SYS_NICE") {
        errors.push(format!("{name} ... process requires capability `CAP_SYS_RESOURCE` or `CAP_SYS_NICE` to call `setpriority(2)` to increase thread priorities"));
    }
    if NOFILE < NR_OPEN_FILES {
        errors.push(format!("{name} ... process requires capability `CAP_SYS_RESOURCE` to call `rlimit(2)  to increase `RLIMIT_NOFILE` to allow more open files for Agave"));
    }
}

/// `run_cmd_perm`, for a process that drops to a non-root user.
fn run_checks(p: &Privileges, errors: &mut Vec<String>) {
    rlimits(p, errors, "run");
    for (cap, why) in [
        (
            "NET_RAW",
            "call `socket(2)` to bind to a raw socket for use by XDP",
        ),
        (
            "SYS_ADMIN",
            "call `bpf(2)` with the `BPF_OBJ_GET` command to initialize XDP",
        ),
    ] {
        if !p.has(cap) {
            errors.push(format!(
                "run ... process requires capability `CAP_{cap}` to {why}"
            ));
        }
    }
    // The process's uid and gid differ from the config user's.
    for (cap, why) in [
        (
            "SETUID",
            "call `setresuid(2)` to switch uid to the sandbox user",
        ),
        (
            "SETGID",
            "call `setresgid(2)` to switch gid to the sandbox user",
        ),
    ] {
        if !p.has(cap) {
            errors.push(format!(
                "run ... process requires capability `CAP_{cap}` to {why}"
            ));
        }
    }
}

/// The hugetlbfs stage's `init_perm`.
fn hugetlbfs_checks(p: &Privileges, errors: &mut Vec<String>) {
    if p.uid != 0 {
        errors.push(
            "hugetlbfs ... process requires root to increase `/proc/sys/vm/nr_hugepages`".into(),
        );
    }
    if !p.has("SYS_ADMIN") {
        errors.push(
            "hugetlbfs ... process requires capability `CAP_SYS_ADMIN` to mount hugetlbfs filesystems"
                .into(),
        );
    }
}

/// The checks of a command (`run`, `bench`, `configure`), and fdctl's message when any
/// fails: each problem as a warning, then the error.
pub fn check(command: &str, p: &Privileges) -> Result<(), String> {
    let mut errors = Vec::new();
    match command {
        "run" => run_checks(p, &mut errors),
        // bench runs `configure init` of every stage, then the run (dev_cmd_perm).
        "bench" => {
            hugetlbfs_checks(p, &mut errors);
            run_checks(p, &mut errors);
        }
        "configure" => hugetlbfs_checks(p, &mut errors),
        _ => {}
    }
    if errors.is_empty() {
        return Ok(());
    }
    let mut out: Vec<String> = errors.iter().map(|e| format!("WARNING {e}")).collect();
    out.push(if command == "run" {
        "ERR     insufficient permissions to execute command `run`. It is recommended to start Firedancer as the root user, but you can also start it with the missing capabilities listed above. The program only needs to start with elevated permissions to do privileged operations at boot, and will immediately drop permissions and switch to the user specified in your configuration file once they are complete. Firedancer will not execute outside of the boot process as root, and will refuse to start if it cannot drop privileges. Firedancer needs to be started privileged to configure high performance networking with XDP.".to_string()
    } else {
        format!("ERR     insufficient permissions to execute command `{command}`")
    });
    Err(out.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, Pod};

    fn privileges(security: serde_json::Value) -> Privileges {
        let c: Container =
            serde_json::from_value(serde_json::json!({"name": "v", "securityContext": security}))
                .unwrap();
        Privileges::of(&Pod::default(), &c)
    }

    #[test]
    fn run_needs_net_raw_and_sys_admin_even_with_sockets() {
        let e = check("run", &privileges(serde_json::json!({}))).unwrap_err();
        assert!(
            e.contains("requires capability `CAP_SYS_ADMIN` to call `bpf(2)`"),
            "{e}"
        );
        assert!(!e.contains("CAP_NET_RAW"), "containerd grants NET_RAW: {e}");
        assert!(e.contains("`CAP_SYS_RESOURCE` or `CAP_SYS_NICE`"), "{e}");
        assert!(e.ends_with("configure high performance networking with XDP."));
        let ok = privileges(
            serde_json::json!({"capabilities": {"add": ["NET_RAW", "SYS_ADMIN", "SYS_RESOURCE"]}}),
        );
        assert_eq!(check("run", &ok), Ok(()));
        assert_eq!(
            check(
                "bench",
                &privileges(serde_json::json!({"privileged": true}))
            ),
            Ok(())
        );
    }

    #[test]
    fn hugetlbfs_mounts_need_root() {
        let p = privileges(
            serde_json::json!({"runAsUser": 1000, "capabilities": {"add": ["SYS_ADMIN"]}}),
        );
        let e = check("configure", &p).unwrap_err();
        assert!(e.contains("process requires root"), "{e}");
        assert!(e.ends_with("insufficient permissions to execute command `configure`"));
    }
}
