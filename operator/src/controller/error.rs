//! Why a pass could not finish: one variant per step of a pass, as Stackable's operators
//! have them (stackabletech/zookeeper-operator rust/operator-binary/src/zk_controller.rs
//! `Error`, its discriminant the metric's `error` label), each naming the object and
//! keeping the API server's error. [`Error::step`] is the errors metric's label;
//! [`Error::kind`] the class of the API server's answer.

/// A pass that could not finish.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    // Observe.
    /// A watch a pass reads from stopped before its first list.
    #[error("the watch of {0} stopped before its first list")]
    WatchStopped(&'static str),
    #[error("{0}: {1}")]
    ReadPod(String, #[source] kube::Error),
    #[error("{0}: {1}")]
    ListPods(String, #[source] kube::Error),
    #[error("{0}: {1}")]
    ReadNode(String, #[source] kube::Error),
    #[error("{0}: {1}")]
    ListNodes(String, #[source] kube::Error),
    #[error("{0}: {1}")]
    ReadLease(String, #[source] kube::Error),
    #[error("{0}: {1}")]
    ReadValidator(String, #[source] kube::Error),
    #[error("{0}: {1}")]
    ReadExperiment(String, #[source] kube::Error),
    #[error("{0}: {1}")]
    ReadTrial(String, #[source] kube::Error),

    // Act.
    /// The rendered objects (claims, Secrets, ConfigMaps, the pod): controller/apply.rs.
    #[error("{0}: {1}")]
    ApplyRendered(String, #[source] kube::Error),
    /// No random bytes for a generated Secret.
    #[error("{0}: reading /dev/urandom: {1}")]
    GenerateSecret(String, #[source] std::io::Error),
    #[error("{0}: {1}")]
    DeletePods(String, #[source] kube::Error),
    #[error("{0}: {1}")]
    StopPods(String, #[source] kube::Error),
    #[error("{0}: {1}")]
    AnnotatePod(String, #[source] kube::Error),
    #[error("{0}: {1}")]
    TakeLease(String, #[source] kube::Error),
    #[error("{0}: {1}")]
    MoveLease(String, #[source] kube::Error),
    #[error("{0}: {1}")]
    EnsureBudget(String, #[source] kube::Error),
    #[error("{0}: {1}")]
    EnsurePodMonitor(String, #[source] kube::Error),
    #[error("{0}: {1}")]
    CreateTrial(String, #[source] kube::Error),
    #[error("{0}: {1}")]
    DeleteTrial(String, #[source] kube::Error),
    #[error("{0}: {1}")]
    WriteStatus(String, #[source] kube::Error),

    /// The object cannot be reconciled as it is (it bypassed the schema, or does not
    /// deserialize): retrying cannot fix it, a change of it can.
    #[error("{0}")]
    InvalidObject(String),
}

impl Error {
    /// The step that failed: the errors metric's `step` label.
    pub fn step(&self) -> &'static str {
        match self {
            Error::WatchStopped(_) => "watch_stopped",
            Error::ReadPod(..) => "read_pod",
            Error::ListPods(..) => "list_pods",
            Error::ReadNode(..) => "read_node",
            Error::ListNodes(..) => "list_nodes",
            Error::ReadLease(..) => "read_lease",
            Error::ReadValidator(..) => "read_validator",
            Error::ReadExperiment(..) => "read_experiment",
            Error::ReadTrial(..) => "read_trial",
            Error::ApplyRendered(..) => "apply_rendered",
            Error::GenerateSecret(..) => "generate_secret",
            Error::DeletePods(..) => "delete_pods",
            Error::StopPods(..) => "stop_pods",
            Error::AnnotatePod(..) => "annotate_pod",
            Error::TakeLease(..) => "take_lease",
            Error::MoveLease(..) => "move_lease",
            Error::EnsureBudget(..) => "ensure_budget",
            Error::EnsurePodMonitor(..) => "ensure_pod_monitor",
            Error::CreateTrial(..) => "create_trial",
            Error::DeleteTrial(..) => "delete_trial",
            Error::WriteStatus(..) => "write_status",
            Error::InvalidObject(_) => "invalid_object",
        }
    }

    /// The API server's error, if the step made a request.
    pub fn api(&self) -> Option<&kube::Error> {
        match self {
            Error::ReadPod(_, e)
            | Error::ListPods(_, e)
            | Error::ReadNode(_, e)
            | Error::ListNodes(_, e)
            | Error::ReadLease(_, e)
            | Error::ReadValidator(_, e)
            | Error::ReadExperiment(_, e)
            | Error::ReadTrial(_, e)
            | Error::ApplyRendered(_, e)
            | Error::DeletePods(_, e)
            | Error::StopPods(_, e)
            | Error::AnnotatePod(_, e)
            | Error::TakeLease(_, e)
            | Error::MoveLease(_, e)
            | Error::EnsureBudget(_, e)
            | Error::EnsurePodMonitor(_, e)
            | Error::CreateTrial(_, e)
            | Error::DeleteTrial(_, e)
            | Error::WriteStatus(_, e) => Some(e),
            Error::WatchStopped(_) | Error::GenerateSecret(..) | Error::InvalidObject(_) => None,
        }
    }

    /// The class of the failure, for the errors metric's `kind` label: what the API
    /// server answered (forbidden: RBAC; conflict: a status decided from a stale copy,
    /// run again on the fresh object; api: any other answer), kube (no answer), invalid.
    pub fn kind(&self) -> &'static str {
        match self.api() {
            Some(kube::Error::Api(e)) if e.code == 403 => "forbidden",
            Some(kube::Error::Api(e)) if e.code == 409 => "conflict",
            Some(kube::Error::Api(_)) => "api",
            Some(_) => "kube",
            None => "invalid",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16) -> kube::Error {
        kube::Error::Api(
            kube::core::Status {
                code,
                message: "m".into(),
                ..Default::default()
            }
            .boxed(),
        )
    }

    /// Each step is its own label; the class of the API server's answer is kept beside.
    #[test]
    fn the_label_is_the_step_and_the_kind_the_answer() {
        let e = Error::ApplyRendered("applying pod ns/t-1".into(), api(403));
        assert_eq!((e.step(), e.kind()), ("apply_rendered", "forbidden"));
        assert!(e.to_string().starts_with("applying pod ns/t-1: "), "{e}");
        let e = Error::WriteStatus("writing the status of ns/t".into(), api(409));
        assert_eq!((e.step(), e.kind()), ("write_status", "conflict"));
        let e = Error::TakeLease("taking Lease ns/l".into(), api(500));
        assert_eq!((e.step(), e.kind()), ("take_lease", "api"));
        let e = Error::InvalidObject("trial ns/t: spec.repetition: invalid value".into());
        assert_eq!((e.step(), e.kind()), ("invalid_object", "invalid"));
    }
}
