//! A Besu Validator's own admission rules: no node key given twice, and no voting (an
//! execution client).

use kube::core::Rule;

/// The rules, on the Validator's spec.
pub fn rules() -> Vec<Rule> {
    vec![
        // Besu aborts on a single-valued option given twice ("Option '...' should be
        // specified only once": BesuCommand.java L1037-1051 @25.12.0).
        Rule::new("!has(self.template.besu) || !has(self.identity) || !has(self.template.extraArgs) || !self.template.extraArgs.exists(a, a == '--node-private-key-file' || a.startsWith('--node-private-key-file='))")
            .message("template.extraArgs sets --node-private-key-file, which valtune already renders from identity (the node key mounted from identity.secretName), and Besu stops at an option given twice: remove it from extraArgs")
            .field_path(".template.extraArgs"),
        Rule::new("!has(self.template.besu) || self.role != 'voting'")
            .message("Besu is an execution client: it does not vote, and valtune does not render a consensus validator client; use role: nonVoting")
            .field_path(".role"),
    ]
}
