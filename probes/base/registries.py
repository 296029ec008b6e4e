"""One kind of registry for the project's three (probes, corpus readers, model families): ``Registry[T]``.

A registry maps names to things of one kind, from three sources, first found wins:

- what was registered in this process (``add``: a ``@probes.register`` class, a ``--code`` file's probe);
- its built-ins, declared lazily as ``"module:attr"`` (imported when first asked for; a bare ``"module"``
  registers its entries itself when imported, as a built-in probe's module does);
- the entry points of its group (``[project.entry-points."probes.readers"] mine = "pkg.mod:read_mine"``),
  loaded by name when first asked for (or all at once: ``load_all``); a built-in's name wins.

``names()`` lists every name without importing anything but the entry-point metadata. ``scoped()`` (a context
manager) keeps what is registered inside it from outliving it; ``reset()`` forgets every registration and loaded
entry point: tests use them instead of reaching into a registry's fields.
"""
from __future__ import annotations

import difflib
import importlib
from contextlib import contextmanager
from importlib.metadata import EntryPoint, entry_points
from typing import Callable, Generic, Iterator, TypeVar

from probes.base.errors import InputError

T = TypeVar("T")


class Registry(Generic[T]):
    """Names → things of one kind (see the module docstring). kind: what the messages call one ("corpus
    format"); group: the entry-point group; builtins: name → "module:attr" (or "module", or the thing itself);
    check(name, obj, entry point value): the
    thing an entry point gives (None where it registered itself), or InputError; sort: list the names
    alphabetically (else built-ins first, in their order, then the others sorted); any_name: an entry point may
    register things under other names than its own (an unknown name loads them all before it is refused)."""

    def __init__(self, kind: str, group: str, builtins: dict[str, str | T] | None = None,
                 check: Callable[[str, object, str], T | None] | None = None, sort: bool = False,
                 any_name: bool = False):
        self.kind, self.group, self.sort, self.any_name = kind, group, sort, any_name
        self.builtins = dict(builtins or {})
        self.check = check
        self._entries: dict[str, T] = {}
        self._plugins_loaded = False

    def add(self, name: str, obj: T) -> T:
        """Register `obj` as `name` (a later add of the same name replaces it)."""
        self._entries[name] = obj
        return obj

    def registered(self) -> dict[str, T]:
        """What is registered or loaded now, by name (nothing is imported)."""
        return dict(self._entries)

    def entry_points(self) -> list[EntryPoint]:
        """The group's entry points whose names no built-in has."""
        return [ep for ep in entry_points(group=self.group) if ep.name not in self.builtins]

    def names(self) -> list[str]:
        """Every name: built-ins, registered ones and entry points, without loading any."""
        others = sorted(({*self._entries} | {ep.name for ep in self.entry_points()}) - set(self.builtins))
        names = [*self.builtins, *others]
        return sorted(names) if self.sort else names

    def get(self, name: str) -> T:
        """The thing registered as `name`: a built-in imported now, an entry point loaded now; InputError naming
        the available names for an unknown one, or the entry point that cannot be loaded."""
        if name in self._entries:
            return self._entries[name]
        if name in self.builtins:
            return self._builtin(name)
        found = [ep for ep in self.entry_points() if ep.name == name]
        if found:
            self._load(found[0])
        if name not in self._entries and self.any_name:
            self.load_all()
        if name not in self._entries:
            raise unknown_name(self.kind, name, self.names())
        return self._entries[name]

    def load_all(self) -> dict[str, T]:
        """Every built-in and entry point, loaded; {name: thing}."""
        for name in self.builtins:
            if name not in self._entries:
                self._builtin(name)
        return self.load_plugins()

    def load_plugins(self) -> dict[str, T]:
        """Every entry point, loaded (once; the built-ins are not imported); {name: thing} registered now."""
        if not self._plugins_loaded:
            self._plugins_loaded = True
            for ep in self.entry_points():
                if ep.name not in self._entries:
                    self._load(ep)
        return dict(self._entries)

    def reset(self) -> None:
        """Forget every registration and loaded entry point but the built-ins'."""
        for name in set(self._entries) - set(self.builtins):
            del self._entries[name]
        self._plugins_loaded = False

    @contextmanager
    def scoped(self) -> Iterator[Registry[T]]:
        """Within: register freely; after: the registry as it was before (entry points looked at again)."""
        entries, loaded = dict(self._entries), self._plugins_loaded
        self._plugins_loaded = False
        try:
            yield self
        finally:
            self._entries.clear()
            self._entries.update(entries)
            self._plugins_loaded = loaded

    def _builtin(self, name: str) -> T:
        if not isinstance(self.builtins[name], str):  # given as the thing itself
            return self._entries.setdefault(name, self.builtins[name])
        module, _, attr = self.builtins[name].partition(":")
        imported = importlib.import_module(module)  # a bare module registers its own entries
        if attr:
            self._entries[name] = getattr(imported, attr)
        return self._entries[name]

    def _load(self, ep: EntryPoint) -> None:
        try:
            obj = ep.load()
        except (ImportError, AttributeError) as e:  # the plugin's installation, not a bug here
            raise InputError(f"{self.kind} {ep.name!r}: cannot load {ep.value} ({type(e).__name__}: {e})") from None
        checked = obj if self.check is None else self.check(ep.name, obj, ep.value)
        if checked is not None and ep.name not in self._entries:
            self._entries[ep.name] = checked


def unknown_name(kind: str, name: str, names: list[str]) -> InputError:
    """The error for a `kind` ("probe") called `name` that none of `names` is: the names available, and the closest
    one (difflib) where one is close ("unknown probe 'depp'; available: ...; did you mean dep?")."""
    close = difflib.get_close_matches(name, names, n=1)
    hint = f"; did you mean {close[0]}?" if close else ""
    return InputError(f"unknown {kind} {name!r}; available: {', '.join(names)}{hint}")
