"""The reader's depth measure of JSON text: brackets inside strings (with escaped quotes and backslashes,
empty strings side by side) do not count; only the nesting of the collections does."""

from __future__ import annotations

import json

import pytest

from kai.snapshot.reader import json_text_depth, parse_text


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("1", 0),
        ("[]", 1),
        ('{"a": [1, {"b": []}]}', 4),
        ('["[[[[", "{{{{"]', 1),  # brackets in strings
        ('["", "", "[", ""]', 1),  # empty strings next to each other and to a string with a bracket
        ('["\\"[[[", "\\\\", [["]"]]]', 3),  # an escaped quote, an escaped backslash before the closing quote
        ('{"k\\\\": ["\\\\\\"{"]}', 2),  # \\ then \" inside one string
        ('[[[""]], "]]]]]]"]', 3),
    ],
)
def test_depth_counts_collections_not_brackets_in_strings(text: str, depth: int) -> None:
    json.loads(text)  # every case is valid JSON
    assert json_text_depth(text) == depth


def test_a_document_at_the_limit_is_read_and_one_past_it_refused() -> None:
    inner = '{"s": "[[[[\\"]]]]"}'  # a string full of brackets at the bottom adds nothing
    at_limit = "[" * 255 + inner + "]" * 255
    documents, problem = parse_text(at_limit, "file f.json")
    assert problem is None and len(documents) == 1
    documents, problem = parse_text("[" + at_limit + "]", "file f.json")
    assert documents == [] and problem is not None
    assert str(problem) == "file f.json: document: is nested more than 256 levels deep"
