//! The `bench` workload: a private cluster of one, the way agave's own scripts make one
//! (anza-xyz/agave v2.1.14 multinode-demo/setup.sh, bootstrap-validator.sh and
//! net/remote/remote-node.sh), with `solana-bench-tps` sending it transactions from a
//! sidecar in the pod:
//! - `client-keys` writes bench-tps's accounts (`--write-client-keys`), so the genesis
//!   funds them and no faucet is needed;
//! - `genesis` makes the keys and the genesis (`--cluster-type development`: any other
//!   type asks a public RPC for its feature set) in the ledger volume;
//! - the validator starts as the bootstrap leader, leading without waiting for a vote of
//!   its own (`--no-wait-for-vote-to-start-leader`; without it replay skips its leader
//!   slots), with the full RPC API bench-tps calls (getLatestBlockhash, getFeeForMessage);
//! - `bench-tps` waits for the validator's init-complete file and sends transactions over
//!   QUIC, staked as the validator's identity (`--client-node-id`), until the pod stops.
//!
//! Without an entrypoint the validator advertises 127.0.0.1, which the sidecar shares.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, ResourceRequirements, VolumeMount};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::LEDGER_DIR;
use crate::api::template::AgaveSpec;
use crate::clients::pod::sidecar_resources;

/// Keys, the client accounts and the init-complete file: in the ledger directory, as
/// multinode-demo/setup.sh keeps them beside the bootstrap validator's ledger.
const BENCH_DIR: &str = LEDGER_DIR;
/// bench-tps makes `--tx-count` times this many accounts (bench-tps/src/cli.rs default).
pub const KEYPAIR_MULTIPLIER: i32 = 8;
/// `--faucet-lamports` of multinode-demo/setup.sh.
const FAUCET_LAMPORTS: &str = "500000000000000000";
pub const BENCH_CONTAINER: &str = "bench-tps";

pub fn validator_args(agave: &AgaveSpec) -> Vec<String> {
    [
        "--identity",
        &format!("{BENCH_DIR}/identity.json"),
        "--vote-account",
        &format!("{BENCH_DIR}/vote-account.json"),
        "--ledger",
        LEDGER_DIR,
        "--rpc-port",
        &agave.rpc_port.to_string(),
        "--full-rpc-api",
        "--dynamic-port-range",
        &agave.dynamic_port_range,
        "--no-wait-for-vote-to-start-leader",
        "--no-poh-speed-test",
        "--no-os-network-limits-test",
        "--allow-private-addr",
        "--snapshot-interval-slots",
        "200",
        "--no-incremental-snapshots",
        "--init-complete-file",
        &format!("{BENCH_DIR}/init-completed"),
        "--log",
        "-",
    ]
    .into_iter()
    .map(String::from)
    .collect()
}

fn shell(name: &str, image: &str, script: String, mounts: &[VolumeMount]) -> Container {
    Container {
        name: name.into(),
        image: Some(image.into()),
        command: Some(vec!["sh".into(), "-c".into()]),
        args: Some(vec![script]),
        resources: Some(sidecar_resources()),
        volume_mounts: Some(mounts.to_vec()),
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        ..Default::default()
    }
}

/// The init containers that make the cluster: once per ledger volume.
pub fn init_containers(
    agave: &AgaveSpec,
    validator_image: &str,
    mounts: &[VolumeMount],
) -> Vec<Container> {
    let bench_image = agave.bench.image.as_deref().unwrap_or(validator_image);
    let tx = agave.bench.tx_count;
    let keys = format!(
        "set -eu\ntest -f {BENCH_DIR}/client-accounts.yml || solana-bench-tps --write-client-keys {BENCH_DIR}/client-accounts.yml --tx-count {tx} --keypair-multiplier {KEYPAIR_MULTIPLIER}\n"
    );
    let genesis = format!(
        r#"set -eu
b={BENCH_DIR}
test -f {LEDGER_DIR}/genesis.bin && exit 0
for k in identity vote-account stake-account faucet; do
  test -f $b/$k.json || solana-keygen new --no-bip39-passphrase --silent --force --outfile $b/$k.json
done
solana-genesis --ledger {LEDGER_DIR} --cluster-type development --hashes-per-tick auto \
  --bootstrap-validator $b/identity.json $b/vote-account.json $b/stake-account.json \
  --faucet-pubkey $b/faucet.json --faucet-lamports {FAUCET_LAMPORTS} \
  --enable-warmup-epochs --max-genesis-archive-unpacked-size 1073741824 \
  --primordial-accounts-file $b/client-accounts.yml
"#
    );
    vec![
        shell("client-keys", bench_image, keys, mounts),
        shell("genesis", validator_image, genesis, mounts),
    ]
}

/// bench-tps as a native sidecar: started before the validator, it waits for it, and is
/// restarted if it exits (bench-tps exits when the RPC stops answering).
pub fn sidecar(agave: &AgaveSpec, validator_image: &str, mounts: &[VolumeMount]) -> Container {
    let b = &agave.bench;
    let script = format!(
        "until [ -f {BENCH_DIR}/init-completed ]; do sleep 2; done\nexec solana-bench-tps --url http://127.0.0.1:{rpc} --read-client-keys {BENCH_DIR}/client-accounts.yml --tx-count {tx} --keypair-multiplier {KEYPAIR_MULTIPLIER} --threads {threads} --sustained --thread-batch-sleep-ms 0 --bind-address 127.0.0.1 --client-node-id {BENCH_DIR}/identity.json\n",
        rpc = agave.rpc_port,
        tx = b.tx_count,
        threads = b.threads,
    );
    let mut c = shell(
        BENCH_CONTAINER,
        b.image.as_deref().unwrap_or(validator_image),
        script,
        mounts,
    );
    c.restart_policy = Some("Always".into());
    c.termination_message_policy = None;
    let size = BTreeMap::from([
        ("cpu".to_string(), Quantity(b.cpu.to_string())),
        ("memory".to_string(), Quantity(b.memory.clone())),
    ]);
    c.resources = Some(ResourceRequirements {
        limits: Some(size.clone()),
        requests: Some(size),
        ..Default::default()
    });
    c
}
