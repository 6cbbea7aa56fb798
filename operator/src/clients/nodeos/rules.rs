//! nodeos' admission rules beyond its knob table, in CEL on the experiment spec: what the
//! pod could not run, refused at `kubectl apply` with the field and the fix.

use kube::core::Rule;

use super::render::OC_CACHE_MIB;
use crate::api::sweep::{Setting, cel_bounds, cel_swept};
use crate::api::version::{cel_known, cel_version};
use crate::clients::knobs::{Dim, Place};

const N: &str = "self.template.nodeos";
/// nodeos' own memory beside its state, for the rules' arithmetic.
const NODEOS_MIB: i64 = 2048;
const R: &str = "self.template.resources";

/// A rule on nodeos experiments only.
fn rule(cond: String, message: &str, field: &str) -> Rule {
    Rule::new(format!("!has({N}) || {cond}"))
        .message(message)
        .field_path(field)
}

/// CEL: the map modes the trials run (the swept ones, else the tuned one, else the nodeos
/// spec's).
fn modes() -> String {
    format!(
        "(has(self.sweep.databaseMapMode) ? self.sweep.databaseMapMode : [{} ? self.template.tuning.databaseMapMode : has({N}.databaseMapMode) ? {N}.databaseMapMode : 'mapped'])",
        Dim::Setting(Setting::DatabaseMapMode).cel_set(Place::Tuning)
    )
}

/// CEL: `pred(p)` holds for every memory pressure written at `place` (the swept values,
/// or the tuned one when it is not swept).
fn every_pressure(place: Place, pred: &str) -> String {
    match place {
        Place::Sweep => format!(
            "!{} || {}.all(p, !isQuantity(p) || {pred})",
            cel_swept("memoryPressure"),
            cel_bounds("memoryPressure")
        ),
        Place::Tuning => format!(
            "!{} || [self.template.tuning.memoryPressure].all(p, !isQuantity(p) || {pred})",
            Dim::Setting(Setting::MemoryPressure).cel_from_tuning()
        ),
    }
}

/// CEL: the state directory's medium.
fn medium() -> String {
    format!("(has({N}.state) && has({N}.state.medium) ? {N}.state.medium : 'disk')")
}

/// CEL: the state database size in MiB.
fn db_mib() -> String {
    format!("(has({N}.chainStateDbSizeMb) ? {N}.chainStateDbSizeMb : 1024)")
}

/// CEL: `pred` holds for the memory budget of every trial (each swept memory, else the
/// template's limit, else its request); a value that is not a quantity is left to the
/// rules that say so.
fn every_budget(pred: impl Fn(&str) -> String) -> String {
    let ok = |q: &str| format!("(!isQuantity({q}) || {})", pred(q));
    format!(
        "({} ? {}.all(m, {}) : (has({R}.memoryLimit) ? {} : (!has({R}.memory) || {})))",
        cel_swept("memory"),
        cel_bounds("memory"),
        ok("m"),
        ok(&format!("{R}.memoryLimit")),
        ok(&format!("{R}.memory")),
    )
}

/// CEL: no hugepages anywhere in the trials.
fn no_hugepages() -> String {
    format!(
        "((!has({R}.hugepages1Gi) || {R}.hugepages1Gi == 0) && (!has({R}.hugepages2Mi) || {R}.hugepages2Mi == 0) && (!{} || {}.all(h, h == 0)))",
        cel_swept("hugepages1Gi"),
        cel_bounds("hugepages1Gi")
    )
}

pub fn rules() -> Vec<Rule> {
    let modes = modes();
    let medium = medium();
    let db = db_mib();
    let version = cel_version(N);
    let mut rules = vec![
        rule(
            "has(self.template.storage) && self.template.storage.exists(v, v.role == 'data')"
                .into(),
            "nodeos needs a data volume (--data-dir, its blocks log and protocol features): add {role: data, size: 1Ti} to template.storage",
            ".template.storage",
        ),
        rule(
            format!(
                "{medium} == 'disk' || !has(self.template.storage) || !self.template.storage.exists(v, v.role == 'state')"
            ),
            "template.storage has a state volume but template.nodeos.state.medium is not disk: remove the state volume or set the medium to disk",
            ".template.storage",
        ),
        rule(
            format!("has({N}.snapshot) || has({N}.genesisJson)"),
            "nodeos must start from a snapshot (a long chain such as WAX) or a genesis: set template.nodeos.snapshot (url or hostPath) or genesisJson",
            ".template.nodeos",
        ),
        rule(
            format!("has({N}.peers) && size({N}.peers) > 0"),
            "nodeos syncs from peers only: add host:port p2p endpoints of the chain to template.nodeos.peers",
            ".template.nodeos.peers",
        ),
        rule(
            format!(
                "!({}) || !{version}.matches('^:?v?0*[234]\\\\.')",
                cel_known(&version)
            ),
            "valtune runs nodeos of leap 5.x or spring 1.x (their prometheus_plugin serves /v1/prometheus/metrics on the HTTP server; leap 4 has its own listener and no mapped_private mode): use a newer image, or set template.nodeos.version if the tag misleads",
            ".template.nodeos.version",
        ),
        rule(
            format!("{medium} == 'disk' || {modes}.all(m, m == 'mapped')"),
            "chainbase refuses a state file on tmpfs unless database-map-mode is mapped ('We recommend storing the state db file on tmpfs only when database-map-mode=mapped', leap 5.0 and spring): use databaseMapMode mapped, or state.medium disk",
            ".template.nodeos.state.medium",
        ),
        rule(
            format!(
                "!{modes}.exists(m, m == 'locked') || (has({N}.allowMemoryLock) && {N}.allowMemoryLock)"
            ),
            "databaseMapMode locked mlocks the whole state, which needs the IPC_LOCK capability: set template.nodeos.allowMemoryLock: true, or sweep another mode",
            ".template.nodeos.allowMemoryLock",
        ),
        rule(
            format!(
                "!{modes}.exists(m, m == 'locked') || !{no_hugepages} || {budgets}",
                no_hugepages = no_hugepages(),
                budgets = every_budget(|b| format!(
                    "quantity({b}).asApproximateFloat() > double({db}) * 1048576.0"
                )),
            ),
            "databaseMapMode locked keeps the whole state (chainStateDbSizeMb) in memory, which is more than a trial's memory: raise the memory, lower chainStateDbSizeMb, or give it hugepages (template.resources.hugepages1Gi)",
            ".template.nodeos.chainStateDbSizeMb",
        ),
        rule(
            format!(
                "{medium} != 'memory' || {}",
                every_budget(|b| format!(
                    "quantity({b}).asApproximateFloat() > double({db} + {OC_CACHE_MIB}) * 1048576.0"
                ))
            ),
            "state.medium memory is a memory-backed emptyDir (tmpfs): it counts in the pod's memory, cannot be larger than its limit and never swaps (the kubelet mounts it noswap since Kubernetes 1.30), so a chainStateDbSizeMb state plus the 1024 MiB EOS VM OC cache must fit below the memory limit: raise the memory, or use state.medium hostTmpfs (a node tmpfs that swap backs) or disk",
            ".template.nodeos.state.medium",
        ),
        rule(
            format!(
                "!has({N}.swap) || !{N}.swap || (has({R}.memory) && has({R}.memoryLimit) && isQuantity({R}.memory) && isQuantity({R}.memoryLimit) && quantity({R}.memory).add(quantity('1Gi')).compareTo(quantity({R}.memoryLimit)) <= 0)"
            ),
            "swap needs a Burstable pod whose request sizes the swap (the kubelet gives request / node memory x node swap): set template.resources.memoryLimit (the RAM under test) and template.resources.memory (the request) at least 1Gi below it",
            ".template.nodeos.swap",
        ),
        rule(
            format!(
                "{} || {modes}.all(m, m == 'heap' || m == 'locked')",
                no_hugepages()
            ),
            "nodeos uses hugepages only in databaseMapMode heap or locked (chainbase maps the whole state with MAP_HUGETLB): remove the hugepages or use one of those modes",
            ".template.resources",
        ),
    ];
    // The memory hog: what it holds must leave room, wherever its size is written.
    for place in Place::ALL {
        let field = format!(".{}", Dim::Setting(Setting::MemoryPressure).field(place));
        rules.push(rule(
            format!(
                "{medium} != 'memory' || {}",
                every_pressure(place, &every_budget(|b| format!(
                    "quantity({b}).asApproximateFloat() > quantity(p).asApproximateFloat() + double({db} + {OC_CACHE_MIB} + {NODEOS_MIB}) * 1048576.0"
                )))
            ),
            "with state.medium memory nothing of the state can swap, so the memory hog, the state (chainStateDbSizeMb plus the 1024 MiB OC cache) and nodeos (2 GiB) must all fit the memory limit, or the kernel OOM-kills the hog and the trial measures no pressure: lower memoryPressure or chainStateDbSizeMb, or raise the memory",
            &field,
        ));
        rules.push(rule(
            every_pressure(
                place,
                &every_budget(|b| format!("quantity(p).add(quantity('1Gi')).isLessThan(quantity({b}))")),
            ),
            "a memoryPressure value leaves nodeos no memory: the hog runs inside the trial's memory, so each value must be at least 1Gi below it",
            &field,
        ));
    }
    rules
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_holds_for_other_clients_and_names_a_fix() {
        for r in rules() {
            assert!(r.rule.starts_with("!has(self.template.nodeos) || "));
            let m = r
                .message
                .as_ref()
                .map(|m| format!("{m:?}"))
                .unwrap_or_default();
            assert!(m.contains(':'), "a message says what to do: {m}");
        }
    }

    #[test]
    fn budgets_cover_swept_and_template_memory() {
        let cel = every_budget(|b| format!("ok({b})"));
        // A list, or a range's ends.
        assert!(cel.contains("self.sweep.memory : self.sweep.ranges.filter(r, r.name == 'memory').map(r, [r.min, r.max])[0]).all(m, (!isQuantity(m) || ok(m)))"));
        assert!(cel.contains("ok(self.template.resources.memoryLimit)"));
        assert!(cel.contains("ok(self.template.resources.memory)"));
    }
}
