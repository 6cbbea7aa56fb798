//! The TOML config of a Frankendancer trial (keys of firedancer-io/firedancer
//! `src/app/fdctl/config/default.toml` at the versions cited), and what full Firedancer's
//! ([`super::config_full`]) shares with it. It is a template: the `[layout]` and
//! `[development.bench]` affinity strings are placeholders the start script fills in from
//! the container's cpuset ([`super::start`]).

use std::collections::BTreeMap;

use super::knobs::FIREDANCER;
use super::layout::{KINDS, Layout, full};
use crate::api::agave::SolanaCluster;
use crate::api::firedancer::{FiredancerNetProvider, FiredancerSpec, FiredancerWorkload};
use crate::api::template::{Tuning, VolumeRole};
use crate::api::version::Version;
use crate::clients::knobs::{self, KnobError};

/// Where the ConfigMap with the template is mounted, and where the start script writes
/// the config fdctl reads (an emptyDir).
pub const TEMPLATE_DIR: &str = "/etc/firedancer";
pub const TEMPLATE_FILE: &str = "config.toml";
pub const RUN_DIR: &str = "/var/run/firedancer";
/// `scratch_directory` (an emptyDir): keys, and the ledger when there is no ledger volume.
pub const SCRATCH_DIR: &str = "/var/lib/firedancer";
/// `[hugetlbfs] mount_path`, fdctl's default; the kubelet's hugepages emptyDirs are
/// mounted at its `.gigantic` and `.huge` (docs/clients/firedancer.md, hugepages).
pub const HUGETLBFS: &str = "/mnt/.fd";

pub const AFFINITY: &str = "@AFFINITY@";
pub const AGAVE_AFFINITY: &str = "@AGAVE_AFFINITY@";
pub const BENCH_AFFINITY: &str = "@BENCH_AFFINITY@";
/// A Validator's RPC address, the pod's IP (`$POD_IP`, from `status.podIP`).
pub const POD_IP: &str = "@POD_IP@";

pub fn template_path() -> String {
    format!("{TEMPLATE_DIR}/{TEMPLATE_FILE}")
}

pub fn config_path() -> String {
    format!("{RUN_DIR}/{TEMPLATE_FILE}")
}

pub fn identity_path() -> String {
    format!("{SCRATCH_DIR}/identity.json")
}

/// A TOML value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(String),
    Int(i64),
    Bool(bool),
    Strs(Vec<String>),
    /// A user's value that is already TOML (a number, a boolean, a quoted string, an array).
    Raw(String),
}

fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

impl Value {
    /// A user's value: TOML when it reads as a TOML scalar or array, else a string.
    pub fn user(s: &str) -> Value {
        let t = s.trim();
        let number = !t.is_empty()
            && t.trim_start_matches(['+', '-'])
                .chars()
                .all(|c| c.is_ascii_digit() || c == '_' || c == '.')
            && t.chars().any(|c| c.is_ascii_digit())
            && t.matches('.').count() <= 1;
        if t == "true" || t == "false" || number || t.starts_with(['"', '\'', '[']) {
            Value::Raw(t.to_string())
        } else {
            Value::Str(s.to_string())
        }
    }

    fn render(&self) -> String {
        match self {
            Value::Str(s) => quote(s),
            Value::Int(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Strs(v) => format!(
                "[{}]",
                v.iter().map(|s| quote(s)).collect::<Vec<_>>().join(", ")
            ),
            Value::Raw(r) => r.clone(),
        }
    }
}

/// Dotted keys to values, rendered as TOML tables.
#[derive(Debug, Clone, Default)]
pub struct Config(BTreeMap<String, Value>);

impl Config {
    pub fn set(&mut self, key: &str, value: Value) {
        self.0.insert(key.to_string(), value);
    }

    /// `[table]` sections, top-level keys first (TOML puts them before any header).
    pub fn render(&self, header: &str) -> String {
        let mut tables: BTreeMap<&str, Vec<(&str, &Value)>> = BTreeMap::new();
        for (k, v) in &self.0 {
            let (table, key) = k.rsplit_once('.').unwrap_or(("", k));
            tables.entry(table).or_default().push((key, v));
        }
        let mut out = String::from(header);
        for (table, keys) in tables {
            if !table.is_empty() {
                out.push_str(&format!("\n[{table}]\n"));
            }
            for (k, v) in keys {
                out.push_str(&format!("{k} = {}\n", v.render()));
            }
        }
        out
    }
}

/// What a follower joins: (entrypoints, known validators, genesis hash), from Agave's
/// docs/src/clusters/available.md (anza-xyz/agave), which Frankendancer's Agave child
/// takes as `[gossip] entrypoints` and `[consensus]` keys.
pub(super) fn cluster(
    c: SolanaCluster,
) -> (
    &'static [&'static str],
    &'static [&'static str],
    &'static str,
) {
    match c {
        SolanaCluster::MainnetBeta => (
            &[
                "entrypoint.mainnet-beta.solana.com:8001",
                "entrypoint2.mainnet-beta.solana.com:8001",
                "entrypoint3.mainnet-beta.solana.com:8001",
                "entrypoint4.mainnet-beta.solana.com:8001",
                "entrypoint5.mainnet-beta.solana.com:8001",
            ],
            &[
                "7Np41oeYqPefeNQEHSv1UDhYrehxin3NStELsSKCT4K2",
                "GdnSyH3YtwcxFvQrVVJMm1JhTS4QVX7MFsX56uJLUfiZ",
                "DE1bawNcRJB9rVm3buyMVfr8mBEoyyu73NBovf2oXJsJ",
                "CakcnaRDHka2gXyfbEd2d3xsvkJkqsLw2akB3zsN1D2S",
            ],
            "5eykt4UsFv8P8NJdTREpY1vzqKqZKvdpKuc147dw2N9d",
        ),
        SolanaCluster::Testnet => (
            &[
                "entrypoint.testnet.solana.com:8001",
                "entrypoint2.testnet.solana.com:8001",
                "entrypoint3.testnet.solana.com:8001",
            ],
            &[
                "5D1fNXzvv5NjV1ysLjirC4WY92RNsVH18vjmcszZd8on",
                "Ft5fbkqNa76vnsjYNwjDZUXoTWpP7VYm3mtsaQckQADN",
                "9QxCLckBiJc783jnMvXZubK4wH86Eqqvashtrwvcsgkv",
            ],
            "4uhcVJyU9pJkvQyS88uRDiswHXSCkY3zQawwpjk2NsNY",
        ),
        SolanaCluster::Devnet => (
            &[
                "entrypoint.devnet.solana.com:8001",
                "entrypoint2.devnet.solana.com:8001",
                "entrypoint3.devnet.solana.com:8001",
                "entrypoint4.devnet.solana.com:8001",
                "entrypoint5.devnet.solana.com:8001",
            ],
            &[
                "dv1ZAGvdsz5hHLwWXsVnM94hWf1pjbKVau1QVkaMJ92",
                "dv2eQHeP4RFrJZ6UeiZWoc3XTtmtZCUKxxCApCDcRNV",
                "dv4ACNkpYPcE3aKmYDqZm9G5EB3J4MRoeE7WNDRBVJB",
                "dv3qDFk1DTF36Z62bNvrCXe9sKATA6xvVy6A798xxAS",
            ],
            "EtWTRABZaYq6iMfeYKouRu166VU2xqa1wcaWoxPkrZBG",
        ),
        SolanaCluster::Custom => (&[], &[], ""),
    }
}

/// Everything a trial's config needs besides the spec.
pub struct Inputs<'a> {
    pub spec: &'a FiredancerSpec,
    /// The tuned tile counts (over the spec's layout).
    pub tuning: &'a Tuning,
    pub version: Option<Version>,
    /// Storage roles of the trial, with their mount paths.
    pub volumes: Vec<(VolumeRole, String)>,
    /// Where the Agave child pushes its datapoints (a follower's vmagent), if anywhere.
    pub datapoints_port: Option<i32>,
    /// A Validator's: its key files and an RPC the operator reaches; None for a trial.
    pub validator: Option<KeyFiles>,
}

/// A Frankendancer Validator's key files, where the start script copies them from its
/// Secrets ([`super::start`]): `[consensus] identity_path` and, voting,
/// `vote_account_path` (the identity is the authorized voter: no `authorized_voter_paths`,
/// except for a failover pair member, whose authorized voter is the staked identity).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeyFiles {
    pub identity: Option<String>,
    pub vote_account: Option<String>,
    pub authorized_voter: Option<String>,
}

/// Every configured tile count, the spec's and the tuned ones, under its version's key
/// (the knob table's).
pub(super) fn tile_counts(c: &mut Config, i: &Inputs) -> Result<(), KnobError> {
    let mut counts = i.tuning.clone();
    for (knob, _, _) in KINDS {
        if let Some(n) = Layout::spec_count(&i.spec.layout, knob) {
            counts.threads.entry(knob).or_insert(n);
        }
    }
    let applied = knobs::apply(&FIREDANCER, &counts, i.version)?;
    for (key, value) in &applied.config {
        c.set(key, Value::user(value));
    }
    Ok(())
}

/// The keys both flavors write alike: the user, hugetlbfs, the network provider, the
/// metric tile and the GUI (the same keys in fdctl's and firedancer's default.toml).
pub(super) fn common(c: &mut Config, s: &FiredancerSpec) {
    c.set("user", Value::Str(s.user.clone()));
    c.set("hugetlbfs.mount_path", Value::Str(HUGETLBFS.into()));
    c.set(
        "net.provider",
        Value::Str(
            match s.net_provider {
                FiredancerNetProvider::Socket => "socket",
                FiredancerNetProvider::Xdp => "xdp",
            }
            .into(),
        ),
    );
    // fdctl listens on 127.0.0.1 by default, which Prometheus cannot reach.
    c.set(
        "tiles.metric.prometheus_listen_address",
        Value::Str("0.0.0.0".into()),
    );
    c.set(
        "tiles.metric.prometheus_listen_port",
        Value::Int(s.metrics_port.into()),
    );
    c.set("tiles.gui.enabled", Value::Bool(s.gui));
    if s.gui {
        c.set(
            "tiles.gui.gui_listen_address",
            Value::Str("127.0.0.1".into()),
        );
        c.set("tiles.gui.gui_listen_port", Value::Int(s.gui_port.into()));
    }
}

/// The config of a trial, with its affinity placeholders.
pub fn config(i: &Inputs) -> Result<Config, KnobError> {
    if full(i.spec) {
        return super::config_full::config(i);
    }
    let s = i.spec;
    let mut c = Config::default();
    common(&mut c, s);
    c.set("scratch_directory", Value::Str(SCRATCH_DIR.into()));
    for (role, key) in [
        (VolumeRole::Ledger, "ledger.path"),
        (VolumeRole::Accounts, "ledger.accounts_path"),
        (VolumeRole::Snapshots, "snapshots.path"),
    ] {
        if let Some((_, path)) = i.volumes.iter().find(|(r, _)| *r == role) {
            c.set(key, Value::Str(path.clone()));
        }
    }
    // A snapshot cache holds its Agave's archives, full (`--snapshots`) and incremental
    // (`--incremental-snapshot-archive-path`), in the node's directory (snapshots.rs).
    if super::snapshots::cache(s).is_some() {
        let dir = Value::Str(super::snapshots::MOUNT.into());
        c.set("snapshots.path", dir.clone());
        c.set("snapshots.incremental_path", dir);
    }
    // The tiles on the container's cores, the Agave child on the rest.
    c.set("layout.affinity", Value::Str(AFFINITY.into()));
    c.set("layout.agave_affinity", Value::Str(AGAVE_AFFINITY.into()));
    tile_counts(&mut c, i)?;
    match s.workload {
        FiredancerWorkload::Follow => follower(&mut c, i),
        FiredancerWorkload::Bench => bench(&mut c, s),
    }
    for (k, v) in &s.config {
        c.set(k, Value::user(v));
    }
    Ok(c)
}

/// A non-voting follower of a cluster: no `[consensus] vote_account_path`, so it never
/// votes ("If no voting account is provided, voting will be disabled").
fn follower(c: &mut Config, i: &Inputs) {
    let s = i.spec;
    let (entrypoints, known, genesis) = cluster(s.cluster);
    let mut e: Vec<String> = entrypoints.iter().map(|e| e.to_string()).collect();
    e.extend(s.entrypoints.iter().cloned());
    let mut k: Vec<String> = known.iter().map(|k| k.to_string()).collect();
    k.extend(s.known_validators.iter().cloned());
    c.set("gossip.entrypoints", Value::Strs(e));
    c.set("consensus.known_validators", Value::Strs(k));
    let keys = i.validator.clone().unwrap_or_default();
    c.set(
        "consensus.identity_path",
        Value::Str(keys.identity.unwrap_or_else(identity_path)),
    );
    if let Some(vote) = keys.vote_account {
        c.set("consensus.vote_account_path", Value::Str(vote));
    }
    // Passed to the Agave child as `--authorized-voter` (run_agave.c @v0.1106.40201).
    if let Some(voter) = keys.authorized_voter {
        c.set("consensus.authorized_voter_paths", Value::Strs(vec![voter]));
    }
    let genesis = s.expected_genesis_hash.clone().unwrap_or(genesis.into());
    if !genesis.is_empty() {
        c.set("consensus.expected_genesis_hash", Value::Str(genesis));
    }
    // As Firedancer's own guide sets it (book/guide/getting-started.md: port 8899, full_api,
    // private). The RPC exporter reads slot lag here; solana-exporter v3.0.2 needs the full API.
    c.set("rpc.port", Value::Int(s.rpc_port.into()));
    c.set("rpc.full_api", Value::Bool(true));
    c.set("rpc.private", Value::Bool(true));
    // Snapshots from any peer (only known validators often stalls the download).
    c.set("rpc.only_known", Value::Bool(false));
    if i.validator.is_some() {
        // The operator reads getHealth and the restart window's figures from outside the
        // pod; with `private` the Agave child binds 127.0.0.1 unless told otherwise
        // (default.toml [rpc] bind_address, passed as --rpc-bind-address by
        // src/app/fdctl/commands/run_agave.c @v0.1106.40201, the same from v0.501.20212).
        // The pod's IP, as for Agave: under host networking 0.0.0.0 would open the full
        // RPC API on every address of the node; the start script fills it in.
        c.set("rpc.bind_address", Value::Str(POD_IP.into()));
    }
    if let Some(port) = i.datapoints_port {
        c.set(
            "reporting.solana_metrics_config",
            Value::Str(format!(
                "host=http://127.0.0.1:{port},db=frankendancer,u=valtune,p=valtune"
            )),
        );
    }
}

/// `fddev bench`: the load generator's tiles and limits.
pub(super) fn bench(c: &mut Config, s: &FiredancerSpec) {
    let b = &s.bench;
    c.set(
        "development.bench.affinity",
        Value::Str(BENCH_AFFINITY.into()),
    );
    c.set(
        "development.bench.benchg_tile_count",
        Value::Int(b.benchg_tiles.into()),
    );
    c.set(
        "development.bench.benchs_tile_count",
        Value::Int(b.benchs_tiles.into()),
    );
    c.set(
        "development.bench.larger_max_cost_per_block",
        Value::Bool(b.larger_max_cost_per_block),
    );
    c.set(
        "development.bench.larger_shred_limits_per_block",
        Value::Bool(b.larger_shred_limits_per_block),
    );
    if let Some(n) = b.fund_initial_accounts {
        c.set("development.genesis.fund_initial_accounts", Value::Int(n));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_toml_and_text_is_quoted() {
        assert_eq!(Value::user("30"), Value::Raw("30".into()));
        assert_eq!(Value::user("1_000"), Value::Raw("1_000".into()));
        assert_eq!(Value::user("true"), Value::Raw("true".into()));
        assert_eq!(Value::user("\"x\""), Value::Raw("\"x\"".into()));
        assert_eq!(Value::user("0.0.0.0").render(), "\"0.0.0.0\"");
        assert_eq!(Value::user("auto").render(), "\"auto\"");
        assert_eq!(Value::Str("a\"b".into()).render(), "\"a\\\"b\"");
    }

    #[test]
    fn keys_group_into_tables_after_the_top_level() {
        let mut c = Config::default();
        c.set("layout.verify_tile_count", Value::Int(30));
        c.set("user", Value::Str("firedancer".into()));
        c.set("development.bench.benchg_tile_count", Value::Int(12));
        c.set("layout.affinity", Value::Str(AFFINITY.into()));
        assert_eq!(
            c.render("# h\n"),
            "# h\nuser = \"firedancer\"\n\n[development.bench]\nbenchg_tile_count = 12\n\n[layout]\naffinity = \"@AFFINITY@\"\nverify_tile_count = 30\n"
        );
    }
}
