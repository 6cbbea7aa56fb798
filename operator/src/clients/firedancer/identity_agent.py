"""The identity agent of a Frankendancer failover pair member (valtune, docs/validators.md).

It is identity_agent.py (the Agave pair's agent, beside this file in the same ConfigMap:
the same annotation, link and tower files) with each set-identity done as Frankendancer
takes it, by the validator image's own fdctl in the validator container's mount
namespace:

    nsenter --target PID --mount -- FDCTL set-identity --config CONFIG [--require-tower] KEYPAIR

FDCTL is the running validator's own binary (the path /proc/PID/exe names).

fdctl set-identity "finds the running validator from the shared memory described by the
configuration file, so you must point --config at the SAME config file the validator was
started with, and run it from a binary built from the SAME git commit" (firedancer-io/
firedancer src/app/fdctl/commands/set_identityh.c, v0.1106.40201): it joins the
validator's keyswitch workspaces, files on the hugetlbfs mounts fdctl made inside the
validator container, which only that container's mount namespace holds. PID is fdctl
run's main process, found in the pod's shared process namespace (the lowest pid whose
comm is fdctl: its tiles rename themselves). Entering the namespace takes CAP_SYS_PTRACE
(to open /proc/PID/ns/mnt of a process with more capabilities than the agent) and
CAP_SYS_ADMIN (setns into a mount namespace); nsenter is busybox's in the python:alpine
image. The keypair paths are the validator container's (its key copies): the agent mounts
no key. --require-tower makes the Agave child load the identity's tower from its ledger
(tower-1_9-<pubkey>.bin), which the agent copied there first.
"""

import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import identity_agent as agent  # noqa: E402

PROCFS = os.environ.get("PROCFS", "/proc")


def validator_pid(procfs):
    """fdctl run's main process: the lowest pid whose comm is fdctl."""
    pids = []
    for name in os.listdir(procfs):
        if not name.isdigit():
            continue
        try:
            with open(os.path.join(procfs, name, "comm")) as f:
                if f.read().strip() == "fdctl":
                    pids.append(int(name))
        except OSError:
            pass
    if not pids:
        raise RuntimeError(
            "no fdctl process in %s: the pod must share its process namespace "
            "(shareProcessNamespace) and the validator must be running" % procfs
        )
    return min(pids)


def fdctl_of(procfs, pid):
    """The running validator's own binary, as its container names it (/proc/PID/exe, read
    with CAP_SYS_PTRACE): set-identity must come from the SAME build. fdctl on PATH where
    /proc does not say."""
    try:
        return os.readlink(os.path.join(procfs, str(pid), "exe"))
    except OSError:
        return "fdctl"


def fdctl_set_identity(config):
    """identity_agent.py's set-identity call (ledger, "setIdentity", [keypair, require_tower]),
    made with fdctl in the validator container."""

    def call(_ledger, _method, params):
        keypair, require_tower = params
        pid = validator_pid(PROCFS)
        cmd = ["nsenter", "--target", str(pid), "--mount", "--"]
        cmd += [fdctl_of(PROCFS, pid), "set-identity", "--config", config]
        if require_tower:
            cmd.append("--require-tower")
        cmd.append(keypair)
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        said = (r.stdout + r.stderr).strip()
        if r.returncode != 0:
            raise RuntimeError("%s: exit %d: %s" % (" ".join(cmd), r.returncode, said[-2000:]))
        agent.log(said.splitlines()[-1] if said else "fdctl set-identity: done")

    return call


def main():
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--config", required=True, help="the validator's fdctl config, as it sees it")
    a, rest = p.parse_known_args()
    agent.admin_rpc = fdctl_set_identity(a.config)
    sys.argv = [sys.argv[0]] + rest
    return agent.main()


if __name__ == "__main__":
    sys.exit(main())
