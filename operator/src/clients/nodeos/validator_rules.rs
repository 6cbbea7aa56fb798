//! A nodeos Validator's own admission rules: a producer's name and key come from the
//! Validator (producerName, identity), never from the template, and there is no standby.

use kube::core::Rule;

/// The rules, on the Validator's spec.
pub fn rules() -> Vec<Rule> {
    vec![
        Rule::new("!has(self.producerName) || (has(self.template.nodeos) && self.role == 'voting')")
            .message("producerName is a nodeos producer's account (nodeos --producer-name): set role: voting with template.nodeos, or remove producerName")
            .field_path(".producerName"),
        Rule::new("!has(self.template.nodeos) || self.role != 'voting' || (has(self.producerName) && has(self.identity))")
            .message("a producing nodeos needs its producer account and its key: set producerName and identity.secretName (a Secret whose key holds nodeos' signature provider, <public-key>=KEY:<private-key>)")
            .field_path(".producerName"),
        Rule::new("!has(self.template.nodeos) || ((!has(self.template.nodeos.config) || !self.template.nodeos.config.exists(k, k in ['producer-name', 'signature-provider'])) && (!has(self.template.extraArgs) || !self.template.extraArgs.exists(a, a.startsWith('--producer-name') || a.startsWith('--signature-provider') || a == '-p')))")
            .message("a nodeos Validator's producer-name and signature-provider come from producerName and identity (the key stays in its Secret, out of a ConfigMap): remove them from template.nodeos.config and template.extraArgs")
            .field_path(".template.nodeos.config"),
        Rule::new("!has(self.template.nodeos) || self.role != 'standby'")
            .message("a nodeos Validator is a non-producing node (role: nonVoting) or a producer (role: voting); valtune has no nodeos standby to swap a producer's key to: use one of those")
            .field_path(".role"),
    ]
}
