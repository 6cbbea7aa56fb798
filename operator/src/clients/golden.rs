//! Golden tests of rendered pods: each client's rendering of fixed trials is pinned in
//! `clients/<client>/testdata/*.yaml`. A change shows as a diff; when it is intended,
//! `make golden` (UPDATE_GOLDEN=1) rewrites the files.

use std::path::PathBuf;

use crate::api::ValidatorExperiment;
use crate::api::trial::ValidatorTrial;
use crate::clients::RenderInput;
use crate::strategies::build::build_trial;

/// The trial of an experiment's `index`-th planned point (the operator's own builder).
pub fn trial(yaml: &str, index: usize) -> ValidatorTrial {
    let mut vx: ValidatorExperiment = serde_saphyr::from_str(yaml).expect("a fixture experiment");
    vx.metadata
        .namespace
        .get_or_insert_with(|| "validators".into());
    vx.metadata
        .uid
        .get_or_insert_with(|| "00000000-0000-0000-0000-000000000001".into());
    let planned = crate::strategies::plan::plan(&vx.spec.sweep, vx.spec.trial.repetitions);
    let mut t = build_trial(&vx, &planned[index]).expect("a fixture point");
    t.metadata.uid = Some("00000000-0000-0000-0000-000000000002".into());
    t
}

/// An example of manifests/examples, as text.
pub fn example(file: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../manifests/examples")
        .join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Compares `actual` with the golden file, or rewrites it under UPDATE_GOLDEN=1.
pub fn check(client: &str, name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("src/clients")
        .join(client)
        .join("testdata")
        .join(format!("{name}.yaml"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("testdata/");
        std::fs::write(&path, actual).expect("writing a golden file");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "{} is missing: run `make golden` and commit it",
            path.display()
        )
    });
    if expected != actual {
        let first = expected
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(expected.lines().count().min(actual.lines().count()));
        panic!(
            "{} differs from the rendering, first at line {}:\n  golden: {:?}\n  now:    {:?}\nIf the change is intended, run `make golden` and commit the files.",
            path.display(),
            first + 1,
            expected.lines().nth(first),
            actual.lines().nth(first)
        );
    }
}

/// The input of a trial's first attempt, with the operator's Prometheus of the fixtures.
pub fn input(trial: &ValidatorTrial) -> RenderInput {
    RenderInput::for_trial(
        trial,
        1,
        &[],
        Some("http://prometheus-operated.monitoring:9090"),
    )
    .expect("a fixture point")
}

/// The rendered objects of a trial's first attempt, as the golden YAML.
pub fn rendered(trial: &ValidatorTrial) -> String {
    let r = super::render(&input(trial)).expect("the fixture renders");
    let mut docs = vec![serde_saphyr::to_string(&r.pod).expect("YAML")];
    docs.extend(
        r.config_maps
            .iter()
            .map(|c| serde_saphyr::to_string(c).expect("YAML")),
    );
    // Generated Secrets without their random value (the operator fills it in).
    docs.extend(
        r.secrets
            .iter()
            .map(|s| serde_saphyr::to_string(&s.secret(&[])).expect("YAML")),
    );
    docs.join("---\n")
}
