//! The Firedancer releases whose differences valtune renders (firedancer-io/firedancer
//! tags; Frankendancer is `v0.<fdctl minor><patch>.<Agave version>`, full Firedancer
//! `v1.x` and later, src/app/fdctl/with-version.mk).

use crate::api::version::Version;

/// The oldest Frankendancer valtune renders: `[net] provider` (the socket provider, so a
/// pod needs no XDP) and the topology valtune counts (net/sock, quic, verify, dedup,
/// resolv, pack, bank, poh, shred, store, sign, metric, cswtch) are in every release from
/// v0.501.20212 (src/app/fdctl/topology.c, src/disco/net/fd_net_tile_topo.c).
pub const V0_501: Version = Version::new(0, 501, 0);

/// 23baa3ef35 and siblings (2026-01-28, first tag v0.901.40002): tiles `resolv` -> `resolh`,
/// `poh` -> `pohh`, `cswtch` -> `diag`, and the key `resolh_tile_count`.
pub const V0_901: Version = Version::new(0, 901, 0);

/// c7473a8d80 "metrics: normalize naming scheme" (2026-06-10): in Frankendancer from
/// v0.1101.40201 (the v0.10xx branch never got it), in full Firedancer from v1.1.0. Every
/// counter gains `_total` (src/disco/metrics/fd_prometheus.c `metric_export_name`).
pub const V0_1101: Version = Version::new(0, 1101, 0);
pub const V1_1: Version = Version::new(1, 1, 0);

/// Full Firedancer (the `firedancer` binary): v1.0.0 and later.
pub const V1: Version = Version::new(1, 0, 0);

/// Whether a version exports the renamed metrics.
pub fn renamed_metrics(v: Version) -> bool {
    if v >= V1 { v >= V1_1 } else { v >= V0_1101 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rename_is_in_the_tags_git_says() {
        // `git tag --contains c7473a8d80`: v0.1101.40201.. and v1.1.0..; not v0.1007 or v1.0.1.
        assert!(renamed_metrics(Version::new(0, 1101, 40201)));
        assert!(renamed_metrics(Version::new(0, 1106, 40201)));
        assert!(!renamed_metrics(Version::new(0, 1007, 40100)));
        assert!(!renamed_metrics(Version::new(0, 913, 40003)));
        assert!(!renamed_metrics(Version::new(1, 0, 1)));
        assert!(renamed_metrics(Version::new(1, 1, 4)));
        assert!(renamed_metrics(Version::new(26, 8, 1)));
    }
}
