{{/* The chart's name, and the release's name for its objects (63 characters at most). */}}
{{- define "valtune.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "valtune.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "valtune.selectorLabels" -}}
app.kubernetes.io/name: {{ include "valtune.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "valtune.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "valtune.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: operator
app.kubernetes.io/part-of: valtune
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "valtune.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "valtune.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The image: repository@digest when a digest is given, else repository:tag (the tag
defaults to the chart's appVersion, the operator version this chart was made for). */}}
{{- define "valtune.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* Where the leader Lease lives: the operator puts it in the namespace it watches, else
in its own (operator/src/runtime.rs: --namespace, else POD_NAMESPACE). */}}
{{- define "valtune.leaseNamespace" -}}
{{- default .Release.Namespace .Values.operator.watchNamespace }}
{{- end }}

{{/* What the operator does in the namespaces it watches, and why (each rule is checked by
a lab test that installs this chart and runs an experiment as its ServiceAccount). */}}
{{- define "valtune.namespacedRules" -}}
# Experiments are the users': valtune reads them and writes only their status.
- apiGroups: [valtune.dev]
  resources: [validatorexperiments]
  verbs: [get, list, watch]
# Trials are valtune's: created per point, deleted when a point leaves the sweep.
- apiGroups: [valtune.dev]
  resources: [validatortrials]
  verbs: [get, list, watch, create, delete]
# Validators are the users': valtune reads them, never writes their spec (Argo CD would
# revert it), and writes their status.
- apiGroups: [valtune.dev]
  resources: [validators]
  verbs: [get, list, watch]
# Status of all three (server-side apply of the status subresource).
- apiGroups: [valtune.dev]
  resources: [validatorexperiments/status, validatortrials/status, validators/status]
  verbs: [get, patch, update]
# One Lease per validator identity, in the Validator's namespace: created by the
# Validator that takes the identity (owned by it, so it goes with it), read by any other
# naming the same identity, which then holds back. Patched once in a failover: the
# staked identity's Lease moves to the standby that signs with it.
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, create, patch]
# One PodDisruptionBudget per Validator (minAvailable 1 over its one pod, owned by it):
# read each pass, created when missing (controller/validator/pdb.rs).
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [get, create]
# A Validator's state: one claim per volume role, created once beside its first pod and
# kept through restarts and upgrades (never deleted by valtune).
- apiGroups: [""]
  resources: [persistentvolumeclaims]
  verbs: [create]
# Each attempt of a trial is a pod (server-side apply), deleted when the trial finishes
# or retries; a Validator's pod is created, and deleted for a restart. Listing finds the
# pods of one identity. Its local volumes are generic ephemeral volumes: the
# kube-controller-manager creates and deletes their claims, so no PVC rights.
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, create, patch, delete]
# Config files some clients read (Firedancer's config.toml, Besu's TOML, nodeos's
# config.ini), one ConfigMap per attempt, owned by the trial (server-side apply).
- apiGroups: [""]
  resources: [configmaps]
  verbs: [create, patch]
# The JWT Besu and its consensus client share: one Secret per experiment, created once
# (an existing one is kept: 409) and never read back.
- apiGroups: [""]
  resources: [secrets]
  verbs: [create]
# An event on every phase change a user would look for.
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, patch]
# One PodMonitor per experiment, so Prometheus scrapes its trials (read first, applied
# only when it would change). Whether the kind is served is asked of API discovery.
- apiGroups: [monitoring.coreos.com]
  resources: [podmonitors]
  verbs: [get, create, patch]
{{- end }}

{{- define "valtune.clusterRules" -}}
# Whether a trial's node still exists (NodeLost) and what it offers, from a watch of
# them (a get when the watch has not delivered it); a paired comparison lists them to
# match two free nodes of one class for each pair. Nodes are cluster-scoped.
- apiGroups: [""]
  resources: [nodes]
  verbs: [get, list, watch]
{{- end }}

{{/* Seconds of a duration written as 90s, 15m, 6h or 2d (for PromQL comparisons). */}}
{{- define "valtune.seconds" -}}
{{- $d := toString . }}
{{- $n := trimSuffix "s" (trimSuffix "m" (trimSuffix "h" (trimSuffix "d" $d))) | int }}
{{- if hasSuffix "d" $d }}{{ mul $n 86400 }}
{{- else if hasSuffix "h" $d }}{{ mul $n 3600 }}
{{- else if hasSuffix "m" $d }}{{ mul $n 60 }}
{{- else }}{{ $n }}
{{- end }}
{{- end }}

{{/* The job label of the operator's series, whichever monitor scrapes it: the
PrometheusRule selects by it. */}}
{{- define "valtune.jobRelabeling" -}}
- action: replace
  targetLabel: job
  replacement: {{ include "valtune.fullname" . }}
{{- end }}
