#!/usr/bin/env bash
# Prints manifests/install/valtune.yaml: the chart rendered for `kubectl apply` users
# (charts/valtune/ci/kubectl-install-values.yaml), release valtune in valtune-system.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${VALTUNE_TOOLS_BIN:?set VALTUNE_TOOLS_BIN (hack/tools/build.sh --print-bin-dir)}
cat <<'HEADER'
# valtune's operator for `kubectl apply` users: the ServiceAccount, its RBAC (every rule
# says why), the Deployment and its Service, in namespace valtune-system. Generated from
# charts/valtune by `make manifests` (charts/valtune/ci/kubectl-install-values.yaml); do
# not edit. Install the CRDs first, then this, then point it at your Prometheus:
#   kubectl apply --server-side -f crds/
#   kubectl create namespace valtune-system
#   kubectl apply -f manifests/install/valtune.yaml
#   kubectl -n valtune-system set env deployment/valtune VALTUNE_PROMETHEUS_URL=http://prometheus-operated.monitoring:9090
# Helm users: `helm install valtune charts/valtune` instead (docs/operations.md).
HEADER
"$bin/helm" template valtune charts/valtune -n valtune-system --kube-version 1.34.2 \
  -f charts/valtune/ci/kubectl-install-values.yaml
