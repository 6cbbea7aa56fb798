//! Each table against fixtures extracted from upstream at its tags, by the commands their
//! headers record (hack/firedancer/config_keys.py, hack/upstream-keys/): what the operator
//! and the lab judge keys by is what upstream has, not what one of them says.

use std::collections::BTreeSet;
use std::path::PathBuf;

use upstream_keys::{V, besu, firedancer, in_range, nodeos};

fn fixtures(dir: &str) -> Vec<(String, BTreeSet<String>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(dir);
    let mut out: Vec<(String, BTreeSet<String>)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            let words = std::fs::read_to_string(&path)
                .unwrap()
                .lines()
                .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
                .map(|l| l.trim().to_string())
                .collect();
            (name, words)
        })
        .collect();
    out.sort();
    out
}

/// `v0.1106.40201` -> (0, 1106, 40201); `v26.08.1` -> (26, 8, 1).
fn tag(t: &str) -> V {
    let n: Vec<u32> = t
        .trim_start_matches(|c: char| !c.is_ascii_digit())
        .split('.')
        .map(|p| p.parse().unwrap())
        .collect();
    (n[0], n[1], n[2])
}

/// Every key of each release's default.toml, and no other, is in the table at that
/// release: the first and last Frankendancer and full Firedancer tags read, and the ones
/// valtune pins.
#[test]
fn firedancer_keys_at_each_fixture_tag_are_the_releases_default_toml() {
    let all = fixtures("firedancer");
    assert!(all.len() >= 5, "{}", all.len());
    for (name, keys) in &all {
        let v = tag(name);
        let table = if v.0 == 0 {
            firedancer::KEYS
        } else {
            firedancer::FULL_KEYS
        };
        let present: BTreeSet<String> = table
            .iter()
            .filter(|(_, since, before)| in_range((*since, *before), v))
            .map(|(k, _, _)| k.to_string())
            .collect();
        let missing: Vec<_> = keys.difference(&present).collect();
        let extra: Vec<_> = present.difference(keys).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "{name}: upstream has, the table lacks: {missing:?}; the table has, upstream lacks: {extra:?}"
        );
    }
    // The newest lines read are the newest fixtures'.
    let newest = |full: bool| {
        all.iter()
            .map(|(n, _)| tag(n))
            .filter(|v| (v.0 > 0) == full)
            .max()
            .map(|(a, b, _)| (a, b, 0))
            .unwrap()
    };
    assert_eq!(newest(false), firedancer::NEWEST);
    assert_eq!(newest(true), firedancer::FULL_NEWEST);
}

/// An option whose existence changed between versions is in each full list exactly when
/// its range says so.
#[test]
fn besu_versioned_options_agree_with_the_full_lists() {
    for at in besu::READ_AT {
        let list: BTreeSet<&str> = besu::list(at)
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(str::trim)
            .collect();
        for (option, since, before) in besu::VERSIONED {
            assert_eq!(
                list.contains(option),
                in_range((since, before), at),
                "{option} at {at:?}"
            );
        }
        // Every line is a long option.
        assert!(list.iter().all(|o| o.starts_with("--")), "{at:?}");
    }
}

/// Each table says where it comes from.
#[test]
fn every_table_records_its_source() {
    for s in [
        upstream_keys::agave::SOURCE,
        besu::SOURCE,
        firedancer::SOURCE,
        upstream_keys::nodeos::SOURCE,
    ] {
        assert!(s.repository.contains('/') && !s.paths.is_empty() && !s.tags.is_empty());
        assert!(!s.extracted_by.is_empty());
    }
}

/// The options of each release line the lists were read at are the option registrations
/// of its nodeos at that tag, and no others.
#[test]
fn nodeos_options_of_each_line_are_its_registrations() {
    let all = fixtures("nodeos");
    assert_eq!(all.len(), 2);
    for (name, options) in &all {
        let (line, read_at, only): (_, _, &[&str]) = match name.split_once('-').unwrap() {
            ("leap", t) => ("leap", tag(t), nodeos::LEAP_ONLY),
            ("spring", t) => ("spring", tag(t), nodeos::SPRING_ONLY),
            other => panic!("{other:?}"),
        };
        let expected = if line == "leap" {
            nodeos::LEAP_READ_AT
        } else {
            nodeos::SPRING_READ_AT
        };
        assert_eq!(read_at, expected, "{name}");
        let table: BTreeSet<String> = nodeos::COMMON
            .iter()
            .chain(only)
            .map(|o| o.to_string())
            .collect();
        let missing: Vec<_> = options.difference(&table).collect();
        let extra: Vec<_> = table.difference(options).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "{name}: upstream registers, the table lacks: {missing:?}; the table has, upstream lacks: {extra:?}"
        );
    }
}

/// Each versioned option's range agrees with upstream at the tags around its bounds
/// (tests/fixtures/besu/versioned.txt).
#[test]
fn besu_versioned_ranges_agree_with_upstream_at_their_bounds() {
    let text = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/besu/versioned.txt"),
    )
    .unwrap();
    let mut rows = 0;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let w: Vec<&str> = line.split_whitespace().collect();
        let (at, option, present) = (tag(w[0]), w[1], w[2] == "1");
        let range = besu::versioned(option).unwrap_or_else(|| panic!("{option}"));
        assert_eq!(in_range(range, at), present, "{option} at {}", w[0]);
        rows += 1;
    }
    assert_eq!(rows, besu::VERSIONED.len() * 15);
}
