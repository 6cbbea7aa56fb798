//! Starting Besu as its container would: valtune's allocator wrapper, the image's start
//! script (app/src/main/scripts/unixStartScript.txt @25.12.0: jemalloc preload, JVM
//! options), HotSpot's option parsing, then Besu's own (picocli 4.7.6: options, the TOML
//! file, `BESU_*` env defaults). Each refusal is the exit the real program makes, with
//! its words (hyperledger/besu @25.12.0 unless said; openjdk/jdk25u for HotSpot).

use std::collections::BTreeMap;

use super::super::{Env, Exit};
use super::V;
use super::options::exists;

/// The official image's libraries an `LD_PRELOAD` can load: libjemalloc-dev's unversioned
/// name and libjemalloc2's (docker/Dockerfile @25.12.0 L15, Ubuntu 24.04 multiarch
/// paths). It has no tcmalloc or mimalloc.
const IMAGE_LIBRARIES: [&str; 4] = [
    "libjemalloc.so",
    "libjemalloc.so.2",
    "/usr/lib/x86_64-linux-gnu/libjemalloc.so",
    "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
];

/// The environment the image sets (docker/Dockerfile @25.12.0 L53-59).
const IMAGE_ENV: [(&str, &str); 2] = [
    ("BESU_RPC_HTTP_HOST", "0.0.0.0"),
    ("BESU_PID_PATH", "/tmp/pid"),
];

/// HotSpot (jdk25u) options the lab knows; any other `-XX:` option stops the JVM as an
/// unrecognized one would. Experimental ones need -XX:+UnlockExperimentalVMOptions
/// (gc/g1/g1_globals.hpp, gc/shared/gc_globals.hpp, runtime/globals.hpp).
const JVM_OPTIONS: [&str; 52] = [
    "UseG1GC",
    "UseParallelGC",
    "UseSerialGC",
    "UseZGC",
    "UseShenandoahGC",
    "UseEpsilonGC",
    "MaxGCPauseMillis",
    "GCTimeRatio",
    "G1ConcRefinementThreads",
    "G1HeapWastePercent",
    "G1HeapRegionSize",
    "G1ReservePercent",
    "G1MixedGCCountTarget",
    "G1PeriodicGCInterval",
    "G1RSetUpdatingPauseTimePercent",
    "G1UseAdaptiveIHOP",
    "G1ConfidencePercent",
    "InitiatingHeapOccupancyPercent",
    "ParallelGCThreads",
    "ConcGCThreads",
    "MaxHeapFreeRatio",
    "MinHeapFreeRatio",
    "MaxHeapSize",
    "InitialHeapSize",
    "MaxNewSize",
    "NewSize",
    "MaxRAMPercentage",
    "InitialRAMPercentage",
    "MinRAMPercentage",
    "MaxDirectMemorySize",
    "MaxMetaspaceSize",
    "MetaspaceSize",
    "ReservedCodeCacheSize",
    "MaxTenuringThreshold",
    "SoftRefLRUPolicyMSPerMB",
    "UseStringDeduplication",
    "AlwaysPreTouch",
    "UseLargePages",
    "UseTransparentHugePages",
    "UseNUMA",
    "UseCompactObjectHeaders",
    "ExitOnOutOfMemoryError",
    "CrashOnOutOfMemoryError",
    "HeapDumpOnOutOfMemoryError",
    "HeapDumpPath",
    "StartFlightRecording",
    "NativeMemoryTracking",
    "UnlockExperimentalVMOptions",
    "UnlockDiagnosticVMOptions",
    "G1NewSizePercent",
    "G1MaxNewSizePercent",
    "G1MixedGCLiveThresholdPercent",
];
const EXPERIMENTAL: [&str; 3] = [
    "G1NewSizePercent",
    "G1MaxNewSizePercent",
    "G1MixedGCLiveThresholdPercent",
];

/// Options that take a list and may repeat (everything else may appear once from 25.8.0).
const LISTS: [&str; 10] = [
    "--host-allowlist",
    "--engine-host-allowlist",
    "--bootnodes",
    "--metrics-category",
    "--metrics-categories",
    "--rpc-http-api",
    "--rpc-http-apis",
    "--rpc-http-cors-origins",
    "--banned-node-ids",
    "--plugins",
];

fn exit(code: i32, message: String) -> Exit {
    Exit {
        at: 0.0,
        reason: "Error",
        code,
        message,
    }
}

/// picocli's usage error through BesuParameterExceptionHandler: the message, then how to
/// get help; exit code 2 (ExitCode.USAGE).
fn usage(message: String) -> Exit {
    exit(
        2,
        format!("{message}\n\nTo display full help:\nbesu [COMMAND] --help"),
    )
}

fn jvm_error(first: String) -> Exit {
    exit(
        1,
        format!(
            "{first}\nError: Could not create the Java Virtual Machine.\nError: A fatal exception has occurred. Program will exit."
        ),
    )
}

/// What the start gives the model.
#[derive(Debug, Clone, PartialEq)]
pub struct Started {
    /// Besu's options, by long name (the last value of each), after env and TOML defaults.
    pub options: BTreeMap<String, String>,
    /// The allocator's library actually preloaded, if any.
    pub preload: Option<String>,
    /// MALLOC_ARENA_MAX as the process sees it.
    pub arena_max: Option<f64>,
    /// -Xmx (or -XX:MaxHeapSize), bytes.
    pub heap: Option<f64>,
    pub max_ram_percentage: f64,
    pub exit_on_oom: bool,
    pub g1_tuned: bool,
}

/// valtune's wrapper (`sh -c '...exec /opt/besu/bin/besu "$@"' besu ARGS`): Besu's args,
/// and whether the wrapper runs.
pub fn besu_args(line: &[String]) -> Option<(Vec<String>, bool)> {
    match line {
        [sh, c, script, _zero, rest @ ..]
            if (sh == "sh" || sh.ends_with("/sh"))
                && c == "-c"
                && script.contains("exec /opt/besu/bin/besu") =>
        {
            Some((rest.to_vec(), true))
        }
        [cmd, rest @ ..]
            if cmd.ends_with("/besu") || cmd == "besu" || cmd.ends_with("besu-entry.sh") =>
        {
            Some((rest.to_vec(), false))
        }
        _ => None,
    }
}

/// A JVM size (`5g`, `512m`, `1048576`), as HotSpot reads -Xmx.
fn jvm_bytes(s: &str) -> Option<f64> {
    let (num, mult) = match s.chars().last()? {
        'k' | 'K' => (&s[..s.len() - 1], 1024f64),
        'm' | 'M' => (&s[..s.len() - 1], 1024f64.powi(2)),
        'g' | 'G' => (&s[..s.len() - 1], 1024f64.powi(3)),
        't' | 'T' => (&s[..s.len() - 1], 1024f64.powi(4)),
        _ => (s, 1.0),
    };
    num.parse::<u64>().ok().map(|n| n as f64 * mult)
}

/// The wrapper, the start script and the JVM, up to Besu's own parsing.
pub fn launch(
    args: &[String],
    wrapper: bool,
    env: &Env,
    version: V,
    file: &dyn Fn(&str) -> Option<String>,
) -> Result<Started, Exit> {
    let mut env = env.clone();
    for (k, v) in IMAGE_ENV {
        env.entry(k.into()).or_insert_with(|| v.into());
    }
    let has = |lib: &str| IMAGE_LIBRARIES.contains(&lib);
    // ld.so's words for a library it cannot load (glibc elf/rtld.c), then the wrapper's.
    let ld_error = |lib: &str| {
        format!(
            "ERROR: ld.so: object '{lib}' from LD_PRELOAD cannot be preloaded (cannot open shared object file): ignored."
        )
    };
    let mut preload = env.get("LD_PRELOAD").cloned().filter(|l| has(l));
    if wrapper
        && let Some(lib) = env
            .get("VALTUNE_ALLOCATOR_LIBRARY")
            .filter(|l| !l.is_empty())
    {
        if !has(lib) {
            let name = env
                .get("VALTUNE_ALLOCATOR")
                .cloned()
                .unwrap_or_else(|| "?".into());
            return Err(exit(
                1,
                format!(
                    "valtune: allocator {name} is not in this image: {}",
                    ld_error(lib)
                ),
            ));
        }
        preload = Some(lib.clone());
    }
    // The start script: jemalloc unless BESU_USING_JEMALLOC is false (from 24.12.0).
    let off = version >= (24, 12, 0)
        && matches!(
            env.get("BESU_USING_JEMALLOC").map(String::as_str),
            Some("false" | "FALSE")
        );
    if !off {
        if has("libjemalloc.so") {
            preload = Some("libjemalloc.so".into());
        } else {
            env.insert("MALLOC_ARENA_MAX".into(), "2".into());
        }
    }
    let arena_max = env
        .get("MALLOC_ARENA_MAX")
        .and_then(|v| v.trim().parse::<f64>().ok());

    // JAVA_OPTS then BESU_OPTS, after the defaults (unixStartScript.txt L197).
    let mut heap = None;
    let mut max_ram = 25.0;
    let mut exit_on_oom = false;
    // The seed's G1 options were Besu's defaults from 23.10.0 to 25.11.x (#5879, #9367).
    let mut g1_tuned = ((23, 10, 0)..(25, 12, 0)).contains(&version);
    let tokens: Vec<String> = ["JAVA_OPTS", "BESU_OPTS"]
        .iter()
        .filter_map(|k| env.get(*k))
        .flat_map(|v| v.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .collect();
    let unlocked = tokens
        .iter()
        .any(|t| t == "-XX:+UnlockExperimentalVMOptions");
    for t in &tokens {
        if let Some(size) = t.strip_prefix("-Xmx") {
            heap = Some(
                jvm_bytes(size)
                    .ok_or_else(|| jvm_error(format!("Invalid maximum heap size: {t}")))?,
            );
        } else if let Some(opt) = t.strip_prefix("-XX:") {
            let (flag, value) = match opt.split_once('=') {
                Some((f, v)) => (f, Some(v)),
                None => (opt, None),
            };
            let on = !flag.starts_with('-');
            let name = flag.trim_start_matches(['+', '-']);
            if !JVM_OPTIONS.contains(&name) {
                return Err(jvm_error(format!("Unrecognized VM option '{opt}'")));
            }
            if EXPERIMENTAL.contains(&name) && !unlocked {
                return Err(jvm_error(format!(
                    "VM option '{name}' is experimental and must be enabled via -XX:+UnlockExperimentalVMOptions."
                )));
            }
            match (name, value) {
                ("ExitOnOutOfMemoryError", None) => exit_on_oom = on,
                ("MaxHeapSize", Some(v)) => heap = jvm_bytes(v),
                ("MaxRAMPercentage", Some(v)) => max_ram = v.parse().unwrap_or(25.0),
                ("G1HeapWastePercent" | "G1ConcRefinementThreads", Some(_)) => g1_tuned = true,
                _ => {}
            }
        }
    }
    let options = besu_options(args, &env, version, file)?;
    Ok(Started {
        options,
        preload,
        arena_max,
        heap,
        max_ram_percentage: max_ram,
        exit_on_oom,
        g1_tuned,
    })
}

/// Besu's options: the command line, then `BESU_<NAME>` env vars and the TOML file as
/// defaults (DefaultCommandValues, EnvironmentVariableDefaultProvider,
/// TomlConfigurationDefaultProvider), each checked as picocli checks it.
fn besu_options(
    args: &[String],
    env: &Env,
    version: V,
    file: &dyn Fn(&str) -> Option<String>,
) -> Result<BTreeMap<String, String>, Exit> {
    let mut cli: Vec<(String, String)> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        let (name, value) = match a.split_once('=') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (a.clone(), None),
        };
        if !name.starts_with("--") || !exists(&name, version) {
            return Err(usage(format!("Unknown option: '{a}'")));
        }
        let value = match value {
            Some(v) => v,
            // `--flag value`, or a boolean flag alone.
            None => match args.get(i + 1).filter(|n| !n.starts_with("--")) {
                Some(n) => {
                    i += 1;
                    n.clone()
                }
                None => "true".into(),
            },
        };
        if version >= (25, 8, 0)
            && !LISTS.contains(&name.as_str())
            && cli.iter().any(|(n, _)| *n == name)
        {
            return Err(usage(format!(
                "Option '{name}' should be specified only once"
            )));
        }
        cli.push((name, value));
        i += 1;
    }
    let mut options: BTreeMap<String, String> = BTreeMap::new();
    if let Some(path) = cli
        .iter()
        .rev()
        .find(|(n, _)| n == "--config-file")
        .map(|(_, v)| v.clone())
    {
        let Some(text) = file(&path) else {
            return Err(usage(
                "Unable to read TOML configuration, file not found.".into(),
            ));
        };
        let mut unknown = Vec::new();
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') || line.starts_with('[') {
                continue;
            }
            let Some((k, v)) = line.split_once('=') else {
                return Err(usage(format!("Invalid TOML configuration: {line}")));
            };
            let key = k.trim().trim_matches('"');
            let key = key.rsplit('.').next().unwrap_or(key);
            if exists(&format!("--{key}"), version) {
                options.insert(format!("--{key}"), v.trim().trim_matches('"').to_string());
            } else {
                unknown.push(key.to_string());
            }
        }
        if !unknown.is_empty() {
            let s = if unknown.len() > 1 { "s" } else { "" };
            return Err(usage(format!(
                "Unknown option{s} in TOML configuration file: {}",
                unknown.join(", ")
            )));
        }
    }
    for (k, v) in env {
        if let Some(rest) = k.strip_prefix("BESU_") {
            let name = format!("--{}", rest.to_lowercase().replace('_', "-"));
            if exists(&name, version) {
                options.insert(name, v.clone());
            }
        }
    }
    for (n, v) in cli {
        options.insert(n, v);
    }
    check_values(&options, version)?;
    Ok(options)
}

fn check_values(options: &BTreeMap<String, String>, version: V) -> Result<(), Exit> {
    if let Some(v) = options.get("--data-storage-format") {
        let formats = ["FOREST", "BONSAI", "X_BONSAI_ARCHIVE"];
        if !formats.contains(&v.to_uppercase().as_str()) {
            return Err(usage(format!(
                "Invalid value for option '--data-storage-format': expected one of [FOREST, BONSAI, X_BONSAI_ARCHIVE] (case-insensitive) but was '{v}'"
            )));
        }
    }
    if let Some(v) = options.get("--network") {
        let mut names = vec![
            "MAINNET",
            "SEPOLIA",
            "HOLESKY",
            "LUKSO",
            "DEV",
            "FUTURE_EIPS",
            "EXPERIMENTAL_EIPS",
            "CLASSIC",
            "MORDOR",
        ];
        if version >= (24, 10, 0) {
            names.push("EPHEMERY");
        }
        if version >= (25, 3, 0) {
            names.push("HOODI");
        }
        if !names.contains(&v.to_uppercase().replace('-', "_").as_str()) {
            return Err(usage(format!(
                "Invalid value for option '--network': expected one of [{}] (case-insensitive) but was '{v}'",
                names.join(", ")
            )));
        }
    }
    for flag in [
        "--metrics-enabled",
        "--Xplugin-rocksdb-high-spec-enabled",
        "--Xbonsai-full-flat-db-enabled",
        "--Xsnapsync-synchronizer-flat-db-healing-enabled",
    ] {
        if let Some(v) = options.get(flag)
            && !matches!(v.to_lowercase().as_str(), "true" | "false")
        {
            return Err(usage(format!(
                "Invalid value for option '{flag}': '{v}' is not a boolean"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Env {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    const V25_12: V = (25, 12, 0);

    #[test]
    fn the_removed_flat_db_flag_stops_25_6_and_later() {
        let a = args(&["--Xsnapsync-synchronizer-flat-db-healing-enabled=true"]);
        let e = launch(&a, true, &env(&[]), V25_12, &|_| None).unwrap_err();
        assert_eq!(e.code, 2);
        assert!(e.message.starts_with(
            "Unknown option: '--Xsnapsync-synchronizer-flat-db-healing-enabled=true'"
        ));
        assert!(launch(&a, true, &env(&[]), (24, 1, 0), &|_| None).is_ok());
    }

    #[test]
    fn an_allocator_the_image_lacks_stops_the_wrapper_with_ld_sos_words() {
        let e = launch(
            &[],
            true,
            &env(&[
                ("VALTUNE_ALLOCATOR", "tcmalloc"),
                ("VALTUNE_ALLOCATOR_LIBRARY", "libtcmalloc_minimal.so.4"),
                ("BESU_USING_JEMALLOC", "false"),
            ]),
            V25_12,
            &|_| None,
        )
        .unwrap_err();
        assert_eq!(e.code, 1);
        assert_eq!(
            e.message,
            "valtune: allocator tcmalloc is not in this image: ERROR: ld.so: object 'libtcmalloc_minimal.so.4' from LD_PRELOAD cannot be preloaded (cannot open shared object file): ignored."
        );
    }

    #[test]
    fn glibc_is_what_is_left_when_jemalloc_is_switched_off() {
        let s = launch(
            &[],
            true,
            &env(&[("BESU_USING_JEMALLOC", "false"), ("MALLOC_ARENA_MAX", "2")]),
            V25_12,
            &|_| None,
        )
        .unwrap();
        assert_eq!(s.preload, None);
        assert_eq!(s.arena_max, Some(2.0));
        let s = launch(&[], true, &env(&[]), V25_12, &|_| None).unwrap();
        assert_eq!(s.preload.as_deref(), Some("libjemalloc.so"));
        // Before 24.12.0 the switch does not exist: jemalloc it is.
        let s = launch(
            &[],
            true,
            &env(&[("BESU_USING_JEMALLOC", "false")]),
            (24, 1, 0),
            &|_| None,
        )
        .unwrap();
        assert_eq!(s.preload.as_deref(), Some("libjemalloc.so"));
    }

    #[test]
    fn jvm_options_are_read_as_hotspot_reads_them() {
        let s = launch(
            &[],
            true,
            &env(&[(
                "BESU_OPTS",
                "-XX:G1HeapWastePercent=15 -Xmx5g -XX:+ExitOnOutOfMemoryError",
            )]),
            V25_12,
            &|_| None,
        )
        .unwrap();
        assert_eq!(s.heap, Some(5.0 * 1024f64.powi(3)));
        assert!(s.exit_on_oom && s.g1_tuned);
        let e = launch(
            &[],
            true,
            &env(&[("BESU_OPTS", "-XX:G1HeapWastePercnt=15")]),
            V25_12,
            &|_| None,
        )
        .unwrap_err();
        assert!(
            e.message.starts_with(
                "Unrecognized VM option 'G1HeapWastePercnt=15'\nError: Could not create"
            )
        );
        let e = launch(
            &[],
            true,
            &env(&[("BESU_OPTS", "-Xmx5Gi")]),
            V25_12,
            &|_| None,
        )
        .unwrap_err();
        assert!(e.message.starts_with("Invalid maximum heap size: -Xmx5Gi"));
    }

    #[test]
    fn options_come_from_the_command_line_env_and_toml_and_may_not_repeat() {
        let file = |p: &str| {
            (p == "/etc/besu.toml")
                .then(|| "sync-mode=\"FULL\"\nbonsai-historical-block-limit=1024\n".to_string())
        };
        let a = args(&["--config-file=/etc/besu.toml", "--metrics-port=9545"]);
        let s = launch(
            &a,
            true,
            &env(&[("BESU_METRICS_HOST", "0.0.0.0")]),
            V25_12,
            &file,
        )
        .unwrap();
        assert_eq!(s.options["--sync-mode"], "FULL");
        assert_eq!(s.options["--metrics-host"], "0.0.0.0");
        assert_eq!(s.options["--rpc-http-host"], "0.0.0.0");
        let a = args(&["--metrics-port=9545", "--metrics-port=9546"]);
        let e = launch(&a, true, &env(&[]), V25_12, &|_| None).unwrap_err();
        assert!(
            e.message
                .starts_with("Option '--metrics-port' should be specified only once")
        );
        let bad = |_: &str| Some("no-such-key=1\n".to_string());
        let e = launch(&args(&["--config-file=/x"]), true, &env(&[]), V25_12, &bad).unwrap_err();
        assert!(
            e.message
                .starts_with("Unknown option in TOML configuration file: no-such-key")
        );
        let e = launch(
            &args(&["--network=hoodi"]),
            true,
            &env(&[]),
            (25, 1, 0),
            &|_| None,
        )
        .unwrap_err();
        assert!(e.message.contains("Invalid value for option '--network'"));
    }
}
