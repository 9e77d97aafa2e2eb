"""The scheduler configuration file, in KAI's format: actions, plugin tiers with arguments, parameters."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kai.api.errors import Problem
from kai.api.timeutil import parse_duration, parse_time

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
    # kai's protective eviction rules (not KAI's): off by default, see kai/actions/NOTES.md.
    reclaim_keeps_victim_share: bool = False  # a reclaim chunk never takes its queue below share / quota
    reclaim_spares_queues_within_quota: bool = False  # a queue within quota at cycle start keeps its pods
    spare_jobs_placed_this_cycle: bool = False  # pods placed earlier in the cycle are never victims
    evict_elastic_extras_first: bool = False  # in a victim queue, elastic extras go before any gang


@dataclass(frozen=True, slots=True)
class UsageParams:
    """`usageDBConfig.usageParams`: how queue usage history is weighed (time-based fair share, 4.3).
    Durations in seconds, instants in epoch seconds; a half-life of 0 means no decay."""

    half_life_period: float = 0.0
    window_size: float = 7 * 86400.0
    window_type: str = "sliding"  # sliding | tumbling (cron is read but not built: treated as sliding)
    tumbling_window_start_time: float = 0.0
    fetch_interval: float = 60.0
    staleness_period: float = 300.0


@dataclass(frozen=True, slots=True)
class UsageDBConfig:
    """`usageDBConfig`: where usage comes from live (the simulator uses its own history instead)."""

    client_type: str = "prometheus"
    connection_string: str = ""
    params: UsageParams = UsageParams()


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    actions: tuple[str, ...] = DEFAULT_ACTIONS
    plugins: tuple[PluginOption, ...] = tuple(PluginOption(n) for n in DEFAULT_PLUGINS)
    params: SchedulerParams = SchedulerParams()
    queue_depth_per_action: dict[str, int] = field(default_factory=dict)
    usage_db: UsageDBConfig | None = None  # set: time-based fair share is on

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
    "reclaimKeepsVictimShare": ("reclaim_keeps_victim_share", bool),
    "reclaimSparesQueuesWithinQuota": ("reclaim_spares_queues_within_quota", bool),
    "spareJobsPlacedThisCycle": ("spare_jobs_placed_this_cycle", bool),
    "evictElasticExtrasFirst": ("evict_elastic_extras_first", bool),
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
    usage_db = _usage_db(raw.get("usageDBConfig"), where, problems, warnings)
    return SchedulerConfig(actions, plugins, SchedulerParams(**params), depth, usage_db), problems, warnings


_USAGE_DURATIONS = {
    "halfLifePeriod": "half_life_period",
    "windowSize": "window_size",
    "fetchInterval": "fetch_interval",
    "stalenessPeriod": "staleness_period",
}


def _usage_duration(value: Any) -> float:
    """A Go duration, or whole days/weeks such as `7d` or `1w` (how people write usage windows)."""
    text = str(value).strip()
    if text[:-1].isdigit() and text[-1:] in ("d", "w"):
        return float(text[:-1]) * (86400.0 if text[-1] == "d" else 604800.0)
    return parse_duration(value)


def _usage_db(raw: Any, where: str, problems: list[Problem], warnings: list[str]) -> UsageDBConfig | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        problems.append(Problem(where, "usageDBConfig", "must be a mapping"))
        return None
    client = str(raw.get("clientType") or "prometheus")
    if client not in ("prometheus", "fake", "fake-with-history"):
        problems.append(
            Problem(where, "usageDBConfig.clientType", f"must be prometheus, fake or fake-with-history, got {client!r}")
        )
    values: dict[str, Any] = {}
    usage = raw.get("usageParams") or {}
    if not isinstance(usage, dict):
        problems.append(Problem(where, "usageDBConfig.usageParams", "must be a mapping"))
        usage = {}
    for key, attr in _USAGE_DURATIONS.items():
        if usage.get(key) is None:
            continue
        try:
            values[attr] = _usage_duration(usage[key])
        except ValueError as err:
            problems.append(Problem(where, f"usageDBConfig.usageParams.{key}", str(err)))
            continue
        if values[attr] < 0 or (attr == "window_size" and values[attr] == 0):
            problems.append(Problem(where, f"usageDBConfig.usageParams.{key}", f"must be positive, got {usage[key]!r}"))
    window_type = str(usage.get("windowType") or "sliding")
    if window_type == "cron":
        warnings.append(f"{where}: usageDBConfig.usageParams.windowType cron is not built in kai: sliding is used")
        window_type = "sliding"
    elif window_type not in ("sliding", "tumbling"):
        fld = "usageDBConfig.usageParams.windowType"
        problems.append(Problem(where, fld, f"must be sliding, tumbling or cron, got {window_type!r}"))
    values["window_type"] = window_type
    if usage.get("tumblingWindowStartTime") is not None:
        try:
            values["tumbling_window_start_time"] = parse_time(usage["tumblingWindowStartTime"])
        except ValueError as err:
            problems.append(Problem(where, "usageDBConfig.usageParams.tumblingWindowStartTime", str(err)))
    return UsageDBConfig(client, str(raw.get("connectionString") or ""), UsageParams(**values))
