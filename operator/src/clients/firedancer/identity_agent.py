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
validator container, which only that container's mount namespace holds. PID is fdctl's
Agave child, found in the pod's shared process namespace by its command line
(`fdctl run-agave --config-fd N`): it alone of fdctl's processes stays in the container's
mount namespace. fdctl run's main process and its pidns process (argv `fdctl run`) and
the tiles (`fdctl run1 TILE`) each sandbox themselves into an empty root of their own
mount namespace (src/app/shared/commands/run/run.c L286-475, L965-1037;
src/util/sandbox/fd_sandbox.c L344-378, L656-672), where nsenter finds no fdctl to run;
the Agave child is cloned with CLONE_NEWPID only and does not sandbox
(src/app/fdctl/commands/run_agave.c L228-258). Entering the namespace takes
CAP_SYS_PTRACE (to open /proc/PID/ns/mnt of a process of another user or with more
capabilities than the agent) and CAP_SYS_ADMIN (setns into a mount namespace); nsenter
is busybox's in the python:alpine image. The keypair paths are the validator container's (its key copies): the agent mounts
no key. --require-tower makes the Agave child load the identity's tower from its ledger
(tower-1_9-<pubkey>.bin), which the agent copied there first.

A set-identity is never killed: one stopped mid-switch leaves the validator's keyswitch
locked, and every later set-identity then fails with "Cannot set-identity because
Firedancer is already in the process of switching keys ... run the `set-identity` command
again with the `--force` argument" until someone forces it (set_identityh.c L150-170).
The agent logs a switch that runs long and waits for it. A switch that runs for minutes
is most likely one the Agave child refused (a tower it could not load): upstream's
set-identity then never exits (set_identityh.c L189-196, L303-321; fd_pohh_tile.c
L1277-1296), the identity unchanged. Ending it, and a switch cut off by the agent's
container ending, are recovered by hand: docs/validators.md (failover, Frankendancer).
"""

import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import identity_agent as agent  # noqa: E402

PROCFS = os.environ.get("PROCFS", "/proc")


def validator_pid(procfs):
    """fdctl's Agave child: the process whose argv[1] is run-agave. Of two (the exec'd
    run-agave clones Agave and exits, run_agave.c), the later."""
    pids = []
    for name in os.listdir(procfs):
        if not name.isdigit():
            continue
        try:
            with open(os.path.join(procfs, name, "cmdline"), "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if len(argv) > 1 and argv[1] == b"run-agave":
            pids.append(int(name))
    if not pids:
        raise RuntimeError(
            "no `fdctl run-agave` process in %s: the pod must share its process namespace "
            "(shareProcessNamespace) and the validator's Agave child must be running" % procfs
        )
    return max(pids)


def fdctl_of(procfs, pid):
    """The running validator's own binary, as its container names it (/proc/PID/exe, read
    with CAP_SYS_PTRACE): set-identity must come from the SAME build. fdctl on PATH where
    /proc does not say."""
    try:
        return os.readlink(os.path.join(procfs, str(pid), "exe"))
    except OSError:
        return "fdctl"


def run_to_the_end(cmd, every=60):
    """Its output and exit code, however long it takes: a switch killed halfway leaves
    the keyswitch LOCKED (module docstring)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    started = time.monotonic()
    while True:
        try:
            out, _ = p.communicate(timeout=every)
            return out.strip(), p.returncode
        except subprocess.TimeoutExpired:
            agent.log(
                "%s: still running after %ds; never killed mid-switch. If the validator's "
                "log shows its set-identity failed, it never ends: see docs/validators.md "
                "(Frankendancer pairs, a switch is never killed)"
                % (" ".join(cmd), time.monotonic() - started)
            )


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
        said, code = run_to_the_end(cmd)
        if code != 0:
            raise RuntimeError("%s: exit %d: %s" % (" ".join(cmd), code, said[-2000:]))
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
