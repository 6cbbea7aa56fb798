//! The one shape of a pass's decision, for every kind: the status to write, what to do
//! against the API server (each kind its own `Act` enum, done in order), and when to look
//! again. A pure `decide` returns it from what the pass observed; `act` does it.

use std::time::Duration;

use kube::runtime::controller::Action;

/// What a pass decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Step<S, A> {
    pub status: S,
    pub acts: Vec<A>,
    /// When to look again; None waits for a change of the object or what it watches.
    pub requeue: Option<Duration>,
}

impl<S, A> Step<S, A> {
    /// A step that keeps `status`, does nothing and waits for a change.
    pub fn keep(status: S) -> Self {
        Step {
            status,
            acts: Vec::new(),
            requeue: None,
        }
    }

    /// The controller's next look.
    pub fn action(&self) -> Action {
        self.requeue
            .map(Action::requeue)
            .unwrap_or_else(Action::await_change)
    }
}

/// An event on the object a pass reconciles.
#[derive(Debug, Clone, PartialEq)]
pub struct Note {
    pub warning: bool,
    pub reason: String,
    pub text: String,
}

impl Note {
    pub fn normal(reason: impl Into<String>, text: impl Into<String>) -> Self {
        Note {
            warning: false,
            reason: reason.into(),
            text: text.into(),
        }
    }

    pub fn warning(reason: impl Into<String>, text: impl Into<String>) -> Self {
        Note {
            warning: true,
            reason: reason.into(),
            text: text.into(),
        }
    }
}
