//! What a check found: `valtune check`'s findings, and what a client says of the nodes an
//! experiment may use (`ValidatorClient::node_findings`). A leaf: it uses nothing of
//! valtune's, so both `check` and `clients` may use it.

/// A check's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    Pass,
    /// Works, but not as docs/prepare-cluster.md prepares it (or could not be read).
    Warn,
    Fail,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "PASS",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
        }
    }
}

/// One check's result.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// Short and stable (the operator's metric label): `prometheus`, `remote-write`, ...
    pub check: &'static str,
    pub status: Status,
    pub detail: String,
    /// What to run or change, for Warn and Fail.
    pub fix: Option<String>,
}

impl Finding {
    pub fn pass(check: &'static str, detail: impl Into<String>) -> Finding {
        Finding {
            check,
            status: Status::Pass,
            detail: detail.into(),
            fix: None,
        }
    }

    pub fn fail(check: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Finding {
        Finding {
            check,
            status: Status::Fail,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }

    pub fn warn(check: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Finding {
        Finding {
            status: Status::Warn,
            ..Finding::fail(check, detail, fix)
        }
    }
}
