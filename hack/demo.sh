#!/usr/bin/env bash
# The demo (`make demo`): on a running lab with the CRDs installed, start the operator,
# apply the quickstart (the paper's RAM sweep), follow it to the end, print the results.
set -euo pipefail
cd "$(dirname "$0")/.."

lab_dir=${LAB_DIR:-.lab}
kubectl=${KUBECTL:?set KUBECTL}
export KUBECONFIG=$lab_dir/kubeconfig
eval "$(./target/debug/valtune-lab env --dir "$lab_dir")"
experiment=agave-ram
manifest=manifests/examples/quickstart-agave-ram-sweep.yaml

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
./target/debug/valtune-lab spawn --dir "$lab_dir" --name operator -- \
  "$PWD/target/debug/valtune" operator --prometheus-url "$PROMETHEUS_URL" --listen "127.0.0.1:$port"

# A fresh run each time: the previous demo's experiment (and its trials) go first.
"$kubectl" delete validatorexperiment "$experiment" --ignore-not-found --wait=true >/dev/null
"$kubectl" apply -f "$manifest"
echo
echo "Running the RAM sweep (5 trials, 3 at a time; each 12 simulated hours in ~1 real minute)."
start=$SECONDS
last=""
while :; do
  phase=$("$kubectl" get validatorexperiment "$experiment" -o jsonpath='{.status.phase}' 2>/dev/null || true)
  line=$("$kubectl" get validatortrials -l valtune.dev/experiment=$experiment \
    -o jsonpath='{range .items[*]}{.status.point}:{.status.phase}{" "}{end}' 2>/dev/null || true)
  if [ "$line" != "$last" ]; then
    printf '[%4ss] %-9s %s\n' "$((SECONDS - start))" "${phase:-Pending}" "$line"
    last=$line
  fi
  case "$phase" in Succeeded|Failed) break ;; esac
  if [ $((SECONDS - start)) -gt 600 ]; then
    echo "the experiment did not finish in 10 minutes; see $lab_dir/logs/operator.log" >&2
    exit 1
  fi
  sleep 2
done
echo
"$kubectl" get validatortrials -l valtune.dev/experiment=$experiment
echo
./target/debug/valtune report "$experiment"
cat <<MSG

The lab is still running:   export KUBECONFIG=$lab_dir/kubeconfig
                            $kubectl get validatorexperiments,validatortrials
Operator log:               $lab_dir/logs/operator.log
Stop everything with:       make lab-down
MSG
