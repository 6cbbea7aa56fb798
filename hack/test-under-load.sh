#!/usr/bin/env bash
# `make test-under-load`: `make test` with a second lab beside it running the demo over and
# over (the RAM sweep, helm upgrade, report), RUNS times in a row (default 1). This is how
# the suite meets a busy machine: CI and developers share 2 cores, and a test's outcome
# must not hinge on a second of CPU (issue 23). Not part of CI: it costs a demo per
# 4 minutes beside every run.
#
# With arguments, runs that command under the same load instead of `make test`, e.g. one
# lab test against a test lab of your own, or `sleep 300` to watch the load alone:
#   KUBECTL=... HELM=... hack/test-under-load.sh cargo test -p valtune --test lab -- nodeos
set -euo pipefail
cd "$(dirname "$0")/.."

runs=${RUNS:-1}
make=${MAKE:-make}
load_dir=${LOAD_LAB_DIR:-target/load-lab}
export KUBECTL=${KUBECTL:?set KUBECTL} HELM=${HELM:?set HELM}
if [ $# -gt 0 ]; then command=("$@"); else command=("$make" --no-print-directory test); fi

echo "load: starting a lab in $load_dir"
"$make" --no-print-directory lab-up LAB_DIR="$load_dir" >/dev/null
rm -f "$load_dir/stop"
# Job control: the demo loop gets a process group of its own, so stopping it stops the
# demo it is in (kubectl, helm, valtune report) too, not only the loop.
set -m
(
  n=0
  while [ ! -e "$load_dir/stop" ]; do
    n=$((n + 1))
    if LAB_DIR=$load_dir hack/demo.sh >"$load_dir/demo-$n.log" 2>&1; then
      echo "load: demo $n done"
    else
      echo "load: demo $n failed (see $load_dir/demo-$n.log)"
    fi
  done
) &
loop=$!
set +m
stop() {
  touch "$load_dir/stop"
  kill -- -"$loop" 2>/dev/null || true
  wait "$loop" 2>/dev/null || true
  "$make" --no-print-directory lab-down LAB_DIR="$load_dir" >/dev/null 2>&1 || true
  echo "load: stopped, lab $load_dir down"
}
trap stop EXIT

status=0
for i in $(seq 1 "$runs"); do
  start=$SECONDS
  if "${command[@]}"; then
    echo "under load: ${command[*]}: run $i of $runs passed in $((SECONDS - start)) s"
  else
    status=$?
    echo "under load: ${command[*]}: run $i of $runs failed after $((SECONDS - start)) s" >&2
    break
  fi
done
exit $status
