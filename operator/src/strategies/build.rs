//! The trial object for a planned trial: pure, self-contained, owned by the experiment.

use std::collections::BTreeMap;

use kube::api::ObjectMeta;
use kube::{Resource, ResourceExt};

use crate::api::ValidatorExperiment;
use crate::api::labels;
use crate::api::resolve::resolve_template;
use crate::api::trial::{TrialPair, ValidatorTrial, ValidatorTrialSpec};
use crate::api::tuning::PointValueError;
use crate::results::dataset::HOSTNAME_LABEL;
use crate::strategies::plan::PlannedTrial;
use crate::strategies::strategy_for;

/// An error names a point value its setting cannot hold (a strategy's bug: the sweep's
/// values all can).
pub fn build_trial(
    vx: &ValidatorExperiment,
    p: &PlannedTrial,
) -> Result<ValidatorTrial, PointValueError> {
    let name = vx.name_any();
    let mut template = resolve_template(&vx.spec.template, &vx.spec.sweep, &p.point)?;
    // A trial of a pair runs on the node matched for it: selected by its hostname label,
    // beside the placement's own selector (so the pod renders as any other).
    if let Some(node) = p.pair.as_ref().and_then(|s| s.node.clone()) {
        template
            .placement
            .node_selector
            .insert(HOSTNAME_LABEL.into(), node);
    }
    // How its strategy runs this trial (a window of its own, or the experiment's).
    let settings = strategy_for(&vx.spec).trial_settings(&vx.spec, p);
    let spec = ValidatorTrialSpec {
        experiment: name.clone(),
        point: p.point.clone(),
        repetition: p.repetition,
        template,
        settings,
        metrics: vx.spec.metrics.clone(),
        pair: p.pair.as_ref().and_then(|slot| {
            Some(TrialPair {
                role: slot.role,
                partner: p.partner()?.name(&name),
            })
        }),
    };
    let mut trial = ValidatorTrial::new(&p.name(&name), spec);
    trial.metadata = ObjectMeta {
        name: Some(p.name(&name)),
        namespace: vx.namespace(),
        labels: Some(BTreeMap::from([
            (labels::EXPERIMENT.into(), name),
            (labels::MANAGED_BY.into(), labels::MANAGER.into()),
        ])),
        owner_references: vx.controller_owner_ref(&()).map(|o| vec![o]),
        ..Default::default()
    };
    Ok(trial)
}

/// Each distinct point's trial and its first attempt's pod as rendered, in plan order, at
/// most `max` points: where a point's pod may go and what it needs, for `valtune check`
/// and for the nodes a paired comparison matches. A point that cannot be built or
/// rendered says why, named by its point.
pub fn first_attempts(
    vx: &ValidatorExperiment,
    prometheus_url: Option<&str>,
    max: usize,
) -> Vec<Result<(ValidatorTrial, k8s_openapi::api::core::v1::Pod), String>> {
    let mut seen = std::collections::HashSet::new();
    crate::strategies::plan::plan(&vx.spec.sweep, 1)
        .into_iter()
        .filter(|p| seen.insert(p.point.canonical()))
        .take(max)
        .map(|p| {
            let point = p.point.describe();
            let trial = build_trial(vx, &p).map_err(|e| format!("{point}: {e}"))?;
            let rendered = crate::clients::RenderInput::for_trial(&trial, 1, &[], prometheus_url)
                .and_then(|input| crate::clients::render(&input))
                .map_err(|e| format!("{point}: {e}"))?;
            Ok((trial, rendered.pod))
        })
        .collect()
}
