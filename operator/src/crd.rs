//! The CRDs valtune serves, as committed under crds/ and templated into the chart: the
//! API types' schemas, plus the admission rules of every client's knob table and
//! profile (generated, so rules and rendering come from one table) and of every strategy.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use crate::api::{Validator, ValidatorExperiment, ValidatorTrial};

/// Every CRD valtune serves, as (file stem, definition).
pub fn crds() -> Vec<(&'static str, CustomResourceDefinition)> {
    let mut experiment = ValidatorExperiment::crd();
    add_spec_rules(&mut experiment, crate::clients::admission_rules());
    add_spec_rules(&mut experiment, crate::strategies::admission::rules());
    add_spec_rules(&mut experiment, crate::api::comparison::rules());
    let validator = validator_crd(&experiment);
    vec![
        ("validatorexperiments", without_nullable(experiment)),
        ("validatortrials", without_nullable(ValidatorTrial::crd())),
        ("validators", without_nullable(validator)),
    ]
}

/// The Validator's CRD: its template is checked by the same generated rules as an
/// experiment's. Some of them also read `spec.sweep` (a knob refused whether swept or
/// tuned), and CEL compiles only against fields the schema declares: the Validator's
/// schema declares `sweep` as the experiment's (defaulting to {}), and a rule refuses
/// setting any of its fields, so those rules read it as an experiment's that sweeps
/// nothing.
fn validator_crd(experiment: &CustomResourceDefinition) -> CustomResourceDefinition {
    let mut crd = Validator::crd();
    add_spec_rules(&mut crd, crate::clients::validator_rules());
    let sweep = spec_schema(experiment)
        .properties
        .as_ref()
        .and_then(|p| p.get("sweep"))
        .cloned()
        .expect("the experiment has a sweep");
    let mut sweep = serde_json::to_value(sweep).expect("a schema serializes");
    // The rules read `self.sweep.x` after checking `has(self.sweep.x)`, which fails on an
    // absent `sweep` ("no such key"): as on an experiment, it defaults to {}, and setting
    // any of its fields is refused.
    let fields: Vec<String> = sweep["properties"]
        .as_object()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    if let Some(map) = sweep.as_object_mut() {
        map.insert("default".into(), serde_json::json!({}));
        map.insert(
            "description".into(),
            "Not a Validator field (a Validator runs one configuration: set its values in template.tuning). Declared so that the template's admission rules, shared with experiments, apply as written; refused when set.".into(),
        );
    }
    spec_schema_mut(&mut crd)
        .properties
        .get_or_insert_with(Default::default)
        .insert(
            "sweep".into(),
            serde_json::from_value(sweep).expect("a schema deserializes"),
        );
    add_spec_rules(
        &mut crd,
        vec![
            kube::core::Rule::new(
                fields
                    .iter()
                    .map(|f| format!("!has(self.sweep.{f})"))
                    .collect::<Vec<_>>()
                    .join(" && "),
            )
                .message("a Validator runs one configuration and sweeps nothing: move the values into template.tuning, or run an experiment")
                .field_path(".sweep"),
        ],
    );
    add_spec_rules(&mut crd, crate::clients::template_rules());
    crd
}

fn spec_schema(
    crd: &CustomResourceDefinition,
) -> &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps {
    crd.spec.versions[0]
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .and_then(|s| s.properties.as_ref())
        .and_then(|p| p.get("spec"))
        .expect("a CRD with a spec")
}

fn spec_schema_mut(
    crd: &mut CustomResourceDefinition,
) -> &mut k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps {
    crd.spec.versions[0]
        .schema
        .as_mut()
        .and_then(|s| s.open_api_v3_schema.as_mut())
        .and_then(|s| s.properties.as_mut())
        .and_then(|p| p.get_mut("spec"))
        .expect("a CRD with a spec")
}

/// Appends CEL rules to the `spec` of the CRD's (only) version.
fn add_spec_rules(crd: &mut CustomResourceDefinition, rules: Vec<kube::core::Rule>) {
    let spec = spec_schema_mut(crd);
    let list = spec.x_kubernetes_validations.get_or_insert_with(Vec::new);
    for rule in rules {
        let value = serde_json::to_value(&rule).expect("a rule serializes");
        list.push(serde_json::from_value(value).expect("a rule is a ValidationRule"));
    }
}

/// Optional fields are simply absent, never null: with `nullable`, `field: null` would
/// reach the CEL rules as a present value, and GitOps tools would see null-vs-absent
/// drift. An optional enum's `null` value goes too.
fn without_nullable(crd: CustomResourceDefinition) -> CustomResourceDefinition {
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(map) => {
                map.remove("nullable");
                if let Some(serde_json::Value::Array(values)) = map.get_mut("enum") {
                    values.retain(|x| !x.is_null());
                }
                map.values_mut().for_each(strip);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut value = serde_json::to_value(crd).expect("a CRD serializes");
    strip(&mut value);
    serde_json::from_value(value).expect("a CRD without nullable still deserializes")
}

/// A CRD as the YAML committed under crds/.
pub fn crd_yaml(crd: &CustomResourceDefinition) -> String {
    let body = serde_saphyr::to_string(crd).expect("a CRD serializes to YAML");
    format!("# Generated by `valtune crd`; do not edit (make crds regenerates it).\n---\n{body}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::settings::{MetricsSettings, TrialSettings};

    /// The defaults the API server fills in are the ones the operator assumes.
    #[test]
    fn schema_defaults_equal_the_rust_defaults() {
        let crd = serde_json::to_value(&crds()[0].1).unwrap();
        let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
        assert_eq!(
            spec["trial"]["default"],
            serde_json::to_value(TrialSettings::default()).unwrap()
        );
        assert_eq!(
            spec["metrics"]["default"],
            serde_json::to_value(MetricsSettings::default()).unwrap()
        );
        assert_eq!(spec["maxTrials"]["default"], 256);
        assert_eq!(spec["maxTrials"]["maximum"], 1024.0);
    }

    #[test]
    fn generated_crds_are_strict_and_carry_their_rules() {
        for (stem, crd) in crds() {
            let yaml = crd_yaml(&crd);
            assert!(!yaml.contains("nullable"), "{stem} has nullable fields");
            assert!(!yaml.contains("- null"), "{stem} has an enum with null");
            assert!(yaml.starts_with("# Generated by `valtune crd`"));
            let v = &crd.spec.versions[0];
            assert!(v.subresources.as_ref().unwrap().status.is_some());
            assert!(!v.additional_printer_columns.as_ref().unwrap().is_empty());
        }
        let vx = crd_yaml(&crds()[0].1);
        for rule in [
            "self.maxTrials",
            "MAX_LOADED_ENTRY_COUNT",
            "isQuantity",
            "set exactly one client",
            "Agave cannot set some of these thread knobs",
            "Besu has no program cache",
            "strategy.bisection searches exactly one ordered parameter",
            "must be an image reference",
            "the consensus client valtune renders is Teku",
            "each peer must be host:port[:trx|:blk]",
            "a config value must be on one line",
        ] {
            assert!(vx.contains(rule), "missing rule mentioning {rule}");
        }
        assert_eq!(crds()[0].1.spec.names.short_names, Some(vec!["vx".into()]));
        assert_eq!(
            crds()[1].1.spec.names.short_names,
            Some(vec!["vtrial".into()])
        );
    }

    /// Every rule on an experiment's template is on the Validator's, the same text.
    #[test]
    fn the_validator_carries_the_templates_rules() {
        let rules = |crd: &CustomResourceDefinition| -> Vec<String> {
            spec_schema(crd)
                .x_kubernetes_validations
                .iter()
                .flatten()
                .map(|r| r.rule.clone())
                .collect()
        };
        let all = crds();
        let (vx, vv) = (rules(&all[0].1), rules(&all[2].1));
        let template = crate::clients::template_rules();
        assert!(template.len() > 40, "{}", template.len());
        for r in &template {
            assert!(vx.contains(&r.rule) && vv.contains(&r.rule), "{}", r.rule);
        }
        assert!(
            !vv.iter()
                .any(|r| r.contains("self.metrics") || r.contains("self.trial"))
        );
        assert_eq!(all[2].1.spec.names.short_names, Some(vec!["vv".into()]));
        let spec = serde_json::to_value(spec_schema(&all[2].1)).unwrap();
        assert_eq!(
            spec["required"],
            serde_json::json!(["nodeName", "template"])
        );
        assert_eq!(
            spec["properties"]["sweep"]["default"],
            serde_json::json!({})
        );
        assert!(
            vv.iter()
                .any(|r| r.starts_with("!has(self.sweep.allocator) && ")
                    && r.contains("!has(self.sweep.memory)"))
        );
    }
}
