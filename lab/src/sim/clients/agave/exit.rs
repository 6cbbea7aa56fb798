//! `agave-validator exit`, as a preStop hook runs it in the validator's container: it
//! asks the validator over its admin RPC socket (`<ledger>/admin.rpc`) for its `pid`,
//! then to `exit`, and waits until that process is gone (validator/src/commands/exit/mod.rs
//! at anza-xyz/agave v4.0.0: `kill(pid, 0)` until ESRCH; here, until the process's entry
//! leaves the pod's /proc, which the lab removes when it ends). Without `--force` the
//! command first waits for a restart window (`wait-for-restart-window`), which the lab
//! does not play: such a hook fails here, saying so.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::Container;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::sim::clients::flag_values;
use crate::sim::pod_view::PodView;

/// What the command line asks: the ledger directory, `--force`, and whether it waits
/// for the process to end (no `--no-wait-for-exit`). None: not an `exit` command.
#[derive(Debug, PartialEq)]
pub struct ExitCommand {
    pub ledger: String,
    pub force: bool,
    pub wait: bool,
}

/// Reads `agave-validator [--ledger DIR] exit [--force] [--no-wait-for-exit] ...`; the
/// ledger defaults to `ledger` (src/cli.rs `DefaultArgs::ledger_path`).
pub fn parse(command: &[String]) -> Option<ExitCommand> {
    let program = command.first()?;
    if program.rsplit('/').next() != Some("agave-validator") {
        return None;
    }
    let at = command.iter().position(|a| a == "exit")?;
    let (global, sub) = command[1..].split_at(at - 1);
    let ledger = flag_values(global, "--ledger")
        .first()
        .or(flag_values(global, "-l").first())
        .map(|l| l.to_string())
        .unwrap_or_else(|| "ledger".into());
    Some(ExitCommand {
        ledger,
        force: sub.iter().any(|a| a == "--force" || a == "-f"),
        wait: !sub.iter().any(|a| a == "--no-wait-for-exit"),
    })
}

/// Runs the command in `container` of the pod: Ok once the validator has ended (or the
/// request is sent, with `--no-wait-for-exit`), else what the command prints as it fails.
pub async fn run(
    cmd: &ExitCommand,
    view: &PodView,
    container: &Container,
    proc_dir: &Path,
) -> Result<(), String> {
    if !cmd.force {
        return Err(
            "agave-validator exit without --force waits for a restart window, which the lab does not play".into(),
        );
    }
    let shown = Path::new(&cmd.ledger).join("admin.rpc");
    let socket = view
        .volume_dir(container, &cmd.ledger)
        .map(|d| d.join("admin.rpc"))
        .filter(|p| p.exists())
        .ok_or_else(|| format!("{} does not exist", shown.display()))?;
    let conn = tokio::net::UnixStream::connect(&socket)
        .await
        .map_err(|e| format!("{}: {e}", shown.display()))?;
    let (read, mut write) = conn.into_split();
    let mut lines = BufReader::new(read).lines();
    let pid = if cmd.wait {
        call(&mut write, &mut lines, 1, "pid").await.map_err(|_| {
            "remote process exit cannot be waited on. `--wait-for-exit` is not supported by the remote process".to_string()
        })?
        .as_u64()
        .unwrap_or(0)
    } else {
        0
    };
    call(&mut write, &mut lines, 2, "exit").await?;
    if cmd.wait {
        while proc_dir.join(pid.to_string()).exists() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    Ok(())
}

type Lines = tokio::io::Lines<BufReader<tokio::net::unix::OwnedReadHalf>>;

/// One JSON-RPC call on the socket, its answer a line.
async fn call(
    write: &mut tokio::net::unix::OwnedWriteHalf,
    lines: &mut Lines,
    id: u64,
    method: &str,
) -> Result<Value, String> {
    let mut line = json!({"jsonrpc": "2.0", "id": id, "method": method}).to_string();
    line.push('\n');
    write
        .write_all(line.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let answer = lines
        .next_line()
        .await
        .map_err(|e| e.to_string())?
        .ok_or("the admin RPC closed the connection")?;
    let v: Value = serde_json::from_str(&answer).map_err(|e| e.to_string())?;
    match v.get("error") {
        Some(e) => Err(e.to_string()),
        None => Ok(v["result"].clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rendered_hook_is_read() {
        let line = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(
            parse(&line("agave-validator --ledger /mnt/ledger exit --force")),
            Some(ExitCommand {
                ledger: "/mnt/ledger".into(),
                force: true,
                wait: true
            })
        );
        assert_eq!(
            parse(&line("/usr/bin/agave-validator exit --no-wait-for-exit")),
            Some(ExitCommand {
                ledger: "ledger".into(),
                force: false,
                wait: false
            })
        );
        assert_eq!(parse(&line("agave-validator --ledger /l monitor")), None);
        assert_eq!(parse(&line("sh -c exit")), None);
    }
}
