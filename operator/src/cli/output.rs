//! `-o`: how a command prints, the names kubectl uses.

use clap::ValueEnum;

/// An output format (`-o`, or `--format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Aligned columns.
    Table,
    /// The table with more columns (why each trial ended, where it ran).
    Wide,
    /// Comma-separated, every column, a header line first.
    Csv,
    /// JSON, for scripts.
    Json,
    /// YAML.
    Yaml,
}

/// Prints a value as JSON or YAML.
pub fn print_data(format: Output, value: &serde_json::Value) -> anyhow::Result<()> {
    match format {
        Output::Yaml => print!("{}", serde_saphyr::to_string(value)?),
        _ => println!("{}", serde_json::to_string_pretty(value)?),
    }
    Ok(())
}
