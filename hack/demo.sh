#!/usr/bin/env bash
# The demo (`make demo`): on a running lab, what a user does on a cluster: `helm install`
# the chart (the CRDs, the operator as a Deployment running as its ServiceAccount), then
# `kubectl apply` the quickstart (the paper's RAM sweep); follow it to the end with
# `valtune report --watch`, which prints the results and writes the figures. The lab runs the operator's pod as the local valtune binary, and the
# quickstart as written for a real cluster, its durations compressed by the lab
# (`valtune-lab compress`: 12 hours are a minute at the default 720x; docs/lab.md).
set -euo pipefail
cd "$(dirname "$0")/.."

lab_dir=${LAB_DIR:-.lab}
kubectl=${KUBECTL:?set KUBECTL}
helm=${HELM:?set HELM}
export KUBECONFIG=$lab_dir/kubeconfig
eval "$(./target/debug/valtune-lab env --dir "$lab_dir")"
experiment=agave-ram
manifest=manifests/examples/quickstart-agave-ram-sweep.yaml

# On a cluster: --set operator.prometheusUrl=http://prometheus-operated.monitoring:9090.
# The lab's pod IPs are loopback addresses, which Services cannot have as endpoints, so
# Prometheus scrapes the operator through the chart's PodMonitor here.
echo "helm install valtune charts/valtune (namespace valtune-system)"
"$helm" upgrade --install valtune charts/valtune --namespace valtune-system --create-namespace \
  --set operator.prometheusUrl="$PROMETHEUS_URL" \
  --set metrics.serviceMonitor.enabled=false --set metrics.podMonitor.enabled=true \
  --wait --timeout 3m >/dev/null
"$kubectl" -n valtune-system get pods -l app.kubernetes.io/instance=valtune

# A fresh run each time: the previous demo's experiment (and its trials) go first.
"$kubectl" delete validatorexperiment "$experiment" --ignore-not-found --wait=true >/dev/null
./target/debug/valtune-lab compress --dir "$lab_dir" "$manifest" | "$kubectl" apply -f -
echo
echo "Running the RAM sweep (5 trials, 3 at a time; each 12 simulated hours in ~1 real minute)."
# `valtune report --watch` follows it (each trial's phase and window, the node-hours so
# far) and, once it ends, prints the report and writes its figures and page
# (docs/report.md), the trials' series read from the lab's Prometheus (PROMETHEUS_URL).
if ! timeout 600 ./target/debug/valtune report "$experiment" --watch --out "$lab_dir/report"; then
  echo "the experiment did not finish in 10 minutes; see $lab_dir/logs/pods/valtune-system_valtune-*_operator.log" >&2
  exit 1
fi
echo
"$kubectl" get validatortrials -l valtune.dev/experiment=$experiment
echo
./target/debug/valtune recommend "$experiment" || true
cat <<MSG

The lab is still running:   export KUBECONFIG=$lab_dir/kubeconfig
                            $kubectl get validatorexperiments,validatortrials
The report's page:          $lab_dir/report/index.html (figures, data as CSV)
Operator log:               $lab_dir/logs/pods/valtune-system_valtune-*_operator.log
Stop everything with:       make lab-down
MSG
