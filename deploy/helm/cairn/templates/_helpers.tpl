{{- define "cairn.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "cairn.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "cairn.secretName" -}}
{{- if .Values.secret.existingSecret -}}{{ .Values.secret.existingSecret }}{{- else -}}{{ include "cairn.fullname" . }}{{- end -}}
{{- end -}}

{{- define "cairn.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end -}}

{{/* The headless service's DNS name of data node 0, which the others join. */}}
{{- define "cairn.seed" -}}
http://{{ include "cairn.fullname" . }}-0.{{ include "cairn.fullname" . }}-headless.{{ .Release.Namespace }}.svc.cluster.local:8080
{{- end -}}

{{/* The Service of every data node: client nodes join through any of them. */}}
{{- define "cairn.serviceURL" -}}
http://{{ include "cairn.fullname" . }}.{{ .Release.Namespace }}.svc.cluster.local:{{ .Values.service.port }}
{{- end -}}

{{- define "cairn.secretEnv" -}}
- name: CAIRN_CLUSTER_SECRET
  valueFrom:
    secretKeyRef:
      name: {{ include "cairn.secretName" . }}
      key: cluster-secret
- name: CAIRN_ADMIN_KEY
  valueFrom:
    secretKeyRef:
      name: {{ include "cairn.secretName" . }}
      key: admin-key
{{- end -}}
