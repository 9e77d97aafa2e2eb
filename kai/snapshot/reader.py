"""Reading Kubernetes objects from YAML files: multi-document streams and `v1 List`s."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from kai.api.errors import Problem

try:
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _Loader = yaml.SafeLoader


def read_objects(paths: list[str | Path]) -> tuple[list[dict[str, Any]], list[Problem]]:
    """All objects in the files, in file order, with one problem per unreadable file or document."""
    objects: list[dict[str, Any]] = []
    problems: list[Problem] = []
    for path in paths:
        where = f"file {path}"
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as err:
            problems.append(Problem(where, "", f"cannot be read: {err.strerror or err}"))
            continue
        try:
            documents = list(yaml.load_all(text, Loader=_Loader))
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            at = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            reason = getattr(err, "problem", None) or str(err).splitlines()[0]
            problems.append(Problem(where, at, f"is not valid YAML: {reason}"))
            continue
        for number, doc in enumerate(documents, start=1):
            if doc is None:
                continue
            if not isinstance(doc, dict):
                problems.append(Problem(where, f"document {number}", "is not a Kubernetes object (a mapping)"))
                continue
            if doc.get("kind") == "List" or (str(doc.get("kind", "")).endswith("List") and "items" in doc):
                for index, item in enumerate(doc.get("items") or []):
                    if isinstance(item, dict):
                        objects.append(item)
                    else:
                        problems.append(Problem(where, f"document {number} items[{index}]", "is not an object"))
                continue
            objects.append(doc)
    return objects, problems
