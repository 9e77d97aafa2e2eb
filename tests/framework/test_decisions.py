"""The statement makes one Binding per bound pod through `new_binding`, which writes the frozen class's
fields itself: it must give exactly the value the class's own constructor gives (and must be kept in step
when Binding gains a field: then this comparison fails on the field it left unset)."""

from __future__ import annotations

import dataclasses

from kai.framework.decisions import Binding, new_binding


def test_new_binding_is_the_constructors_value() -> None:
    made = new_binding("ns/p", "node-1", ("g1", "g2"))
    expected = Binding("ns/p", "node-1", ("g1", "g2"))
    assert made == expected
    assert hash(made) == hash(expected)
    assert [getattr(made, f.name) for f in dataclasses.fields(Binding)] == ["ns/p", "node-1", ("g1", "g2"), ()]
    assert dataclasses.replace(made, claims=()) == expected
