//! The Validator's admission rules that depend on what each client's long-running
//! validator can be (whether it votes and how, whether it runs as a failover pair member,
//! whether its restart window takes `restartWindow`'s options): built from each client's
//! [`ValidatorRoles`] (`ValidatorClient::validator_roles`), so a rule lists the clients by
//! what they are, never by hand. Each client's own Validator rules are its module's.

use kube::core::Rule;

/// What a client's long-running validator can be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValidatorRoles {
    /// The template key: `agave`.
    pub name: &'static str,
    /// Its name in the Validator's messages (`Frankendancer`: the Validators valtune runs
    /// of Firedancer).
    pub display: &'static str,
    pub votes: Votes,
    /// It runs as a failover pair member (`spareIdentity`, `standbyFor`).
    pub failover: bool,
    /// Its restart window takes `restartWindow`'s options (Agave's
    /// `wait-for-restart-window`: minIdleTime, skipNewSnapshotCheck, maxDelinquentStake).
    pub window_options: bool,
}

/// Whether and how a client's validator votes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Votes {
    /// It does not vote: role voting is refused by its own rule.
    No,
    /// With a vote account beside its identity (`voteAccount`).
    WithVoteAccount,
    /// With its identity alone; how, for messages.
    WithIdentity(&'static str),
}

/// The rules, in a fixed order.
pub fn rules(clients: &[ValidatorRoles]) -> Vec<Rule> {
    let names = |keep: &dyn Fn(&ValidatorRoles) -> bool| -> Vec<&ValidatorRoles> {
        clients.iter().filter(|c| keep(c)).collect()
    };
    let has = |cs: &[&ValidatorRoles], join: &str| {
        cs.iter()
            .map(|c| format!("has(self.template.{})", c.name))
            .collect::<Vec<_>>()
            .join(join)
    };
    let failover = names(&|c| c.failover);
    let failover_has = has(&failover, " || ");
    let failover_names = or_list(failover.iter().map(|c| c.display));
    let failover_specs = or_list(failover.iter().map(|c| format!("template.{}", c.name)));
    let by_identity = names(&|c| matches!(c.votes, Votes::WithIdentity(_)));
    let by_account = names(&|c| c.votes == Votes::WithVoteAccount);
    let how: Vec<&str> = by_identity
        .iter()
        .filter_map(|c| match c.votes {
            Votes::WithIdentity(how) => Some(how),
            _ => None,
        })
        .collect();
    let not_by_identity = by_identity
        .iter()
        .map(|c| format!(" && !has(self.template.{})", c.name))
        .collect::<String>();
    let window = names(&|c| c.window_options);
    vec![
        Rule::new(format!("!has(self.spareIdentity) || (self.role == 'voting' && ({failover_has}))"))
            .message(format!("spareIdentity is the unstaked keypair a voting {failover_names} validator switches to when it hands its identity to a standby (failover): set role: voting with {failover_specs}, or remove spareIdentity").as_str())
            .field_path(".spareIdentity"),
        Rule::new(format!("!has(self.standbyFor) || (self.role == 'standby' && ({failover_has}) && has(self.voteAccount))"))
            .message(format!("standbyFor is the staked identity {} {failover_names} standby takes over at a failover (its authorized voter), beside the vote account: set role: standby with {failover_specs} and voteAccount, or remove standbyFor", article(&failover_names)).as_str())
            .field_path(".standbyFor"),
        Rule::new(format!(
            "self.role != 'voting' || {}(has(self.identity) && has(self.voteAccount))",
            by_identity
                .iter()
                .map(|c| format!("has(self.template.{}) || ", c.name))
                .collect::<String>()
        ))
        .message("a voting validator needs its identity and its vote account: set identity.secretName and voteAccount.secretName")
        .field_path(".voteAccount"),
        Rule::new(format!("(self.role == 'voting'{not_by_identity}) || has(self.standbyFor) || !has(self.voteAccount)"))
            .message(format!(
                "only a voting {} validator, or a standby with standbyFor, uses a vote account{}: remove voteAccount, or set role: voting",
                or_list(by_account.iter().map(|c| c.display)),
                if how.is_empty() { String::new() } else { format!(" ({})", how.join("; ")) }
            ).as_str())
            .field_path(".voteAccount"),
        Rule::new(format!("!has(self.restartWindow) || {}(!has(self.restartWindow.minIdleTime) && !has(self.restartWindow.skipNewSnapshotCheck) && !has(self.restartWindow.maxDelinquentStake))", window.iter().map(|c| format!("has(self.template.{}) || ", c.name)).collect::<String>()))
            .message(format!("minIdleTime, skipNewSnapshotCheck and maxDelinquentStake are the options of Agave's wait-for-restart-window ({}): remove them for this client", and_list(window.iter().map(|c| c.display))).as_str())
            .field_path(".restartWindow"),
    ]
}

/// "A", "A or B", "A, B or C".
pub fn or_list<S: AsRef<str>>(words: impl Iterator<Item = S>) -> String {
    list(words, "or")
}

fn and_list<S: AsRef<str>>(words: impl Iterator<Item = S>) -> String {
    list(words, "and")
}

fn list<S: AsRef<str>>(words: impl Iterator<Item = S>, last: &str) -> String {
    let words: Vec<String> = words.map(|w| w.as_ref().to_string()).collect();
    match words.split_last() {
        None => String::new(),
        Some((only, [])) => only.clone(),
        Some((tail, head)) => format!("{} {last} {tail}", head.join(", ")),
    }
}

/// "an" before a vowel, else "a".
fn article(next: &str) -> &'static str {
    if next.starts_with(['A', 'E', 'I', 'O', 'U', 'a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_read_as_english() {
        assert_eq!(or_list(["A"].iter()), "A");
        assert_eq!(or_list(["A", "B"].iter()), "A or B");
        assert_eq!(and_list(["A", "B", "C"].iter()), "A, B and C");
        assert_eq!(article("Agave"), "an");
        assert_eq!(article("Frankendancer"), "a");
    }

    /// A client that fails over joins the failover rules' lists; one that votes with its
    /// identity is spared the vote account.
    #[test]
    fn the_rules_list_the_clients_by_what_they_are() {
        let c = |name, votes, failover| ValidatorRoles {
            name,
            display: name,
            votes,
            failover,
            window_options: failover,
        };
        let rules = rules(&[
            c("a", Votes::WithVoteAccount, true),
            c("b", Votes::WithVoteAccount, true),
            c("p", Votes::WithIdentity("p signs alone"), false),
            c("n", Votes::No, false),
        ]);
        assert!(
            rules[0]
                .rule
                .ends_with("(has(self.template.a) || has(self.template.b)))")
        );
        assert!(
            rules[2]
                .rule
                .contains("|| has(self.template.p) || (has(self.identity)")
        );
        assert!(
            rules[3]
                .rule
                .starts_with("(self.role == 'voting' && !has(self.template.p))")
        );
        let message = |r: &Rule| serde_json::to_value(r).unwrap()["message"].clone();
        assert_eq!(
            message(&rules[3]),
            "only a voting a or b validator, or a standby with standbyFor, uses a vote account (p signs alone): remove voteAccount, or set role: voting"
        );
    }
}
