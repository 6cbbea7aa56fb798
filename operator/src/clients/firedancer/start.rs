//! The validator container's start script. Under the kubelet's static CPU manager a
//! Guaranteed container gets exclusive cores that only it can see (its cgroup's
//! `cpuset.cpus.effective`), and fdctl's `affinity = "auto"` ignores that cpuset: it lays
//! tiles out over every CPU in /sys/devices/system/cpu/present
//! (src/disco/topo/fd_cpu_topo.c). So the script writes explicit affinity strings from
//! the cpuset: the first cores to the tiles in topology order, then the bench's
//! generators and senders (bencho floats, as in the seed's `f1,0-13`), the rest to
//! Frankendancer's Agave child (full Firedancer has none). It then prepares what the
//! program checks (the user's directories, an identity, hugetlbfs mounts, and full
//! Firedancer's snapshots directory) and execs fdctl or firedancer, which reports a layout
//! that does not fit itself ("The topology you are using has N tiles, but the CPU affinity
//! ... only provides for M cores", src/app/fdctl/topology.c, src/app/firedancer/topology.c).
//!
//! `FD_TEMPLATE`, `FD_CONFIG` and `CPUSET_FILE` override the paths it reads and writes
//! (the lab runs this script against files of its own).

use super::config::{
    AFFINITY, AGAVE_AFFINITY, BENCH_AFFINITY, HUGETLBFS, POD_IP, config_path, identity_path,
    template_path,
};
use super::layout::Needs;
use crate::api::firedancer::FiredancerWorkload;

const HEAD: &str = r#"set -eu
tiles={{TILES}} bench={{BENCH}} want={{CPU}} user={{USER}}
template=${FD_TEMPLATE:-{{TEMPLATE}}}
config=${FD_CONFIG:-{{CONFIG}}}
cpuset=${CPUSET_FILE:-}
for f in /sys/fs/cgroup/cpuset.cpus.effective /sys/fs/cgroup/cpuset/cpuset.effective_cpus; do
  if [ -z "$cpuset" ] && [ -r "$f" ]; then cpuset=$f; fi
done
if [ -z "$cpuset" ]; then
  echo "valtune: cannot read the container's cpuset (cgroup v2 cpuset.cpus.effective, v1 cpuset/cpuset.effective_cpus)" >&2
  exit 1
fi
cpus=""
for r in $(tr ',' ' ' < "$cpuset"); do
  i=${r%-*}; last=${r#*-}
  while [ "$i" -le "$last" ]; do cpus="$cpus $i"; i=$((i + 1)); done
done
set -- $cpus
n=$#
if [ "$n" -gt "$want" ]; then
  echo "valtune: the cpuset has $n CPUs for a container that requested $want: the kubelet's CPU manager policy is not static, so these cores are shared; using the first $want" >&2
  n=$want
fi
# take SKIP COUNT CPU...: COUNT of the CPUs after the first SKIP, comma-separated.
take() {
  skip=$1 count=$2; shift 2; out=""
  while [ "$skip" -gt 0 ] && [ $# -gt 0 ]; do shift; skip=$((skip - 1)); done
  while [ "$count" -gt 0 ] && [ $# -gt 0 ]; do out="${out:+$out,}$1"; shift; count=$((count - 1)); done
  echo "$out"
}
affinity=$(take 0 "$tiles" "$@")
bench_affinity=f1
b=$(take "$tiles" "$bench" "$@")
if [ -n "$b" ]; then bench_affinity="f1,$b"; fi
rest=$((n - tiles - bench))
if [ "$rest" -lt 0 ]; then rest=0; fi
agave_affinity=$(take $((tiles + bench)) "$rest" "$@")
sed -e "s/{{A}}/$affinity/" -e "s/{{AA}}/$agave_affinity/" -e "s/{{BA}}/$bench_affinity/" -e "s/{{IP}}/${POD_IP:-127.0.0.1}/" "$template" > "$config"
{{SAY}}
if ! id "$user" >/dev/null 2>&1; then
  echo "valtune: the image has no user $user, which {{PROGRAM}} drops to (it refuses root): add one (useradd $user) or set template.firedancer.user" >&2
  exit 1
fi
chown "$user" {{DIRS}}
"#;

/// The programs of a flavor: (the validator, its development build with `bench`).
/// Frankendancer's `fdctl`/`fddev` (src/app/fdctl, src/app/fddev); full Firedancer's
/// `firedancer`/`firedancer-dev` (src/app/firedancer/Local.mk, src/app/firedancer-dev).
pub fn programs(full: bool) -> (&'static str, &'static str) {
    if full {
        ("firedancer", "firedancer-dev")
    } else {
        ("fdctl", "fddev")
    }
}

/// The command a workload runs: `fdctl run`, `fddev bench`, `firedancer run`,
/// `firedancer-dev bench`.
pub fn command(full: bool, workload: FiredancerWorkload) -> String {
    let (program, dev) = programs(full);
    match workload {
        FiredancerWorkload::Follow => format!("{program} run"),
        FiredancerWorkload::Bench => format!("{dev} bench"),
    }
}

/// Where a Validator's keys are copied for fdctl's user (an emptyDir of medium Memory:
/// the keys stay off the node's disks).
pub const KEYS_DIR: &str = "/run/valtune/keys";

/// A Validator's key files: each (Secret file, copy) the script makes, and whether one is
/// the identity (then no throwaway identity is made).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Keys {
    pub copies: Vec<(String, String)>,
    pub identity: bool,
}

/// Copies each Secret's key for `user`: a Secret's files are root's (mode 0400), and the
/// Agave child, which reads `--identity` and `--vote-account`, runs as the user fdctl
/// drops to (`fd_topo_run_single_process(..., config->uid, config->gid, ...)`,
/// src/app/fdctl/commands/run_agave.c @v0.1106.40201). `FD_ROOT` prefixes the paths (the
/// lab runs the script against files of its own); a missing key stops the script
/// (`set -e`) with cat's message.
fn copy_keys(keys: &Keys) -> String {
    let mut s = String::from(
        "# The Validator's keys, from its Secrets, readable by the user only.\nroot=${FD_ROOT:-}\n",
    );
    for (from, to) in &keys.copies {
        s.push_str(&format!(
            "(umask 077; cat \"$root{from}\" > \"$root{to}\")\nchown \"$user\" \"$root{to}\"\n"
        ));
    }
    s
}

/// Prepares the node's snapshot directory (snapshots.rs): full Firedancer's `snapshots`
/// stage accepts only a directory of the user's user and group with mode 0700 and cannot
/// undo another (src/app/shared/commands/configure/snapshots.c); Frankendancer's Agave
/// would prefer a bank snapshot an earlier trial left (its accounts are gone with that
/// trial's volume) to the archives, so only the archives stay.
pub(super) fn cache_script(full: bool, dir: &str) -> String {
    // `FD_ROOT` prefixes the path, as for the keys (the lab runs the script on files of
    // its own).
    if full {
        format!(
            "# The node's snapshot directory, as firedancer's snapshots stage accepts it.\nroot=${{FD_ROOT:-}}\nchown \"$user:$(id -g \"$user\")\" \"$root{dir}\"\nchmod 700 \"$root{dir}\"\n"
        )
    } else {
        format!(
            "# The node's snapshot archives stay; an earlier trial's bank snapshots go.\nroot=${{FD_ROOT:-}}\nrm -rf \"$root{dir}/snapshots\"\nchown \"$user\" \"$root{dir}\"\n"
        )
    }
}

/// The script, for a trial needing `needs` on `cpu` cores (a Validator's with its `keys`).
pub fn script(
    full: bool,
    workload: FiredancerWorkload,
    needs: Needs,
    cpu: i32,
    user: &str,
    (dirs, cache): (&[String], Option<&str>),
    keys: Option<&Keys>,
) -> String {
    let (program, dev) = programs(full);
    let say = if full {
        r#"echo "valtune: $n cores: tiles on $affinity" >&2"#
    } else {
        r#"echo "valtune: $n cores: tiles on $affinity; Agave on ${agave_affinity:-no core of its own}" >&2"#
    };
    let mut s = HEAD
        .replace("{{SAY}}", say)
        .replace("{{PROGRAM}}", program)
        .replace("{{TILES}}", &needs.tiles.to_string())
        .replace("{{BENCH}}", &needs.bench_cores.to_string())
        .replace("{{CPU}}", &cpu.to_string())
        .replace("{{USER}}", user)
        .replace("{{TEMPLATE}}", &template_path())
        .replace("{{CONFIG}}", &config_path())
        .replace("{{A}}", AFFINITY)
        .replace("{{AA}}", AGAVE_AFFINITY)
        .replace("{{BA}}", BENCH_AFFINITY)
        .replace("{{IP}}", POD_IP)
        .replace("{{DIRS}}", &dirs.join(" "));
    if let Some(dir) = cache {
        s.push_str(&cache_script(full, dir));
    }
    match workload {
        FiredancerWorkload::Follow => {
            let id = identity_path();
            // Full Firedancer's snapshot loader writes to `[paths] snapshots`, which its
            // `snapshots` stage creates owned by the user (shared/commands/configure/snapshots.c).
            let stages = if full {
                "hugetlbfs snapshots"
            } else {
                "hugetlbfs"
            };
            if let Some(k) = keys {
                s.push_str(&copy_keys(k));
            }
            if !keys.is_some_and(|k| k.identity) {
                s.push_str(&format!(
                    r#"# An unstaked identity: a trial never votes (no vote account in the config).
if [ ! -f {id} ]; then {program} keys new {id} --config "$config"; fi
chown "$user" {id}
"#
                ));
            }
            s.push_str(&format!(
                r#"# {program} run accepts only hugetlbfs mounts it made (device none, owned by the user, mode
# 0700; shared/commands/configure/hugetlbfs.c check): this replaces the kubelet's
# hugepages mounts under {HUGETLBFS} with such mounts, drawing on the same pages.
{program} configure init {stages} --config "$config"
exec {program} run --config "$config"
"#
            ));
        }
        FiredancerWorkload::Bench => {
            // bench runs `configure init` of every stage itself (shared_dev/commands/bench/bench.c).
            s.push_str(&format!("exec {dev} bench --config \"$config\"\n"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::process::Command;

    /// Runs the script with `cpuset` as the container's, a template, and fdctl/fddev/
    /// chown/id stubs that record their arguments: (exit code, config written, calls, stderr).
    fn run(script: &str, cpuset: &str, user_exists: bool) -> (i32, String, String, String) {
        let dir = std::env::temp_dir().join(format!(
            "valtune-fd-start-{}-{}",
            std::process::id(),
            rand_suffix()
        ));
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let calls = dir.join("calls");
        for stub in ["fdctl", "fddev", "firedancer", "firedancer-dev", "chown"] {
            let p = bin.join(stub);
            std::fs::write(
                &p,
                format!("#!/bin/sh\necho \"{stub} $*\" >> {}\n", calls.display()),
            )
            .unwrap();
            chmod(&p);
        }
        let id = bin.join("id");
        std::fs::write(
            &id,
            format!("#!/bin/sh\nexit {}\n", if user_exists { 0 } else { 1 }),
        )
        .unwrap();
        chmod(&id);
        std::fs::write(dir.join("cpuset"), cpuset).unwrap();
        std::fs::write(
            dir.join("template"),
            "[layout]\naffinity = \"@AFFINITY@\"\nagave_affinity = \"@AGAVE_AFFINITY@\"\n[development.bench]\naffinity = \"@BENCH_AFFINITY@\"\n[rpc]\nbind_address = \"@POD_IP@\"\n",
        )
        .unwrap();
        let out = Command::new("sh")
            .arg("-c")
            .arg(script)
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .env("FD_TEMPLATE", dir.join("template"))
            .env("FD_CONFIG", dir.join("config"))
            .env("CPUSET_FILE", dir.join("cpuset"))
            .env("POD_IP", "10.0.0.7")
            .output()
            .unwrap();
        let read = |p: PathBuf| std::fs::read_to_string(p).unwrap_or_default();
        let result = (
            out.status.code().unwrap_or(-1),
            read(dir.join("config")),
            read(calls),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        std::fs::remove_dir_all(&dir).unwrap();
        result
    }

    fn rand_suffix() -> u64 {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        N.fetch_add(1, Ordering::SeqCst)
    }

    fn chmod(p: &std::path::Path) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn needs(tiles: u32, bench_cores: u32) -> Needs {
        Needs {
            tiles,
            bench_cores,
            all_tiles: tiles + bench_cores + u32::from(bench_cores > 0),
        }
    }

    #[test]
    fn the_cpuset_is_split_between_tiles_bench_and_agave() {
        let s = script(
            false,
            FiredancerWorkload::Bench,
            needs(4, 3),
            10,
            "firedancer",
            (&["/var/lib/firedancer".into()], None),
            None,
        );
        let (code, config, calls, _) = run(&s, "2-7,10-13\n", true);
        assert_eq!(code, 0);
        assert!(
            config.contains("affinity = \"2,3,4,5\"\nagave_affinity = \"11,12,13\""),
            "{config}"
        );
        assert!(
            config.contains("[development.bench]\naffinity = \"f1,6,7,10\""),
            "{config}"
        );
        // A Validator's RPC binds the pod's IP (config::POD_IP).
        assert!(
            config.contains("[rpc]\nbind_address = \"10.0.0.7\""),
            "{config}"
        );
        let calls: Vec<&str> = calls.lines().collect();
        assert_eq!(calls[0], "chown firedancer /var/lib/firedancer");
        assert!(calls[1].starts_with("fddev bench --config "), "{calls:?}");
        assert_eq!(calls.len(), 2);
    }

    #[test]
    fn a_follower_gets_an_identity_and_hugetlbfs_mounts_before_run() {
        let s = script(
            false,
            FiredancerWorkload::Follow,
            needs(3, 0),
            4,
            "firedancer",
            (&["/d".into()], None),
            None,
        );
        let (code, config, calls, _) = run(&s, "0-3", true);
        assert_eq!(code, 0);
        assert!(
            config.contains("affinity = \"0,1,2\"\nagave_affinity = \"3\""),
            "{config}"
        );
        let calls: Vec<&str> = calls.lines().collect();
        assert!(
            calls[1].starts_with("fdctl keys new /var/lib/firedancer/identity.json --config "),
            "{calls:?}"
        );
        assert!(
            calls[3].starts_with("fdctl configure init hugetlbfs --config "),
            "{calls:?}"
        );
        assert!(calls[4].starts_with("fdctl run --config "), "{calls:?}");
    }

    #[test]
    fn full_firedancer_runs_its_own_programs_on_the_whole_cpuset() {
        let s = script(
            true,
            FiredancerWorkload::Follow,
            needs(3, 0),
            4,
            "firedancer",
            (&["/d".into()], None),
            None,
        );
        let (code, config, calls, err) = run(&s, "0-3", true);
        assert_eq!(code, 0, "{err}");
        assert!(config.contains("affinity = \"0,1,2\"\n"), "{config}");
        assert!(err.contains("4 cores: tiles on 0,1,2\n"), "{err}");
        let calls: Vec<&str> = calls.lines().collect();
        assert!(
            calls[1].starts_with("firedancer keys new /var/lib/firedancer/identity.json"),
            "{calls:?}"
        );
        assert!(
            calls[3].starts_with("firedancer configure init hugetlbfs snapshots --config "),
            "{calls:?}"
        );
        assert!(
            calls[4].starts_with("firedancer run --config "),
            "{calls:?}"
        );
        let s = script(
            true,
            FiredancerWorkload::Bench,
            needs(3, 2),
            6,
            "firedancer",
            (&["/d".into()], None),
            None,
        );
        let (_, _, calls, _) = run(&s, "0-5", true);
        assert!(calls.contains("firedancer-dev bench --config "), "{calls}");
    }

    #[test]
    fn too_few_cores_are_left_for_fdctl_to_refuse() {
        // 6 tiles on 4 cores: the affinity lists the 4, and fdctl says the numbers.
        let s = script(
            false,
            FiredancerWorkload::Follow,
            needs(6, 0),
            4,
            "firedancer",
            (&["/d".into()], None),
            None,
        );
        let (code, config, _, _) = run(&s, "8-11", true);
        assert_eq!(code, 0);
        assert!(
            config.contains("affinity = \"8,9,10,11\"\nagave_affinity = \"\""),
            "{config}"
        );
    }

    #[test]
    fn a_shared_cpuset_is_used_up_to_the_request_and_said() {
        let s = script(
            false,
            FiredancerWorkload::Follow,
            needs(2, 0),
            3,
            "firedancer",
            (&["/d".into()], None),
            None,
        );
        let (code, config, _, err) = run(&s, "0-63", true);
        assert_eq!(code, 0);
        assert!(
            config.contains("affinity = \"0,1\"\nagave_affinity = \"2\""),
            "{config}"
        );
        assert!(err.contains("CPU manager policy is not static"), "{err}");
    }

    #[test]
    fn an_image_without_the_user_stops_with_the_fix() {
        let s = script(
            false,
            FiredancerWorkload::Bench,
            needs(2, 1),
            4,
            "fd",
            (&["/d".into()], None),
            None,
        );
        let (code, _, calls, err) = run(&s, "0-3", false);
        assert_eq!(code, 1);
        assert!(err.contains("the image has no user fd"), "{err}");
        assert!(calls.is_empty());
    }
}
