//! The exporter images valtune's pods use unless a template names others: pinned, and in
//! one place, so a bump reaches every client (docs/clients/*.md cite their versions).

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
