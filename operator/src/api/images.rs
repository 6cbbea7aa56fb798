//! The exporters valtune's pods use unless a template names others: pinned images and
//! their ports, in one place, so a bump reaches every client (docs/clients/*.md cite their
//! versions). Serde defaults of the templates' `exporters` fields.

/// asymmetric-research/solana-exporter (slot lag from getHealth).
pub fn solana_exporter() -> String {
    "ghcr.io/asymmetric-research/solana-exporter:v3.0.2".into()
}

/// ncabatoff/process-exporter (RSS, VSZ and page faults from /proc).
pub fn process_exporter() -> String {
    "ncabatoff/process-exporter:0.8.7".into()
}

/// VictoriaMetrics vmagent (InfluxDB points in, every point remote-written out).
pub fn vmagent() -> String {
    "victoriametrics/vmagent:v1.110.0".into()
}

/// The port valtune gives solana-exporter (its `-listen-address`).
pub fn solana_exporter_port() -> i32 {
    9634
}

/// process-exporter's default `--web.listen-address` port.
pub fn process_exporter_port() -> i32 {
    9256
}

/// vmagent's default `-httpListenAddr` port, where it also receives InfluxDB points.
pub fn vmagent_port() -> i32 {
    8429
}
