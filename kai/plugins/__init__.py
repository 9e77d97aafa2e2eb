"""Scheduling policies, each registering hooks on the session.

Importing this package registers every plugin it holds.
"""

from kai.plugins import (
    dynamicresources,
    elastic,
    gpusharing,
    minruntime,
    nodeavailability,
    nodeplacement,
    nominatednode,
    podaffinity,
    predicates,
    priority,
    resourcetype,
    subgrouporder,
    taskorder,
    topology,
)
from kai.plugins.proportion import plugin as proportion

__all__ = [
    "dynamicresources",
    "elastic",
    "gpusharing",
    "minruntime",
    "nodeavailability",
    "nodeplacement",
    "nominatednode",
    "podaffinity",
    "predicates",
    "priority",
    "proportion",
    "resourcetype",
    "subgrouporder",
    "taskorder",
    "topology",
]
