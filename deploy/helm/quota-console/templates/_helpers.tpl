{{/* The chart's name, or nameOverride. */}}
{{- define "quota-console.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's objects' name: fullnameOverride, else <release>-<chart> unless the release already contains the chart's name. */}}
{{- define "quota-console.fullname" -}}
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

{{- define "quota-console.selectorLabels" -}}
app.kubernetes.io/name: {{ include "quota-console.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "quota-console.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "quota-console.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: quota-console
{{- end }}

{{- define "quota-console.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "quota-console.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The port of --listen (the part after the last colon). */}}
{{- define "quota-console.port" -}}
{{- .Values.listen | splitList ":" | last | int }}
{{- end }}

{{- define "quota-console.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{- define "quota-console.sessionKeySecret" -}}
{{- default (printf "%s-session-key" (include "quota-console.fullname" .)) .Values.sessionKey.existingSecret }}
{{- end }}

{{/* Where the console keeps its state (--state-namespace): the release namespace unless set. */}}
{{- define "quota-console.stateNamespace" -}}
{{- default .Release.Namespace .Values.stateNamespace }}
{{- end }}

{{/* The Lease the replicas elect a leader with; its Role names it. */}}
{{- define "quota-console.leaseName" -}}
{{- default (printf "%s-leader" (include "quota-console.fullname" .)) .Values.leaderElection.lease }}
{{- end }}

{{- define "quota-console.historyClaim" -}}
{{- default (printf "%s-history" (include "quota-console.fullname" .)) .Values.history.sqlite.persistence.existingClaim }}
{{- end }}

{{/* The proxies trusted to name the client (--trusted-proxy-cidrs), as JSON: the value, or with the Ingress on and no value the private ranges its controller's pods have. */}}
{{- define "quota-console.trustedProxies" -}}
{{- $cidrs := .Values.auth.trustedProxyCIDRs }}
{{- if and (kindIs "invalid" $cidrs) .Values.ingress.enabled }}
{{- $cidrs = list "10.0.0.0/8" "172.16.0.0/12" "192.168.0.0/16" "100.64.0.0/10" "fc00::/7" }}
{{- end }}
{{- default list $cidrs | toJson }}
{{- end }}

{{/* Where mounted files live in the container. */}}
{{- define "quota-console.proxySecretFile" -}}/etc/quota-console/proxy-secret/{{ .Values.auth.proxy.secret.key }}{{- end }}
{{- define "quota-console.sessionKeyFile" -}}/etc/quota-console/session-key/key{{- end }}
{{- define "quota-console.historyDSNFile" -}}/etc/quota-console/history/{{ .Values.history.postgres.key }}{{- end }}

{{/*
The console's command line: every value that is set becomes its flag
(TestChartPassesOnlyFlagsTheConsoleHas checks that the console has each).
*/}}
{{- define "quota-console.args" -}}
- {{ printf "--listen=%s" .Values.listen | quote }}
{{- if .Values.metricsPort }}
- {{ printf "--metrics-listen=:%d" (int .Values.metricsPort) | quote }}
{{- end }}
- {{ printf "--log-level=%s" .Values.logLevel | quote }}
- {{ printf "--memory-limit-mib=%d" (int .Values.memoryLimitMiB) | quote }}
- {{ printf "--log-format=%s" .Values.logFormat | quote }}
- {{ printf "--auth=%s" .Values.auth.mode | quote }}
{{- with .Values.prometheus.url }}
- {{ printf "--prometheus-url=%s" . | quote }}
{{- end }}
- {{ printf "--namespace-prefix=%s" .Values.namespacePrefix | quote }}
{{- with .Values.clusterName }}
- {{ printf "--cluster-name=%s" . | quote }}
{{- end }}
{{- with .Values.cohort }}
- {{ printf "--cohort=%s" . | quote }}
{{- end }}
- {{ printf "--team-pod-security=%s" .Values.teamNamespaces.podSecurity | quote }}
{{- if eq .Values.auth.mode "proxy" }}
- {{ printf "--auth-proxy-user-header=%s" .Values.auth.proxy.userHeader | quote }}
- {{ printf "--auth-proxy-groups-header=%s" .Values.auth.proxy.groupsHeader | quote }}
- {{ printf "--auth-proxy-cidrs=%s" (join "," .Values.auth.proxy.cidrs) | quote }}
{{- $hosts := .Values.auth.proxy.hosts }}
{{- if and (not $hosts) .Values.ingress.enabled }}
{{- range .Values.ingress.hosts }}
{{- $hosts = append $hosts .host }}
{{- end }}
{{- end }}
{{- with $hosts }}
- {{ printf "--auth-proxy-hosts=%s" (join "," .) | quote }}
{{- end }}
{{- if .Values.auth.proxy.secret.existingSecret }}
- {{ printf "--auth-proxy-secret-file=%s" (include "quota-console.proxySecretFile" .) | quote }}
{{- end }}
{{- end }}
{{- with .Values.auth.token.audience }}
- {{ printf "--auth-token-audience=%s" . | quote }}
{{- end }}
{{- if eq .Values.auth.mode "token" }}
{{- with (include "quota-console.trustedProxies" . | fromJsonArray) }}
- {{ printf "--trusted-proxy-cidrs=%s" (join "," .) | quote }}
{{- end }}
{{- end }}
{{- if or .Values.secureCookies (and .Values.ingress.enabled .Values.ingress.tls) }}
- "--secure-cookies"
{{- end }}
{{- if .Values.sessionKey.enabled }}
- {{ printf "--session-key-file=%s" (include "quota-console.sessionKeyFile" .) | quote }}
{{- end }}
- {{ printf "--state-namespace=%s" (include "quota-console.stateNamespace" .) | quote }}
- {{ printf "--leader-election-lease=%s" (include "quota-console.leaseName" .) | quote }}
{{- if eq .Values.history.store "sqlite" }}
- "--history-store=sqlite"
- {{ printf "--history-path=%s" .Values.history.sqlite.path | quote }}
{{- else if eq .Values.history.store "postgres" }}
- "--history-store=postgres"
- {{ printf "--history-dsn-file=%s" (include "quota-console.historyDSNFile" .) | quote }}
{{- else }}
- "--history-store=none"
{{- end }}
- {{ printf "--history-retention=%s" .Values.history.retention | quote }}
{{- range .Values.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}

{{/* Rules across values that the schema cannot state, each with its reason. */}}
{{- define "quota-console.validate" -}}
{{- if and .Values.auth.token.audience (ne .Values.auth.mode "token") }}
{{- fail "auth.token.audience is only used with auth.mode token" }}
{{- end }}
{{- if and .Values.auth.proxy.secret.existingSecret (ne .Values.auth.mode "proxy") }}
{{- fail "auth.proxy.secret.existingSecret is only used with auth.mode proxy" }}
{{- end }}
{{- if and (eq .Values.auth.mode "proxy") (not .Values.auth.proxy.cidrs) (not .Values.auth.proxy.secret.existingSecret) }}
{{- fail "auth.mode proxy needs auth.proxy.cidrs or auth.proxy.secret.existingSecret: otherwise no request is trusted" }}
{{- end }}
{{- if and (eq .Values.history.store "postgres") (not .Values.history.postgres.existingSecret) }}
{{- fail "history.store postgres needs history.postgres.existingSecret, a Secret with the DSN" }}
{{- end }}
{{- if and .Values.metricsPort (eq (int .Values.metricsPort) (int (include "quota-console.port" .))) }}
{{- fail "metricsPort must differ from the port of listen: its /metrics names every team" }}
{{- end }}
{{- end }}

{{/* The labels of an alert (files/rules.yaml): its severity, and alerts.alertLabels (which may replace it). Called with (list $ severity). */}}
{{- define "quota-console.alertLabels" -}}
{{- $root := index . 0 -}}
{{- toYaml (merge (deepCopy (default (dict) $root.Values.alerts.alertLabels)) (dict "severity" (index . 1))) }}
{{- end }}

{{/* A duration of values.schema.json's form (a whole number and one of s, m, h, d) in seconds, for PromQL comparisons. */}}
{{- define "quota-console.seconds" -}}
{{- $n := regexFind "^[0-9]+" . -}}
{{- $unit := trimPrefix $n . -}}
{{- mul ($n | int64) (get (dict "s" 1 "m" 60 "h" 3600 "d" 86400) $unit) -}}
{{- end }}
