//! The `valtune` CLI as a user runs it against the lab: the namespace from the
//! kubeconfig's context, `kubectl valtune` as kubectl's plugin, the recommendation as a
//! patch the API server takes, the experiments listed, and `kubectl get vtrial` saying
//! why each trial ended.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use valtune::api::ValidatorExperiment;
use valtune::api::experiment::ExperimentPhase;

use crate::common::{create, lab, quickstart_with, wait_finished, wait_for};

/// The lab's kubeconfig with its current context set to `ns`, and a second context
/// `elsewhere` on the same cluster without a namespace.
fn kubeconfig(lab_config: &Path, ns: &str, dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(lab_config).unwrap();
    let mut config: Value = serde_saphyr::from_str(&text).unwrap();
    let current = config["current-context"].as_str().unwrap().to_string();
    let contexts = config["contexts"].as_array_mut().unwrap();
    let mut other = contexts
        .iter()
        .find(|c| c["name"] == current.as_str())
        .unwrap()
        .clone();
    for c in contexts
        .iter_mut()
        .filter(|c| c["name"] == current.as_str())
    {
        c["context"]["namespace"] = json!(ns);
    }
    other["name"] = json!("elsewhere");
    contexts.push(other);
    let path = dir.join("kubeconfig");
    std::fs::write(&path, serde_json::to_string(&config).unwrap()).unwrap();
    path
}

fn run(program: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let out = Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    eprintln!(
        "$ {} {}\n{}{}",
        program.display(),
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stdout(out: &Output) -> String {
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// The cells of a kubectl table by header: the header's words start where their
/// columns start (kubectl aligns with a tabwriter).
fn cells(table: &str, header: &str) -> Vec<String> {
    let mut lines = table.lines();
    let head = lines.next().unwrap();
    let start = head
        .find(header)
        .unwrap_or_else(|| panic!("no column {header}: {head}"));
    lines
        .map(|l| {
            let rest = l.get(start..).unwrap_or("");
            // Up to the next column: two spaces (the message, last, to the end).
            match rest.find("  ") {
                Some(end) if !head[start..].trim_start_matches(header).trim().is_empty() => {
                    rest[..end].trim().to_string()
                }
                _ => rest.trim().to_string(),
            }
        })
        .collect()
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn cli_recommend_prints_a_patch_the_api_server_accepts() {
    let lab = lab().await;
    let ns = lab.namespace("cli").await;
    let _op = lab.start_operator(&ns);
    // Two sizes around the paper's knee, and a generic knob the patch writes into the
    // template's env.
    create(
        &lab,
        &quickstart_with(
            &ns,
            "rec",
            json!({"spec": {"sweep": {"memory": ["256Gi", "512Gi"], "knobs": [{"name": "arena", "env": "MALLOC_ARENA_MAX", "values": ["4"]}]}, "parallelism": 2}}),
        ),
    )
    .await;
    // One that finds nothing (128Gi is OOM-killed), one that waits (suspended).
    create(
        &lab,
        &quickstart_with(
            &ns,
            "none",
            json!({"spec": {"sweep": {"memory": ["128Gi"]}}}),
        ),
    )
    .await;
    create(
        &lab,
        &quickstart_with(&ns, "later", json!({"spec": {"suspend": true}})),
    )
    .await;
    let vx = wait_finished(&lab, &ns, "rec", Duration::from_secs(420)).await;
    let rec = vx.status.clone().unwrap().recommendation.unwrap();
    assert_eq!(rec.summary, "memory=512Gi arena=4", "{rec:?}");
    wait_finished(&lab, &ns, "none", Duration::from_secs(300)).await;
    let vxs: Api<ValidatorExperiment> = Api::namespaced(lab.client.clone(), &ns);
    wait_for("later to be suspended", Duration::from_secs(60), || async {
        let p = vxs.get("later").await.map_err(|e| e.to_string())?;
        match p.status.map(|s| s.phase) {
            Some(ExperimentPhase::Suspended) => Ok(()),
            p => Err(format!("{p:?}")),
        }
    })
    .await;

    let dir = std::env::temp_dir().join(format!("valtune-cli-{ns}"));
    std::fs::create_dir_all(&dir).unwrap();
    let config = kubeconfig(&lab.state.kubeconfig, &ns, &dir);
    let config = config.to_str().unwrap();
    let valtune = Path::new(env!("CARGO_BIN_EXE_valtune"));
    let env = [("KUBECONFIG", config)];

    // No -n: the namespace is the context's, as kubectl's.
    let yaml = stdout(&run(valtune, &["recommend", "rec"], &env));
    for line in [
        "# reason:  the smallest memory",
        "# support: kept up 1/1",
        "# trial:   ",
    ] {
        assert!(yaml.contains(line), "{line}: {yaml}");
    }
    let patch: Value = serde_saphyr::from_str(&yaml).unwrap();
    let dry = PatchParams {
        dry_run: true,
        ..Default::default()
    };
    // What `kubectl patch vx rec --type merge --patch-file F --dry-run=server` sends:
    // admission (schema, CEL) runs on the result, nothing is stored.
    let applied = vxs
        .patch("rec", &dry, &Patch::Merge(&patch))
        .await
        .expect("the API server refused the recommendation's patch");
    let t = &applied.spec.template;
    assert_eq!(t.resources.memory.as_deref(), Some("512Gi"), "{patch}");
    let env_of = |name: &str| {
        t.env
            .iter()
            .find(|e| e.name == name)
            .and_then(|e| e.value.clone())
    };
    assert_eq!(env_of("MALLOC_ARENA_MAX").as_deref(), Some("4"), "{patch}");
    // The rest of the template is the experiment's.
    assert_eq!(t.storage, vx.spec.template.storage);
    assert_eq!(
        vxs.get("rec").await.unwrap().spec,
        vx.spec,
        "a dry run stores nothing"
    );

    // Another context: its namespace (none: default) unless -n says.
    let other = run(
        valtune,
        &[
            "recommend",
            "rec",
            "--kubeconfig",
            config,
            "--context",
            "elsewhere",
        ],
        &[],
    );
    assert!(!other.status.success());
    assert!(
        String::from_utf8_lossy(&other.stderr)
            .contains("no ValidatorExperiment rec in namespace default"),
        "{other:?}"
    );
    // kubectl's plugin: `kubectl valtune` runs kubectl-valtune from the PATH.
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let link = bin.join("kubectl-valtune");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(valtune, &link).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let kubectl = lab.state.tools.join("kubectl");
    let plugin_env = [("KUBECONFIG", config), ("PATH", path.as_str())];
    let json_out = stdout(&run(
        &kubectl,
        &[
            "valtune",
            "recommend",
            "rec",
            "--kubeconfig",
            config,
            "--context",
            "elsewhere",
            "-n",
            &ns,
            "-o",
            "json",
        ],
        &plugin_env,
    ));
    let j: Value = serde_json::from_str(&json_out).unwrap();
    assert_eq!(j["patch"], patch);
    assert_eq!(j["recommendation"]["point"], "memory=512Gi arena=4");
    assert_eq!(j["recommendation"]["trial"], rec.trial.as_str());
    assert_eq!(j["phase"], "Succeeded");
    let help = stdout(&run(
        &kubectl,
        &["valtune", "recommend", "--help"],
        &plugin_env,
    ));
    assert!(help.contains("Usage: kubectl valtune recommend"), "{help}");

    // No recommendation: say whether it may still come.
    let none = run(valtune, &["recommend", "none"], &env);
    assert!(!none.status.success());
    let said = String::from_utf8_lossy(&none.stderr);
    assert!(
        said.contains("none: the experiment finished and no point kept up"),
        "{said}"
    );
    let later = run(valtune, &["recommend", "later"], &env);
    assert!(!later.status.success());
    let said = String::from_utf8_lossy(&later.stderr);
    assert!(
        said.contains("none yet: the experiment is suspended"),
        "{said}"
    );

    // The experiments, one line each.
    let list = stdout(&run(valtune, &["list"], &env));
    let line = |name: &str| {
        list.lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name}: {list}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(
        line("rec"),
        "rec agave Succeeded 2/2 0 memory=512Gi arena=4"
    );
    assert_eq!(line("none"), "none agave Succeeded 1/1 0 -");
    assert_eq!(line("later"), "later agave Suspended 0/5 0 -");

    // kubectl get vtrial: why each trial ended, counts without decimals.
    let get = |extra: &[&str]| {
        let mut args = vec![
            "get",
            "vtrial",
            "-n",
            &ns,
            "-l",
            "valtune.dev/experiment=none",
        ];
        args.extend(extra);
        stdout(&run(&kubectl, &args, &env))
    };
    let table = get(&[]);
    assert_eq!(cells(&table, "OUTCOME"), ["OOMKilled"], "{table}");
    let message = &cells(&table, "MESSAGE")[0];
    assert!(message.contains("OOMKilled"), "{table}");
    for column in ["AVG TPS", "0 TPS S", "MAX TPS", "MAX LAG"] {
        let v = &cells(&table, column)[0];
        assert!(
            !v.is_empty() && v.chars().all(|c| c.is_ascii_digit()),
            "{column}: {v:?} is not a whole number\n{table}"
        );
    }
    let wide = get(&["-o", "wide"]);
    let coverage: f64 = cells(&wide, "COVERAGE")[0].parse().unwrap();
    assert!((0.0..=1.0).contains(&coverage), "{wide}");
    assert!(!table.contains("COVERAGE"), "{table}");
    // kubectl upper-cases names: no µ to turn into a Greek Μ that reads "MS".
    assert!(wide.contains("PC USEC/BATCH"), "{wide}");

    // The report's wide table says it too.
    let report = stdout(&run(valtune, &["report", "none", "-o", "wide"], &env));
    assert!(
        report.lines().next().unwrap().ends_with("MESSAGE"),
        "{report}"
    );
    assert!(report.contains(message.as_str()), "{report}");
    assert!(
        report.contains("recommendation: none: the experiment finished and no point kept up"),
        "{report}"
    );

    std::fs::remove_dir_all(&dir).unwrap();
    lab.delete_namespace(&ns).await;
}
