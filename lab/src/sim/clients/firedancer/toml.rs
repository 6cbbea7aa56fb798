//! Enough of TOML to read a Frankendancer config as fdctl reads it: `[table.headers]`,
//! `key = value` with strings, integers (`_` separators), floats, booleans and one-line
//! arrays, and `#` comments. Keys come out dotted (`layout.verify_tile_count`). A line
//! fdctl's parser would reject is an error with its line number (src/util/toml).

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq)]
pub enum Toml {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    Arr(Vec<Toml>),
}

impl Toml {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Toml::Str(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Toml::Int(n) => Some(*n),
            _ => None,
        }
    }
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Toml::Bool(b) => Some(*b),
            _ => None,
        }
    }
}

/// A parse error: (line, what); duplicates are errors as in fdctl (FD_TOML_ERR_DUP).
pub type Error = (usize, &'static str);

/// Strips a `#` comment that is outside any string.
fn strip_comment(line: &str) -> &str {
    let mut in_str = false;
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        match c {
            '\\' if in_str && !escaped => {
                escaped = true;
                continue;
            }
            '"' if !escaped => in_str = !in_str,
            '#' if !in_str => return &line[..i],
            _ => {}
        }
        escaped = false;
    }
    line
}

fn string(s: &str) -> Option<(String, &str)> {
    let rest = s.strip_prefix('"')?;
    let mut out = String::new();
    let mut chars = rest.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((out, &rest[i + 1..])),
            '\\' => match chars.next()?.1 {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                other => out.push(other),
            },
            other => out.push(other),
        }
    }
    None
}

fn scalar(s: &str) -> Option<Toml> {
    let s = s.trim();
    match s {
        "true" => return Some(Toml::Bool(true)),
        "false" => return Some(Toml::Bool(false)),
        _ => {}
    }
    if s.starts_with('"') {
        let (v, rest) = string(s)?;
        return rest.trim().is_empty().then_some(Toml::Str(v));
    }
    let digits = s.replace('_', "");
    if let Ok(n) = digits.parse::<i64>() {
        return Some(Toml::Int(n));
    }
    digits.parse::<f64>().ok().map(Toml::Float)
}

fn value(s: &str) -> Option<Toml> {
    let s = s.trim();
    let Some(inner) = s.strip_prefix('[') else {
        return scalar(s);
    };
    let inner = inner.strip_suffix(']')?.trim();
    let mut items = Vec::new();
    let mut rest = inner;
    while !rest.is_empty() {
        let (item, after) = if rest.starts_with('"') {
            let (v, after) = string(rest)?;
            (Toml::Str(v), after)
        } else {
            let end = rest.find(',').unwrap_or(rest.len());
            (scalar(&rest[..end])?, &rest[end..])
        };
        items.push(item);
        rest = after.trim_start();
        rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
    }
    Some(Toml::Arr(items))
}

/// Reads a config into dotted keys.
pub fn parse(text: &str) -> Result<BTreeMap<String, Toml>, Error> {
    let mut out = BTreeMap::new();
    let mut table = String::new();
    for (n, raw) in text.lines().enumerate() {
        let line = strip_comment(raw).trim();
        if line.is_empty() {
            continue;
        }
        if let Some(header) = line.strip_prefix('[') {
            let name = header.strip_suffix(']').ok_or((n + 1, "parse"))?.trim();
            if name.is_empty() {
                return Err((n + 1, "parse"));
            }
            table = name.to_string();
            continue;
        }
        let (key, v) = line.split_once('=').ok_or((n + 1, "parse"))?;
        let key = key.trim();
        if key.is_empty()
            || !key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err((n + 1, "parse"));
        }
        let v = value(v).ok_or((n + 1, "parse"))?;
        let path = if table.is_empty() {
            key.to_string()
        } else {
            format!("{table}.{key}")
        };
        if out.insert(path, v).is_some() {
            return Err((n + 1, "duplicate key"));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_valtune_writes() {
        let c = parse(
            "# h\nuser = \"firedancer\" # who\n\n[layout]\naffinity = \"2,3\"\nverify_tile_count = 30\n[development.bench]\nlarger_max_cost_per_block = true\nfund = 32_768\n[gossip]\nentrypoints = [\"a:1\", \"b#2:3\"]\n",
        )
        .unwrap();
        assert_eq!(c["user"], Toml::Str("firedancer".into()));
        assert_eq!(c["layout.verify_tile_count"], Toml::Int(30));
        assert_eq!(
            c["development.bench.larger_max_cost_per_block"],
            Toml::Bool(true)
        );
        assert_eq!(c["development.bench.fund"], Toml::Int(32768));
        assert_eq!(
            c["gossip.entrypoints"],
            Toml::Arr(vec![Toml::Str("a:1".into()), Toml::Str("b#2:3".into())])
        );
    }

    #[test]
    fn refuses_what_fdctl_refuses_with_the_line() {
        assert_eq!(parse("[layout]\nx = 1\nx = 2\n"), Err((3, "duplicate key")));
        assert_eq!(parse("a = \n"), Err((1, "parse")));
        assert_eq!(parse("[layout\n"), Err((1, "parse")));
    }
}
