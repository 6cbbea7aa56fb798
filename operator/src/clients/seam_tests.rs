//! The client seam holds: outside a client's own module and the registry lines, no file
//! of the operator names a client.
//!
//! A client's own module is `clients/<name>/` (or `clients/<name>.rs`) and its spec,
//! `api/<name>.rs`, for each `name` in [`CLIENTS`]. Every other file under `operator/src` is generic, read without
//! its tests (a module declared `#[cfg(test)] mod x;` with every file beneath it, a
//! one-line item guarded by `#[cfg(test)]` such as a test-only registry entry, and a file's tail from a
//! `#[cfg(test)]` before `mod ... {`: clippy's items_after_test_module keeps code out of
//! that tail) and without comments. A line of it names a client
//! when its code holds:
//! - a path into the client's module: `agave::`;
//! - a type of the client's: an identifier that starts with the client's module type and
//!   goes on in capitals (`AgaveSpec`, `NodeosMapMode`);
//! - outside string literals, the client's field of a template: `.nodeos`
//!   (`t.client.nodeos`);
//! - inside a string literal, a CEL path to it: `self.nodeos`, `self.template.agave`.
//!
//! Prose in messages and comments ("use Agave's window") is not naming. The registry
//! lines are one per client in `CLIENTS` (clients/mod.rs) and two in the template's
//! `ClientSpec` (api/template.rs: its `pub use` and its line of the union).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::CLIENTS;

/// Lines per client that may name it outside its own module.
const REGISTRY_LINES: usize = 3;
/// The files that hold them.
const REGISTRY_FILES: [&str; 2] = ["clients/mod.rs", "api/template.rs"];

fn src() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Files declared `#[cfg(test)] mod x;` (x.rs or x/mod.rs beside the declaring module).
fn test_only(all: &[PathBuf]) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    for p in all {
        let text = std::fs::read_to_string(p).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let dir = match p.file_name().unwrap().to_str().unwrap() {
            "mod.rs" | "lib.rs" | "main.rs" => p.parent().unwrap().to_path_buf(),
            _ => p.with_extension(""),
        };
        for w in lines.windows(2) {
            let decl = w[1].trim().trim_start_matches("pub ");
            if w[0].trim() == "#[cfg(test)]"
                && let Some(name) = decl.strip_prefix("mod ").and_then(|d| d.strip_suffix(';'))
            {
                out.insert(dir.join(format!("{name}.rs")));
                // x/mod.rs and every file beneath it.
                out.insert(dir.join(name));
            }
        }
    }
    out
}

/// The code of a line: (outside string literals, inside them), comments dropped. A
/// string open at the line's end (a multi-line literal) is closed there.
fn split(line: &str) -> (String, String) {
    let (mut code, mut strings) = (String::new(), String::new());
    let mut chars = line.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            match c {
                '\\' => {
                    chars.next();
                }
                '"' => {
                    in_string = false;
                    strings.push(' ');
                }
                _ => strings.push(c),
            }
            continue;
        }
        match c {
            '/' if chars.peek() == Some(&'/') => break,
            '"' => in_string = true,
            '\'' => {
                // A char literal ('"') or a lifetime ('a).
                let rest: String = chars.clone().take(3).collect();
                if rest.starts_with("\\") || rest.chars().nth(1) == Some('\'') {
                    while let Some(x) = chars.next() {
                        if x == '\\' {
                            chars.next();
                        } else if x == '\'' {
                            break;
                        }
                    }
                    code.push_str("' '");
                } else {
                    code.push(c);
                }
            }
            _ => code.push(c),
        }
    }
    (code, strings)
}

fn type_prefix(name: &str) -> String {
    let mut cs = name.chars();
    cs.next()
        .map(|f| f.to_ascii_uppercase().to_string() + cs.as_str())
        .unwrap_or_default()
}

/// Whether `code` holds `word` starting at a word boundary and ending at one (or, for a
/// type, going on in a capital).
fn names(code: &str, strings: &str, name: &str) -> bool {
    let boundary = |s: &str, at: usize| {
        at == 0
            || !s[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_')
    };
    let ends = |s: &str, at: usize| {
        !s[at..]
            .chars()
            .next()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
    };
    let find = |s: &str, pat: &str, end: &dyn Fn(&str, usize) -> bool, start_boundary: bool| {
        s.match_indices(pat)
            .any(|(i, _)| (!start_boundary || boundary(s, i)) && end(s, i + pat.len()))
    };
    let ty = type_prefix(name);
    let capital = |s: &str, at: usize| {
        s[at..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_uppercase())
    };
    find(code, &format!("{name}::"), &|_, _| true, true)
        || find(code, &ty, &capital, true)
        || find(code, &format!(".{name}"), &ends, false)
        || find(strings, &format!("self.{name}"), &ends, true)
        || find(strings, &format!("self.template.{name}"), &ends, true)
}

/// (file, line, text) of every generic line naming a client, by client.
fn naming() -> BTreeMap<&'static str, Vec<(String, usize, String)>> {
    let root = src();
    let mut all = Vec::new();
    files(&root, &mut all);
    all.sort();
    let tests = test_only(&all);
    let clients: Vec<&'static str> = CLIENTS.iter().map(|c| c.name()).collect();
    let mut out: BTreeMap<&'static str, Vec<(String, usize, String)>> = BTreeMap::new();
    for p in &all {
        let rel = p
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let own = clients.iter().any(|n| {
            rel.starts_with(&format!("clients/{n}/"))
                || rel == format!("clients/{n}.rs")
                || rel == format!("api/{n}.rs")
        });
        if own || tests.iter().any(|t| p.starts_with(t)) || rel.ends_with("tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(p).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        // After `#[cfg(test)]`: its other attributes, then the one-line item it guards (a
        // registry entry or a field of a test-only strategy or client), are test code.
        let mut guarded = false;
        for (i, line) in lines.iter().enumerate() {
            let next = lines.get(i + 1).map(|l| l.trim()).unwrap_or("");
            if line.trim() == "#[cfg(test)]" && next.starts_with("mod ") && next.ends_with('{') {
                break;
            }
            if line.trim() == "#[cfg(test)]" {
                guarded = true;
                continue;
            }
            if guarded {
                guarded = line.trim().starts_with("#[");
                continue;
            }
            let (code, strings) = split(line);
            for n in &clients {
                if names(&code, &strings, n) {
                    out.entry(n)
                        .or_default()
                        .push((rel.clone(), i + 1, line.trim().to_string()));
                }
            }
        }
    }
    out
}

#[test]
fn no_generic_file_names_a_client_beyond_the_registry_lines() {
    let found = naming();
    let mut over = Vec::new();
    for c in CLIENTS.iter() {
        let lines = found.get(c.name()).cloned().unwrap_or_default();
        let outside: Vec<_> = lines
            .iter()
            .filter(|(f, _, _)| !REGISTRY_FILES.contains(&f.as_str()))
            .collect();
        let files: BTreeSet<&str> = lines.iter().map(|(f, _, _)| f.as_str()).collect();
        if !outside.is_empty() || lines.len() > REGISTRY_LINES {
            over.push(format!(
                "{} is named in {} generic files, {} lines (at most {REGISTRY_LINES}, in {REGISTRY_FILES:?}):\n{}",
                c.name(),
                files.len(),
                lines.len(),
                lines
                    .iter()
                    .map(|(f, n, l)| format!("  {f}:{n}: {l}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            ));
        }
    }
    assert!(over.is_empty(), "{}", over.join("\n"));
}

/// The definition catches what it should, and only that.
#[test]
fn naming_is_code_not_prose() {
    let n = |line: &str| {
        let (code, strings) = split(line);
        names(&code, &strings, "nodeos")
    };
    for named in [
        "use crate::clients::nodeos::swap;",
        "let m: NodeosMapMode = x;",
        "if t.client.nodeos.is_some() {",
        r#"Rule::new("!has(self.template.nodeos) || x")"#,
        r#"Rule::new("[has(self.nodeos)].size() == 1")"#,
    ] {
        assert!(n(named), "{named}");
    }
    for not in [
        "// nodeos::swap, in a comment",
        r#"format!("a nodeos producer signs with template.nodeos.config")"#,
        "let nodeos_port = 8888;",
        "let x = Nodeos;",
        "fn nodeosish() {}",
    ] {
        assert!(!n(not), "{not}");
    }
}

/// The API's registry (the template's union) and the operator's list the same clients in
/// the same order.
#[test]
fn the_two_registries_agree() {
    let clients: Vec<&str> = CLIENTS.iter().map(|c| c.name()).collect();
    assert_eq!(clients, crate::api::template::ClientSpec::NAMES);
}
