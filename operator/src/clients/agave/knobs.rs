//! Agave's knob table: what an Agave trial can sweep and how each value reaches
//! agave-validator, by version (anza-xyz/agave, the paths cited per knob).

use crate::api::sweep::{Setting, ThreadKnob};
use crate::api::version::{Version, Versions};
use crate::clients::knobs::{Dim, Generic, How, Knob, KnobTable, Reach, Refusal};

const V3_0: Version = Version::new(3, 0, 0);

/// validator/src/cli/thread_args.rs, core/src/banking_stage.rs (anza-xyz/agave).
pub static AGAVE: KnobTable = KnobTable {
    client: "agave",
    display: "Agave",
    knobs: &[
        Knob {
            dim: Dim::Memory,
            reach: &[Reach::always(How::Resource("memory"))],
            source: "",
        },
        Knob {
            dim: Dim::Cpu,
            reach: &[Reach::always(How::Resource("cpu"))],
            source: "",
        },
        Knob {
            dim: Dim::ProgramCacheEntries,
            reach: &[Reach::always(How::Image)],
            source: "program-runtime/src/loaded_programs.rs MAX_LOADED_ENTRY_COUNT (a compile-time constant)",
        },
        Knob {
            dim: Dim::Thread(ThreadKnob::BankingThreads),
            reach: &[
                // 2.x reads the total, its two vote threads included (default 6, minimum 3).
                Reach {
                    versions: Versions::before(V3_0),
                    how: How::Env("SOLANA_BANKING_THREADS"),
                    plus: 2,
                },
                Reach::within(
                    Versions::since(V3_0),
                    How::Arg("--block-production-num-workers"),
                ),
            ],
            source: "core/src/banking_stage.rs (2.x: SOLANA_BANKING_THREADS); validator/src/cli/thread_args.rs BlockProductionNumWorkersArg (first in v3.0.0, 1..=64)",
        },
        Knob {
            dim: Dim::Setting(Setting::Sigverify),
            // 4.0 removed --cuda: refused at admission for gpu (agave_rules).
            reach: &[Reach::always(How::Client(
                "`--cuda`, the GPU of template.agave.gpu and its RuntimeClass (gpu)",
            ))],
            source: "validator/src/cli.rs --cuda (2.x), validator/src/commands/run/args.rs (3.x); perf/src/perf_libs.rs init_cuda",
        },
        Knob {
            dim: Dim::Thread(ThreadKnob::ReplayTransactionsThreads),
            reach: &[Reach::always(How::Arg("--replay-transactions-threads"))],
            source: "validator/src/cli/thread_args.rs",
        },
        Knob {
            dim: Dim::Thread(ThreadKnob::ReplayForksThreads),
            reach: &[Reach::always(How::Arg("--replay-forks-threads"))],
            source: "validator/src/cli/thread_args.rs",
        },
        Knob {
            dim: Dim::Thread(ThreadKnob::RayonGlobalThreads),
            reach: &[Reach::within(
                Versions::since(Version::new(2, 2, 0)),
                How::Arg("--rayon-global-threads"),
            )],
            source: "validator/src/cli/thread_args.rs RayonGlobalThreadsArg (first in v2.2.0)",
        },
        Knob {
            dim: Dim::Thread(ThreadKnob::RpcThreads),
            reach: &[Reach::always(How::Arg("--rpc-threads"))],
            source: "validator/src/cli/thread_args.rs",
        },
        Knob {
            dim: Dim::Thread(ThreadKnob::UnifiedSchedulerHandlerThreads),
            reach: &[Reach::always(How::Arg(
                "--unified-scheduler-handler-threads",
            ))],
            source: "validator/src/cli/thread_args.rs",
        },
    ],
    refusals: &[Refusal {
        dim: Dim::Hugepages1Gi,
        why: "Agave does not allocate hugepages (it does not use hugetlbfs), so sweeping them measures nothing; hugepages serve Firedancer, and nodeos with databaseMapMode heap or locked",
    }],
    generic: Generic {
        env: true,
        arg: true,
        config_key: false,
        no_config_key: "Agave has no config file: set the knob with arg (a CLI flag) or env instead of configKey",
    },
};

/// Flags that exist only in some Agave versions (upstream-keys, which the lab's model reads
/// too): refused in `template.extraArgs` and in `arg` knobs when the version is known to
/// lack them (agave exits at start on an unknown flag, with exit code 1: clap 2.33).
pub fn versioned_flags() -> impl Iterator<Item = (&'static str, Versions)> {
    let v = |v: Option<upstream_keys::V>| v.map(|(a, b, c)| Version::new(a, b, c));
    upstream_keys::agave::VERSIONED_FLAGS
        .iter()
        .map(move |(flag, since, before, _)| {
            (
                *flag,
                Versions {
                    since: v(*since),
                    before: v(*before),
                },
            )
        })
}
