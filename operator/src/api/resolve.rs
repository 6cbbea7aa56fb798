//! Applying a point of the sweep to the template: the trial's self-contained copy.

use k8s_openapi::api::core::v1::EnvVar;

use super::sweep::{SweepSpec, TrialPoint};
use super::template::ValidatorTemplate;

/// The template a trial runs: swept memory, CPU and hugepages set, and every generic knob
/// turned into an env var, an argument or a config key of the client. Thread counts and
/// the program cache size stay in the point: how they reach the process is per client.
pub fn resolve_template(
    template: &ValidatorTemplate,
    sweep: &SweepSpec,
    point: &TrialPoint,
) -> ValidatorTemplate {
    let mut t = template.clone();
    if let Some(m) = &point.memory {
        t.resources.memory = Some(m.clone());
        t.resources.memory_limit = None;
    }
    if let Some(c) = point.cpu {
        t.resources.cpu = c;
    }
    if let Some(h) = point.hugepages1_gi {
        t.resources.hugepages1_gi = Some(h);
    }
    for knob in sweep.knobs.iter().flatten() {
        let Some(value) = point.knobs.get(&knob.name) else {
            continue;
        };
        if let Some(env) = &knob.env {
            t.env.retain(|e| &e.name != env);
            t.env.push(EnvVar {
                name: env.clone(),
                value: Some(value.clone()),
                ..Default::default()
            });
        } else if let Some(arg) = &knob.arg {
            t.extra_args.push(format!("{arg}={value}"));
        } else if let Some(key) = &knob.config_key {
            // A client without a config file refuses configKey knobs at admission.
            if let Some(config) = t.client.config_mut() {
                config.insert(key.clone(), value.clone());
            }
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::sweep::KnobSweep;

    fn template() -> ValidatorTemplate {
        serde_saphyr::from_str(
            "agave: {image: agave:v2}\nresources: {cpu: 16, memory: 64Gi, memoryLimit: 128Gi}\nstorage: [{role: ledger, size: 1Ti}]\nenv: [{name: MALLOC_ARENA_MAX, value: '8'}]\n",
        )
        .unwrap()
    }

    #[test]
    fn memory_sets_request_and_limit() {
        let point = TrialPoint {
            memory: Some("256Gi".into()),
            cpu: Some(32),
            ..Default::default()
        };
        let t = resolve_template(&template(), &SweepSpec::default(), &point);
        assert_eq!(t.resources.memory.as_deref(), Some("256Gi"));
        assert_eq!(t.resources.memory_limit, None);
        assert_eq!(t.resources.cpu, 32);
    }

    #[test]
    fn knobs_become_env_or_args_and_replace_template_env() {
        let sweep = SweepSpec {
            knobs: Some(vec![
                KnobSweep {
                    name: "arena".into(),
                    env: Some("MALLOC_ARENA_MAX".into()),
                    arg: None,
                    config_key: None,
                    values: vec!["2".into()],
                },
                KnobSweep {
                    name: "accountsDbCache".into(),
                    env: None,
                    arg: Some("--accounts-db-cache-limit-mb".into()),
                    config_key: None,
                    values: vec!["4096".into()],
                },
            ]),
            ..Default::default()
        };
        let point = sweep.expand().remove(0);
        let t = resolve_template(&template(), &sweep, &point);
        let arena: Vec<_> = t
            .env
            .iter()
            .filter(|e| e.name == "MALLOC_ARENA_MAX")
            .collect();
        assert_eq!(arena.len(), 1);
        assert_eq!(arena[0].value.as_deref(), Some("2"));
        assert_eq!(t.extra_args, vec!["--accounts-db-cache-limit-mb=4096"]);
    }
}
