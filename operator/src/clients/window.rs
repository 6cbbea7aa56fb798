//! A client's restart window: when a change of a long-running validator's pod may be
//! applied by deleting the running one. One trait, [`RestartWindow`]: a read of the
//! client's own endpoints (I/O, each pass) and a pure judge of what was read. Each client
//! returns its window from `ValidatorClient::restart_window`; the Validator reconciler
//! reads and judges through the trait and names no client.

use std::any::Any;
use std::fmt::Debug;
use std::sync::Arc;

use futures::future::BoxFuture;
use jiff::Timestamp;
use serde_json::Value;

use super::health::Health;
use crate::api::validator::ValidatorSpec;

/// Whether a change may be applied now, and why.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// "Ready to restart".
    Open(String),
    /// Not now, and why.
    Wait(String),
}

/// What a window keeps between passes (in `status.pendingChange`, for the same change).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Kept {
    /// The snapshot slot seen when the window first opened (Agave's `restart_snapshot`).
    pub snapshot_slot: Option<i64>,
    /// An incremental snapshot was seen while waiting.
    pub incremental_seen: bool,
}

/// The pod's endpoints, as a window reads them: (HTTP status, body), or None when
/// nothing answered. The reconciler gives its HTTP client; a test gives fixtures.
pub trait Endpoints: Send + Sync {
    fn get<'a>(&'a self, url: &'a str) -> BoxFuture<'a, Option<(u16, String)>>;
    /// A JSON-RPC 2.0 call by POST (`params` null: none).
    fn rpc<'a>(
        &'a self,
        url: &'a str,
        method: &'a str,
        params: Value,
    ) -> BoxFuture<'a, Option<(u16, String)>>;
}

/// Where and what a window reads on one pass.
pub struct Reach<'a> {
    pub endpoints: &'a dyn Endpoints,
    /// The running pod's IP.
    pub ip: &'a str,
    pub spec: &'a ValidatorSpec,
    /// The client's health answer on this pass (its meaning and body), if one came.
    pub health: Option<(Health, &'a str)>,
    /// A change is pending (the running pod's hash is not the rendered one).
    pub pending: bool,
}

/// What a window read on one pass.
#[derive(Debug, Clone, Default)]
pub struct Read {
    /// (head, lag), where the window's figures show them (Solana's slot and slots behind).
    pub position: Option<(i64, i64)>,
    /// The figures the judge needs, when a change is pending, or why they could not be
    /// read; None: nothing to read.
    pub reading: Option<Result<Reading, String>>,
}

/// A window's figures, opaque to the reconciler: only the window that read them looks
/// inside ([`Reading::get`]).
#[derive(Clone)]
pub struct Reading(Arc<dyn Figures>);

/// What a [`Reading`] may hold.
pub trait Figures: Any + Debug + Send + Sync {}
impl<T: Any + Debug + Send + Sync> Figures for T {}

impl Reading {
    pub fn new<T: Figures>(figures: T) -> Reading {
        Reading(Arc::new(figures))
    }

    /// The figures, if they are a `T` (the window's own type).
    pub fn get<T: Figures>(&self) -> Option<&T> {
        let any: &dyn Any = self.0.as_ref();
        any.downcast_ref()
    }
}

impl Debug for Reading {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// What a judge is given: pure data of one pass.
#[derive(Debug, Clone, Copy)]
pub struct Judging<'a> {
    pub spec: &'a ValidatorSpec,
    /// What the read returned on this pass ([`Read::reading`]).
    pub reading: Option<&'a Result<Reading, String>>,
    /// The client answered its health endpoint on this pass.
    pub answered: bool,
    /// Why a running pod's endpoint did not answer, when something may listen there (a
    /// timeout: a busy validator is not a stopped one).
    pub unanswered: Option<&'a str>,
    /// What the previous pass kept for this change.
    pub kept: Kept,
    pub now: Timestamp,
}

/// A client's restart window.
pub trait RestartWindow: Debug + Send + Sync {
    /// Reads what the judge needs from the running pod's own endpoints. The default reads
    /// nothing.
    fn read<'a>(&'a self, _at: Reach<'a>) -> BoxFuture<'a, Read> {
        Box::pin(async { Read::default() })
    }
    /// Whether the change may be applied now, and what to keep for the next pass (None:
    /// nothing). Pure.
    fn judge(&self, j: &Judging) -> (Verdict, Option<Kept>);
}

/// At once: the client has no leader slots or rounds to miss.
#[derive(Debug, Clone, Copy)]
pub struct Immediate;

impl RestartWindow for Immediate {
    fn judge(&self, _j: &Judging) -> (Verdict, Option<Kept>) {
        (
            Verdict::Open("the client has no restart window: restarting now".into()),
            None,
        )
    }
}

/// The client has a window valtune does not compute: the change waits, and status says
/// why.
#[derive(Debug, Clone, Copy)]
pub struct NotComputed(pub &'static str);

impl RestartWindow for NotComputed {
    fn judge(&self, _j: &Judging) -> (Verdict, Option<Kept>) {
        (
            Verdict::Wait(format!(
                "the client's restart window: {}; the pod keeps running as it is",
                self.0
            )),
            None,
        )
    }
}

/// Fixture endpoints for a window's read tests: answers by URL (GET) or by method
/// (JSON-RPC), nothing elsewhere.
#[cfg(test)]
pub mod fixtures {
    use std::collections::BTreeMap;

    use futures::future::BoxFuture;
    use serde_json::Value;

    #[derive(Default)]
    pub struct Answers {
        pub get: BTreeMap<String, (u16, String)>,
        /// method -> (status, body); the params asked are recorded.
        pub rpc: BTreeMap<String, (u16, String)>,
        pub asked: std::sync::Mutex<Vec<(String, Value)>>,
    }

    impl super::Endpoints for Answers {
        fn get<'a>(&'a self, url: &'a str) -> BoxFuture<'a, Option<(u16, String)>> {
            Box::pin(async move { self.get.get(url).cloned() })
        }

        fn rpc<'a>(
            &'a self,
            _url: &'a str,
            method: &'a str,
            params: Value,
        ) -> BoxFuture<'a, Option<(u16, String)>> {
            self.asked
                .lock()
                .unwrap()
                .push((method.to_string(), params));
            Box::pin(async move { self.rpc.get(method).cloned() })
        }
    }
}
