//! Applying a point of the sweep to the template: the trial's self-contained copy.

use k8s_openapi::api::core::v1::EnvVar;

use super::sweep::{SweepSpec, TrialPoint};
use super::template::ValidatorTemplate;
use super::tuning::PointValueError;

/// The template a trial runs: swept memory, CPU and hugepages set, every typed setting
/// (thread counts, the program cache size, the allocator, ...) in `tuning`, where the
/// client's knob table reads it, and every generic knob turned into an env var, an
/// argument or a config key of the client. An error means the point was not expanded from
/// a sweep (a sweep holds only valid values).
pub fn resolve_template(
    template: &ValidatorTemplate,
    sweep: &SweepSpec,
    point: &TrialPoint,
) -> Result<ValidatorTemplate, PointValueError> {
    let mut t = template.clone();
    t.tuning.apply_point(point)?;
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
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::sweep::{KnobSweep, ThreadKnob};

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
        let t = resolve_template(&template(), &SweepSpec::default(), &point).unwrap();
        assert_eq!(t.resources.memory.as_deref(), Some("256Gi"));
        assert_eq!(t.resources.memory_limit, None);
        assert_eq!(t.resources.cpu, 32);
    }

    #[test]
    fn swept_settings_replace_the_templates_tuning_and_the_rest_stays() {
        let mut base = template();
        base.tuning =
            serde_saphyr::from_str("threads: {bankingThreads: 8, rpcThreads: 4}\nheap: 5Gi\n")
                .unwrap();
        let sweep: SweepSpec =
            serde_saphyr::from_str("threads: [{name: bankingThreads, values: [16]}]\n").unwrap();
        let t = resolve_template(&base, &sweep, &sweep.expand()[0]).unwrap();
        assert_eq!(t.tuning.threads[&ThreadKnob::BankingThreads], 16);
        assert_eq!(t.tuning.threads[&ThreadKnob::RpcThreads], 4);
        assert_eq!(t.tuning.heap.as_deref(), Some("5Gi"));
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
        let t = resolve_template(&template(), &sweep, &point).unwrap();
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
