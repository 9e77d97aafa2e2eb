"""Reading Kubernetes objects from YAML or JSON files: multi-document streams and `v1 List`s.

Limits are checked before the C loader sees a byte, because libyaml's composer recurses on the C
stack (YAML nested 50,000 deep kills the process) and expands nothing by itself:

* a file larger than `MAX_FILE_BYTES` (64 MiB; `KAI_MAX_FILE_BYTES` overrides it) is refused;
* text nested more than `MAX_DEPTH` (256) levels is refused, naming the line and column where it goes
  too deep. A cheap scan bounds the depth of ordinary files; only a file that might be deeper (many
  brackets, deep indentation, long `- - -` chains) is walked event by event (libyaml's parser keeps
  its own stack, so that walk is safe). Aliases (`*a`) can nest deeper than the text: a file with
  anchors is measured again once loaded;
* bytes that are not UTF-8 (or UTF-16/32 with a byte-order mark, as YAML allows) are refused with the
  byte offset, line and column.

JSON files (`kubectl get -o json`, the live scheduler's `/snapshot`) are read with the JSON parser first.
"""

from __future__ import annotations

import codecs
import gc
import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from kai.api.errors import Problem

try:
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _Loader = yaml.SafeLoader

MAX_DEPTH = 256
MAX_FILE_BYTES = int(os.environ.get("KAI_MAX_FILE_BYTES", str(64 << 20)))

# An alias (`*name`) or an anchor (`&name`) where a YAML node starts: after a space, a line start or `[{,`.
_ALIAS = re.compile(r"(?:^|[\s\[{,])\*[^\s,\[\]{}]")
_ANCHOR = re.compile(r"(?:^|[\s\[{,])&[^\s,\[\]{}]")

_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def _position(data: bytes, offset: int) -> str:
    line = data.count(b"\n", 0, offset) + 1
    column = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return f"byte {offset} (line {line}, column {column})"


def decode(data: bytes, where: str) -> tuple[str | None, Problem | None]:
    """The text of a file: UTF-8, or UTF-16/32 behind a byte-order mark."""
    encoding = next((name for bom, name in _BOMS if data.startswith(bom)), "utf-8")
    try:
        return data.decode(encoding), None
    except UnicodeDecodeError as err:
        return None, Problem(where, _position(data, err.start), f"is not valid {encoding.upper()}: {err.reason}")


def _may_be_deep(text: str, limit: int) -> bool:
    """False when the text cannot nest `limit` levels: few brackets, shallow indentation, short chains."""
    quarter = limit // 4
    # Flow collections: every opening bracket may add a level, but an empty `{}` / `[]` (which kubectl
    # and YAML dumpers write everywhere) adds at most one, wherever it is.
    openings = text.count("[") + text.count("{") - text.count("[]") - text.count("{}")
    if openings + 1 >= quarter:
        return True
    if re.search(rf"(?m)^[ \t]{{{quarter}}}", text):
        return True
    return re.search(rf"(?:[-?:][ \t]+){{{quarter}}}", text) is not None


def _text_depth_problem(text: str, where: str, limit: int) -> Problem | None:
    """Walk the parser's events (no composing, no recursion); a problem at the first node too deep."""
    depth = 0
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > limit:
                mark = event.start_mark
                return Problem(
                    where, f"line {mark.line + 1}, column {mark.column + 1}", f"is nested more than {limit} levels deep"
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
    return None


def structure_depth(value: Any, limit: int) -> int:
    """The nesting depth of loaded data, counting shared (aliased) parts once each; stops past `limit`."""
    deepest: dict[int, int] = {}
    stack: list[tuple[Any, int]] = [(value, 1)]
    worst = 0
    while stack:
        current, depth = stack.pop()
        worst = max(worst, depth)
        if worst > limit:
            return worst
        if deepest.get(id(current), 0) >= depth:
            continue
        deepest[id(current)] = depth
        children = current.values() if isinstance(current, dict) else current if isinstance(current, list) else ()
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return worst


_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'[]{}"')
_STEP = np.zeros(256, dtype=np.int8)  # a bracket's step of the depth: +1 opening, -1 closing
_STEP[[ord("{"), ord("[")]] = 1
_STEP[[ord("}"), ord("]")]] = -1


def json_text_depth(text: str) -> int:
    """The nesting depth of a valid JSON text (the root collection is level 1), from its brackets outside
    strings: escaped backslashes and quotes go first, then every byte but brackets and quotes, then
    pairs of adjacent quotes (nothing stands between them, so every other mark stays on its side of the
    strings: most strings are gone before any array is made), then what is left inside strings; a
    running sum over the brackets. C-speed passes over the text, no walk over the objects."""
    data = text.encode("utf-8", "surrogatepass")
    if b"\\" in data:
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    kept = data.translate(None, _NOT_STRUCTURE).replace(b'""', b"")
    if not kept:
        return 0
    marks = np.frombuffer(kept, dtype=np.uint8)
    if b'"' in kept:
        quotes = marks == ord('"')
        outside = (np.cumsum(quotes, dtype=np.int32) & 1) == 0  # an even number of quotes before: not in a string
        marks = marks[outside & ~quotes]
        if not marks.size:
            return 0
    return int(np.cumsum(_STEP[marks], dtype=np.int32).max())


class _CollectorPaused:
    """The cyclic garbage collector off while a parser makes millions of containers, none of them cyclic
    (it would rescan the growing tree again and again: two thirds of the time of a large JSON file)."""

    def __enter__(self) -> None:
        self.was_enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self.was_enabled:
            gc.enable()


def _yaml_error(err: yaml.YAMLError, where: str) -> Problem:
    mark = getattr(err, "problem_mark", None)
    at = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "document"
    reason = getattr(err, "problem", None) or str(err).splitlines()[0]
    return Problem(where, at, f"is not valid YAML: {reason}")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_text(text: str, where: str, limit: int = MAX_DEPTH) -> tuple[list[Any], Problem | None]:
    """The documents of a YAML (or JSON) text, or the first problem that stops reading it."""
    if text.lstrip()[:1] in ("{", "["):
        try:
            with _CollectorPaused():
                document = json.loads(text, parse_constant=_no_constant)
        except RecursionError:
            return [], Problem(where, "document", f"is nested more than {limit} levels deep")
        except ValueError:
            pass  # YAML's flow style is not always JSON: read it as YAML below
        else:
            if json_text_depth(text) > limit:
                return [], Problem(where, "document", f"is nested more than {limit} levels deep")
            return [document], None
    try:
        if _may_be_deep(text, limit):
            problem = _text_depth_problem(text, where, limit)
            if problem is not None:
                return [], problem
        aliased = _ALIAS.search(text) is not None and _ANCHOR.search(text) is not None
        documents: list[Any] = []
        too_deep: Problem | None = None
        with _CollectorPaused():  # the C loader composes one document at a time: each is measured as it comes
            for number, document in enumerate(yaml.load_all(text, Loader=_Loader), start=1):
                # Aliases can nest deeper than the text shows; a YAML error further on still comes first.
                if aliased and too_deep is None and structure_depth(document, limit) > limit:
                    message = f"is nested more than {limit} levels deep (aliases)"
                    too_deep = Problem(where, f"document {number}", message)
                documents.append(document)
    except yaml.YAMLError as err:
        return [], _yaml_error(err, where)
    except RecursionError:  # pragma: no cover - the depth checks above come first
        return [], Problem(where, "document", f"is nested more than {limit} levels deep")
    if too_deep is not None:
        return [], too_deep
    return documents, None


def read_text(path: str | Path, where: str) -> tuple[str | None, Problem | None]:
    """The text of a file, within the size limit and properly encoded."""
    try:
        size = Path(path).stat().st_size
        if size > MAX_FILE_BYTES:
            return None, Problem(
                where, "", f"is {size} bytes, more than kai reads ({MAX_FILE_BYTES}; set KAI_MAX_FILE_BYTES)"
            )
        data = Path(path).read_bytes()
    except OSError as err:
        return None, Problem(where, "", f"cannot be read: {err.strerror or err}")
    return decode(data, where)


def read_objects(paths: list[str | Path]) -> tuple[list[dict[str, Any]], list[Problem]]:
    """All objects in the files, in file order, with one problem per unreadable file or document."""
    objects: list[dict[str, Any]] = []
    problems: list[Problem] = []
    for path in paths:
        where = f"file {path}"
        text, problem = read_text(path, where)
        if problem is not None or text is None:
            problems.extend([problem] if problem else [])
            continue
        documents, problem = parse_text(text, where)
        if problem is not None:
            problems.append(problem)
            continue
        for number, doc in enumerate(documents, start=1):
            if doc is None:
                continue
            if not isinstance(doc, dict):
                problems.append(Problem(where, f"document {number}", "is not a Kubernetes object (a mapping)"))
                continue
            kind = doc.get("kind")
            if kind == "List" or (isinstance(kind, str) and kind.endswith("List") and "items" in doc):
                items = doc.get("items")
                if items is not None and not isinstance(items, list):
                    problems.append(Problem(where, f"document {number} items", "must be a list of objects"))
                    continue
                for index, item in enumerate(items or []):
                    if isinstance(item, dict):
                        objects.append(item)
                    else:
                        problems.append(Problem(where, f"document {number} items[{index}]", "is not an object"))
                continue
            objects.append(doc)
    return objects, problems
