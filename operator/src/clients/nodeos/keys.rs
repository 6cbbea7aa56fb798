//! nodeos' options as a release line judges them: upstream-keys' lists of leap 5.0 and
//! spring 1.2 (crates/upstream-keys/src/nodeos.rs). A config.ini key is an option name,
//! and nodeos exits 254 on an unknown one.

use upstream_keys::nodeos;

use crate::api::version::Version;
use crate::clients::config_keys::{Verdict, similar};

/// A config.ini key: an option of the leap or spring release line the lists were read at.
pub fn judge(v: Version, key: &str) -> Verdict {
    let line = |(a, b, _): (u32, u32, u32)| (v.major, v.minor) == (a, b);
    let (own, other, other_name) = if line(nodeos::LEAP_READ_AT) {
        (nodeos::LEAP_ONLY, nodeos::SPRING_ONLY, "spring 1.x")
    } else if line(nodeos::SPRING_READ_AT) {
        (nodeos::SPRING_ONLY, nodeos::LEAP_ONLY, "leap 5.x")
    } else {
        return Verdict::Unjudged;
    };
    if nodeos::COMMON.contains(&key) || own.contains(&key) {
        return Verdict::Known;
    }
    let fix = if other.contains(&key) {
        format!("it is an option of {other_name}: remove it, or use an image of that line")
    } else {
        match similar(key, nodeos::COMMON.iter().chain(own).copied()) {
            Some(s) => format!("did you mean `{s}`? Correct the key or remove it"),
            None => "a config.ini key is a nodeos option name (nodeos --help lists them): correct the key or remove it".into(),
        }
    };
    Verdict::Lacks {
        why: String::new(),
        fix,
    }
}
