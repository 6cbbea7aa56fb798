#!/usr/bin/env bash
# Prints charts/valtune/argocd/argocd-cm.yaml: a patch of Argo CD's argocd-cm that adds
# valtune's health checks (charts/valtune/argocd/<Kind>/health.lua), in the per-kind key
# format argo-cd v3.6.2 reads (util/settings/settings.go: resource.customizations.health.
# <group>_<kind>). `make manifests` writes it; `make chart-test` checks it and docs/gitops.md.
set -euo pipefail
cd "$(dirname "$0")/.."
cat <<'HEADER'
# Argo CD health checks for valtune's kinds. Apply with
#   kubectl -n argocd patch configmap argocd-cm --type merge --patch-file argocd-cm.yaml
# Generated from charts/valtune/argocd/*/health.lua by `make manifests`; do not edit.
HEADER
echo "data:"
for kind in ValidatorExperiment ValidatorTrial Validator; do
  echo "  resource.customizations.health.valtune.dev_$kind: |"
  sed -e 's/^/    /' -e 's/^ *$//' "charts/valtune/argocd/$kind/health.lua"
done
