//! `fdctl set-identity` against a running simulated Frankendancer, as the real command
//! does it (firedancer-io/firedancer src/app/fdctl/commands/set_identityh.c at
//! v0.1106.40201): its arguments (`--require-tower`, `--do-not-require-vote-history`,
//! `--force` stripped, then the keypair path, else its usage line), the running validator
//! found from the config it is given (it joins the workspaces that config describes, so
//! another config finds no validator), the keypair read as the validator container sees
//! it, and the switch through the PoH tile to the Agave child's `set_identity_keypair`
//! ([`Signer`]: with `--require-tower` the identity's tower must load from the ledger).
//! Its last line on success is the command's: "Validator identity key switched to
//! `<pubkey>`" (exit 0). The PoH tile's keyswitch is a lock ([`Lock`]): taken at the
//! start (the CAS from UNLOCKED, else "Cannot set-identity because Firedancer is already
//! in the process of switching keys ..." unless `--force`), released at the end.
//!
//! Two ways the real command blocks, which the lab's nsenter plays (its codes
//! [`WAITS`] and [`HANGS`]):
//! - before the Agave child is up the PoH tile cannot switch it, so fdctl waits;
//! - when the Agave child refuses the identity (a tower it cannot load), the PoH tile
//!   marks the switch FAILED without halting, set-identity goes on to ask it to unhalt
//!   and waits for an answer that never comes (set_identityh.c L189-196 and L303-321,
//!   src/discoh/pohh/fd_pohh_tile.c L1277-1296 `maybe_change_identity`): it never exits,
//!   and its "Failed to switch identity key" is never printed. The identity is
//!   unchanged and the keyswitch stays locked until a `--force`.
//!
//! The lab reaches it from `nsenter --mount` into the validator container (sim/nsenter.rs):
//! the only place its workspaces are.

use serde_json::{Value, json};

use super::super::Rpc;
use super::super::agave::identity::pubkey_of_keypair;
use super::super::agave::signer::Signer;

use crate::sim::nsenter::{HANGS, WAITS};

/// The PoH tile's keyswitch: locked while a switch runs or once one was abandoned.
pub type Lock = std::sync::atomic::AtomicBool;

/// What fdctl prints on failure (FD_LOG_ERR), as one message; exit 1.
fn failed(message: String) -> Rpc {
    Rpc::Error {
        code: 1,
        message,
        data: None,
    }
}

/// Runs `fdctl ARGV` (the arguments after the program) in the validator container whose
/// validator was started with `config`; `ready`: its Agave child is up (the keyswitch is
/// served by it). `read` reads a file as the container sees it.
pub fn fdctl(
    argv: &[String],
    config: &str,
    ready: bool,
    signer: &Signer,
    lock: &Lock,
    read: &dyn Fn(&str) -> Option<String>,
) -> Rpc {
    use std::sync::atomic::Ordering::SeqCst;
    let mut args: Vec<&str> = argv.iter().map(String::as_str).collect();
    // fdctl's main strips `--config PATH` wherever it is (fd_env_strip_cmdline_cstr).
    let mut given = None;
    if let Some(i) = args.iter().position(|a| *a == "--config") {
        given = args.get(i + 1).map(|s| s.to_string());
        args.drain(i..(i + 2).min(args.len()));
    }
    match args.first() {
        Some(&"set-identity") => {}
        Some(other) => return failed(format!("ERR     unknown subcommand `{other}`")),
        None => return failed("ERR     no subcommand specified".into()),
    }
    let mut rest: Vec<&str> = args[1..].to_vec();
    let mut strip = |flag: &str| {
        let had = rest.contains(&flag);
        rest.retain(|a| *a != flag);
        had
    };
    let require_tower = strip("--require-tower");
    strip("--do-not-require-vote-history");
    let force = strip("--force");
    let Some(path) = rest.first().copied() else {
        return failed("ERR     Usage: fdctl set-identity <keypair> [--require-tower] [--do-not-require-vote-history] [--force]".into());
    };
    let Some(config_path) = given else {
        return failed(
            "ERR     missing --config: set-identity needs the config the validator runs with"
                .into(),
        );
    };
    // Another config describes other workspaces: no running validator there.
    if config_path != config {
        return failed(match read(&config_path) {
            None => format!(
                "ERR     failed to open config file `{config_path}` (2-No such file or directory)"
            ),
            Some(_) => format!(
                "ERR     no running validator's workspaces match the config `{config_path}`: point --config at the one the validator was started with ({config})"
            ),
        });
    }
    // fd_keyload_load: the file must hold a keypair.
    let Some(pubkey) = read(path).as_deref().and_then(pubkey_of_keypair) else {
        return failed(format!("ERR     failed to read identity keypair `{path}`"));
    };
    if !ready {
        return Rpc::Error {
            code: WAITS,
            message: String::new(),
            data: None,
        };
    }
    let mut said = String::new();
    if lock.swap(true, SeqCst) {
        if !force {
            return failed("ERR     Cannot set-identity because Firedancer is already in the process of switching keys. If you are not currently changing the identity, it might be because an identity change was abandoned. To recover, run the `set-identity` command again with the `--force` argument.".into());
        }
        said.push_str("WARNING Another process was changing keys, but `--force` supplied. Forcing lock on validator identity for key switch...\n");
    }
    match signer.admin_rpc("setIdentity", &json!([path, require_tower])) {
        Some(Rpc::Result(_)) => {
            lock.store(false, SeqCst);
            Rpc::Result(Value::String(format!(
                "{said}NOTICE  Validator identity key switched to `{pubkey}`"
            )))
        }
        // Refused: the identity unchanged, the lock held, fdctl waiting for ever.
        _ => Rpc::Error {
            code: HANGS,
            message: said,
            data: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn key(seed: u8) -> String {
        serde_json::to_string(&(0..64u8).map(|i| i ^ seed).collect::<Vec<u8>>()).unwrap()
    }

    /// The pair's standby: the tower is required and missing, so the switch never ends
    /// (the identity unchanged, the keyswitch locked); a switch then fails on the lock
    /// until `--force`; with the tower in the ledger it switches; another config finds no
    /// validator; before the Agave child is up fdctl waits.
    #[test]
    fn set_identity_switches_only_with_the_same_config_and_the_tower() {
        let dir = std::env::temp_dir().join(format!("vv-keyswitch-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let files = BTreeMap::from([
            ("/run/valtune/keys/staked.json".to_string(), key(1)),
            ("/run/valtune/keys/spare.json".to_string(), key(2)),
            ("/var/run/firedancer/config.toml".to_string(), String::new()),
        ]);
        let staked = pubkey_of_keypair(&key(1)).unwrap();
        let spare = pubkey_of_keypair(&key(2)).unwrap();
        let read = |p: &str| files.get(p).cloned();
        let f2 = files.clone();
        let signer = Signer::new(
            spare.clone(),
            Some(staked.clone()),
            Some(dir.clone()),
            Box::new(move |p| f2.get(p).cloned()),
            crate::sim::signing::Recorder::none(),
        );
        let lock = Lock::new(false);
        let cfg = "/var/run/firedancer/config.toml";
        let argv = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        let take = argv(
            "set-identity --config /var/run/firedancer/config.toml --require-tower /run/valtune/keys/staked.json",
        );
        let code = |r: Rpc| match r {
            Rpc::Error { code, message, .. } => (code, message),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            code(fdctl(&take, cfg, false, &signer, &lock, &read)).0,
            WAITS
        );
        assert_eq!(
            code(fdctl(&take, cfg, true, &signer, &lock, &read)).0,
            HANGS
        );
        assert_eq!(signer.identity(), spare);
        std::fs::write(
            dir.join(super::super::super::agave::signer::tower_file(&staked)),
            "{}",
        )
        .unwrap();
        let (c, said) = code(fdctl(&take, cfg, true, &signer, &lock, &read));
        assert_eq!(c, 1);
        assert!(said.contains("run the `set-identity` command again with the `--force` argument"));
        let other =
            argv("set-identity --config /etc/firedancer/config.toml /run/valtune/keys/staked.json");
        assert!(matches!(
            fdctl(&other, cfg, true, &signer, &lock, &read),
            Rpc::Error { .. }
        ));
        let mut forced = take.clone();
        forced.push("--force".into());
        assert_eq!(
            fdctl(&forced, cfg, true, &signer, &lock, &read),
            Rpc::Result(Value::String(format!(
                "WARNING Another process was changing keys, but `--force` supplied. Forcing lock on validator identity for key switch...\nNOTICE  Validator identity key switched to `{staked}`"
            )))
        );
        assert!(signer.votes());
        // Unlocked again: the next switch needs no force.
        let release = argv(
            "set-identity --config /var/run/firedancer/config.toml /run/valtune/keys/spare.json",
        );
        assert!(matches!(
            fdctl(&release, cfg, true, &signer, &lock, &read),
            Rpc::Result(_)
        ));
        assert!(matches!(
            fdctl(&argv("set-identity --config /var/run/firedancer/config.toml"), cfg, true, &signer, &lock, &read),
            Rpc::Error { message, .. } if message.contains("Usage: fdctl set-identity <keypair>")
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
