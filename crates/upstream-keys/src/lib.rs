//! The config keys and command-line options each validator client knows, by version, as
//! extracted from its upstream sources at their tags. Pure data, with each table's
//! [`Source`]: the operator judges a template's keys by these tables before a pod is
//! created, and the lab's client models refuse unknown keys by the same tables, so the
//! lab does not merely agree with the operator: the contract tests (tests/contract.rs)
//! check each table against fixtures extracted from upstream by the commands their
//! headers record.
//!
//! This crate depends on nothing and nothing of valtune's: it holds only what upstream
//! says.

pub mod agave;
pub mod besu;
pub mod firedancer;
pub mod nodeos;

/// (major, minor, patch).
pub type V = (u32, u32, u32);

/// Where a table was extracted from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Source {
    /// The upstream repository (`owner/name` on GitHub).
    pub repository: &'static str,
    /// The files read.
    pub paths: &'static str,
    /// The tags read.
    pub tags: &'static str,
    /// How: the program or command that extracted the table.
    pub extracted_by: &'static str,
}

/// Whether `version` is in `[since, before)`, an absent bound being open.
pub fn in_range((since, before): (Option<V>, Option<V>), version: V) -> bool {
    since.is_none_or(|s| version >= s) && before.is_none_or(|b| version < b)
}
