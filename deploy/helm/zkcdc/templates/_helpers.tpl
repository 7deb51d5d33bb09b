{{- define "zkcdc.labels" -}}
app.kubernetes.io/name: zkcdc
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{- define "zkcdc.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end -}}
