"""probes.base.registries.Registry: built-ins imported when first asked for, registrations undone by scoped() and
reset(), one message for an unknown name."""
from __future__ import annotations

import sys

import pytest

from probes.base.errors import InputError
from probes.base.registries import Registry


def test_a_builtin_is_imported_when_first_asked_for():
    sys.modules.pop("colorsys", None)
    things: Registry[object] = Registry("thing", "probes.no-such-group", {"hsv": "colorsys:rgb_to_hsv"})
    assert things.names() == ["hsv"] and "colorsys" not in sys.modules and things.registered() == {}
    assert things.get("hsv")(1.0, 0.0, 0.0) == (0.0, 1.0, 1.0) and "hsv" in things.registered()


def test_scoped_and_reset_undo_registrations():
    things: Registry[int] = Registry("thing", "probes.no-such-group", {"one": 1}, sort=True)
    with things.scoped():
        things.add("two", 2)
        assert things.get("two") == 2 and things.names() == ["one", "two"]
    assert things.names() == ["one"]
    things.add("three", 3)
    things.get("one")
    things.reset()
    assert things.registered() == {"one": 1}
    with pytest.raises(InputError, match="unknown thing 'three'; available: one"):
        things.get("three")
