//! Firedancer (firedancer-io/firedancer): Frankendancer (`fdctl` and `fddev`, v0.x) and
//! full Firedancer (`firedancer` and `firedancer-dev`, v1.0.0 on): a follower of a cluster
//! (Frankendancer measured like Agave, full Firedancer from its own replay and repair
//! metrics), or seed 003's leader benchmark (`bench`), from a TOML config per trial
//! ([`config`], [`config_full`]) whose tile counts are swept ([`knobs`]), with every tile
//! on a core of its own ([`layout`], [`start`]), hugepages as the kubelet grants them and
//! privileges only as the spec names them ([`rules`]). How results are read is in
//! [`profile`]; why each choice, with the upstream sources, in docs/clients/firedancer.md.

mod config;
mod config_full;
mod keys;
mod knobs;
mod layout;
pub mod pair;
mod profile;
mod render;
mod rules;
mod snapshots;
mod start;
mod validator_rules;
mod versions;

use std::sync::Arc;

use kube::core::Rule;

use super::config_keys::ConfigKeys;
use super::health::HealthProbe;
use super::knobs::KnobTable;
use super::pod::Skeleton;
use super::profile::{Layout, MetricProfile, Objective};
use super::window::{NotComputed, RestartWindow};
use super::{ClientPod, RenderError, RenderInput, ValidatorClient, Warmup};
use crate::api::firedancer::{FiredancerSpec, FiredancerWorkload};
use crate::api::settings::{QueryKey, WindowStart};
use crate::api::sweep::SweepSpec;
use crate::api::template::{ClientSpec, ValidatorTemplate};
use crate::api::trial::TrialResults;
use crate::api::validator_rules::{ValidatorRoles, Votes};
use crate::api::version::Version;

pub const VALIDATOR_CONTAINER: &str = "validator";

pub struct Firedancer;

fn spec(t: &ValidatorTemplate) -> Result<&FiredancerSpec, RenderError> {
    t.client
        .firedancer
        .as_ref()
        .ok_or_else(|| RenderError::Invalid("the template has no firedancer settings".into()))
}

impl ValidatorClient for Firedancer {
    fn name(&self) -> &'static str {
        "firedancer"
    }

    fn runs(&self, spec: &ClientSpec) -> bool {
        spec.firedancer.is_some()
    }

    fn image_and_version<'a>(&self, t: &'a ValidatorTemplate) -> (&'a str, Option<&'a str>) {
        t.client
            .firedancer
            .as_ref()
            .map(|f| (f.image.as_str(), f.version.as_deref()))
            .unwrap_or(("", None))
    }

    fn knobs(&self) -> &'static KnobTable {
        &knobs::FIREDANCER
    }

    fn rules(&self) -> Vec<Rule> {
        rules::rules()
    }

    /// fdctl's `[hugetlbfs] mount_path`: the kubelet's hugepages volumes go where fdctl
    /// expects its `.gigantic` and `.huge` mounts (the start script remounts them).
    fn hugetlbfs_path(&self) -> &'static str {
        config::HUGETLBFS
    }

    fn render(&self, input: &RenderInput, skeleton: &Skeleton) -> Result<ClientPod, RenderError> {
        let t = &input.template;
        let spec = spec(t)?;
        let version = self.version(t).ok_or_else(|| {
            RenderError::Invalid(
                "Firedancer's version is not known: set template.firedancer.version or use an image tagged :vX.Y.Z".into(),
            )
        })?;
        render::pod(self, input, spec, version, skeleton)
    }

    /// A Frankendancer follower serves the Agave RPC of its Agave child (`[rpc] port`):
    /// `getHealth` judged by its body as Agave's ([`crate::clients::agave::get_health`]).
    /// Not `fdctl ready`: it joins the tiles' shared memory from inside the container,
    /// blocks until every tile but the Agave child's is running, and says nothing of the
    /// chain (src/app/shared/commands/ready.c @v0.1106.40201). Full Firedancer's rpc tile
    /// listens on 127.0.0.1 only (refused as a Validator).
    fn health(&self, t: &ValidatorTemplate) -> Option<HealthProbe> {
        let f = t.client.firedancer.as_ref()?;
        (f.workload == FiredancerWorkload::Follow && !layout::full(f)).then(|| HealthProbe {
            port: f.rpc_port,
            path: "/".into(),
            host: None,
            rpc_method: Some("getHealth"),
            judge: crate::clients::agave::get_health,
            position: None,
        })
    }

    /// fdctl has no `wait-for-restart-window` (src/app/fdctl/main.c ACTIONS @v0.1106.40201;
    /// firedancer-io/firedancer#10617 asks for one "matching Agave's semantics"): its Agave
    /// child serves the same RPC methods, so the operator applies Agave's checks there.
    fn restart_window(&self, t: &ValidatorTemplate) -> Arc<dyn RestartWindow> {
        match t.client.firedancer.as_ref() {
            Some(f) if !layout::full(f) => Arc::new(super::agave::window::LeaderSchedule {
                rpc_port: f.rpc_port,
            }),
            _ => Arc::new(NotComputed(
                "valtune computes no restart window for full Firedancer",
            )),
        }
    }

    fn config_keys<'a>(&self, t: &'a ValidatorTemplate) -> Option<ConfigKeys<'a>> {
        let f = t.client.firedancer.as_ref()?;
        Some(ConfigKeys {
            client: keys::display(f),
            field: "template.firedancer.config (or a sweep.knobs configKey)",
            config: &f.config,
            // fdctl takes no options of its own: admission refuses Firedancer's extraArgs.
            args: false,
            judge: Box::new(move |v, key| keys::judge(f.flavor, v, key)),
        })
    }

    fn key_rules(&self) -> Vec<Rule> {
        keys::admission_rules()
    }

    /// The Validators valtune runs of Firedancer are Frankendancer's (fdctl): full
    /// Firedancer's are refused (validator_rules.rs).
    fn validator_roles(&self) -> ValidatorRoles {
        ValidatorRoles {
            name: "firedancer",
            display: "Frankendancer",
            votes: Votes::WithVoteAccount,
            failover: true,
            window_options: true,
        }
    }

    fn validator_rules(&self) -> Vec<Rule> {
        validator_rules::rules()
    }

    /// Its Agave child's (`[rpc] port`).
    fn identity_rpc_port(&self, t: &ValidatorTemplate) -> Option<i32> {
        t.client.firedancer.as_ref().map(|f| f.rpc_port)
    }

    fn typical_warmup(&self, t: &ValidatorTemplate, _from: WindowStart) -> Warmup {
        match t.client.firedancer.as_ref().map(|f| f.workload) {
            Some(FiredancerWorkload::Bench) => Warmup::minutes(
                30,
                "a Firedancer bench: configure, a genesis of its own, funding the accounts (minutes; docs/clients/firedancer.md)",
            ),
            _ => Warmup::minutes(
                120,
                "a Firedancer follower: a snapshot, then catching up (as Agave's, seed 000)",
            ),
        }
    }

    fn profile(&self, t: &ValidatorTemplate) -> MetricProfile {
        // Admission insists on a known version; the newest names otherwise.
        let v = self.version(t).unwrap_or(Version::new(0, 1106, 40201));
        match t.client.firedancer.as_ref() {
            Some(spec) => profile::profile(spec, v),
            None => unsupported_profile(),
        }
    }

    fn profile_keys(&self) -> Option<Vec<QueryKey>> {
        Some(vec![QueryKey::Tps, QueryKey::SlotLag])
    }

    fn report(&self, t: &ValidatorTemplate, _sweep: &SweepSpec) -> Layout {
        let full = t.client.firedancer.as_ref().is_some_and(layout::full);
        let mut numbers = profile::columns(full);
        // A follower's chain load beside its results (Frankendancer: solana-exporter's;
        // full Firedancer: its replay tile's).
        if t.client.firedancer.as_ref().map(|f| f.workload) == Some(FiredancerWorkload::Follow) {
            numbers.extend(crate::clients::solana_load::COLUMNS);
        }
        Layout {
            numbers,
            text: profile::TEXT_COLUMNS.to_vec(),
            ..Default::default()
        }
    }

    fn objective(&self, _sweep: &SweepSpec) -> Objective {
        profile::OBJECTIVE
    }

    fn summary(&self) -> fn(&TrialResults) -> String {
        profile::summary
    }
}

/// The profile of a client whose trials are not rendered (nothing reads it); the clients
/// still without a module of their own use it too.
pub(super) fn unsupported_profile() -> MetricProfile {
    MetricProfile {
        queries: Default::default(),
        lag: QueryKey::SlotLag,
        lag_unit: super::profile::LagUnit::Slots,
        default_max_lag: 0,
        endpoints: Vec::new(),
        validator_container: VALIDATOR_CONTAINER,
        figures: Vec::new(),
        remote_written: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use crate::clients::golden;

    const FOLLOWER: &str = "apiVersion: valtune.dev/v1alpha1\nkind: ValidatorExperiment\nmetadata: {name: fd-follow}\nspec:\n  template:\n    firedancer: {image: 'r/frankendancer:v0.913.40003', cluster: testnet, privileged: true}\n    resources: {cpu: 32, memory: 512Gi, hugepages1Gi: 32, hugepages2Mi: 512}\n    storage: [{role: ledger, size: 2Ti}, {role: accounts, size: 2Ti}]\n  sweep:\n    threads: [{name: resolvTiles, values: [2]}]\n";

    /// A follower: the node's network, its sidecars, an identity and hugetlbfs mounts
    /// before `fdctl run`, and keys of its version (v0.913: resolh_tile_count).
    #[test]
    fn golden_follower_pod() {
        let t = golden::trial(FOLLOWER, 0);
        let pod = golden::rendered(&t);
        for part in [
            "hostNetwork: true",
            "name: rpc-exporter",
            "name: vmagent",
            "fdctl configure init hugetlbfs",
            "exec fdctl run",
            "resolh_tile_count = 2",
            "solana_metrics_config = \"host=http://127.0.0.1:8429,db=frankendancer,u=valtune,p=valtune\"",
            "expected_genesis_hash = \"4uhcVJyU9pJkvQyS88uRDiswHXSCkY3zQawwpjk2NsNY\"",
            "path = \"/mnt/ledger\"",
        ] {
            assert!(pod.contains(part), "{part}: {pod}");
        }
        golden::check("firedancer", "follow-testnet-v0913", &pod);
        // Before v0.901 the same sweep writes the old key.
        let t = golden::trial(&FOLLOWER.replace("v0.913.40003", "v0.505.20216"), 0);
        assert!(golden::rendered(&t).contains("resolv_tile_count = 2"));
    }

    /// Privileges are what the spec names: a follower and XDP are privileged (the tiles'
    /// sandbox writes /proc/sys), on the node's network, and need no AppArmor exception; a
    /// bench gets the capabilities it names, and AppArmor `Unconfined` with SYS_ADMIN.
    #[test]
    fn privileges_are_only_those_named() {
        let xdp = FOLLOWER.replace(
            "privileged: true",
            "privileged: true, netProvider: xdp, workload: bench",
        );
        let pod = golden::rendered(&golden::trial(&xdp, 0));
        assert!(
            pod.contains("privileged: true") && pod.contains("hostNetwork: true"),
            "{pod}"
        );
        assert!(
            !pod.contains("appArmorProfile") && !pod.contains("capabilities:"),
            "{pod}"
        );
        assert!(pod.contains("provider = \"xdp\""));
        let pod = golden::rendered(&golden::trial(FOLLOWER, 0));
        assert!(pod.contains("privileged: true"), "{pod}");
        let bench = golden::rendered(&golden::trial(
            &golden::example("frankendancer-bench-tiles.yaml"),
            0,
        ));
        assert!(!bench.contains("privileged: true"), "{bench}");
        assert!(bench.contains("type: Unconfined"), "{bench}");
        assert!(!bench.contains("hostNetwork: true"), "{bench}");
    }

    const FULL_FOLLOWER: &str = "apiVersion: valtune.dev/v1alpha1\nkind: ValidatorExperiment\nmetadata: {name: fdf-follow}\nspec:\n  template:\n    firedancer: {image: 'r/firedancer:v1.1.4', flavor: firedancer, cluster: testnet, privileged: true}\n    resources: {cpu: 64, memory: 256Gi, hugepages1Gi: 64, hugepages2Mi: 512}\n    storage: [{role: ledger, size: 1Ti}, {role: accounts, size: 2Ti}]\n  sweep:\n    threads: [{name: execTiles, values: [6]}]\n";

    /// Full Firedancer follows on its own: the node's network, no sidecars, firedancer's
    /// own commands, and its keys (execrp, paths, no Agave).
    #[test]
    fn golden_full_follower_pod() {
        let t = golden::trial(FULL_FOLLOWER, 0);
        let pod = golden::rendered(&t);
        for part in [
            "hostNetwork: true",
            "firedancer configure init hugetlbfs snapshots",
            "exec firedancer run",
            "execrp_tile_count = 6",
            "telemetry = false",
            "shredb = \"/mnt/ledger/shreds.db\"",
        ] {
            assert!(pod.contains(part), "{part}: {pod}");
        }
        for absent in [
            "rpc-exporter",
            "vmagent",
            "agave_affinity = ",
            "fdctl",
            "[reporting]",
        ] {
            assert!(!pod.contains(absent), "{absent}: {pod}");
        }
        golden::check("firedancer", "follow-testnet-full-v1.1.4", &pod);
    }

    #[test]
    fn golden_full_bench_pod() {
        // 20 verify and 6 execle tiles: the full Firedancer example's last point.
        let t = golden::trial(&golden::example("firedancer-bench-tiles.yaml"), 3);
        let pod = golden::rendered(&t);
        assert!(pod.contains("exec firedancer-dev bench"), "{pod}");
        assert!(pod.contains("execle_tile_count = 6"), "{pod}");
        golden::check("firedancer", "bench-full-verify20-execle6", &pod);
    }

    #[test]
    fn golden_seed_bench_pod() {
        // verify 30, bank 6, no blockstore: the guide's last step.
        let t = golden::trial(&golden::example("frankendancer-bench-tiles.yaml"), 7);
        let pod = golden::rendered(&t);
        golden::check("firedancer", "bench-verify30-bank6-no-blockstore", &pod);
    }
}
