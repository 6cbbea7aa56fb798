//! One container of a pod the lab runs as a local process: started with its command
//! line and env in its working directory, logging to logs/pods/. The lab's kubelet
//! probes it, restarts it with its back-off and stops it (crate::kubelet); this runtime
//! starts the process and says how it ended.
//!
//! A real program run in a memory cgroup with the container's limit (the next step for
//! the real agave-validator) fits the same seam: `spawn` joins the cgroup before exec,
//! and the cgroup's OOM kill count tells [`Run::child`] that a SIGKILL was the kernel's
//! OOM killer (OOMKilled).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use futures::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Container;

use super::LocalProgram;
use super::credentials::Projected;
use crate::kubelet::runtime::{Run, Runtime};
use crate::sim::pod_view::PodView;
use crate::sim::runtimes::PodCtx;
use crate::state::LabState;

/// A container of valtune's image, run as the local build.
pub struct Local {
    program: PathBuf,
    argv: Vec<String>,
    env: BTreeMap<String, String>,
    workdir: PathBuf,
    log: PathBuf,
}

impl Local {
    pub fn new(ctx: Arc<PodCtx>, program: LocalProgram, c: Container) -> Local {
        let view = ctx.view();
        let dir = ctx.dirs.root.join(&c.name);
        let log = ctx
            .dirs
            .logs
            .join(format!("{}_{}_{}.log", view.namespace, view.name, c.name));
        let env = match &ctx.creds {
            Some(creds) => env(&view, &c, &ctx.state, creds),
            None => view.env(&c),
        };
        Local {
            program: program.binary(&ctx.state),
            argv: argv(program, &view, &c),
            env,
            workdir: dir,
            log,
        }
    }
}

impl Runtime for Local {
    fn start(&self, _start: Timestamp) -> BoxFuture<'_, Result<Run, String>> {
        Box::pin(async move {
            let _ = std::fs::create_dir_all(&self.workdir);
            let child =
                spawn(self).map_err(|e| format!("starting {}: {e}", self.program.display()))?;
            Ok(Run::child(child, None))
        })
    }
}

/// The container's arguments: its command (less the image's entrypoint, which is the
/// program) and args, `$(VAR)`s expanded, pod-local listen addresses on the pod's IP.
pub fn argv(program: LocalProgram, view: &PodView, c: &Container) -> Vec<String> {
    let line = view.command_line(c);
    let skip = c
        .command
        .as_ref()
        .and_then(|cmd| cmd.first())
        .is_some_and(|first| {
            first == program.entrypoint() || first.rsplit('/').next() == Some("valtune")
        });
    line.into_iter()
        .skip(usize::from(skip))
        .map(|a| view.local_addr(&a))
        .collect()
}

/// The container's environment: the pod's (resolved as the kubelet resolves it), what
/// the kubelet adds (HOSTNAME, the API server's service address), and the kubeconfig with
/// the projected token. Nothing of the simulator's own environment.
pub fn env(
    view: &PodView,
    c: &Container,
    state: &LabState,
    creds: &Projected,
) -> BTreeMap<String, String> {
    let mut env = BTreeMap::from([
        (
            "PATH".to_string(),
            "/usr/local/bin:/usr/bin:/bin".to_string(),
        ),
        ("HOSTNAME".to_string(), view.name.clone()),
    ]);
    if let Some(hostport) = state.apiserver_url.strip_prefix("https://")
        && let Some((host, port)) = hostport.rsplit_once(':')
    {
        env.insert("KUBERNETES_SERVICE_HOST".into(), host.into());
        env.insert("KUBERNETES_SERVICE_PORT".into(), port.into());
    }
    env.extend(view.env(c));
    env.insert("KUBECONFIG".into(), creds.kubeconfig.display().to_string());
    env
}

fn spawn(r: &Local) -> std::io::Result<tokio::process::Child> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&r.log)?;
    tokio::process::Command::new(&r.program)
        .args(&r.argv)
        .env_clear()
        .envs(&r.env)
        .env("HOME", &r.workdir)
        .current_dir(&r.workdir)
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;

    fn view() -> PodView {
        let pod: Pod = serde_saphyr::from_str(
            "metadata: {name: valtune-abc, namespace: ops}\nspec:\n  nodeName: lab-system\n  containers:\n  - name: operator\n    image: ghcr.io/valtune/valtune:0.1.0\n    args: [operator, --listen=0.0.0.0:8080, --prometheus-url=http://prometheus:9090, --lease-namespace=$(POD_NAMESPACE)]\n    env:\n    - {name: POD_NAMESPACE, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}\n    ports: [{name: http-metrics, containerPort: 8080}]\n",
        )
        .unwrap();
        PodView::new(
            pod,
            "127.9.9.7".parse().unwrap(),
            BTreeMap::new(),
            BTreeMap::new(),
        )
    }

    #[test]
    fn the_command_line_listens_on_the_pods_ip() {
        let v = view();
        let c = &v.pod.spec.as_ref().unwrap().containers[0];
        assert_eq!(
            argv(LocalProgram::Valtune, &v, c),
            vec![
                "operator",
                "--listen=127.9.9.7:8080",
                "--prometheus-url=http://prometheus:9090",
                "--lease-namespace=ops"
            ]
        );
        // A command naming the entrypoint is the program itself.
        let mut c = c.clone();
        c.command = Some(vec!["/usr/local/bin/valtune".into()]);
        assert_eq!(argv(LocalProgram::Valtune, &v, &c)[0], "operator");
    }
}
