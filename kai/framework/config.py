"""The scheduler configuration file, in KAI's format: actions, plugin tiers with arguments, parameters."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kai.api.errors import Problem
from kai.api.timeutil import parse_duration

DEFAULT_ACTIONS = ("allocate", "consolidation", "reclaim", "preempt", "stalegangeviction")
# KAI's operator defaults, in order (section 1.4 of the behaviour note).
DEFAULT_PLUGINS = (
    "predicates",
    "proportion",
    "priority",
    "nodeavailability",
    "resourcetype",
    "podaffinity",
    "elastic",
    "kubeflow",
    "ray",
    "subgrouporder",
    "taskorder",
    "nominatednode",
    "dynamicresources",
    "minruntime",
    "topology",
    "snapshot",
    "gpupack",
    "nodeplacement",
    "gpusharingorder",
)


@dataclass(frozen=True, slots=True)
class PluginOption:
    name: str
    arguments: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SchedulerParams:
    scheduler_name: str = "kai-scheduler"
    max_consolidation_preemptees: int = 16
    allow_consolidating_reclaim: bool = True
    staleness_grace_period: float = 60.0  # seconds; negative = never evict stale gangs
    full_hierarchy_fairness: bool = True
    use_scheduling_signatures: bool = True
    # Disruption budget (kai's own, not KAI's): negative = off.
    max_evicted_gpu_ratio: float = -1.0  # GPUs evicted for one preemptor per cycle / GPUs it requests
    max_evicted_gpus_per_queue: float = -1.0  # GPUs evicted from one (victim leaf) queue per cycle


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    actions: tuple[str, ...] = DEFAULT_ACTIONS
    plugins: tuple[PluginOption, ...] = tuple(PluginOption(n) for n in DEFAULT_PLUGINS)
    params: SchedulerParams = SchedulerParams()
    queue_depth_per_action: dict[str, int] = field(default_factory=dict)

    def plugin_arguments(self, name: str) -> dict[str, str] | None:
        for option in self.plugins:
            if option.name == name:
                return option.arguments
        return None


_PARAM_FIELDS: dict[str, tuple[str, type]] = {
    "schedulerName": ("scheduler_name", str),
    "maxNumberConsolidationPreemptees": ("max_consolidation_preemptees", int),
    "allowConsolidatingReclaim": ("allow_consolidating_reclaim", bool),
    "globalDefaultStalenessGracePeriod": ("staleness_grace_period", float),
    "fullHierarchyFairness": ("full_hierarchy_fairness", bool),
    "useSchedulingSignatures": ("use_scheduling_signatures", bool),
    "maxEvictedToRequestedGpuRatio": ("max_evicted_gpu_ratio", float),
    "maxEvictedGpusPerQueuePerCycle": ("max_evicted_gpus_per_queue", float),
}


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if str(value).strip().lower() in ("true", "1", "yes"):
        return True
    if str(value).strip().lower() in ("false", "0", "no"):
        return False
    raise ValueError(f"{value!r} is not true or false")


def parse_config(
    raw: Any, known_actions: set[str], where: str = "scheduler config"
) -> tuple[SchedulerConfig, list[Problem], list[str]]:
    """Parse the configuration mapping; returns the config, problems (fatal) and warnings."""
    problems: list[Problem] = []
    warnings: list[str] = []
    if raw is None:
        return SchedulerConfig(), problems, warnings
    if not isinstance(raw, dict):
        return SchedulerConfig(), [Problem(where, "", "must be a mapping")], warnings

    actions = DEFAULT_ACTIONS
    if raw.get("actions") is not None:
        names = tuple(a.strip() for a in str(raw["actions"]).split(",") if a.strip())
        for name in names:
            if name not in known_actions:
                problems.append(
                    Problem(where, "actions", f"unknown action {name!r} (known: {', '.join(sorted(known_actions))})")
                )
        actions = names

    plugins = tuple(PluginOption(n) for n in DEFAULT_PLUGINS)
    if raw.get("tiers") is not None:
        collected: list[PluginOption] = []
        tiers = raw["tiers"]
        if not isinstance(tiers, list):
            problems.append(Problem(where, "tiers", "must be a list of {plugins: [...]}"))
            tiers = []
        for t_index, tier in enumerate(tiers):
            for p_index, plugin in enumerate((tier or {}).get("plugins") or []):
                if not isinstance(plugin, dict) or not plugin.get("name"):
                    problems.append(Problem(where, f"tiers[{t_index}].plugins[{p_index}].name", "is required"))
                    continue
                args = plugin.get("arguments") or {}
                if not isinstance(args, dict):
                    problems.append(
                        Problem(where, f"tiers[{t_index}].plugins[{p_index}].arguments", "must be a mapping")
                    )
                    args = {}
                collected.append(PluginOption(str(plugin["name"]), {str(k): str(v) for k, v in args.items()}))
        plugins = tuple(collected)

    params: dict[str, Any] = {}
    raw_params = raw.get("schedulerParams") or {}
    if not isinstance(raw_params, dict):
        problems.append(Problem(where, "schedulerParams", "must be a mapping"))
        raw_params = {}
    for key, value in raw_params.items():
        if key not in _PARAM_FIELDS:
            warnings.append(f"{where}: schedulerParams.{key} is not a parameter kai knows: ignored")
            continue
        attr, kind = _PARAM_FIELDS[key]
        try:
            if kind is bool:
                params[attr] = _bool(value)
            elif attr == "staleness_grace_period":
                params[attr] = parse_duration(value)
            else:
                params[attr] = kind(value)
        except (TypeError, ValueError) as err:
            problems.append(Problem(where, f"schedulerParams.{key}", str(err)))
    if params.get("max_consolidation_preemptees", 0) < 0:
        problems.append(Problem(where, "schedulerParams.maxNumberConsolidationPreemptees", "must not be negative"))

    depth: dict[str, int] = {}
    for key, value in (raw.get("queueDepthPerAction") or {}).items():
        if key not in actions:
            problems.append(Problem(where, f"queueDepthPerAction.{key}", "names an action that is not enabled"))
        elif not isinstance(value, int) or value < 1:
            problems.append(Problem(where, f"queueDepthPerAction.{key}", f"must be a positive integer, got {value!r}"))
        else:
            depth[key] = value
    for key in raw:
        if key not in ("actions", "tiers", "schedulerParams", "queueDepthPerAction", "usageDBConfig"):
            warnings.append(f"{where}: field {key!r} is not read by kai: ignored")
    return SchedulerConfig(actions, plugins, SchedulerParams(**params), depth), problems, warnings
