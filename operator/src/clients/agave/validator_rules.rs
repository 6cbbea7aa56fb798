//! An Agave Validator's own admission rules (beside the template's, which experiments
//! share): the failover pair's identity agent port clear of every port Agave and its
//! sidecars bind, no bench workload, and no flag valtune renders from the Validator's keys
//! and role in extraArgs.

use kube::core::Rule;

use crate::api::validator::DEFAULT_IDENTITY_AGENT_PORT;

/// The rules, on the Validator's spec.
pub fn rules() -> Vec<Rule> {
    vec![
        // With host networking the agent's port is on the node beside every port Agave and
        // its sidecars bind: valtune renders all of them from the template.
        Rule::new(format!("!has(self.template.agave) || !(has(self.spareIdentity) || has(self.standbyFor)) || (((has(self.identityAgentPort) ? self.identityAgentPort : {DEFAULT_IDENTITY_AGENT_PORT}) < int(self.template.agave.dynamicPortRange.split('-')[0]) || (has(self.identityAgentPort) ? self.identityAgentPort : {DEFAULT_IDENTITY_AGENT_PORT}) > int(self.template.agave.dynamicPortRange.split('-')[1])) && !((has(self.identityAgentPort) ? self.identityAgentPort : {DEFAULT_IDENTITY_AGENT_PORT}) in [self.template.agave.rpcPort, self.template.agave.rpcPort + 1, self.template.agave.exporters.rpcPort, self.template.agave.exporters.processPort, self.template.agave.exporters.datapointsPort]))"))
            .message(format!("identityAgentPort (default {DEFAULT_IDENTITY_AGENT_PORT}) collides with a port Agave binds on the node (template.agave.dynamicPortRange, rpcPort, its websocket rpcPort + 1) or an exporter's (template.agave.exporters): set identityAgentPort to a free port outside them").as_str())
            .field_path(".identityAgentPort"),
        Rule::new("!has(self.template.agave) || !has(self.template.agave.workload) || self.template.agave.workload != 'bench'")
            .message("a Validator follows its cluster: the bench workload is a private cluster of one for experiments; remove template.agave.workload")
            .field_path(".template.agave.workload"),
        // valtune renders these from identity, voteAccount and role (and binds the RPC for
        // the operator); agave-validator exits on a flag given twice (clap 2.33: "was
        // provided more than once"), and a --no-voting kept beside role: voting would run a
        // staked validator that never votes.
        Rule::new("!has(self.template.agave) || !has(self.template.extraArgs) || !self.template.extraArgs.exists(a, a == '-i' || a in ['--identity', '--vote-account', '--no-voting', '--rpc-bind-address', '--authorized-voter'] || a.startsWith('--identity=') || a.startsWith('--vote-account=') || a.startsWith('--rpc-bind-address=') || a.startsWith('--authorized-voter='))")
            .message("template.extraArgs sets --identity, --vote-account, --no-voting, --rpc-bind-address or --authorized-voter, which valtune renders for an Agave Validator from identity, voteAccount, spareIdentity, standbyFor and role: remove it from extraArgs (agave-validator exits on a flag given twice, and a --no-voting beside role: voting would keep the validator from voting)")
            .field_path(".template.extraArgs"),
    ]
}
