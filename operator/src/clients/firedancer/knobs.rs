//! Firedancer's knob table: what a trial can sweep and which `[layout]` key each tile
//! count is, by version (Frankendancer below v1.0.0, full Firedancer from it) (firedancer-io/firedancer `src/app/fdctl/config/default.toml` for
//! Frankendancer, `src/app/firedancer/config/default.toml` for full Firedancer; renames
//! found with `git log -S`, first tags as cited).

use super::versions::{V0_901, V1};
use crate::api::sweep::ThreadKnob;
use crate::api::version::Versions;
use crate::clients::knobs::{Dim, Generic, How, Knob, KnobTable, Reach, Refusal};

/// Frankendancer versions (0.x) from full Firedancer (1.0.0 and later).
const FRANKENDANCER: Versions = Versions::before(V1);
const FULL: Versions = Versions::since(V1);

macro_rules! tile {
    ($t:ident, $key:literal) => {
        Knob {
            dim: Dim::Thread(ThreadKnob::$t),
            reach: &[Reach::always(How::ConfigKey($key))],
            source: "src/app/fdctl/config/default.toml [layout] (every release from v0.501.20212); the same key in src/app/firedancer/config/default.toml (every tag from v1.0.0)",
        }
    };
}

pub static FIREDANCER: KnobTable = KnobTable {
    client: "firedancer",
    display: "Firedancer",
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
            dim: Dim::Hugepages1Gi,
            reach: &[Reach::always(How::Resource("hugepages-1Gi"))],
            source: "the workspaces of [hugetlbfs] max_page_size = \"gigantic\" (src/disco/topo/fd_topo.c fd_topo_gigantic_page_cnt)",
        },
        tile!(NetTiles, "layout.net_tile_count"),
        tile!(QuicTiles, "layout.quic_tile_count"),
        tile!(VerifyTiles, "layout.verify_tile_count"),
        tile!(ShredTiles, "layout.shred_tile_count"),
        Knob {
            dim: Dim::Thread(ThreadKnob::BankTiles),
            reach: &[
                Reach::within(FRANKENDANCER, How::ConfigKey("layout.bank_tile_count")),
                Reach::within(FULL, How::ConfigKey("layout.execle_tile_count")),
            ],
            source: "fdctl default.toml bank_tile_count; full Firedancer renamed bank to execle in ff7fcf99c2 (2026-01-28, src/app/firedancer/config/default.toml L865 @v1.1.4)",
        },
        Knob {
            dim: Dim::Thread(ThreadKnob::ResolvTiles),
            reach: &[
                Reach::within(
                    Versions::before(V0_901),
                    How::ConfigKey("layout.resolv_tile_count"),
                ),
                Reach::within(
                    Versions {
                        since: Some(V0_901),
                        before: Some(V1),
                    },
                    How::ConfigKey("layout.resolh_tile_count"),
                ),
                Reach::within(FULL, How::ConfigKey("layout.resolv_tile_count")),
            ],
            source: "fdctl default.toml: resolv_tile_count renamed resolh_tile_count in 23baa3ef35 (2026-01-28, first tag v0.901.40002); full Firedancer keeps resolv_tile_count",
        },
        Knob {
            dim: Dim::Thread(ThreadKnob::ExecTiles),
            reach: &[Reach::within(
                FULL,
                How::ConfigKey("layout.execrp_tile_count"),
            )],
            source: "full Firedancer only: exec_tile_count renamed execrp_tile_count in 70a7ad5cbd (2026-01-28; src/app/firedancer/config/default.toml L884 @v1.1.4)",
        },
        Knob {
            dim: Dim::Thread(ThreadKnob::GossvfTiles),
            reach: &[Reach::within(
                FULL,
                How::ConfigKey("layout.gossvf_tile_count"),
            )],
            source: "full Firedancer only: src/app/firedancer/config/default.toml [layout] gossvf_tile_count (L854 @v1.1.4; every tag from v1.0.0)",
        },
        Knob {
            dim: Dim::Thread(ThreadKnob::SignTiles),
            reach: &[Reach::within(
                FULL,
                How::ConfigKey("layout.sign_tile_count"),
            )],
            source: "full Firedancer only: src/app/firedancer/config/default.toml [layout] sign_tile_count (L910 @v1.1.4), at least 2 (src/app/shared/fd_config.c fd_config_validatef)",
        },
        Knob {
            dim: Dim::Thread(ThreadKnob::UnifiedSchedulerHandlerThreads),
            reach: &[Reach::within(
                FRANKENDANCER,
                How::ConfigKey("layout.agave_unified_scheduler_handler_threads"),
            )],
            source: "fdctl default.toml [layout] agave_unified_scheduler_handler_threads (bf77a1d50a, in every release from v0.501.20212); full Firedancer has no Agave",
        },
    ],
    refusals: &[Refusal {
        dim: Dim::ProgramCacheEntries,
        why: "Firedancer cannot sweep programCacheEntries: full Firedancer sizes its cache in MiB (sweep.knobs with configKey runtime.program_cache.heap_size_mib) and Frankendancer uses Agave's compile-time constant",
    }],
    generic: Generic {
        env: true,
        // fdctl takes no settings on its command line (`unknown argument`, shared/boot/fd_boot.c).
        arg: false,
        config_key: true,
        no_config_key: "",
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::template::Tuning;
    use crate::api::version::Version;
    use crate::clients::knobs::{KnobError, apply};

    fn tuning(knob: &str, n: i32) -> Tuning {
        let knob = ThreadKnob::ALL
            .into_iter()
            .find(|t| t.as_str() == knob)
            .unwrap();
        Tuning {
            threads: [(knob, n)].into(),
            ..Default::default()
        }
    }

    #[test]
    fn tile_counts_reach_the_key_of_their_version() {
        let key = |knob: &str, v: Version| {
            apply(&FIREDANCER, &tuning(knob, 3), Some(v)).map(|a| a.config[0].0.clone())
        };
        let old = Version::new(0, 505, 20216);
        let new = Version::new(0, 1106, 40201);
        let full = Version::new(1, 1, 4);
        assert_eq!(key("resolvTiles", old).unwrap(), "layout.resolv_tile_count");
        assert_eq!(key("resolvTiles", new).unwrap(), "layout.resolh_tile_count");
        assert_eq!(
            key("resolvTiles", full).unwrap(),
            "layout.resolv_tile_count"
        );
        assert_eq!(key("bankTiles", new).unwrap(), "layout.bank_tile_count");
        assert_eq!(key("bankTiles", full).unwrap(), "layout.execle_tile_count");
        assert_eq!(key("verifyTiles", new).unwrap(), "layout.verify_tile_count");
        assert_eq!(key("execTiles", full).unwrap(), "layout.execrp_tile_count");
        assert_eq!(key("signTiles", full).unwrap(), "layout.sign_tile_count");
        assert_eq!(
            key("gossvfTiles", Version::new(26, 8, 1)).unwrap(),
            "layout.gossvf_tile_count"
        );
        assert!(key("signTiles", new).is_err());
        assert_eq!(
            key("execTiles", new),
            Err(KnobError::NotInVersion {
                knob: "execTiles",
                version: new
            })
        );
    }

    #[test]
    fn the_rules_refuse_arg_knobs_and_name_the_versions() {
        let text = serde_json::to_string(&FIREDANCER.rules()).unwrap();
        assert!(text.contains("Firedancer takes no arg knobs"), "{text}");
        assert!(text.contains("this Firedancer version has no execTiles: it exists from 1.0.0"));
        assert!(text.contains("before 0.901.0"));
    }
}
