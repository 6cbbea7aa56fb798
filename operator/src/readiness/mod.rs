//! What the cluster offers a trial, read the same way by `valtune check` (check/) and by
//! the operator (controller/): which nodes a trial's pod may land on and fit
//! ([`nodes`]), and whether a Prometheus answers and receives remote writes
//! ([`prometheus`]). It imports neither, so both can import it without a cycle.

pub mod nodes;
pub mod prometheus;
