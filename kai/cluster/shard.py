"""KAI's ``SchedulingShard`` (``kai.scheduler/v1``) as a scheduler configuration.

KAI's operator runs one scheduler per shard and writes its configuration file from the shard's
spec; ``kai run --scheduling-shard FILE`` does the same in the scheduler (the Helm chart mounts the
shard's spec). From the spec:

* ``placementStrategy.{gpu,cpu}`` (``binpack``, the default, or ``spread``): the ``nodeplacement``
  plugin's arguments; ``gpupack`` or ``gpuspread`` by the GPU strategy; ``gpusharingorder`` only
  with GPU binpack; ``consolidation`` off when either strategy is spread.
* ``actions`` / ``plugins`` (name -> ``enabled``, ``priority``, and for plugins ``arguments``):
  merged into KAI's defaults and their priorities (higher runs first); ``enabled`` and
  ``priority`` replace the default's one by one, ``arguments`` replace the default arguments
  whole; a name not among the defaults is added (enabled, priority 0).
* ``kValue`` -> ``proportion``'s ``kValue``; ``minRuntime.{preempt,reclaim}MinRuntime`` ->
  ``minruntime``'s ``defaultPreemptMinRuntime`` / ``defaultReclaimMinRuntime``.
* ``queueDepthPerAction``, ``usageDBConfig``: copied as they are.
* ``partitionLabelValue``: the node pool the scheduler takes (``--partition-label-value``);
  ``args``: extra command-line flags (the chart renders them).
* ``goMemLimit``, ``goMemLimitRatio`` (Go's memory limit), ``scenarioSearchBudgets`` and
  ``scenarioSearchCheckpoints`` mean nothing to kai: a warning names them.

The result is KAI's configuration-file mapping, read by ``kai.framework.config.parse_config``
like any file; a value of the wrong type is a problem naming the field.
"""

from __future__ import annotations

from typing import Any

from kai.api.errors import Problem

ACTION_PRIORITIES = {"allocate": 500, "consolidation": 400, "reclaim": 300, "preempt": 200, "stalegangeviction": 100}
PLUGIN_PRIORITIES = {
    "predicates": 1900,
    "proportion": 1800,
    "priority": 1700,
    "nodeavailability": 1600,
    "resourcetype": 1500,
    "podaffinity": 1400,
    "elastic": 1300,
    "kubeflow": 1200,
    "ray": 1100,
    "subgrouporder": 1000,
    "taskorder": 900,
    "nominatednode": 800,
    "dynamicresources": 700,
    "minruntime": 600,
    "topology": 500,
    "snapshot": 400,
    "gpupack": 300,  # or gpuspread, by placementStrategy.gpu
    "nodeplacement": 200,
    "gpusharingorder": 100,  # GPU binpack only
}
STRATEGIES = ("binpack", "spread")
SPEC_FIELDS = {
    "partitionLabelValue",
    "placementStrategy",
    "actions",
    "plugins",
    "kValue",
    "minRuntime",
    "queueDepthPerAction",
    "usageDBConfig",
    "args",
}
NOT_READ = {
    "goMemLimit": "Go's memory limit (kai is not a Go program)",
    "goMemLimitRatio": "Go's memory limit (kai is not a Go program)",
    "scenarioSearchBudgets": "scenario search time budgets (kai's search has none)",
    "scenarioSearchCheckpoints": "reclaim search checkpoints (not built)",
}


_OBJECT_FIELDS = {"apiVersion", "kind", "metadata", "spec", "status"}


def shard_spec(raw: Any) -> Any:
    """The spec of a SchedulingShard object, or `raw` itself when it is a bare spec."""
    if isinstance(raw, dict) and (
        raw.get("kind") == "SchedulingShard"
        or ("spec" in raw and set(raw) <= {"apiVersion", "kind", "metadata", "spec"})
    ):
        return raw.get("spec") or {}
    return raw


def _built() -> set[str]:
    import kai.cycle  # noqa: F401 - registers kai's plugins
    from kai.framework.plugin import registered_plugins

    return set(registered_plugins())


def shard_config(raw: Any, where: str = "SchedulingShard") -> tuple[dict[str, Any], list[Problem], list[str]]:
    """KAI's configuration-file mapping for the shard `raw` (an object or its spec); problems, warnings."""
    problems: list[Problem] = []
    warnings: list[str] = []
    spec = shard_spec(raw)
    if spec is None:
        spec = {}
    if not isinstance(spec, dict):
        return {}, [Problem(where, "spec", f"must be a mapping, got {type(spec).__name__}")], warnings

    def problem(fld: str, message: str) -> None:
        problems.append(Problem(where, f"spec.{fld}", message))

    for key in spec:
        if key in NOT_READ:
            warnings.append(f"{where}: spec.{key} ({NOT_READ[key]}) is not read by kai: ignored")
        elif key not in SPEC_FIELDS:
            warnings.append(f"{where}: spec.{key} is not a SchedulingShard field kai knows: ignored")

    placement = spec.get("placementStrategy") or {}
    if not isinstance(placement, dict):
        problem("placementStrategy", "must be a mapping {gpu, cpu}")
        placement = {}
    strategy: dict[str, str] = {}
    for resource in ("gpu", "cpu"):
        value = placement.get(resource) or "binpack"
        if value not in STRATEGIES:
            problem(f"placementStrategy.{resource}", f"must be binpack or spread, got {value!r}")
            value = "binpack"
        strategy[resource] = value
    spread = "spread" in strategy.values()

    # -- actions --
    actions: dict[str, dict[str, Any]] = {
        name: {"enabled": not (name == "consolidation" and spread), "priority": priority}
        for name, priority in ACTION_PRIORITIES.items()
    }
    _merge(actions, spec.get("actions"), "actions", problem, arguments=False)
    action_list = [name for name, option in _ordered(actions) if option["enabled"]]

    # -- plugins --
    gpu_plugin = "gpuspread" if strategy["gpu"] == "spread" else "gpupack"
    plugins: dict[str, dict[str, Any]] = {}
    for name, priority in PLUGIN_PRIORITIES.items():
        if name == "gpupack":
            name = gpu_plugin
        plugins[name] = {"enabled": True, "priority": priority, "arguments": {}}
    if strategy["gpu"] != "binpack":
        plugins["gpusharingorder"]["enabled"] = False
    plugins["nodeplacement"]["arguments"] = {"gpu": strategy["gpu"], "cpu": strategy["cpu"]}
    if "kValue" in spec:
        k = spec["kValue"]
        if isinstance(k, bool) or not isinstance(k, int | float):
            problem("kValue", f"must be a number, got {k!r}")
        else:
            plugins["proportion"]["arguments"]["kValue"] = _number_text(k)
    runtime = spec.get("minRuntime")
    if runtime is not None:
        if not isinstance(runtime, dict):
            problem("minRuntime", "must be a mapping {preemptMinRuntime, reclaimMinRuntime}")
        else:
            for fld, argument in (
                ("preemptMinRuntime", "defaultPreemptMinRuntime"),
                ("reclaimMinRuntime", "defaultReclaimMinRuntime"),
            ):
                if runtime.get(fld) is not None:
                    plugins["minruntime"]["arguments"][argument] = str(runtime[fld])
    _merge(plugins, spec.get("plugins"), "plugins", problem, arguments=True)
    # KAI's defaults that kai has not built are left out (the configuration reader would warn at every
    # start); one the shard names itself stays, and gets its warning.
    named = set(spec.get("plugins") or {}) if isinstance(spec.get("plugins"), dict) else set()
    built = _built()
    tier = []
    for name, option in _ordered(plugins):
        if option["enabled"] and (name in built or name in named or name not in PLUGIN_PRIORITIES):
            entry: dict[str, Any] = {"name": name}
            if option["arguments"]:
                entry["arguments"] = dict(option["arguments"])
            tier.append(entry)

    config: dict[str, Any] = {"actions": ", ".join(action_list), "tiers": [{"plugins": tier}]}
    for key in ("queueDepthPerAction", "usageDBConfig"):
        if spec.get(key) is not None:
            config[key] = spec[key]
    args = spec.get("args")
    if args is not None and not isinstance(args, dict):
        problem("args", "must be a mapping flag -> value")
    return config, problems, warnings


def _merge(defaults: dict[str, dict[str, Any]], overrides: Any, fld: str, problem: Any, *, arguments: bool) -> None:
    if overrides is None:
        return
    if not isinstance(overrides, dict):
        problem(fld, "must be a mapping name -> {enabled, priority" + (", arguments}" if arguments else "}"))
        return
    for name, override in overrides.items():
        where = f"{fld}.{name}"
        if override is None:
            override = {}
        if not isinstance(override, dict):
            problem(where, "must be a mapping")
            continue
        option = defaults.setdefault(str(name), {"enabled": True, "priority": 0, "arguments": {}})
        if override.get("enabled") is not None:
            if not isinstance(override["enabled"], bool):
                problem(f"{where}.enabled", f"must be true or false, got {override['enabled']!r}")
            else:
                option["enabled"] = override["enabled"]
        if override.get("priority") is not None:
            priority = override["priority"]
            if isinstance(priority, bool) or not isinstance(priority, int):
                problem(f"{where}.priority", f"must be an integer, got {priority!r}")
            else:
                option["priority"] = priority
        if arguments and override.get("arguments") is not None:
            args = override["arguments"]
            if not isinstance(args, dict):
                problem(f"{where}.arguments", "must be a mapping of strings")
            else:
                option["arguments"] = {str(k): _text(v) for k, v in args.items()}


def _ordered(options: dict[str, dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """Higher priority first; equal priorities keep their order (defaults before additions)."""
    return sorted(options.items(), key=lambda item: -item[1]["priority"])


def _number_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
