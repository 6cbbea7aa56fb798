//! The part of log4j2 (2.2x, as Besu ships it) a Besu pod's logging configuration can
//! use to send log lines somewhere: `Http` appenders (directly, or behind an `Async`
//! appender) referenced by a logger whose name covers the logging class, with an optional
//! `RegexFilter` (the formatted message must match the whole expression) and a
//! `PatternLayout` of literals, `%msg`/`%m`/`%message`, `%n`, `%d{UNIX_MILLIS}` and
//! `%replace{pattern}{regex}{substitution}` (Java's `replaceAll`). The lab evaluates the
//! pod's own configuration on the lines the model logs; what it cannot read posts nothing.

use regex::Regex;

/// An HTTP appender a class's log lines reach.
#[derive(Debug, Clone)]
pub struct HttpSink {
    pub url: String,
    filter: Option<Regex>,
    pattern: Vec<Part>,
}

impl HttpSink {
    /// The body log4j posts for one event (message `msg` at `unix_ms`), if the filter
    /// lets it through.
    pub fn render(&self, msg: &str, unix_ms: i64) -> Option<String> {
        if self.filter.as_ref().is_some_and(|f| !f.is_match(msg)) {
            return None;
        }
        Some(render(&self.pattern, msg, unix_ms))
    }
}

/// One element of the XML: its name and attributes (the lab's configurations are small and
/// flat enough for a scan of tags).
#[derive(Debug, Clone)]
struct Tag {
    name: String,
    attrs: Vec<(String, String)>,
    depth: usize,
    /// Whether it closes itself (`<X/>`).
    empty: bool,
}

impl Tag {
    fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

fn unescape(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

fn tags(xml: &str) -> Vec<Tag> {
    let comments = Regex::new(r"(?s)<!--.*?-->").expect("a regex");
    let xml = comments.replace_all(xml, "");
    let tag = Regex::new(r#"<(/?)([A-Za-z][A-Za-z0-9_.:-]*)((?:\s+[A-Za-z_:][A-Za-z0-9_.:-]*\s*=\s*"[^"]*")*)\s*(/?)>"#)
        .expect("a regex");
    let attr = Regex::new(r#"([A-Za-z_:][A-Za-z0-9_.:-]*)\s*=\s*"([^"]*)""#).expect("a regex");
    let mut out = Vec::new();
    let mut depth = 0usize;
    for c in tag.captures_iter(&xml) {
        if &c[1] == "/" {
            depth = depth.saturating_sub(1);
            continue;
        }
        let empty = &c[4] == "/";
        out.push(Tag {
            name: c[2].to_string(),
            attrs: attr
                .captures_iter(&c[3])
                .map(|a| (a[1].to_string(), unescape(&a[2])))
                .collect(),
            depth,
            empty,
        });
        if !empty {
            depth += 1;
        }
    }
    out
}

/// The children of the tag at `i` (tags one level deeper until the level closes).
fn children(tags: &[Tag], i: usize) -> impl Iterator<Item = &Tag> {
    let depth = tags[i].depth;
    let empty = tags[i].empty;
    tags[i + 1..]
        .iter()
        .take_while(move |t| !empty && t.depth > depth)
        .filter(move |t| t.depth == depth + 1)
}

/// The HTTP appenders the log lines of class `class` (at INFO) reach under `xml`.
pub fn http_sinks(xml: &str, class: &str) -> Vec<HttpSink> {
    let tags = tags(xml);
    let named = |name: &str| tags.iter().position(|t| t.attr("name") == Some(name));
    // The refs of the loggers that cover the class: the most specific named one, plus its
    // ancestors' while additivity holds, and Root.
    let mut loggers: Vec<(usize, usize)> = tags
        .iter()
        .enumerate()
        .filter(|(_, t)| t.name == "Logger" || t.name == "AsyncLogger")
        .filter_map(|(i, t)| {
            let n = t.attr("name")?;
            (class == n || class.starts_with(&format!("{n}."))).then_some((n.len(), i))
        })
        .collect();
    loggers.sort_by_key(|l| std::cmp::Reverse(l.0));
    let mut refs: Vec<String> = Vec::new();
    let mut additive = true;
    for (_, i) in &loggers {
        if !additive {
            break;
        }
        refs.extend(
            children(&tags, *i)
                .filter(|t| t.name == "AppenderRef")
                .filter_map(|t| t.attr("ref").map(str::to_string)),
        );
        additive = tags[*i].attr("additivity") != Some("false");
    }
    if additive
        && let Some(root) = tags
            .iter()
            .position(|t| t.name == "Root" || t.name == "AsyncRoot")
    {
        refs.extend(
            children(&tags, root)
                .filter(|t| t.name == "AppenderRef")
                .filter_map(|t| t.attr("ref").map(str::to_string)),
        );
    }
    let mut sinks = Vec::new();
    let mut seen = Vec::new();
    while let Some(r) = refs.pop() {
        if seen.contains(&r) {
            continue;
        }
        seen.push(r.clone());
        let Some(i) = named(&r) else { continue };
        match tags[i].name.as_str() {
            "Async" => refs.extend(
                children(&tags, i)
                    .filter(|t| t.name == "AppenderRef")
                    .filter_map(|t| t.attr("ref").map(str::to_string)),
            ),
            "Http" => {
                let Some(url) = tags[i].attr("url") else {
                    continue;
                };
                let kids: Vec<&Tag> = children(&tags, i).collect();
                let Some(pattern) = kids
                    .iter()
                    .find(|t| t.name == "PatternLayout")
                    .and_then(|t| t.attr("pattern"))
                else {
                    continue;
                };
                let filter = match kids.iter().find(|t| t.name == "RegexFilter") {
                    Some(f) => match f.attr("regex").map(|r| Regex::new(&format!("^(?:{r})$"))) {
                        Some(Ok(re)) => Some(re),
                        // A filter log4j cannot compile stops the appender.
                        _ => continue,
                    },
                    None => None,
                };
                sinks.push(HttpSink {
                    url: url.to_string(),
                    filter,
                    pattern: parse(pattern),
                });
            }
            _ => {}
        }
    }
    sinks
}

/// The `{...}` option starting at `s[0] == '{'`, and what follows it (braces nest).
fn option(s: &str) -> Option<(&str, &str)> {
    if !s.starts_with('{') {
        return None;
    }
    let mut depth = 0;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some((&s[1..i], &s[i + 1..]));
                }
            }
            _ => {}
        }
    }
    None
}

/// Java's `$n` group references, as Rust's `${n}` (so `$1$2` stays two groups).
fn java_substitution(sub: &str) -> String {
    let re = Regex::new(r"\$([0-9])").expect("a regex");
    re.replace_all(sub, "$${${1}}").into_owned()
}

/// A PatternLayout pattern, parsed once.
#[derive(Debug, Clone)]
enum Part {
    Literal(String),
    Message,
    Newline,
    UnixMillis,
    UnixSeconds,
    /// `%replace{parts}{regex}{substitution}`; None when log4j could not compile it (the
    /// text passes unchanged).
    Replace(Vec<Part>, Option<Regex>, String),
}

fn parse(pattern: &str) -> Vec<Part> {
    let mut out = Vec::new();
    let mut rest = pattern;
    while let Some(i) = rest.find('%') {
        if i > 0 {
            out.push(Part::Literal(rest[..i].to_string()));
        }
        rest = &rest[i + 1..];
        let name_len = rest
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(rest.len());
        let name = &rest[..name_len];
        rest = &rest[name_len..];
        match name {
            "msg" | "m" | "message" => out.push(Part::Message),
            "n" => out.push(Part::Newline),
            "d" | "date" => {
                let (fmt, after) = option(rest).unwrap_or(("", rest));
                rest = after;
                out.push(if fmt == "UNIX_MILLIS" {
                    Part::UnixMillis
                } else {
                    Part::UnixSeconds
                });
            }
            "replace" => {
                let Some((inner, r1)) = option(rest) else {
                    break;
                };
                let Some((re, r2)) = option(r1) else { break };
                let Some((sub, r3)) = option(r2) else { break };
                rest = r3;
                out.push(Part::Replace(
                    parse(inner),
                    Regex::new(re).ok(),
                    java_substitution(sub),
                ));
            }
            "" if rest.starts_with('%') => {
                out.push(Part::Literal("%".into()));
                rest = &rest[1..];
            }
            // A converter the lab does not play yields nothing.
            _ => {
                if let Some((_, after)) = option(rest) {
                    rest = after;
                }
            }
        }
    }
    if !rest.is_empty() {
        out.push(Part::Literal(rest.to_string()));
    }
    out
}

fn render(parts: &[Part], msg: &str, unix_ms: i64) -> String {
    let mut out = String::new();
    for p in parts {
        match p {
            Part::Literal(s) => out.push_str(s),
            Part::Message => out.push_str(msg),
            Part::Newline => out.push('\n'),
            Part::UnixMillis => out.push_str(&unix_ms.to_string()),
            Part::UnixSeconds => out.push_str(&(unix_ms / 1000).to_string()),
            Part::Replace(inner, re, sub) => {
                let text = render(inner, msg, unix_ms);
                match re {
                    Some(re) => out.push_str(&re.replace_all(&text, sub.as_str())),
                    None => out.push_str(&text),
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The operator's configuration, as it renders it (operator/src/clients/besu/log4j2.xml).
    const CONFIG: &str = include_str!("../../../../../operator/src/clients/besu/log4j2.xml");
    const CLASS: &str = "org.hyperledger.besu.ethereum.api.jsonrpc.internal.methods.engine.AbstractEngineNewPayload";

    #[test]
    fn every_versions_block_line_becomes_milliseconds() {
        let sinks = http_sinks(&CONFIG.replace("{port}", "8429"), CLASS);
        assert_eq!(sinks.len(), 1, "{sinks:?}");
        assert_eq!(sinks[0].url, "http://127.0.0.1:8429/write?precision=ms");
        let line = |msg: &str| sinks[0].render(msg, 1_700_000_000_123);
        // 25.10.0 on, below and above a second.
        assert_eq!(
            line("Imported #23,456,789  (0x1234…abcd)|  150 tx (12.0% parallel)| 16 ws|  3 blobs| 1.02 gwei bfee|  15,000,000 ( 50.0%) gas used| 123.4ms exec| 121.56 Mgas/s| 25 peers").as_deref(),
            Some("besu_block_import exec_ms=123.4 1700000000123\n")
        );
        assert_eq!(
            line("Imported #23,456,789  (0x1234…abcd)|  150 tx| 16 ws|  3 blobs| 1.02 gwei bfee|  15,000,000 ( 50.0%) gas used| 1.234s exec| 12.16 Mgas/s| 25 peers").as_deref(),
            Some("besu_block_import exec_ms=1234 1700000000123\n")
        );
        // 25.5.0 to 25.9.x, 24.12.0 to 25.4.x, before 24.12.0.
        assert_eq!(
            line("Imported #1  (0x12…34)|  150 tx| 16 ws|  0 blobs| 1.02 gwei bfee|  15,000,000 ( 50.0%) gas used| 0.050s exec|  1.00 Mgas/s|  5 peers").as_deref(),
            Some("besu_block_import exec_ms=50 1700000000123\n")
        );
        assert_eq!(
            line("Imported #1  (0x12…34)|  150 tx| 16 ws| 0 blobs| base fee 1.02 gwei| gas used  15,000,000 ( 50.0%)| exec time 0.005s| mgas/s  1.00| peers:  5").as_deref(),
            Some("besu_block_import exec_ms=5 1700000000123\n")
        );
        assert_eq!(
            line("Imported #1 / 150 tx / 16 ws / 0 blobs / base fee 1.02 gwei / 15,000,000 (50.0%) gas / (0x12…34) in 2.500s. Peers: 5").as_deref(),
            Some("besu_block_import exec_ms=2500 1700000000123\n")
        );
        // Other lines are filtered out.
        assert_eq!(line("Besu is starting"), None);
    }

    #[test]
    fn only_loggers_covering_the_class_reach_an_appender() {
        let other = CONFIG.replace(
            "name=\"org.hyperledger.besu.ethereum.api.jsonrpc.internal.methods.engine.AbstractEngineNewPayload\"",
            "name=\"org.hyperledger.besu.ethereum.p2p\"",
        );
        assert!(http_sinks(&other, CLASS).is_empty());
        let package = CONFIG.replace(".AbstractEngineNewPayload\"", "\"");
        assert_eq!(http_sinks(&package, CLASS).len(), 1);
    }
}
