//! A Frankendancer Validator's own admission rules (beside the template's, which
//! experiments share): the failover pair's privilege to enter the validator's mount
//! namespace, its identity agent port clear of the ports fdctl binds, Frankendancer only
//! (fdctl), no bench workload, and no config key valtune renders.

use kube::core::Rule;

use crate::api::validator::{DEFAULT_IDENTITY_AGENT_PORT, ENTER};

/// fdctl's `dynamic_port_range` when the config sets none (src/app/fdctl/config/
/// default.toml L62 @v0.1106.40201).
pub const FIREDANCER_DYNAMIC_PORT_RANGE: &str = "8900-9000";

/// Why a Frankendancer failover pair without [`ENTER`] is refused. `fdctl set-identity`
/// "finds the running validator from the shared memory described by the configuration
/// file" (firedancer-io/firedancer `src/app/fdctl/commands/set_identityh.c`, the action's
/// detail, and `set_identity`, which joins every keyswitch workspace read-write, at
/// v0.1106.40201): workspaces on the hugetlbfs mounts `fdctl configure init hugetlbfs`
/// makes in the validator container's own mount namespace (a hugetlbfs mount is an
/// instance of its own, so another container's mount of the same pages does not hold
/// those files). The pod's identity agent runs it there only by entering that namespace.
pub const FRANKENDANCER_PAIR_NEEDS_PRIVILEGE: &str = "a Frankendancer failover pair member (spareIdentity or standbyFor) needs identityAgentEntersValidatorMountNamespace: true: fdctl set-identity (firedancer-io/firedancer src/app/fdctl/commands/set_identityh.c @v0.1106.40201) finds the running validator by joining its shared-memory workspaces on the hugetlbfs mounts fdctl makes inside the validator container, so the identity agent must run it in that container's mount namespace (nsenter), which takes the pod's processes shared and the agent container's CAP_SYS_ADMIN, CAP_SYS_CHROOT and CAP_SYS_PTRACE (and DAC_OVERRIDE, SETUID, SETGID for fdctl); set identityAgentEntersValidatorMountNamespace: true to grant them (docs/validators.md, failover), or remove spareIdentity and standbyFor";

/// The rules, on the Validator's spec.
pub fn rules() -> Vec<Rule> {
    vec![
        // fdctl set-identity finds the running validator through its workspaces on the
        // hugetlbfs mounts fdctl made in the validator container's own mount namespace
        // (firedancer-io/firedancer src/app/fdctl/commands/set_identityh.c `set_identity`
        // @v0.1106.40201): the identity agent reaches them only by entering that namespace,
        // a privilege the Validator names.
        Rule::new(format!("!has(self.template.firedancer) || !(has(self.spareIdentity) || has(self.standbyFor)) || (has(self.{ENTER}) && self.{ENTER})"))
            .message(FRANKENDANCER_PAIR_NEEDS_PRIVILEGE)
            .field_path(format!(".{ENTER}").as_str()),
        Rule::new(format!("!has(self.{ENTER}) || !self.{ENTER} || (has(self.template.firedancer) && (has(self.spareIdentity) || has(self.standbyFor)))"))
            .message(format!("{ENTER} lets a Frankendancer failover pair member's identity agent run fdctl set-identity in the validator container's mount namespace; this Validator is not one (template.firedancer with spareIdentity or standbyFor): remove it").as_str())
            .field_path(format!(".{ENTER}").as_str()),
        // Frankendancer's: its Agave child's RPC and websocket, the metric tile and the
        // exporters, as valtune renders them (its other ports are the config's; the default
        // is outside fdctl's defaults, default.toml @v0.1106.40201).
        Rule::new(format!("!has(self.template.firedancer) || !(has(self.spareIdentity) || has(self.standbyFor)) || !((has(self.identityAgentPort) ? self.identityAgentPort : {DEFAULT_IDENTITY_AGENT_PORT}) in [self.template.firedancer.rpcPort, self.template.firedancer.rpcPort + 1, self.template.firedancer.metricsPort, self.template.firedancer.exporters.rpcPort, self.template.firedancer.exporters.datapointsPort])"))
            .message(format!("identityAgentPort (default {DEFAULT_IDENTITY_AGENT_PORT}) collides with a port Frankendancer binds on the node (template.firedancer.rpcPort, its websocket rpcPort + 1, metricsPort) or an exporter's (template.firedancer.exporters): set identityAgentPort to a free port outside them and outside the config's dynamic_port_range").as_str())
            .field_path(".identityAgentPort"),
        // And the range fdctl binds its other ports in: the config's (`dynamic_port_range =
        // "A-B"`, src/app/shared/fd_config.c L161-180 @v0.1106.40201), else fdctl's default.
        Rule::new(format!("!has(self.template.firedancer) || !(has(self.spareIdentity) || has(self.standbyFor)) || [((has(self.template.firedancer.config) && 'dynamic_port_range' in self.template.firedancer.config) ? self.template.firedancer.config['dynamic_port_range'].replace('\"', '').replace(\"'\", '').trim() : '{FIREDANCER_DYNAMIC_PORT_RANGE}')].all(r, (has(self.identityAgentPort) ? self.identityAgentPort : {DEFAULT_IDENTITY_AGENT_PORT}) < int(r.split('-')[0]) || (has(self.identityAgentPort) ? self.identityAgentPort : {DEFAULT_IDENTITY_AGENT_PORT}) > int(r.split('-')[1]))"))
            .message(format!("identityAgentPort (default {DEFAULT_IDENTITY_AGENT_PORT}) lies inside Frankendancer's dynamic_port_range (template.firedancer.config's, default {FIREDANCER_DYNAMIC_PORT_RANGE}), where fdctl binds its ports on the node: set identityAgentPort to a free port outside that range").as_str())
            .field_path(".identityAgentPort"),
        // Full Firedancer's rpc tile listens on 127.0.0.1 only (`[tiles.rpc] rpc_listen_address`),
        // so the operator cannot read its health; its vote and tower tiles are not wired.
        Rule::new("!has(self.template.firedancer) || self.template.firedancer.flavor != 'firedancer'")
            .message("valtune runs Frankendancer Validators (fdctl, v0.x) only: full Firedancer's RPC and voting are not wired (docs/validators.md); use flavor: frankendancer with a v0.x image, or run full Firedancer as an experiment")
            .field_path(".template.firedancer.flavor"),
        Rule::new("!has(self.template.firedancer) || self.template.firedancer.workload != 'bench'")
            .message("a Validator follows its cluster: the bench workload is a private cluster of one for experiments; remove template.firedancer.workload")
            .field_path(".template.firedancer.workload"),
        Rule::new("!has(self.template.firedancer) || !has(self.template.firedancer.config) || !self.template.firedancer.config.exists(k, k in ['rpc.bind_address', 'consensus.vote_account_path', 'consensus.authorized_voter_paths'])")
            .message("a Frankendancer Validator's rpc.bind_address (0.0.0.0, so the operator reads getHealth), consensus.vote_account_path (from voteAccount) and authorized_voter_paths (its identity votes) are valtune's: remove them from template.firedancer.config")
            .field_path(".template.firedancer.config"),
    ]
}
