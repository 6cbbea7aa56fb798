//! The tuned settings of a validator, typed as the sweep is: thread and tile counts, the
//! program cache size, the allocator, the heap, ... Every setting an experiment sweeps
//! beyond resources and generic knobs lands here in a trial's resolved template, so a
//! trial, a template written by hand and (later) a running Validator describe a
//! configuration the same way. How each value reaches the process is the client's (its
//! knob table, `clients/<client>/knobs.rs`).

use std::collections::BTreeMap;

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::sweep::{Allocator, Setting, Sigverify, ThreadKnob, TrialPoint, value_text};

/// Each thread or tile count is 1 to 512, as the sweep's are. (The schema lists the knob
/// names as properties; their values are the map's.)
fn thread_counts(schema: &mut schemars::Schema) {
    let bound = |s: &mut serde_json::Value| {
        if let Some(o) = s.as_object_mut() {
            o.insert("minimum".into(), 1.into());
            o.insert("maximum".into(), 512.into());
        }
    };
    if let Some(v) = schema.get_mut("additionalProperties") {
        bound(v);
    }
    if let Some(props) = schema.get_mut("properties").and_then(|p| p.as_object_mut()) {
        props.values_mut().for_each(bound);
    }
}

/// Tuned settings. Each is optional: unset keeps the client's own (its spec's field, else
/// its default). A swept value replaces the template's in each trial.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct Tuning {
    /// Program cache capacity in entries (Agave: the image of
    /// template.agave.programCacheImages built with it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 16, max = 65536))]
    pub program_cache_entries: Option<i32>,
    /// Thread and tile counts by the client's knob name (docs/clients.md), e.g.
    /// `bankingThreads: 8`; a name no client has is an unknown field.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(transform = thread_counts)]
    pub threads: BTreeMap<ThreadKnob, i32>,
    /// The memory allocator of the client process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocator: Option<Allocator>,
    /// glibc malloc's arena limit (`MALLOC_ARENA_MAX`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 128))]
    pub malloc_arena_max: Option<i32>,
    /// The JVM's maximum heap (`-Xmx`), a quantity such as 5Gi (Besu).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = Rule::new("isQuantity(self) && quantity(self).isGreaterThan(quantity('0'))")
        .message("must be a positive quantity such as 5Gi"))]
    pub heap: Option<String>,
    /// Memory a hog holds beside the validator, inside its pod's memory (nodeos); 0 runs
    /// no hog.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = super::shapes::non_negative_quantity("0, 6Gi or 8G"))]
    pub memory_pressure: Option<String>,
    /// How nodeos maps its state (`--database-map-mode`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database_map_mode: Option<DatabaseMapMode>,
    /// Where transaction signatures are verified (Agave `--cuda` for gpu).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sigverify: Option<Sigverify>,
}

/// A trial point's value that is not one of its setting's (the point was not expanded
/// from a sweep, which only holds valid values).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("point.{field}: {value:?} is not a value valtune knows there")]
pub struct PointValueError {
    /// Where in the point: `threads` (an unknown name) or `settings.<name>`.
    pub field: String,
    pub value: String,
}

impl Tuning {
    pub fn is_empty(&self) -> bool {
        self == &Tuning::default()
    }

    /// A typed setting's value, written as the sweep writes it (`glibc`, `2`, `5Gi`).
    pub fn setting(&self, s: Setting) -> Option<String> {
        match s {
            Setting::Allocator => self.allocator.as_ref().map(value_text),
            Setting::MallocArenaMax => self.malloc_arena_max.map(|n| n.to_string()),
            Setting::Heap => self.heap.clone(),
            Setting::MemoryPressure => self.memory_pressure.clone(),
            Setting::DatabaseMapMode => self.database_map_mode.map(|m| m.as_str().to_string()),
            Setting::Sigverify => self.sigverify.as_ref().map(value_text),
        }
    }

    /// Sets the values a trial point sweeps, over the template's.
    pub fn apply_point(&mut self, point: &TrialPoint) -> Result<(), PointValueError> {
        if let Some(n) = point.program_cache_entries {
            self.program_cache_entries = Some(n);
        }
        for (name, n) in &point.threads {
            let knob = typed(name).ok_or_else(|| PointValueError {
                field: "threads".into(),
                value: name.clone(),
            })?;
            self.threads.insert(knob, *n);
        }
        for (name, value) in &point.settings {
            let bad = || PointValueError {
                field: format!("settings.{name}"),
                value: value.clone(),
            };
            let setting = Setting::ALL
                .into_iter()
                .find(|s| s.as_str() == name)
                .ok_or_else(bad)?;
            match setting {
                Setting::Allocator => self.allocator = Some(typed(value).ok_or_else(bad)?),
                Setting::MallocArenaMax => {
                    self.malloc_arena_max = Some(value.parse().map_err(|_| bad())?)
                }
                Setting::Heap => self.heap = Some(value.clone()),
                Setting::MemoryPressure => self.memory_pressure = Some(value.clone()),
                Setting::DatabaseMapMode => {
                    self.database_map_mode = Some(DatabaseMapMode::parse(value).ok_or_else(bad)?)
                }
                Setting::Sigverify => self.sigverify = Some(typed(value).ok_or_else(bad)?),
            }
        }
        Ok(())
    }
}

/// An enum from the name serde gives it.
fn typed<T: serde::de::DeserializeOwned>(name: &str) -> Option<T> {
    serde_json::from_value(serde_json::Value::String(name.into())).ok()
}

// nodeos' (the values of the typed setting `databaseMapMode`); its doc is the schema's.
/// How chainbase maps the state (spring `plugins/chain_plugin/chain_plugin.cpp`).
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, JsonSchema, Default,
)]
#[serde(rename_all = "snake_case")]
pub enum DatabaseMapMode {
    #[default]
    Mapped,
    MappedPrivate,
    Heap,
    Locked,
}

impl DatabaseMapMode {
    pub fn as_str(self) -> &'static str {
        match self {
            DatabaseMapMode::Mapped => "mapped",
            DatabaseMapMode::MappedPrivate => "mapped_private",
            DatabaseMapMode::Heap => "heap",
            DatabaseMapMode::Locked => "locked",
        }
    }

    pub fn parse(s: &str) -> Option<DatabaseMapMode> {
        [
            DatabaseMapMode::Mapped,
            DatabaseMapMode::MappedPrivate,
            DatabaseMapMode::Heap,
            DatabaseMapMode::Locked,
        ]
        .into_iter()
        .find(|m| m.as_str() == s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::sweep::SweepSpec;

    /// Every value a sweep can hold comes back from its point as the sweep wrote it.
    #[test]
    fn a_swept_point_becomes_typed_tuning_and_reads_back_the_same() {
        let sweep: SweepSpec = serde_saphyr::from_str(
            "programCacheEntries: [512]\nthreads: [{name: bankingThreads, values: [8]}]\nallocator: [glibc]\nmallocArenaMax: [2]\nheap: [5Gi]\nmemoryPressure: ['0']\ndatabaseMapMode: [mapped_private]\nsigverify: [gpu]\n",
        )
        .unwrap();
        let point = sweep.expand().remove(0);
        let mut t = Tuning::default();
        t.apply_point(&point).unwrap();
        assert_eq!(t.program_cache_entries, Some(512));
        assert_eq!(t.threads[&ThreadKnob::BankingThreads], 8);
        assert_eq!(t.allocator, Some(Allocator::Glibc));
        assert_eq!(t.database_map_mode, Some(DatabaseMapMode::MappedPrivate));
        for s in Setting::ALL {
            assert_eq!(
                t.setting(s).as_ref(),
                point.settings.get(s.as_str()),
                "{s:?}"
            );
        }
        assert_eq!(
            serde_json::to_value(&t).unwrap()["threads"],
            serde_json::json!({"bankingThreads": 8})
        );
    }

    #[test]
    fn a_point_value_of_no_setting_is_refused_with_its_place() {
        let point = TrialPoint {
            settings: [("allocator".to_string(), "hoard".to_string())].into(),
            ..Default::default()
        };
        let err = Tuning::default().apply_point(&point).unwrap_err();
        assert_eq!(err.field, "settings.allocator");
        let point = TrialPoint {
            threads: [("fooThreads".to_string(), 2)].into(),
            ..Default::default()
        };
        let err = Tuning::default().apply_point(&point).unwrap_err();
        assert_eq!(
            err.to_string(),
            "point.threads: \"fooThreads\" is not a value valtune knows there"
        );
    }
}
