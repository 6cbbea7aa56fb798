//! `spec.tuning.fromExperiment`: an experiment's recommended point resolved over the
//! Validator's template, as the experiment's trials resolved it (api/resolve.rs), or the
//! reason it is refused. Pure: [`super::observe`] reads the experiment and the nodes.

use std::collections::BTreeMap;

use crate::api::ValidatorExperiment;
use crate::api::experiment::ExperimentPhase;
use crate::api::resolve::resolve_template;
use crate::api::template::ValidatorTemplate;
use crate::api::validator::AppliedTuning;
use crate::clients::client_for;
use crate::report::patch::no_recommendation;

/// The well-known label of a node's machine type (kubernetes.io docs,
/// "Well-Known Labels": set by the kubelet from the cloud provider, or by hand on
/// bare metal). Two nodes that both carry it and differ are not the same class.
pub const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";

/// What the experiment's answer is for this Validator.
#[derive(Debug, Clone, PartialEq)]
pub enum Tuned {
    /// No `spec.tuning.fromExperiment`.
    NotAsked,
    /// The point, and the Validator's template with it applied.
    Resolved {
        applied: AppliedTuning,
        template: Box<ValidatorTemplate>,
    },
    /// Not applied: the template runs as written. (reason, message)
    Refused(&'static str, String),
}

/// What the check reads beside the two objects: the labels of the Validator's node and of
/// the node the recommended trial ran on, when they could be read.
#[derive(Debug, Clone, Default)]
pub struct Nodes {
    pub validator: Option<BTreeMap<String, String>>,
    pub trial: Option<BTreeMap<String, String>>,
}

/// The Validators of `vx`'s namespace whose `spec.tuning.fromExperiment` names it.
pub fn naming(
    validators: &[std::sync::Arc<crate::api::Validator>],
    vx: &ValidatorExperiment,
) -> Vec<kube::runtime::reflector::ObjectRef<crate::api::Validator>> {
    use kube::ResourceExt;
    validators
        .iter()
        .filter(|v| v.namespace() == vx.namespace())
        .filter(|v| {
            v.spec
                .tuning
                .as_ref()
                .is_some_and(|t| t.from_experiment == vx.name_any())
        })
        .map(|v| kube::runtime::reflector::ObjectRef::from_obj(v.as_ref()))
        .collect()
}

/// The experiment's recommended point over `template`, or why not. `vx` is None when the
/// experiment does not exist.
pub fn resolve(
    template: &ValidatorTemplate,
    name: &str,
    vx: Option<&ValidatorExperiment>,
    nodes: &Nodes,
) -> Tuned {
    let refuse = |reason, message: String| Tuned::Refused(reason, message);
    let Some(vx) = vx else {
        return refuse(
            "ExperimentNotFound",
            format!(
                "spec.tuning.fromExperiment names experiment {name}, which does not exist in this namespace: create it, or remove fromExperiment"
            ),
        );
    };
    let st = vx.status.clone().unwrap_or_default();
    let Some(rec) = st.recommendation.clone() else {
        return refuse(
            "NoRecommendation",
            format!(
                "experiment {name} has no recommendation: {}",
                no_recommendation(vx)
            ),
        );
    };
    if st.phase != ExperimentPhase::Succeeded && st.phase != ExperimentPhase::Failed {
        // A provisional answer changes as trials finish: each change would restart the
        // validator. It is applied once, when the experiment has finished.
        return refuse(
            "Provisional",
            format!(
                "experiment {name} is {:?}: its recommendation ({}) is provisional and is applied once the experiment finishes",
                st.phase, rec.summary
            ),
        );
    }
    let Some(point) = rec.point.clone() else {
        return refuse(
            "NoPoint",
            format!(
                "experiment {name}'s recommendation ({}) was written by a valtune that did not record its point: commit it with `valtune recommend {name} --for <validator>`",
                rec.summary
            ),
        );
    };
    if let Some((reason, message)) = mismatch(template, name, vx, nodes) {
        return refuse(reason, message);
    }
    match resolve_template(template, &vx.spec.sweep, &point) {
        Ok(t) => Tuned::Resolved {
            applied: AppliedTuning {
                experiment: name.to_string(),
                summary: rec.summary,
                point,
                trial: rec.trial,
            },
            template: Box::new(t),
        },
        Err(e) => refuse(
            "InvalidPoint",
            format!("experiment {name}'s point cannot be applied: {e}"),
        ),
    }
}

/// Why the experiment's answer does not hold for a Validator of `template`: another
/// client, another version, another node class. (reason, message)
pub fn mismatch(
    template: &ValidatorTemplate,
    name: &str,
    vx: &ValidatorExperiment,
    nodes: &Nodes,
) -> Option<(&'static str, String)> {
    let (ours, theirs) = (client_for(template), client_for(&vx.spec.template));
    let (Ok(ours), Ok(theirs)) = (ours, theirs) else {
        return Some((
            "ClientDiffers",
            format!("experiment {name}'s template or this one names no single client"),
        ));
    };
    if ours.name() != theirs.name() {
        return Some((
            "ClientDiffers",
            format!(
                "experiment {name} measured {}, this Validator runs {}: a point of one client means nothing to another",
                theirs.display(),
                ours.display()
            ),
        ));
    }
    let version = |t: &ValidatorTemplate| match ours.version(t) {
        Some(v) => v.to_string(),
        None => ours.image_and_version(t).0.to_string(),
    };
    if version(template) != version(&vx.spec.template) {
        return Some((
            "VersionDiffers",
            format!(
                "experiment {name} measured {} {}, this Validator runs {}: run the experiment again at this version, or set the values in template.tuning",
                ours.display(),
                version(&vx.spec.template),
                version(template)
            ),
        ));
    }
    node_class_differs(vx, nodes).map(|why| {
        (
            "NodeClassDiffers",
            format!("experiment {name} measured other machines: {why}"),
        )
    })
}

/// Why the Validator's node is not of the class the experiment measured: a label of the
/// experiment's nodeSelector it lacks, or another machine type than the trial's node.
fn node_class_differs(vx: &ValidatorExperiment, nodes: &Nodes) -> Option<String> {
    let Some(labels) = &nodes.validator else {
        return Some("the Validator's node cannot be read, so its class cannot be checked".into());
    };
    for (k, v) in &vx.spec.template.placement.node_selector {
        if labels.get(k) != Some(v) {
            return Some(format!(
                "the experiment's template.placement.nodeSelector has {k}={v}, the Validator's node has {}",
                labels
                    .get(k)
                    .map_or("no such label".to_string(), |x| format!("{k}={x}"))
            ));
        }
    }
    let trial = nodes.trial.as_ref()?;
    match (trial.get(INSTANCE_TYPE), labels.get(INSTANCE_TYPE)) {
        (Some(a), Some(b)) if a != b => Some(format!(
            "the recommended trial ran on a {INSTANCE_TYPE}={a} node, the Validator's node is {b}"
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(image: &str) -> ValidatorTemplate {
        serde_saphyr::from_str(&format!(
            "besu: {{image: '{image}'}}\nresources: {{cpu: 12, memory: 32Gi}}\ntuning: {{allocator: glibc}}\n"
        ))
        .unwrap()
    }

    /// A finished Besu experiment recommending jemalloc with an 8Gi heap.
    fn experiment(phase: &str, image: &str, selector: &str) -> ValidatorExperiment {
        serde_saphyr::from_str(&format!(
            r#"apiVersion: valtune.dev/v1alpha1
kind: ValidatorExperiment
metadata: {{name: heap, namespace: ns}}
spec:
  template:
    besu: {{image: '{image}'}}
    resources: {{cpu: 12, memory: 32Gi}}
    placement: {{nodeSelector: {{{selector}}}}}
  sweep: {{allocator: [glibc, jemalloc], heap: [5Gi, 8Gi]}}
status:
  phase: {phase}
  recommendation:
    summary: allocator=jemalloc heap=8Gi
    reason: the lowest p95
    trial: heap-jemalloc-8gi-1
    point: {{settings: {{allocator: jemalloc, heap: 8Gi}}}}
"#
        ))
        .unwrap()
    }

    fn labels(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, String>> {
        Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    fn nodes() -> Nodes {
        Nodes {
            validator: labels(&[
                (INSTANCE_TYPE, "r6a.metal"),
                ("valtune.dev/bare-metal", "true"),
            ]),
            trial: labels(&[(INSTANCE_TYPE, "r6a.metal")]),
        }
    }

    const IMAGE: &str = "hyperledger/besu:25.12.0";

    #[test]
    fn a_finished_recommendation_is_resolved_over_the_template() {
        let t = template(IMAGE);
        let vx = experiment("Succeeded", IMAGE, "valtune.dev/bare-metal: 'true'");
        let Tuned::Resolved { applied, template } = resolve(&t, "heap", Some(&vx), &nodes()) else {
            panic!("refused")
        };
        assert_eq!(applied.summary, "allocator=jemalloc heap=8Gi");
        assert_eq!(applied.trial, "heap-jemalloc-8gi-1");
        assert_eq!(template.tuning.heap.as_deref(), Some("8Gi"));
        assert_eq!(
            serde_json::to_value(template.tuning.allocator).unwrap(),
            "jemalloc"
        );
        // The rest of the Validator's template stays as written.
        assert_eq!(template.resources, t.resources);
    }

    /// (what, experiment, nodes, reason)
    #[test]
    fn what_cannot_be_applied_is_refused_with_the_reason() {
        let t = template(IMAGE);
        let mut none = experiment("Succeeded", IMAGE, "");
        none.status.as_mut().unwrap().recommendation = None;
        let mut old = experiment("Succeeded", IMAGE, "");
        old.status
            .as_mut()
            .unwrap()
            .recommendation
            .as_mut()
            .unwrap()
            .point = None;
        let mut agave = experiment("Succeeded", IMAGE, "");
        agave.spec.template = serde_saphyr::from_str(
            "agave: {image: 'anza/agave:v2.2.14'}\nresources: {memory: 64Gi}\n",
        )
        .unwrap();
        let other_machine = Nodes {
            trial: labels(&[(INSTANCE_TYPE, "r7a.metal")]),
            ..nodes()
        };
        let rows: Vec<(&str, Option<ValidatorExperiment>, Nodes, &str)> = vec![
            ("no experiment", None, nodes(), "ExperimentNotFound"),
            ("no recommendation", Some(none), nodes(), "NoRecommendation"),
            (
                "running",
                Some(experiment("Running", IMAGE, "")),
                nodes(),
                "Provisional",
            ),
            ("no point recorded", Some(old), nodes(), "NoPoint"),
            ("another client", Some(agave), nodes(), "ClientDiffers"),
            (
                "another version",
                Some(experiment("Succeeded", "hyperledger/besu:26.2.0", "")),
                nodes(),
                "VersionDiffers",
            ),
            (
                "a label of the experiment's selector missing",
                Some(experiment("Succeeded", IMAGE, "gen: zen4")),
                nodes(),
                "NodeClassDiffers",
            ),
            (
                "another machine type",
                Some(experiment("Succeeded", IMAGE, "")),
                other_machine,
                "NodeClassDiffers",
            ),
        ];
        for (what, vx, n, reason) in rows {
            match resolve(&t, "heap", vx.as_ref(), &n) {
                Tuned::Refused(r, message) => {
                    assert_eq!(r, reason, "{what}: {message}");
                    assert!(message.contains("heap"), "{what}: {message}");
                }
                other => panic!("{what}: {other:?}"),
            }
        }
    }
}
