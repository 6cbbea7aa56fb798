//! The Besu process of a trial: its command line, `BESU_OPTS` and the allocator's
//! environment. Flags are hyperledger/besu's at the versions cited (25.12.0 unless said).

use super::knobs::{BESU, FLAT_DB, HIGH_SPEC};
use super::{CONFIG_DIR, DATA_DIR, JWT_PATH, LOG4J_FILE, TOML_FILE};
use crate::api::besu::{BesuSpec, BesuStorageFormat};
use crate::api::quantity::parse_quantity;
use crate::api::sweep::{Allocator, value_text};
use crate::api::template::{Tuning, ValidatorTemplate};
use crate::api::version::Version;
use crate::clients::RenderError;
use crate::clients::knobs::{self, How};

/// What the jemalloc test of Besu's start script preloads (the unversioned name, which
/// the image's libjemalloc-dev provides: docker/Dockerfile @25.12.0 L15).
pub const JEMALLOC_LIBRARY: &str = "libjemalloc.so";

/// Besu's arguments and its container's environment (valtune's part).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Command {
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

/// A quantity as the JVM's `-Xmx` takes it (`g`, `m` or `k`; the JVM has no `Gi`).
pub fn jvm_size(quantity: &str) -> Result<String, RenderError> {
    let bytes = parse_quantity(quantity)
        .map_err(|e| RenderError::Invalid(format!("heap {quantity:?}: {e}")))?;
    const K: u128 = 1024;
    Ok(if bytes % (K * K * K) == 0 {
        format!("{}g", bytes / (K * K * K))
    } else if bytes % (K * K) == 0 {
        format!("{}m", bytes / (K * K))
    } else {
        format!("{}k", bytes / K)
    })
}

/// `BESU_OPTS`: GC options, the heap, exit on OutOfMemoryError, then the user's options
/// (the start script puts BESU_OPTS after its defaults, and HotSpot takes the last of a
/// repeated option: unixStartScript.txt L197).
fn besu_opts(tuning: &Tuning, besu: &BesuSpec) -> Result<Option<String>, RenderError> {
    let mut opts: Vec<String> = besu.gc_options.clone();
    let heap = tuning.heap.as_ref().or(besu.heap.as_ref());
    if let Some(h) = heap {
        opts.push(format!("-Xmx{}", jvm_size(h)?));
    }
    // Besu only logs an OutOfMemoryError (Besu.java L85-99) and runs on degraded; with this
    // HotSpot prints "Terminating due to java.lang.OutOfMemoryError: ..." and exits with 3
    // (debug.cpp report_java_out_of_memory), so a heap too small ends the trial.
    if besu.exit_on_out_of_memory_error {
        opts.push("-XX:+ExitOnOutOfMemoryError".into());
    }
    opts.extend(besu.jvm_options.iter().cloned());
    Ok((!opts.is_empty()).then(|| opts.join(" ")))
}

/// The allocator's environment: `BESU_USING_JEMALLOC=false` keeps the start script from
/// preloading jemalloc, and valtune's wrapper ([`super::render::WRAPPER`]) checks and
/// preloads the chosen library.
fn allocator_env(allocator: Allocator, besu: &BesuSpec) -> Vec<(String, String)> {
    let pair = |k: &str, v: &str| (k.to_string(), v.to_string());
    let library = match allocator {
        Allocator::Jemalloc => Some(JEMALLOC_LIBRARY),
        Allocator::Glibc => None,
        Allocator::Tcmalloc => Some(besu.tcmalloc_library.as_str()),
        Allocator::Mimalloc => Some(besu.mimalloc_library.as_str()),
    };
    let mut env = vec![pair("VALTUNE_ALLOCATOR", &value_text(&allocator))];
    if allocator != Allocator::Jemalloc {
        env.push(pair("BESU_USING_JEMALLOC", "false"));
    }
    if let Some(lib) = library {
        env.push(pair("VALTUNE_ALLOCATOR_LIBRARY", lib));
    }
    env
}

/// Besu's command line and environment for a template.
pub fn command(
    template: &ValidatorTemplate,
    besu: &BesuSpec,
    version: Option<Version>,
) -> Result<Command, RenderError> {
    let flag = |name: &str, value: &str| format!("{name}={value}");
    let mut args = vec![
        flag("--network", besu.network.as_str()),
        flag("--data-path", &format!("{DATA_DIR}/besu")),
        flag("--data-storage-format", besu.data_storage_format.as_str()),
        // Metrics on every interface of the pod, and a Host header Prometheus' (the pod
        // IP) allowed: the metrics server answers 403 to hosts not on --host-allowlist
        // (metrics/core/.../MetricsHttpService.java L96-106; BesuCommand.java L546-552).
        "--metrics-enabled=true".into(),
        "--metrics-host=0.0.0.0".into(),
        flag("--metrics-port", &besu.metrics_port.to_string()),
        "--host-allowlist=*".into(),
        // The Engine API listens on --rpc-http-host (0.0.0.0 in the image) and the
        // consensus client reaches it on the pod's loopback (EngineRPCOptions.java).
        flag("--engine-rpc-port", &besu.engine_port.to_string()),
        flag("--engine-jwt-secret", JWT_PATH),
        flag("--p2p-port", &besu.p2p_port.to_string()),
    ];
    if let Some(on) = besu.flat_db_healing {
        if besu.data_storage_format == BesuStorageFormat::Forest {
            return Err(RenderError::Invalid(
                "flatDbHealing is a Bonsai setting: remove it or use dataStorageFormat BONSAI"
                    .into(),
            ));
        }
        match FLAT_DB.reach(version).map(|r| r.how) {
            Some(How::Arg(f)) => args.push(flag(f, &on.to_string())),
            _ => {
                return Err(RenderError::Invalid(format!(
                    "this Besu version ({}) has no flat-db healing flag",
                    version.map(|v| v.to_string()).unwrap_or_default()
                )));
            }
        }
    }
    if besu.rocksdb_high_spec
        && let Some(How::Arg(f)) = HIGH_SPEC.reach(version).map(|r| r.how)
    {
        args.push(flag(f, "true"));
    }
    if !besu.config.is_empty() {
        args.push(flag("--config-file", &format!("{CONFIG_DIR}/{TOML_FILE}")));
    }
    let tuning = &template.tuning;
    let applied = knobs::apply(&BESU, tuning, version)?;
    args.extend(applied.args);
    args.extend(template.extra_args.iter().cloned());

    let mut env = vec![(
        "LOG4J_CONFIGURATION_FILE".to_string(),
        format!("{CONFIG_DIR}/{LOG4J_FILE}"),
    )];
    if let Some(opts) = besu_opts(tuning, besu)? {
        env.push(("BESU_OPTS".into(), opts));
    }
    if let Some(a) = tuning.allocator {
        env.extend(allocator_env(a, besu));
    }
    env.extend(applied.env);
    Ok(Command { args, env })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heap_sizes_are_written_as_the_jvm_reads_them() {
        assert_eq!(jvm_size("5Gi").unwrap(), "5g");
        assert_eq!(jvm_size("1536Mi").unwrap(), "1536m");
        // Decimal units are not whole MiB.
        assert_eq!(jvm_size("5G").unwrap(), "4882812k");
        assert!(jvm_size("lots").is_err());
    }

    #[test]
    fn glibc_turns_the_start_scripts_jemalloc_off_and_preloads_nothing() {
        let b: BesuSpec = serde_saphyr::from_str("image: hyperledger/besu:25.12.0").unwrap();
        let env = allocator_env(Allocator::Glibc, &b);
        assert!(env.contains(&("BESU_USING_JEMALLOC".into(), "false".into())));
        assert!(!env.iter().any(|(k, _)| k == "VALTUNE_ALLOCATOR_LIBRARY"));
        let env = allocator_env(Allocator::Tcmalloc, &b);
        assert!(env.contains(&(
            "VALTUNE_ALLOCATOR_LIBRARY".into(),
            "libtcmalloc_minimal.so.4".into()
        )));
        // jemalloc: the start script preloads it; the wrapper checks it is there.
        let env = allocator_env(Allocator::Jemalloc, &b);
        assert!(!env.iter().any(|(k, _)| k == "BESU_USING_JEMALLOC"));
        assert!(env.contains(&("VALTUNE_ALLOCATOR_LIBRARY".into(), "libjemalloc.so".into())));
    }
}
