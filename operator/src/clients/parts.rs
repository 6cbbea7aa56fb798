//! Small pieces every client's pod is made of: env vars, ports, mounts, native sidecars.

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EmptyDirVolumeSource, EnvVar, EnvVarSource, ObjectFieldSelector,
    Volume, VolumeMount,
};

use super::pod::sidecar_resources;

pub fn env(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value.into()),
        ..Default::default()
    }
}

/// An env var from the downward API (`metadata.name`, `status.podIP`, ...).
pub fn field_env(name: &str, path: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A named TCP port.
pub fn port(name: &str, port: i32) -> ContainerPort {
    protocol_port(name, port, "TCP")
}

pub fn protocol_port(name: &str, port: i32, protocol: &str) -> ContainerPort {
    ContainerPort {
        name: Some(name.into()),
        container_port: port,
        protocol: Some(protocol.into()),
        ..Default::default()
    }
}

pub fn mount(name: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        read_only: read_only.then_some(true),
        ..Default::default()
    }
}

pub fn empty_dir(name: &str) -> Volume {
    Volume {
        name: name.into(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Default::default()
    }
}

/// A native sidecar: an init container that runs beside the validator and restarts if it
/// exits (Kubernetes 1.29+), unlike a container under the pod's `restartPolicy: Never`.
pub fn sidecar(name: &str, image: &str, args: Vec<String>, ports: Vec<ContainerPort>) -> Container {
    Container {
        name: name.into(),
        image: Some(image.into()),
        args: Some(args),
        ports: Some(ports),
        resources: Some(sidecar_resources()),
        restart_policy: Some("Always".into()),
        ..Default::default()
    }
}

/// Where vmagent buffers points it could not deliver yet (an emptyDir of this name).
pub const VMAGENT_VOLUME: &str = "vmagent-data";
const VMAGENT_DATA: &str = "/var/lib/vmagent";

/// vmagent as a native sidecar: InfluxDB line protocol in on `port` (`/write`), every
/// point remote-written with its own timestamp, labelled with the pod's namespace and name
/// as prometheus-operator labels scraped series (app/vmagent, lib/protoparser/influx at
/// v1.110.0); `-usePromCompatibleNaming` turns `measurement-name` + `field` into
/// `measurement_name_field`. Needs [`empty_dir`]`(VMAGENT_VOLUME)` in the pod.
pub fn vmagent(
    name: &str,
    image: &str,
    port_name: &str,
    port_number: i32,
    remote_write: &str,
) -> Container {
    let mut c = sidecar(
        name,
        image,
        vec![
            format!("-httpListenAddr=:{port_number}"),
            format!("-remoteWrite.url={remote_write}"),
            "-remoteWrite.label=namespace=$(POD_NAMESPACE)".into(),
            "-remoteWrite.label=pod=$(POD_NAME)".into(),
            "-usePromCompatibleNaming".into(),
            format!("-remoteWrite.tmpDataPath={VMAGENT_DATA}"),
        ],
        vec![port(port_name, port_number)],
    );
    c.env = Some(vec![
        field_env("POD_NAMESPACE", "metadata.namespace"),
        field_env("POD_NAME", "metadata.name"),
    ]);
    c.volume_mounts = Some(vec![mount(VMAGENT_VOLUME, VMAGENT_DATA, false)]);
    c
}
