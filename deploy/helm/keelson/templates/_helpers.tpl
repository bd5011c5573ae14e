{{/* The release's full name, at most 63 characters (a DNS label). */}}
{{- define "keelson.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "keelson.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "keelson.selectorLabels" -}}
app.kubernetes.io/name: {{ include "keelson.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "keelson.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "keelson.selectorLabels" . }}
app.kubernetes.io/version: {{ include "keelson.tag" . | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "keelson.tag" -}}
{{- default .Chart.AppVersion .Values.image.tag -}}
{{- end -}}

{{- define "keelson.image" -}}
{{- printf "%s:%s" .Values.image.repository (include "keelson.tag" .) -}}
{{- end -}}

{{- define "keelson.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "keelson.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The port of a listen address such as ":8080" or "0.0.0.0:9090". */}}
{{- define "keelson.port" -}}
{{- $port := splitList ":" . | last -}}
{{- if not (regexMatch "^[0-9]+$" $port) -}}
{{- fail (printf "the address %q has no port" .) -}}
{{- end -}}
{{- $port -}}
{{- end -}}

{{- define "keelson.httpPort" -}}
{{- include "keelson.port" (default ":8080" .Values.config.HTTP_ADDR) -}}
{{- end -}}

{{/* The Secret the pods read the secret settings from: existingSecret, or the chart's own. */}}
{{- define "keelson.secretName" -}}
{{- default (include "keelson.fullname" .) .Values.secrets.existingSecret -}}
{{- end -}}

{{/* fails unless DATABASE_URL and AMQP_URL come from somewhere. */}}
{{- define "keelson.checkRequired" -}}
{{- if not .Values.secrets.existingSecret -}}
{{- $extra := list -}}
{{- range .Values.extraEnv -}}{{- $extra = append $extra .name -}}{{- end -}}
{{- range list "DATABASE_URL" "AMQP_URL" -}}
{{- if not (or (get $.Values.secrets.values .) (hasKey $.Values.secretKeyRefs .) (has . $extra)) -}}
{{- fail (printf "%s is required: set secrets.values.%s, secrets.existingSecret, secretKeyRefs.%s or an extraEnv entry" . . .) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The ConfigMap's data: every non-secret setting, as a string. */}}
{{- define "keelson.configData" -}}
{{- range $name, $value := .Values.config }}
{{ $name }}: {{ toString $value | quote }}
{{- end }}
{{- end -}}

{{/* The chart-made Secret's data: every secret setting, empty ones too (empty = the default). */}}
{{- define "keelson.secretData" -}}
{{- range $name, $value := .Values.secrets.values }}
{{ $name }}: {{ toString $value | b64enc | quote }}
{{- end }}
{{- end -}}

{{/*
The container's environment, for the replicas and the migration: extraEnv, then the settings
taken from other Secrets, then INSTANCE_ID from the pod's name. Argument: (dict "root" $ "suffix" "").
*/}}
{{- define "keelson.env" -}}
{{- $root := .root -}}
{{- with $root.Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- range $name, $ref := $root.Values.secretKeyRefs }}
- name: {{ $name }}
  valueFrom:
    secretKeyRef:
      name: {{ $ref.name }}
      key: {{ $ref.key }}
{{- end }}
{{- if not $root.Values.config.INSTANCE_ID }}
- name: INSTANCE_ID
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
{{- end }}
{{- with $root.Values.goMemLimit }}
- name: GOMEMLIMIT
  value: {{ . | quote }}
{{- end }}
{{- end -}}

{{- define "keelson.envFrom" -}}
{{- $root := .root -}}
- configMapRef:
    name: {{ include "keelson.fullname" $root }}{{ .suffix }}
- secretRef:
    name: {{ if $root.Values.secrets.existingSecret }}{{ $root.Values.secrets.existingSecret }}{{ else }}{{ include "keelson.fullname" $root }}{{ .suffix }}{{ end }}
{{- end -}}
