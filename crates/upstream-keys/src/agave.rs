//! agave-validator's flags that exist only in some versions: agave-validator exits at
//! start on a flag it does not know (clap 2.33: "Found argument '...' which wasn't
//! expected", exit code 1). Each row names where upstream shows it; the flags every
//! version has are not listed (the lab's model and the operator accept any other flag).

use crate::{Source, V};

pub const SOURCE: Source = Source {
    repository: "anza-xyz/agave",
    paths: "validator/src/cli/thread_args.rs, validator/src/commands/run/args.rs, CHANGELOG.md",
    tags: "v2.1.9, v2.2.0, v3.0.0, v4.0.0",
    extracted_by: "by hand, from each flag's introduction and removal (the row's source)",
};

/// (flag, first version with it, first version without it, where upstream shows it).
pub const VERSIONED_FLAGS: [(&str, Option<V>, Option<V>, &str); 4] = [
    (
        "--block-production-num-workers",
        Some((3, 0, 0)),
        None,
        "validator/src/cli/thread_args.rs BlockProductionNumWorkersArg",
    ),
    (
        "--rayon-global-threads",
        Some((2, 2, 0)),
        None,
        "validator/src/cli/thread_args.rs RayonGlobalThreadsArg",
    ),
    (
        "--rpc-blocking-threads",
        Some((2, 1, 9)),
        None,
        "validator/src/cli/thread_args.rs",
    ),
    (
        "--cuda",
        None,
        Some((4, 0, 0)),
        "removed in 4.0.0 (agave PR #10753, CHANGELOG)",
    ),
];
