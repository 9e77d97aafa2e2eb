{{- define "kai.labels" -}}
app.kubernetes.io/part-of: kai
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}

{{- /* KAI's Config (the operator's singleton kai-config): the object in the cluster (a KAI install
       leaves it behind: KAI's chart creates it as a hook), with the value kaiConfig over it. */ -}}
{{- define "kai.config" -}}
{{- $found := dict -}}
{{- if .Capabilities.APIVersions.Has "kai.scheduler/v1/Config" }}{{- /* a lookup of an unserved kind fails */ -}}
{{- $found = lookup "kai.scheduler/v1" "Config" "" "kai-config" -}}
{{- end -}}
{{- $spec := dict -}}
{{- if and $found $found.spec -}}{{- $spec = deepCopy $found.spec -}}{{- end -}}
{{- $spec = mergeOverwrite $spec (deepCopy (.Values.kaiConfig | default dict)) -}}
{{- toJson $spec -}}
{{- end -}}

{{- /* Every setting the templates use, in one place: the chart's values, KAI's chart values of the
       same meaning, and the fields of KAI's Config (which win over the chart's values). */ -}}
{{- define "kai.settings" -}}
{{- $v := .Values -}}
{{- $c := include "kai.config" . | fromJson -}}
{{- $g := $c.global | default dict -}}
{{- $cs := $c.scheduler | default dict -}}
{{- $cb := $c.binder | default dict -}}
{{- $ca := $c.admission | default dict -}}
{{- $cp := $c.podGrouper | default dict -}}
{{- $s := dict -}}
{{- $_ := set $s "schedulerName" ($g.schedulerName | default $v.global.schedulerName) -}}
{{- $_ := set $s "queueLabelKey" ($g.queueLabelKey | default (dig "queueLabelKey" "" ($v.podgrouper | default dict)) | default $v.global.queueLabelKey) -}}
{{- $_ := set $s "nodePoolLabelKey" ($g.nodePoolLabelKey | default $v.global.nodePoolLabelKey) -}}
{{- $_ := set $s "namespaceLabelSelector" ($g.namespaceLabelSelector | default $v.global.namespaceLabelSelector | default dict) -}}
{{- $_ := set $s "podLabelSelector" ($g.podLabelSelector | default $v.global.podLabelSelector | default dict) -}}
{{- /* The image: KAI's global.registry / global.tag / global.imagePullPolicy, else image.* */ -}}
{{- $repository := $v.image.repository -}}
{{- with $v.global.registry }}{{- $repository = printf "%s/kai" (trimSuffix "/" .) -}}{{- end -}}
{{- $tag := $v.global.tag | default $v.image.tag | default .Chart.AppVersion -}}
{{- $_ := set $s "image" (printf "%s:%s" $repository $tag) -}}
{{- $_ := set $s "pullPolicy" ($v.global.imagePullPolicy | default $v.image.pullPolicy) -}}
{{- $secrets := list -}}
{{- range (concat ($v.global.imagePullSecrets | default list) ($g.additionalImagePullSecrets | default list)) -}}
{{- $secrets = append $secrets (kindIs "map" . | ternary . (dict "name" .)) -}}
{{- end -}}
{{- with $g.imagesPullSecret }}{{- $secrets = append $secrets (dict "name" .) -}}{{- end -}}
{{- $_ := set $s "imagePullSecrets" (uniq $secrets) -}}
{{- /* Placement of every pod */ -}}
{{- $_ := set $s "nodeSelector" (merge (deepCopy ($g.nodeSelector | default dict)) ($v.global.nodeSelector | default dict)) -}}
{{- $_ := set $s "tolerations" ($g.tolerations | default $v.global.tolerations | default list) -}}
{{- $_ := set $s "affinity" ($g.affinity | default $v.global.affinity | default dict) -}}
{{- $_ := set $s "antiAffinity" (or $v.global.requireDefaultPodAntiAffinityTerm $g.requireDefaultPodAntiAffinityTerm | default false) -}}
{{- $_ := set $s "securityContext" (mergeOverwrite (deepCopy $v.securityContext) (deepCopy ($v.global.securityContext | default dict)) (deepCopy ($g.securityContext | default dict))) -}}
{{- $_ := set $s "leaderElection" ($v.global.leaderElection | default false) -}}
{{- $replicas := $g.replicaCount | default (dig "replicaCount" nil ($v.operator | default dict)) -}}
{{- /* scheduler */ -}}
{{- $_ := set $s "schedulerReplicas" ($cs.replicas | default $replicas | default $v.scheduler.replicas) -}}
{{- $_ := set $s "schedulerPort" (dig "schedulerService" "port" nil $cs | default (dig "ports" "metricsPort" nil $v.scheduler) | default $v.scheduler.metricsPort) -}}
{{- $_ := set $s "schedulerResources" ($v.scheduler.resources | default (dig "service" "resources" dict $cs)) -}}
{{- $_ := set $s "schedulerAffinity" ($v.scheduler.affinity | default (dig "service" "affinity" dict $cs) | default $s.affinity) -}}
{{- /* binder */ -}}
{{- $rr := $cb.resourceReservation | default dict -}}
{{- $grr := $v.global.resourceReservation | default dict -}}
{{- $_ := set $s "binderReplicas" ($cb.replicas | default $replicas | default $v.binder.replicas) -}}
{{- $_ := set $s "binderWorkers" ($cb.maxConcurrentReconciles | default $v.binder.workers) -}}
{{- $_ := set $s "binderMetricsPort" ($cb.metricsPort | default (dig "ports" "metricsPort" nil $v.binder) | default $v.binder.metricsPort) -}}
{{- $_ := set $s "binderProbePort" ($cb.probePort | default $v.binder.probePort) -}}
{{- $_ := set $s "reservationNamespace" ($rr.namespace | default $grr.namespace | default $v.binder.reservationNamespace) -}}
{{- $_ := set $s "reservationServiceAccount" ($rr.serviceAccountName | default $grr.serviceAccount | default "kai-resource-reservation") -}}
{{- $_ := set $s "reservationAppLabel" ($rr.appLabel | default $grr.appLabel | default "kai-resource-reservation") -}}
{{- $_ := set $s "reservationRuntimeClass" ($rr.runtimeClassName | default $v.binder.runtimeClassName | default "") -}}
{{- $_ := set $s "reservationPodResources" ($rr.podResources | default $v.binder.resourceReservationPodResources | default dict) -}}
{{- $_ := set $s "reservationTimeout" ($rr.allocationTimeout | default "") -}}
{{- $_ := set $s "binderResources" ($v.binder.resources | default (dig "service" "resources" dict $cb)) -}}
{{- $_ := set $s "binderAffinity" ($v.binder.affinity | default (dig "service" "affinity" dict $cb) | default $s.affinity) -}}
{{- /* podgrouper */ -}}
{{- $pa := $cp.args | default dict -}}
{{- $_ := set $s "podgrouperReplicas" ($cp.replicas | default $replicas | default $v.podgrouper.replicas) -}}
{{- $_ := set $s "podgrouperWorkers" ($cp.maxConcurrentReconciles | default $v.podgrouper.workers) -}}
{{- $_ := set $s "gangScheduleKnative" (hasKey $pa "gangScheduleKnative" | ternary $pa.gangScheduleKnative $v.podgrouper.gangScheduleKnative) -}}
{{- $_ := set $s "defaultPrioritiesConfigMapName" ($pa.defaultPrioritiesConfigMapName | default $v.podgrouper.defaultPrioritiesConfigMapName) -}}
{{- $_ := set $s "defaultPrioritiesConfigMapNamespace" ($pa.defaultPrioritiesConfigMapNamespace | default .Release.Namespace) -}}
{{- $_ := set $s "podgrouperResources" ($v.podgrouper.resources | default (dig "service" "resources" dict $cp)) -}}
{{- $_ := set $s "podgrouperAffinity" ($v.podgrouper.affinity | default (dig "service" "affinity" dict $cp) | default $s.affinity) -}}
{{- /* admission */ -}}
{{- $_ := set $s "admissionReplicas" ($ca.replicas | default $replicas | default $v.admission.replicas) -}}
{{- $_ := set $s "admissionPort" (dig "webhook" "targetPort" nil $ca | default (dig "ports" "webhookPort" nil $v.admission) | default $v.admission.port) -}}
{{- $_ := set $s "gpuSharing" (hasKey $ca "gpuSharing" | ternary $ca.gpuSharing $v.global.gpuSharing) -}}
{{- $_ := set $s "queueLabelSelector" (hasKey $ca "queueLabelSelector" | ternary $ca.queueLabelSelector $v.admission.queueLabelSelector) -}}
{{- $_ := set $s "gpuPodRuntimeClassName" (hasKey $ca "gpuPodRuntimeClassName" | ternary $ca.gpuPodRuntimeClassName $v.admission.gpuPodRuntimeClassName) -}}
{{- $_ := set $s "admissionSecret" ($v.admission.certSecretName | default "kai-admission-tls") -}}
{{- $_ := set $s "admissionResources" ($v.admission.resources | default (dig "service" "resources" dict $ca)) -}}
{{- $_ := set $s "admissionAffinity" ($v.admission.affinity | default (dig "service" "affinity" dict $ca) | default $s.affinity) -}}
{{- toJson $s -}}
{{- end -}}

{{- /* What of KAI's Config kai does not read (NOTES.txt warns about each). */ -}}
{{- define "kai.config.unread" -}}
{{- $c := include "kai.config" . | fromJson -}}
{{- $read := dict
  "namespace" list
  "global" (list "schedulerName" "queueLabelKey" "nodePoolLabelKey" "namespaceLabelSelector" "podLabelSelector" "nodeSelector" "tolerations" "affinity" "requireDefaultPodAntiAffinityTerm" "securityContext" "replicaCount" "imagesPullSecret" "additionalImagePullSecrets")
  "scheduler" (list "service" "schedulerService" "replicas")
  "binder" (list "service" "resourceReservation" "replicas" "maxConcurrentReconciles" "probePort" "metricsPort")
  "admission" (list "service" "webhook" "gpuSharing" "queueLabelSelector" "gpuPodRuntimeClassName" "replicas")
  "podGrouper" (list "service" "args" "maxConcurrentReconciles" "replicas") -}}
{{- $unread := list -}}
{{- range $section, $value := $c -}}
{{- if not (hasKey $read $section) -}}
{{- $unread = append $unread $section -}}
{{- else if kindIs "map" $value -}}
{{- $known := index $read $section -}}
{{- range $field, $_ := $value -}}
{{- if not (has $field $known) }}{{- $unread = append $unread (printf "%s.%s" $section $field) -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and (hasKey $c "namespace") (ne (toString $c.namespace) .Release.Namespace) -}}
{{- $unread = append $unread (printf "namespace (%s: kai runs in the release namespace %s)" $c.namespace .Release.Namespace) -}}
{{- end -}}
{{- toJson (without $unread "namespace") -}}
{{- end -}}

{{- /* The pod-level settings every Deployment shares: pull secrets, node selector, tolerations,
       affinity (the component's, else the global one) and the optional anti-affinity between replicas. */ -}}
{{- define "kai.podPlacement" -}}
{{- $s := .settings -}}
{{- with $s.imagePullSecrets }}
imagePullSecrets: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $s.nodeSelector }}
nodeSelector: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $s.tolerations }}
tolerations: {{- toYaml . | nindent 2 }}
{{- end }}
{{- $affinity := deepCopy (.affinity | default dict) }}
{{- if $s.antiAffinity }}
{{- $term := dict "labelSelector" (dict "matchLabels" (dict "app" .app)) "topologyKey" "kubernetes.io/hostname" }}
{{- $pod := $affinity.podAntiAffinity | default dict }}
{{- $_ := set $pod "requiredDuringSchedulingIgnoredDuringExecution" (append ($pod.requiredDuringSchedulingIgnoredDuringExecution | default list) $term) }}
{{- $_ := set $affinity "podAntiAffinity" $pod }}
{{- end }}
{{- with $affinity }}
affinity: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- /* Whether `obj` (a lookup result) belongs to this release (so it may be rendered again). */ -}}
{{- define "kai.ours" -}}
{{- $a := dig "metadata" "annotations" dict .obj -}}
{{- if and (eq (get $a "meta.helm.sh/release-name") .root.Release.Name) (eq (get $a "meta.helm.sh/release-namespace") .root.Release.Namespace) -}}true{{- end -}}
{{- end -}}

{{- /* The SchedulingShards, name -> spec: those in the cluster (a KAI install's carry over), the
       default shard from KAI's scheduler.* values (defaultShard.enabled), and the value `shards`;
       values win field by field. */ -}}
{{- define "kai.shards" -}}
{{- $shards := dict -}}
{{- $found := dict -}}
{{- if .Capabilities.APIVersions.Has "kai.scheduler/v1/SchedulingShard" -}}
{{- $found = lookup "kai.scheduler/v1" "SchedulingShard" "" "" -}}
{{- end -}}
{{- range ($found.items | default list) -}}
{{- $_ := set $shards .metadata.name (deepCopy (.spec | default dict)) -}}
{{- end -}}
{{- if .Values.defaultShard.enabled -}}
{{- $spec := dict "partitionLabelValue" "" -}}
{{- with .Values.scheduler.placementStrategy -}}{{- $_ := set $spec "placementStrategy" (dict "gpu" . "cpu" .) -}}{{- end -}}
{{- if kindIs "map" .Values.scheduler.actions -}}{{- with .Values.scheduler.actions -}}{{- $_ := set $spec "actions" . -}}{{- end -}}{{- end -}}
{{- range $field := list "plugins" "args" "kValue" "minRuntime" "queueDepthPerAction" "usageDBConfig" -}}
{{- with (index $.Values.scheduler $field) -}}{{- $_ := set $spec $field . -}}{{- end -}}
{{- end -}}
{{- $_ := set $shards "default" (mergeOverwrite (get $shards "default" | default dict) $spec) -}}
{{- end -}}
{{- range $name, $spec := .Values.shards | default dict -}}
{{- $_ := set $shards $name (mergeOverwrite (get $shards $name | default dict) (deepCopy ($spec | default dict))) -}}
{{- end -}}
{{- range $name, $spec := $shards -}}
{{- with $spec.args -}}{{- /* flag values are strings (the CRD's type), whatever YAML made of them */ -}}
{{- $args := dict -}}
{{- range $flag, $value := . }}{{- $_ := set $args $flag (toString $value) -}}{{- end -}}
{{- $_ := set $spec "args" $args -}}
{{- end -}}
{{- end -}}
{{- toJson $shards -}}
{{- end -}}
