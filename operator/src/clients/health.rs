//! How a client tells a long-running validator's state at its own interfaces: its health
//! endpoint (the answer is read, not only the HTTP code), where it shows its chain
//! position (its restart window is window.rs).

/// What a client's health endpoint said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    /// In sync with the chain: ready.
    Healthy,
    /// Running, but not (yet) in sync: catching up.
    Behind,
    /// It answered something else, or it cannot tell yet.
    Unknown,
}

/// An HTTP GET the operator makes to the pod, and how its answer is judged.
#[derive(Debug, Clone)]
pub struct HealthProbe {
    pub port: i32,
    /// Path and query.
    pub path: String,
    /// The Host header to send, for an endpoint that checks it against an allowlist.
    pub host: Option<String>,
    /// A JSON-RPC 2.0 method to POST (no params) instead of a GET (Agave's `getHealth`).
    pub rpc_method: Option<&'static str>,
    /// The answer (HTTP status, body) judged as the client means it.
    pub judge: fn(u16, &str) -> Health,
    /// (head, lag) read from the answer's body, for a client whose health answer shows
    /// them (nodeos' get_info).
    pub position: Option<ReadPosition>,
}

/// Reads (head, lag) from a health answer's body.
pub type ReadPosition = fn(&str) -> Option<(i64, i64)>;

/// A Prometheus page of the client's and the two gauges that place it on the chain.
#[derive(Debug, Clone, PartialEq)]
pub struct PositionProbe {
    pub port: i32,
    pub path: String,
    /// The validator's head (block number, slot).
    pub head: &'static str,
    /// The chain's head as the validator knows it.
    pub best: &'static str,
}

impl PositionProbe {
    /// (head, lag) from an exposition page, when both gauges are on it.
    pub fn read(&self, page: &str) -> Option<(i64, i64)> {
        let value = |name: &str| {
            page.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
                let (series, v) = l.rsplit_once(' ')?;
                let bare = series.split('{').next()?;
                (bare == name).then(|| v.trim().parse::<f64>().ok())?
            })
        };
        let head = value(self.head)? as i64;
        let best = value(self.best)? as i64;
        Some((head, (best - head).max(0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_position_is_read_from_the_two_gauges() {
        let p = PositionProbe {
            port: 9545,
            path: "/metrics".into(),
            head: "ethereum_blockchain_height",
            best: "ethereum_best_known_block_number",
        };
        let page = "# TYPE ethereum_blockchain_height gauge\nethereum_blockchain_height 21000010\nethereum_best_known_block_number 21000014\n";
        assert_eq!(p.read(page), Some((21_000_010, 4)));
        let ahead = "ethereum_blockchain_height 12\nethereum_best_known_block_number 10\n";
        assert_eq!(p.read(ahead), Some((12, 0)));
        assert_eq!(p.read("ethereum_blockchain_height 12\n"), None);
    }
}
