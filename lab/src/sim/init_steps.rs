//! The init steps of a pod, run as the node would run them where the lab can (the
//! kubelet runs them one at a time, sim/runtimes.rs): a `sh -c` script runs here, reading the node's simulated kernel settings (its /proc/sys
//! is the lab's per-node directory, given as `SYSCTL_DIR`: the host's network namespace
//! or a pod's own, [`sysctl_dir`]), resource limits (`ulimit` answers the node's) and
//! kernel release (`uname` answers the node's). A script that needs a program of its image the lab lacks (exit
//! 127) counts as done; any other failure fails the step, with the end of its output as
//! the termination message (`FallbackToLogsOnError`).

use std::path::Path;

use k8s_openapi::api::core::v1::Container;

use super::pod_view::PodView;
use crate::topology::Prepared;

/// The node's /proc/sys as a pod sees it: the host's network namespace (`sys`) or the
/// pod's own (`sys-podnet`, where older kernels lack `net.core`'s buffer limits).
pub fn sysctl_dir(node_dir: &Path, host_network: bool) -> std::path::PathBuf {
    node_dir.join(if host_network { "sys" } else { "sys-podnet" })
}

/// A failed step: (exit code, message).
pub type Failure = (i32, String);

/// The shell script a container runs, if it runs one.
fn script(line: &[String]) -> Option<&str> {
    match line {
        [sh, c, script, ..] if (sh == "sh" || sh.ends_with("/sh")) && c == "-c" => Some(script),
        _ => None,
    }
}

/// Runs the pod's init steps in order (native sidecars are not steps), to the first
/// failure: (container, exit code, message). The lab's kubelet runs them one at a time
/// ([`step`]); this is for a start-up without a cluster (the operator's start-up tests).
pub async fn run(view: &PodView, sys: &Path, node: &Prepared) -> Result<(), (String, i32, String)> {
    let steps = view
        .pod
        .spec
        .iter()
        .flat_map(|s| s.init_containers.iter().flatten())
        .filter(|c| c.restart_policy.as_deref() != Some("Always"));
    for c in steps {
        step(view, c, sys, node)
            .await
            .map_err(|(code, m)| (c.name.clone(), code, m))?;
    }
    Ok(())
}

/// Runs one init step, `c` of the pod; one that is not a script is done at once.
pub async fn step(
    view: &PodView,
    c: &Container,
    sys: &Path,
    node: &Prepared,
) -> Result<(), Failure> {
    let line = view.command_line(c);
    let Some(body) = script(&line) else {
        return Ok(());
    };
    // The paths of its claims' volumes as they are on this machine (the node's volume
    // directories): what it writes there outlives the pod, as on the machine.
    let mut body = body.to_string();
    for m in c.volume_mounts.iter().flatten() {
        let local = view.local_path(c, &m.mount_path);
        if local != m.mount_path {
            body = body.replace(&m.mount_path, &local);
        }
    }
    let memlock = node
        .memlock_kib
        .map(|k| k.to_string())
        .unwrap_or_else(|| "unlimited".into());
    let shim = format!(
        "ulimit() {{ case \"$*\" in *n*) echo {nofile};; *l*) echo {memlock};; *) echo unlimited;; esac; }}\nuname() {{ echo {kernel}; }}\n",
        nofile = node.nofile,
        kernel = node.kernel
    );
    let mut cmd = tokio::process::Command::new("sh");
    cmd.arg("-c")
        .arg(format!("{shim}{body}"))
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .envs(view.env(c))
        .env("SYSCTL_DIR", sys)
        .current_dir(std::env::temp_dir())
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let out = match cmd.output().await {
        Ok(o) => o,
        Err(e) => return Err((1, format!("running the step: {e}"))),
    };
    match out.status.code() {
        Some(0) | Some(127) => Ok(()),
        code => {
            let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
            text.push_str(&String::from_utf8_lossy(&out.stderr));
            let lines: Vec<&str> = text.lines().collect();
            let tail = lines[lines.len().saturating_sub(80)..].join("\n");
            Err((code.unwrap_or(1), tail))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn view(script: &str) -> PodView {
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"nodeName": "n1", "initContainers": [
                {"name": "preflight", "image": "x", "command": ["sh", "-c"], "args": [script]},
                {"name": "exporter", "image": "y", "restartPolicy": "Always"},
            ], "containers": []},
        }))
        .unwrap();
        PodView::new(
            pod,
            "127.0.0.1".parse().unwrap(),
            BTreeMap::new(),
            BTreeMap::new(),
        )
    }

    #[tokio::test]
    async fn a_step_reads_the_nodes_settings_and_fails_with_its_words() {
        let dir = std::env::temp_dir().join(format!("valtune-init-{}", std::process::id()));
        let prepared = Prepared::default();
        prepared.write_sysctls(&dir, true).unwrap();
        let check = "m=$(cat $SYSCTL_DIR/vm/max_map_count); n=$(ulimit -Hn); [ $m -ge 1000000 ] && [ $n -ge 1000000 ] || { echo \"missing: max_map_count $m nofile $n\" >&2; exit 1; }";
        assert_eq!(run(&view(check), &dir, &prepared).await, Ok(()));
        let bare = Prepared {
            max_map_count: 65530,
            nofile: 1024,
            ..Default::default()
        };
        bare.write_sysctls(&dir, true).unwrap();
        assert_eq!(
            run(&view(check), &dir, &bare).await,
            Err((
                "preflight".into(),
                1,
                "missing: max_map_count 65530 nofile 1024".into()
            ))
        );
        // A program the image has and the lab does not: the step counts as done.
        assert_eq!(run(&view("solana-keygen new"), &dir, &bare).await, Ok(()));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn a_pods_own_network_on_an_old_kernel_has_no_socket_buffer_limits() {
        let node = std::env::temp_dir().join(format!("valtune-init-netns-{}", std::process::id()));
        let old = Prepared {
            kernel: "6.8.0-45-generic".into(),
            ..Default::default()
        };
        for host in [true, false] {
            old.write_sysctls(&sysctl_dir(&node, host), host).unwrap();
        }
        let check = "v=$(cat $SYSCTL_DIR/net/core/rmem_max 2>/dev/null); [ -n \"$v\" ] || { echo \"no rmem_max on $(uname -r)\" >&2; exit 1; }";
        assert_eq!(
            run(&view(check), &sysctl_dir(&node, true), &old).await,
            Ok(())
        );
        assert_eq!(
            run(&view(check), &sysctl_dir(&node, false), &old).await,
            Err((
                "preflight".into(),
                1,
                "no rmem_max on 6.8.0-45-generic".into()
            ))
        );
        std::fs::remove_dir_all(&node).unwrap();
    }
}
