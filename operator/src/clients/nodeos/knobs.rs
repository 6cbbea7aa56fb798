//! nodeos' knob table: what a nodeos trial can sweep and how each value reaches it. The
//! options are the same in leap v5.0.3 and spring v1.2.2 (AntelopeIO/leap, AntelopeIO/spring,
//! at those tags), so no knob depends on the version.

use crate::api::sweep::{Setting, ThreadKnob};
use crate::clients::knobs::{Dim, Generic, How, Knob, KnobTable, Reach, Refusal};

pub static NODEOS: KnobTable = KnobTable {
    client: "nodeos",
    display: "nodeos",
    knobs: &[
        Knob {
            dim: Dim::Memory,
            reach: &[Reach::always(How::Resource("memory"))],
            source: "the pod's memory budget (pod-level limit), shared by nodeos and the memory hog",
        },
        Knob {
            dim: Dim::Cpu,
            reach: &[Reach::always(How::Resource("cpu"))],
            source: "",
        },
        Knob {
            dim: Dim::Hugepages1Gi,
            reach: &[Reach::always(How::Resource("hugepages-1Gi"))],
            source: "chainbase src/pinnable_mapped_file.cpp setup_non_file_mapping: heap and locked try MAP_HUGETLB|MAP_HUGE_1GB for the whole state",
        },
        Knob {
            dim: Dim::Setting(Setting::DatabaseMapMode),
            reach: &[Reach::always(How::Arg("--database-map-mode"))],
            source: "plugins/chain_plugin/chain_plugin.cpp (database-map-mode)",
        },
        Knob {
            dim: Dim::Setting(Setting::MemoryPressure),
            reach: &[Reach::always(How::Sidecar(
                "stress-ng --vm 1 --vm-bytes N --vm-keep inside the pod's memory budget",
            ))],
            source: "ColinIanKing/stress-ng V0.22.00 stress-ng.1 (--vm-bytes, --vm-keep)",
        },
        Knob {
            dim: Dim::Thread(ThreadKnob::ChainThreads),
            reach: &[Reach::always(How::Arg("--chain-threads"))],
            source: "plugins/chain_plugin/chain_plugin.cpp (chain-threads)",
        },
        Knob {
            dim: Dim::Thread(ThreadKnob::HttpThreads),
            reach: &[Reach::always(How::Arg("--http-threads"))],
            source: "plugins/http_plugin/http_plugin.cpp (http-threads)",
        },
        Knob {
            dim: Dim::Thread(ThreadKnob::NetThreads),
            reach: &[Reach::always(How::Arg("--net-threads"))],
            source: "plugins/net_plugin/net_plugin.cpp (net-threads)",
        },
        Knob {
            dim: Dim::Thread(ThreadKnob::EosVmOcCompileThreads),
            reach: &[Reach::always(How::Arg("--eos-vm-oc-compile-threads"))],
            source: "plugins/chain_plugin/chain_plugin.cpp (eos-vm-oc-compile-threads)",
        },
    ],
    refusals: &[Refusal {
        dim: Dim::ProgramCacheEntries,
        why: "nodeos has no program cache to size (sweep a client setting with sweep.knobs instead)",
    }],
    generic: Generic {
        env: true,
        arg: true,
        config_key: true,
        no_config_key: "",
    },
};
