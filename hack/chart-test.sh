#!/usr/bin/env bash
# `make chart-test`: the chart's checks that need no cluster (the lab tests install it).
#   - the chart's version, appVersion and CRDs are the operator's (files/crds = crds/);
#   - helm lint --strict and helm template with every values file in charts/valtune/ci/
#     (rendered into target/chart-test/rendered/; the lab tests validate those with
#     kubeconform against the lab's schemas);
#   - manifests/install/valtune.yaml is what the chart renders (`make manifests`);
#   - the PrometheusRule through promtool's rule tests (charts/valtune/tests/);
#   - the Argo CD health checks against their fixtures, with Argo CD's Lua
#     (hack/tools/luahealth), and two cases that must fail (hack/luahealth-selftest/);
#   - the argocd-cm patch in the chart and docs/gitops.md are the health checks;
#   - every YAML block of docs/gitops.md is a file of manifests/gitops/ (which the GitOps
#     lab tests apply, make test-gitops) or the argocd-cm patch, as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${VALTUNE_TOOLS_BIN:?set VALTUNE_TOOLS_BIN (hack/tools/build.sh --print-bin-dir)}
chart=charts/valtune
out=target/chart-test
kube_version=1.34.2
rm -rf "$out" && mkdir -p "$out/rendered"
fail() { echo "chart-test: $*" >&2; exit 1; }
step() { printf '[chart-test] %s\n' "$*"; }

step "versions and CRDs"
crate=$(sed -n 's/^version = "\(.*\)"$/\1/p' operator/Cargo.toml | head -n1)
chart_version=$(sed -n 's/^version: \(.*\)$/\1/p' $chart/Chart.yaml)
app_version=$(sed -n 's/^appVersion: "\(.*\)"$/\1/p' $chart/Chart.yaml)
[ "$chart_version" = "$crate" ] && [ "$app_version" = "$crate" ] ||
  fail "Chart.yaml version $chart_version / appVersion $app_version differ from the valtune crate's $crate"
diff -r crds $chart/files/crds >/dev/null ||
  fail "$chart/files/crds differs from crds/: run 'make crds' and commit the result"

step "helm lint and template, each values file in $chart/ci"
for values in $chart/ci/*.yaml; do
  name=$(basename "$values" .yaml)
  "$bin/helm" lint --strict --quiet --kube-version $kube_version -f "$values" $chart >"$out/lint-$name.log" 2>&1 ||
    { cat "$out/lint-$name.log" >&2; fail "helm lint failed with $values"; }
  "$bin/helm" template valtune $chart -n valtune-system --kube-version $kube_version -f "$values" \
    >"$out/rendered/$name.yaml" || fail "helm template failed with $values"
done
# A value the schema refuses is refused (values.schema.json is read at all).
if "$bin/helm" template valtune $chart --kube-version $kube_version --set operator.logFormat=xml >/dev/null 2>"$out/schema.log"; then
  fail "values.schema.json let operator.logFormat=xml through"
fi
grep -q "logFormat" "$out/schema.log" || fail "the schema's refusal does not name the value: $(cat "$out/schema.log")"

step "manifests/install/valtune.yaml is the chart's"
hack/install-manifest.sh >"$out/valtune.yaml"
diff -u manifests/install/valtune.yaml "$out/valtune.yaml" >/dev/null ||
  fail "manifests/install/valtune.yaml is stale: run 'make manifests' and commit the result"

step "PrometheusRule: promtool test rules"
# The rule groups are the PrometheusRule's spec (its last key), one indent level up.
sed -n '/^kind: PrometheusRule$/,/^---/p' "$out/rendered/default-values.yaml" |
  sed -n '/^spec:$/,/^---/p' | sed -e '1d' -e '/^---/d' -e 's/^  //' >"$out/rules.yaml"
grep -q 'alert: ValtuneOperatorDown' "$out/rules.yaml" || fail "no rules found in the rendered PrometheusRule"
cp $chart/tests/rules.test.yaml "$out/"
"$bin/promtool" check rules "$out/rules.yaml" >/dev/null
"$bin/promtool" test rules "$out/rules.test.yaml"

step "Argo CD health checks (gopher-lua v1.1.2, argocd-cm's libraries)"
"$bin/luahealth" test $chart/argocd/ValidatorExperiment $chart/argocd/ValidatorTrial $chart/argocd/Validator
# The test can fail: a wrong expectation, and a library argocd-cm scripts do not get.
wrong="$out/selftest-wrong-expectation"
mkdir -p "$wrong"
cp -r $chart/argocd/ValidatorExperiment/health.lua $chart/argocd/ValidatorExperiment/testdata "$wrong/"
cp hack/luahealth-selftest/wrong-expectation/health_test.yaml "$wrong/"
for case in "$wrong" hack/luahealth-selftest/string-library; do
  if "$bin/luahealth" test "$case" >"$out/selftest.log" 2>&1; then
    fail "luahealth passed $case, which must fail"
  fi
  grep -q '^FAIL' "$out/selftest.log" || fail "luahealth did not report $case: $(cat "$out/selftest.log")"
done
grep -q "attempt to index a non-table object(nil) with key 'find'" "$out/selftest.log" ||
  fail "string.find did not fail as in Argo CD: $(cat "$out/selftest.log")"
"$bin/luahealth" -open-libs test hack/luahealth-selftest/string-library >/dev/null ||
  fail "the string-library case fails even with -open-libs"

step "the argocd-cm patch (chart, docs/gitops.md) holds the health checks"
hack/argocd-cm.sh >"$out/argocd-cm.yaml"
diff -u $chart/argocd/argocd-cm.yaml "$out/argocd-cm.yaml" >/dev/null ||
  fail "$chart/argocd/argocd-cm.yaml is stale: run 'make manifests' and commit the result"
awk '/<!-- argocd-cm: begin -->/{on=1; next} /<!-- argocd-cm: end -->/{on=0} on' docs/gitops.md |
  sed -e '/^```/d' >"$out/argocd-cm-docs.yaml"
diff -u "$out/argocd-cm.yaml" "$out/argocd-cm-docs.yaml" >/dev/null ||
  fail "docs/gitops.md's argocd-cm block differs from $chart/argocd/argocd-cm.yaml: copy it there"
step "docs/gitops.md shows the files of manifests/gitops/ as they are"
blocks="$out/gitops-docs"
mkdir -p "$blocks"
awk -v out="$blocks" '
  /^<!-- file: [^ ]+ -->$/ { src = $3; next }
  /^<!-- argocd-cm: begin -->$/ { src = "argocd-cm"; next }
  /^```yaml$/ {
    n++; f = out "/" n
    if (src == "") { printf "docs/gitops.md:%d: a YAML block that is no file of manifests/gitops/\n", NR > "/dev/stderr"; bad = 1 }
    print src > (f ".src"); printf "" > (f ".yaml"); on = 1; next
  }
  /^```$/ && on { on = 0; src = ""; next }
  on { print > (f ".yaml") }
  END { exit bad }' docs/gitops.md || fail "docs/gitops.md shows YAML that no test applies: put it in manifests/gitops/"
for src in "$blocks"/*.src; do
  file=$(cat "$src")
  [ "$file" = argocd-cm ] && continue
  [ -f "$file" ] || fail "docs/gitops.md shows $file, which does not exist"
  diff -u "$file" "${src%.src}.yaml" >/dev/null || fail "docs/gitops.md's copy of $file differs from the file: copy it there"
done
for file in manifests/gitops/*.yaml manifests/gitops/*/*.yaml; do
  grep -qxF "<!-- file: $file -->" docs/gitops.md || fail "docs/gitops.md does not show $file"
done
step "ok"
