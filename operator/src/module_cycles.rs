//! No two top-level modules import each other, directly or through others: dependencies
//! run one way (the pure core, api and results and strategies, below controller, check
//! and report), as linkerd's policy-controller enforces with crates. Read from the
//! source: every `crate::NAME` path outside tests, per top-level module.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level module -> the modules it names -> where.
type Graph = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Whether a trimmed line opens a test module kept inline (`#[cfg(test)]` above it).
fn opens_inline_module(line: &str) -> bool {
    let rest = line
        .strip_prefix("pub(crate) ")
        .or_else(|| line.strip_prefix("pub "))
        .unwrap_or(line);
    rest.starts_with("mod ") && rest.ends_with('{')
}

/// The files that are test modules of their own (`#[cfg(test)] mod NAME;`), and each
/// file's lines outside tests. A test module kept inline must be the file's last item
/// (the convention the scan relies on: checked here, so a change of it fails loudly).
fn non_test_lines(src: &Path) -> BTreeMap<PathBuf, Vec<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut test_files = BTreeSet::new();
    let mut lines = BTreeMap::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let all: Vec<&str> = text.lines().collect();
        let mut kept = Vec::new();
        let mut i = 0;
        while i < all.len() {
            let line = all[i].trim();
            if line == "#[cfg(test)]" {
                // Its item's first line, below any other attributes and doc comments.
                let mut item = i + 1;
                while all
                    .get(item)
                    .is_some_and(|l| l.trim().starts_with("#[") || l.trim().starts_with("///"))
                {
                    item += 1;
                }
                let next = all.get(item).map_or("", |l| l.trim());
                if opens_inline_module(next) {
                    let indent = all[item].len() - all[item].trim_start().len();
                    let close = format!("{}}}", " ".repeat(indent));
                    let end = (item + 1..all.len()).find(|j| all[*j] == close);
                    let after = end.map_or(0, |e| {
                        all[e + 1..].iter().filter(|l| !l.trim().is_empty()).count()
                    });
                    assert!(
                        end.is_some() && after == 0,
                        "{}:{}: a test module kept inline must end the file",
                        file.display(),
                        i + 1
                    );
                    break;
                }
                // `#[cfg(test)] mod NAME;`: that file is a test.
                let name = next
                    .trim_start_matches("pub(crate) ")
                    .trim_start_matches("pub ")
                    .strip_prefix("mod ")
                    .and_then(|n| n.strip_suffix(';'));
                if let Some(name) = name {
                    let stem = file.file_stem().unwrap().to_string_lossy();
                    let dir = if ["mod", "lib", "main"].contains(&stem.as_ref()) {
                        file.parent().unwrap().to_path_buf()
                    } else {
                        file.with_extension("")
                    };
                    test_files.insert(dir.join(format!("{name}.rs")));
                    test_files.insert(dir.join(name));
                }
                // Any other item under `#[cfg(test)]` (a field, a `use`, a registry entry)
                // on one line.
                i = item + 1;
                continue;
            }
            if !line.starts_with("//") {
                kept.push(all[i].to_string());
            }
            i += 1;
        }
        lines.insert(file.clone(), kept);
    }
    lines.retain(|file, _| !test_files.iter().any(|t| file.starts_with(t)));
    lines
}

fn graph(src: &Path) -> Graph {
    let mut g = Graph::new();
    for (file, lines) in non_test_lines(src) {
        let rel = file.strip_prefix(src).unwrap();
        let top = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        for line in lines {
            for (at, _) in line.match_indices("crate::") {
                // Not `valtune_lab::crate::` nor a longer identifier ending in `crate`.
                let before = line[..at].chars().last();
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                    continue;
                }
                let name: String = line[at + "crate::".len()..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() && name != top {
                    g.entry(top.clone())
                        .or_default()
                        .entry(name)
                        .or_default()
                        .insert(rel.display().to_string());
                }
            }
        }
    }
    g
}

/// A cycle through `g`, as the modules on it, if there is one.
fn find_cycle(g: &Graph) -> Option<Vec<String>> {
    fn visit(
        g: &Graph,
        node: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in g.get(node).into_iter().flat_map(|m| m.keys()) {
            if let Some(c) = visit(g, next, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    g.keys()
        .find_map(|n| visit(g, n, &mut Vec::new(), &mut done))
}

#[test]
fn top_level_modules_import_in_no_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let g = graph(&src);
    if let Some(cycle) = find_cycle(&g) {
        let edges: Vec<String> = cycle
            .windows(2)
            .map(|w| format!("{} -> {} ({:?})", w[0], w[1], g[&w[0]][&w[1]]))
            .collect();
        panic!(
            "top-level modules import each other in a cycle:\n  {}\nmove what both need below both (as readiness/ holds what check and controller share)",
            edges.join("\n  ")
        );
    }
    // The scan sees the imports there are: the operator's reconcilers use the strategies.
    assert!(g["controller"].contains_key("strategies"), "{g:?}");
    assert!(
        !g.contains_key("cli"),
        "the binary's modules name the library as valtune::"
    );
}

/// The scan finds a cycle where there is one, and reads test modules as tests.
#[test]
fn the_scan_finds_a_cycle_and_skips_tests() {
    let dir = std::env::temp_dir().join(format!("valtune-module-cycles-{}", std::process::id()));
    let write = |path: &str, text: &str| {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write("lib.rs", "pub mod a;\npub mod b;\n");
    write(
        "a/mod.rs",
        "use crate::b::x;\n#[cfg(test)]\nmod tests;\nstruct S {\n    #[cfg(test)]\n    /// A test's.\n    #[serde(default)]\n    t: crate::c::T,\n}\n",
    );
    write("a/tests.rs", "use crate::c::y;\n");
    write(
        "b.rs",
        "// crate::c in a comment\npub fn x() {}\n#[cfg(test)]\nmod tests {\n    use crate::a::z;\n}\n",
    );
    let g = graph(&dir);
    assert_eq!(find_cycle(&g), None, "{g:?}");
    assert_eq!(g["a"].keys().collect::<Vec<_>>(), ["b"]);
    write("b.rs", "pub fn x() { crate::a::z() }\n");
    assert_eq!(
        find_cycle(&graph(&dir)),
        Some(vec!["a".to_string(), "b".to_string(), "a".to_string()])
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
