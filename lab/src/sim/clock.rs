//! Lab time: simulated time runs `scale` times faster than the wall clock (docs/lab.md).

use jiff::{SignedDuration, Timestamp};

#[derive(Debug, Clone, PartialEq)]
pub struct Clock {
    /// Simulated seconds per real second.
    pub scale: f64,
    /// The scrape interval, in real seconds.
    pub step: f64,
}

impl Clock {
    /// Simulated seconds a model holds one TPS value for: three scrape intervals, so
    /// every stretch is visible to Prometheus.
    pub fn stretch_s(&self) -> f64 {
        self.scrapes_s(3.0)
    }

    /// Simulated seconds of `n` of the lab's scrape intervals.
    pub fn scrapes_s(&self, n: f64) -> f64 {
        self.step * self.scale * n
    }

    /// Simulated seconds between a process's datapoints: a tenth of a real second, so a
    /// scrape interval holds several and per-step sums never alias (docs/lab.md).
    pub fn datapoint_s(&self) -> f64 {
        self.scale / 10.0
    }

    /// Simulated seconds since `start`.
    pub fn since(&self, start: Timestamp, now: Timestamp) -> f64 {
        now.duration_since(start).as_secs_f64().max(0.0) * self.scale
    }

    /// The wall-clock time of simulated second `t` after `start`.
    pub fn at(&self, start: Timestamp, t: f64) -> Timestamp {
        start + SignedDuration::from_secs_f64(t / self.scale)
    }
}
