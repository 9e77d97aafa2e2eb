"""Label, annotation, API group and default names that KAI manifests use (kept identical to KAI)."""

SCHEDULER_NAME = "kai-scheduler"

# API groups and versions of the CRDs we serve and read.
QUEUE_API_VERSION = "scheduling.run.ai/v2"
PODGROUP_API_VERSION = "scheduling.run.ai/v2alpha2"
BINDREQUEST_API_VERSION = "scheduling.run.ai/v1alpha2"
TOPOLOGY_API_VERSION = "kai.scheduler/v1alpha1"
PRIORITYCLASS_API_VERSION = "scheduling.k8s.io/v1"

# Pod and owner labels.
QUEUE_LABEL = "kai.scheduler/queue"
SUBGROUP_LABEL = "kai.scheduler/subgroup-name"
TASK_PRIORITY_LABEL = "kai.scheduler/task-priority"
PREEMPTIBILITY_LABEL = "kai.scheduler/preemptibility"
PRIORITY_CLASS_LABEL = "priorityClassName"
NODE_POOL_LABEL = "kai.scheduler/node-pool"
GPU_GROUP_LABEL = "runai-gpu-group"
MULTI_GPU_GROUP_LABEL_PREFIX = "runai-gpu-group/"

# Pod annotations.
POD_GROUP_ANNOTATION = "pod-group-name"
GPU_FRACTION_ANNOTATION = "gpu-fraction"
GPU_MEMORY_ANNOTATION = "gpu-memory"
GPU_FRACTION_NUM_DEVICES_ANNOTATION = "gpu-fraction-num-devices"
GPU_FRACTION_CONTAINER_ANNOTATION = "gpu-fraction-container-name"
RECEIVED_RESOURCE_TYPE_ANNOTATION = "received-resource-type"
SHARED_GPU_CONFIGMAP_ANNOTATION = "runai/shared-gpu-configmap"  # prefix of a shared-GPU pod's ConfigMaps

# PodGroup annotations written by the scheduler.
LAST_START_TIMESTAMP_ANNOTATION = "kai.scheduler/last-start-timestamp"
STALE_TIMESTAMP_ANNOTATION = "kai.scheduler/stale-podgroup-timestamp"
TOP_OWNER_METADATA_ANNOTATION = "kai.scheduler/top-owner-metadata"

# Topology annotations on top owners.
TOPOLOGY_ANNOTATION = "kai.scheduler/topology"
TOPOLOGY_REQUIRED_ANNOTATION = "kai.scheduler/topology-required-placement"
TOPOLOGY_PREFERRED_ANNOTATION = "kai.scheduler/topology-preferred-placement"

# Node labels published by the GPU operator.
GPU_MEMORY_NODE_LABEL = "nvidia.com/gpu.memory"
GPU_PRODUCT_NODE_LABEL = "nvidia.com/gpu.product"
GPU_COUNT_NODE_LABEL = "nvidia.com/gpu.count"
MIG_STRATEGY_NODE_LABEL = "nvidia.com/mig.strategy"
MIG_ENABLED_NODE_LABEL = "node-role.kubernetes.io/mig-enabled"

# Resource names.
GPU_RESOURCE = "nvidia.com/gpu"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"

# Defaults installed with KAI.
DEFAULT_QUEUE = "default-queue"
DEFAULT_PARENT_QUEUE = "default-parent-queue"
DEFAULT_PRIORITY_CLASSES: dict[str, int] = {
    "train": 50,
    "build-preemptible": 75,
    "build": 100,
    "inference": 125,
}
DEFAULT_PRIORITY = 50
NON_PREEMPTIBLE_PRIORITY_THRESHOLD = 100
PREEMPTIBLE = "preemptible"
NON_PREEMPTIBLE = "non-preemptible"

# Podgrouper: names, keys and defaults it reads or writes.
PODGROUP_NAME_PREFIX = "pg"
PODGROUPER_WARNING_REASON = "PodGrouperWarning"
USER_LABEL = "user"
PROJECT_LABEL = "project"
SEGMENT_SIZE_ANNOTATION = "kai.scheduler/segment-size"
SEGMENT_TOPOLOGY_REQUIRED_ANNOTATION = "kai.scheduler/segment-topology-required-placement"
SEGMENT_TOPOLOGY_PREFERRED_ANNOTATION = "kai.scheduler/segment-topology-preferred-placement"
BATCH_MIN_MEMBER_ANNOTATION = "kai.scheduler/batch-min-member"
TRAIN_PRIORITY_CLASS = "train"
BUILD_PRIORITY_CLASS = "build"
INFERENCE_PRIORITY_CLASS = "inference"
