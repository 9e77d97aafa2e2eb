"""The scheduler configuration file, in KAI's format: actions, plugin tiers with arguments, parameters.

The reader's rule (the same as the snapshot loader's):

- **Refuse** only what KAI's own reader refuses or what cannot mean anything, with one problem naming
  the field: a value of the wrong type (a string where a number belongs, a list where a mapping
  belongs, `null` where a string belongs), a fraction where a whole number belongs (`1.9`
  preemptees), NaN or infinity, an unknown action, a duration Go cannot read.
- **Accept** every value KAI accepts, with KAI's meaning, and **warn** (naming the field) on the
  merely odd: a plugin name KAI does not know (skipped, as KAI does), a KAI plugin kai has not built
  yet (skipped; live it is also counted in a metric), a plugin list without `proportion` (no quotas
  or fair share, as in KAI), a `queueDepthPerAction` entry for an action that is not enabled or a
  depth KAI's scheduler crashes on, a parameter kai does not read.

Plugin arguments are strings in KAI (`arguments: {kValue: "1.0"}`); numbers and booleans are taken
as the text they stand for.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from kai.api.errors import Problem
from kai.api.timeutil import parse_duration, parse_time
from kai.framework.plugin import plugin_factory, registered_plugins

DEFAULT_ACTIONS = ("allocate", "consolidation", "reclaim", "preempt", "stalegangeviction")
# KAI's operator defaults, in order.
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
# Every plugin KAI's scheduler knows, with what it does there: the
# one list of KAI's plugin names. A name here that kai's plugin registry lacks is "not built" in kai.
KAI_PLUGINS: dict[str, str] = {
    "predicates": "node filters and the largest-node pre-check",
    "proportion": "queue quotas, limits and fair share",
    "priority": "job order by priority class",
    "nodeavailability": "prefers nodes where the pod fits right now",
    "resourcetype": "keeps CPU-only pods on CPU-only nodes",
    "podaffinity": "pod affinity and anti-affinity",
    "elastic": "job order by minMember",
    "kubeflow": "Kubeflow task order",
    "ray": "Ray task order",
    "subgrouporder": "sub-group order",
    "taskorder": "task order by kai.scheduler/task-priority",
    "nominatednode": "prefers a pod's nominated node",
    "dynamicresources": "Dynamic Resource Allocation (pod resource claims)",
    "minruntime": "minimum runtime before preemption and reclaim",
    "topology": "topology-aware placement",
    "snapshot": "the /get-snapshot debugging endpoint; kai's live scheduler serves /snapshot instead",
    "gpupack": "packs shared GPUs",
    "gpuspread": "spreads over GPUs",
    "nodeplacement": "binpack or spread over nodes",
    "gpusharingorder": "prefers nodes with a shared GPU the pod fits",
    "reflectjoborder": "the /get-job-order debugging endpoint",
}
# KAI's PluginOption switches inherited from kube-batch: read by KAI's parser, used by nothing.
_LEGACY_PLUGIN_SWITCHES = {
    "enabledJobOrder",
    "enabledJobReady",
    "enabledJobPipelined",
    "enabledTaskOrder",
    "enabledPreemptable",
    "enabledReclaimable",
    "enabledQueueOrder",
    "enabledPredicate",
    "enabledNodeOrder",
    "disableJobOrder",
    "disableTaskOrder",
    "disablePreemptable",
    "disableReclaimable",
    "disableQueueOrder",
    "disablePredicate",
    "disableNodeOrder",
}
UNLIMITED_PREEMPTEES = -1  # maxNumberConsolidationPreemptees: no restriction


@dataclass(frozen=True, slots=True)
class PluginOption:
    name: str
    arguments: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SchedulerParams:
    scheduler_name: str = "kai-scheduler"
    # Victim jobs one consolidation may move: -1 = no restriction, 0 = consolidation off; KAI finds no
    # consolidation with any other negative value (kai: off).
    max_consolidation_preemptees: int = 16
    allow_consolidating_reclaim: bool = True
    staleness_grace_period: float = 60.0  # seconds; negative = never evict stale gangs
    full_hierarchy_fairness: bool = True
    use_scheduling_signatures: bool = True
    # Disruption budget (kai's own, not KAI's): negative = off.
    max_evicted_gpu_ratio: float = -1.0  # GPUs evicted for one preemptor per cycle / GPUs it requests
    max_evicted_gpus_per_queue: float = -1.0  # GPUs evicted from one (victim leaf) queue per cycle
    # kai's own, off by default: allocate skips a job that asks for more than is free when ordering queues.
    defer_oversized_jobs: bool = False
    # kai's protective eviction rules (not KAI's): off by default, see kai/actions/NOTES.md.
    reclaim_keeps_victim_share: bool = False  # a reclaim chunk never takes its queue below share / quota
    reclaim_spares_queues_within_quota: bool = False  # a queue within quota at cycle start keeps its pods
    spare_jobs_placed_this_cycle: bool = False  # pods placed earlier in the cycle are never victims
    evict_elastic_extras_first: bool = False  # in a victim queue, elastic extras go before any gang


@dataclass(frozen=True, slots=True)
class UsageParams:
    """`usageDBConfig.usageParams`: how queue usage history is weighed (time-based fair share).
    Durations in seconds, instants in epoch seconds; a half-life of 0 means no decay."""

    half_life_period: float = 0.0
    window_size: float = 7 * 86400.0
    window_type: str = "sliding"  # sliding | tumbling (cron is read but not built: treated as sliding)
    tumbling_window_start_time: float = 0.0
    fetch_interval: float = 60.0
    staleness_period: float = 300.0
    wait_timeout: float = 60.0
    # `extraParams`, client specific (Prometheus: metric names, usageQueryTimeout, queryResolution), as
    # (key, value) pairs of strings, in the configuration's order.
    extra_params: tuple[tuple[str, str], ...] = ()

    def extra(self, key: str, default: str = "") -> str:
        """The `extraParams` value of `key`, or `default` when it is absent or empty."""
        for name, value in self.extra_params:
            if name == key and value:
                return value
        return default


@dataclass(frozen=True, slots=True)
class UsageDBConfig:
    """`usageDBConfig`: where usage comes from live (the simulator uses its own history instead)."""

    client_type: str = "prometheus"
    connection_string: str = ""
    params: UsageParams = UsageParams()
    connection_string_env_var: str = ""
    """`connectionStringEnvVar`: the environment variable holding the connection string (when none is given)."""


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    actions: tuple[str, ...] = DEFAULT_ACTIONS
    plugins: tuple[PluginOption, ...] = tuple(PluginOption(n) for n in DEFAULT_PLUGINS)
    params: SchedulerParams = SchedulerParams()
    # Jobs per leaf queue an action considers (its best ones); an action not listed: all. 0: none.
    queue_depth_per_action: dict[str, int] = field(default_factory=dict)
    usage_db: UsageDBConfig | None = None  # set: time-based fair share is on
    # KAI plugins the configuration file names that kai has not built (skipped; counted live).
    not_built: tuple[str, ...] = ()

    def plugin_arguments(self, name: str) -> dict[str, str] | None:
        for option in self.plugins:
            if option.name == name:
                return option.arguments
        return None


# -- typed values ------------------------------------------------------------------------------------
class _Bad(ValueError):
    """A value of the wrong type or form; the message says what was expected."""


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f"the string {value[:60]!r}"
    return f"{value!r}"[:60]


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise _Bad(f"must be a string, got {_kind(value)}")
    return value


def _name(value: Any) -> str:
    text = _string(value)
    if not text.strip():
        raise _Bad("must not be empty")
    return text


def _integer(value: Any, strings: bool = False) -> int:
    """A whole number; `strings`: also its decimal text (schedulerParams are command-line flags in KAI)."""
    if strings and isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            raise _Bad(f"must be a whole number, got {_kind(value)}") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Bad(f"must be a whole number, got {_kind(value)}")
    if not math.isfinite(value) or value != math.floor(value):
        raise _Bad(f"must be a whole number, got {value!r}")
    return int(value)


def _number(value: Any) -> float:
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            raise _Bad(f"must be a number, got {_kind(value)}") from None
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise _Bad(f"must be a number, got {_kind(value)}")
    else:
        number = float(value)
    if not math.isfinite(number):
        raise _Bad(f"must be a finite number, got {value!r}")
    return number


_TRUE = {"1", "t", "T", "true", "TRUE", "True"}  # Go's strconv.ParseBool
_FALSE = {"0", "f", "F", "false", "FALSE", "False"}


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip() in _TRUE | _FALSE:
        return value.strip() in _TRUE
    raise _Bad(f"must be true or false, got {_kind(value)}")


def _duration(value: Any) -> float:
    try:
        return parse_duration(value)
    except ValueError as err:
        raise _Bad(str(err)) from None


def _argument(value: Any) -> str:
    """A plugin argument as KAI holds it (a string); numbers and booleans as the text they stand for."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _Bad(f"must be a finite number, got {value!r}")
        return repr(value)
    raise _Bad(f"must be a string (or a number), got {_kind(value)}")


# schedulerParams key -> (SchedulerParams attribute, reader)
_PARAM_FIELDS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "schedulerName": ("scheduler_name", _name),
    "maxNumberConsolidationPreemptees": ("max_consolidation_preemptees", lambda v: _integer(v, strings=True)),
    "allowConsolidatingReclaim": ("allow_consolidating_reclaim", _boolean),
    "globalDefaultStalenessGracePeriod": ("staleness_grace_period", _duration),
    "fullHierarchyFairness": ("full_hierarchy_fairness", _boolean),
    "useSchedulingSignatures": ("use_scheduling_signatures", _boolean),
    "maxEvictedToRequestedGpuRatio": ("max_evicted_gpu_ratio", _number),
    "maxEvictedGpusPerQueuePerCycle": ("max_evicted_gpus_per_queue", _number),
    "deferOversizedJobs": ("defer_oversized_jobs", _boolean),
    "reclaimKeepsVictimShare": ("reclaim_keeps_victim_share", _boolean),
    "reclaimSparesQueuesWithinQuota": ("reclaim_spares_queues_within_quota", _boolean),
    "spareJobsPlacedThisCycle": ("spare_jobs_placed_this_cycle", _boolean),
    "evictElasticExtrasFirst": ("evict_elastic_extras_first", _boolean),
}
_TOP_LEVEL = ("actions", "tiers", "schedulerParams", "queueDepthPerAction", "usageDBConfig")


class _Reader:
    """Collects problems and warnings while one configuration is read."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.problems: list[Problem] = []
        self.warnings: list[str] = []

    def problem(self, fld: str, message: str) -> None:
        self.problems.append(Problem(self.where, fld, message))

    def warn(self, fld: str, message: str) -> None:
        self.warnings.append(f"{self.where}: {fld}: {message}" if fld else f"{self.where}: {message}")

    def read(self, fld: str, value: Any, reader: Callable[[Any], Any]) -> Any:
        """reader(value), or None with a problem naming the field."""
        try:
            return reader(value)
        except _Bad as err:
            self.problem(fld, str(err))
            return None

    def mapping(self, fld: str, value: Any, what: str) -> dict[Any, Any]:
        """The mapping at `fld` (null or absent: empty); anything else is a problem."""
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.problem(fld, f"must be a mapping of {what}, got {_kind(value)}")
            return {}
        return value


def parse_config(
    raw: Any,
    known_actions: set[str],
    where: str = "scheduler config",
    built_plugins: Collection[str] | None = None,
) -> tuple[SchedulerConfig, list[Problem], list[str]]:
    """Parse the configuration mapping; returns the config, problems (fatal) and warnings.
    `built_plugins`: kai's plugin registry (by default, the plugins registered when this runs)."""
    if built_plugins is None:
        built_plugins = set(registered_plugins())
    r = _Reader(where)
    if raw is None:
        return SchedulerConfig(), r.problems, r.warnings
    if not isinstance(raw, dict):
        r.problem("top level", f"must be a mapping (actions, tiers, schedulerParams, ...), got {_kind(raw)}")
        return SchedulerConfig(), r.problems, r.warnings
    for key in raw:
        if key not in _TOP_LEVEL:
            r.warn("", f"field {key!r} is not read by kai: ignored")

    actions = _actions(r, raw, known_actions)
    plugins, not_built = _plugins(r, raw, built_plugins)
    params = _params(r, raw)
    depth = _depths(r, raw, actions, known_actions)
    usage_db = _usage_db(raw.get("usageDBConfig"), r)
    config = SchedulerConfig(actions, plugins, SchedulerParams(**params), depth, usage_db, tuple(not_built))
    return config, r.problems, r.warnings


def _actions(r: _Reader, raw: dict[Any, Any], known_actions: set[str]) -> tuple[str, ...]:
    if "actions" not in raw:
        return DEFAULT_ACTIONS
    text = r.read("actions", raw["actions"], _string)
    if text is None:
        return DEFAULT_ACTIONS
    names = tuple(a.strip() for a in text.split(",") if a.strip())
    if not names:
        r.warn("actions", "is empty: the default actions are used (as KAI does)")
        return DEFAULT_ACTIONS
    for name in names:
        if name not in known_actions:
            r.problem("actions", f"unknown action {name!r} (known: {', '.join(sorted(known_actions))})")
    return names


def _plugins(r: _Reader, raw: dict[Any, Any], built: Collection[str]) -> tuple[tuple[PluginOption, ...], list[str]]:
    default = tuple(PluginOption(n) for n in DEFAULT_PLUGINS)
    tiers = raw.get("tiers")
    if tiers is None:
        return default, []
    if not isinstance(tiers, list):
        r.problem("tiers", f"must be a list of {{plugins: [...]}}, got {_kind(tiers)}")
        return default, []
    if not tiers:
        r.warn("tiers", "is empty: the default plugins are used (as KAI does)")
        return default, []
    collected: list[PluginOption] = []
    not_built: list[str] = []
    problems_before = len(r.problems)
    for t_index, tier in enumerate(tiers):
        where = f"tiers[{t_index}]"
        if not isinstance(tier, dict):
            r.problem(where, f"must be a mapping with a plugins list, got {_kind(tier)}")
            continue
        for key in tier:
            if key != "plugins":
                r.warn(where, f"field {key!r} is not read by kai: ignored")
        entries = tier.get("plugins")
        if entries is None:
            continue
        if not isinstance(entries, list):
            r.problem(f"{where}.plugins", f"must be a list of {{name: ..., arguments: {{...}}}}, got {_kind(entries)}")
            continue
        for p_index, plugin in enumerate(entries):
            option = _plugin(r, f"{where}.plugins[{p_index}]", plugin, built)
            if option is None:
                continue
            collected.append(option)
            if option.name in built:
                continue
            if option.name in KAI_PLUGINS:
                not_built.append(option.name)
                r.warn(
                    f"{where}.plugins[{p_index}]",
                    f"plugin {option.name!r} is not built in kai yet: skipped (in KAI: {KAI_PLUGINS[option.name]})",
                )
            else:
                close = difflib.get_close_matches(option.name, sorted(KAI_PLUGINS), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                r.warn(
                    f"{where}.plugins[{p_index}]",
                    f"plugin {option.name!r} is not a KAI plugin: skipped, as KAI does{hint}",
                )
    if "proportion" not in {o.name for o in collected} and len(r.problems) == problems_before:
        r.warn("tiers", "no proportion plugin: queue quotas, limits and fair share are off (as in KAI)")
    return tuple(collected), not_built


def _plugin(r: _Reader, where: str, plugin: Any, built: Collection[str]) -> PluginOption | None:
    if not isinstance(plugin, dict):
        r.problem(where, f"must be a mapping with a name, got {_kind(plugin)}")
        return None
    if "name" not in plugin:
        r.problem(f"{where}.name", "is required")
        return None
    name = r.read(f"{where}.name", plugin["name"], _name)
    if name is None:
        return None
    for key in plugin:
        if key in ("name", "arguments"):
            continue
        if key in _LEGACY_PLUGIN_SWITCHES:
            r.warn(where, f"{key!r} has no effect (in KAI either): ignored")
        else:
            r.warn(where, f"field {key!r} is not read by kai: ignored")
    arguments: dict[str, str] = {}
    ok = True
    for key, value in r.mapping(f"{where}.arguments", plugin.get("arguments"), "argument names to values").items():
        if not isinstance(key, str):
            r.problem(f"{where}.arguments", f"argument names must be strings, got {_kind(key)}")
            ok = False
            continue
        text = r.read(f"{where}.arguments.{key}", value, _argument)
        if text is None:
            ok = False
            continue
        arguments[key] = text
    if ok and name in built:
        factory = plugin_factory(name)
        if factory is not None:
            try:
                factory(arguments)  # factories check their arguments and do nothing else
            except ValueError as err:
                r.problem(f"{where}.arguments", str(err))
    return PluginOption(name, arguments)


def _params(r: _Reader, raw: dict[Any, Any]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for key, value in r.mapping("schedulerParams", raw.get("schedulerParams"), "parameter names to values").items():
        if key not in _PARAM_FIELDS:
            r.warn(f"schedulerParams.{key}", "is not a parameter kai knows: ignored")
            continue
        attr, reader = _PARAM_FIELDS[key]
        parsed = r.read(f"schedulerParams.{key}", value, reader)
        if parsed is not None:
            params[attr] = parsed
    preemptees = params.get("max_consolidation_preemptees")
    if preemptees is not None and preemptees < UNLIMITED_PREEMPTEES:
        r.warn(
            "schedulerParams.maxNumberConsolidationPreemptees",
            f"{preemptees} is below -1 (no restriction): KAI then finds no consolidation, so consolidation is off",
        )
    return params


def _depths(r: _Reader, raw: dict[Any, Any], actions: tuple[str, ...], known_actions: set[str]) -> dict[str, int]:
    depth: dict[str, int] = {}
    entries = r.mapping("queueDepthPerAction", raw.get("queueDepthPerAction"), "action names to numbers of jobs")
    for key, value in entries.items():
        fld = f"queueDepthPerAction.{key}"
        number = r.read(fld, value, _integer)
        if number is None:
            continue
        if key not in actions:
            what = "is not enabled in actions" if key in known_actions else "is not an action"
            r.warn(fld, f"{key!r} {what}: no effect")
            continue
        if number == -1:
            continue  # KAI: -1 is no limit
        if number <= 0:
            r.warn(
                fld,
                f"{number}: KAI's scheduler crashes (nil dereference) as soon as {key} has a job to consider "
                "with a depth of 0 or below -1; kai considers no job in this action",
            )
            number = 0
        depth[key] = number
    return depth


_USAGE_DURATIONS = {
    "halfLifePeriod": "half_life_period",
    "windowSize": "window_size",
    "fetchInterval": "fetch_interval",
    "stalenessPeriod": "staleness_period",
    "waitTimeout": "wait_timeout",
}
_USAGE_EXTRA_DURATIONS = ("usageQueryTimeout", "queryResolution")


def _usage_duration(value: Any) -> float:
    """A Go duration, or whole days/weeks such as `7d` or `1w` (how people write usage windows)."""
    text = str(value).strip() if isinstance(value, str) else ""
    if text[:-1].isdigit() and text[-1:] in ("d", "w"):
        return float(text[:-1]) * (86400.0 if text[-1] == "d" else 604800.0)
    return _duration(value)


def _usage_db(raw: Any, r: _Reader) -> UsageDBConfig | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        r.problem("usageDBConfig", f"must be a mapping, got {_kind(raw)}")
        return None
    client = "prometheus"
    if raw.get("clientType") is not None:
        client = r.read("usageDBConfig.clientType", raw["clientType"], _string) or client
    if client not in ("prometheus", "fake", "fake-with-history"):
        r.problem("usageDBConfig.clientType", f"must be prometheus, fake or fake-with-history, got {client!r}")
    connection = ""
    if raw.get("connectionString") is not None:
        connection = r.read("usageDBConfig.connectionString", raw["connectionString"], _string) or ""
    env_var = ""
    if raw.get("connectionStringEnvVar") is not None:
        env_var = r.read("usageDBConfig.connectionStringEnvVar", raw["connectionStringEnvVar"], _string) or ""
    for key in raw:
        if key not in ("clientType", "connectionString", "connectionStringEnvVar", "usageParams"):
            r.warn("usageDBConfig", f"field {key!r} is not read by kai: ignored")
    values: dict[str, Any] = {}
    usage = r.mapping("usageDBConfig.usageParams", raw.get("usageParams"), "parameter names to values")
    for key in usage:
        if key not in (*_USAGE_DURATIONS, "windowType", "tumblingWindowStartTime", "extraParams", "cronString"):
            r.warn("usageDBConfig.usageParams", f"field {key!r} is not read by kai: ignored")
    extra = r.mapping("usageDBConfig.usageParams.extraParams", usage.get("extraParams"), "names to strings")
    pairs = []
    for key, value in extra.items():
        where = f"usageDBConfig.usageParams.extraParams.{key}"
        text = r.read(where, value, _argument)
        if text is None:
            continue
        if key in _USAGE_EXTRA_DURATIONS and text:
            try:
                parse_duration(text)
            except ValueError:
                r.warn(where, f"{text!r} is not a Go duration: the default is used")
        pairs.append((str(key), text))
    values["extra_params"] = tuple(pairs)
    for key, attr in _USAGE_DURATIONS.items():
        if usage.get(key) is None:
            continue
        seconds = r.read(f"usageDBConfig.usageParams.{key}", usage[key], _usage_duration)
        if seconds is None:
            continue
        if seconds < 0 or (attr == "window_size" and seconds == 0):
            r.problem(f"usageDBConfig.usageParams.{key}", f"must be positive, got {usage[key]!r}")
            continue
        values[attr] = seconds
    window_type = "sliding"
    if usage.get("windowType") is not None:
        window_type = r.read("usageDBConfig.usageParams.windowType", usage["windowType"], _string) or window_type
    if window_type == "cron":
        r.warn("usageDBConfig.usageParams.windowType", "cron is not built in kai: sliding is used")
        window_type = "sliding"
    elif window_type not in ("sliding", "tumbling"):
        r.problem("usageDBConfig.usageParams.windowType", f"must be sliding, tumbling or cron, got {window_type!r}")
    values["window_type"] = window_type
    if usage.get("tumblingWindowStartTime") is not None:
        try:
            values["tumbling_window_start_time"] = parse_time(usage["tumblingWindowStartTime"])
        except ValueError as err:
            r.problem("usageDBConfig.usageParams.tumblingWindowStartTime", str(err))
    return UsageDBConfig(client, connection, UsageParams(**values), env_var)
