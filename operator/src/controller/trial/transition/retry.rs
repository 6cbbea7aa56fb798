//! A lost or unschedulable attempt: a new attempt elsewhere, or the trial's end.

use super::*;

/// The pod is gone or its node is: retry on another node, or end NodeLost.
pub(super) fn lost(
    step: &mut Step,
    s: &Settings,
    node: Option<String>,
    reason: String,
    now: Timestamp,
) {
    let node = node.or(step.status.node_name.clone());
    retry_or_fail(
        step,
        s,
        TrialOutcome::NodeLost,
        format!(
            "lost the validator on node {}: {reason}",
            node.clone().unwrap_or_else(|| "?".into())
        ),
        node,
        now,
    )
}

/// Starts the next attempt if retries are left; otherwise the trial fails with `outcome`.
pub(super) fn retry_or_fail(
    step: &mut Step,
    s: &Settings,
    outcome: TrialOutcome,
    message: String,
    avoid: Option<String>,
    now: Timestamp,
) {
    step.acts.push(Act::DeletePods);
    step.requeue = Some(Duration::from_secs(1));
    let st = &mut step.status;
    if st.attempts <= s.retries {
        st.previous_attempts.push(AttemptRecord {
            attempt: st.attempts,
            outcome,
            started_at: st.started_at.clone(),
            node: avoid.clone().or(st.node_name.clone()),
            message: message.clone(),
            ended_at: Time(now),
        });
        if let Some(node) = avoid
            && !st.lost_nodes.contains(&node)
        {
            st.lost_nodes.push(node);
        }
        st.attempts += 1;
        st.phase = TrialPhase::Pending;
        st.node_name = None;
        st.scheduling_since = None;
        st.started_at = None;
        st.caught_up_at = None;
        st.answering_at = None;
        st.first_execution_at = None;
        st.window_start = None;
        st.window_end = None;
        st.outcome = None;
        st.lag = None;
        st.message = Some(format!(
            "{message}; retrying (attempt {} of {})",
            st.attempts,
            s.retries + 1
        ));
        return;
    }
    finish(
        st,
        Some(outcome),
        format!("{message}; no retries left ({})", s.retries),
        now,
    );
}
