"""Packages whose public names are imported on first use (PEP 562): ``import probes`` and the command line's
parser load no torch, transformers or numpy; ``probes.run`` imports the runner the first time it is named."""
from __future__ import annotations

import importlib
import sys
import types
from typing import Any


class LazyPackage(types.ModuleType):
    """A package whose public names (``_public``: {name: the module that defines it}) are imported when first
    asked for. Importing a submodule binds it to the package's attribute of the same name; where a public name
    is also a submodule's (``probes.tools.compare.correlate``, a function in a module of that name), the public
    name keeps meaning the function, as it did when the package imported it at once."""

    _public: dict[str, str]

    def __getattr__(self, name: str) -> Any:
        if name not in self._public:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(self._public[name]), name)
        super().__setattr__(name, value)
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._public and isinstance(value, types.ModuleType) and value.__name__ == self._public[name]:
            return  # the submodule that defines the public name: getattr finds the name in it
        super().__setattr__(name, value)

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *self._public})


def lazy_exports(package: str, public: dict[str, str]) -> None:
    """Make `package` (a package's ``__name__``, called at the end of its ``__init__``) a LazyPackage exporting
    `public`."""
    module = sys.modules[package]
    module.__dict__["_public"] = public
    module.__class__ = LazyPackage
