"""What a probe declares for the command line and ``probes.run``: its options (``Option``), and, for the built-in
probes, the whole declaration (``Declaration``: name, one-line description, options, the module that implements
it), which the registry and the CLI's parser read without importing the probe's code (torch). Light to import."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from probes.base.errors import InputError


@dataclass(frozen=True)
class Option:
    """A probe option: ``--name`` on the command line, ``name=`` in ``probes.run``.

    ``type`` converts a value given as text (the command line, a study file) and checks one given
    from Python; ``choices`` lists the allowed values (None: any value of the type)."""

    name: str
    default: Any
    help: str
    type: type = str
    choices: tuple | None = None

    def convert(self, value: Any, probe: str) -> Any:
        """The value as this option's type, or InputError naming the probe and option."""
        where = f"probe {probe!r} option {self.name!r}"
        if self.type is bool:
            import numpy as np  # a numpy bool (from a table or an array) is a bool too

            if isinstance(value, (bool, np.bool_)):
                converted = bool(value)
            elif isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
                converted = value.lower() in ("true", "1", "yes")
            else:
                raise InputError(f"{where} takes true or false, not {value!r}")
        else:
            if self.type in (int, float) and isinstance(value, bool):
                raise InputError(f"{where} takes a number ({self.type.__name__}), not {value!r}")
            if self.type is int and isinstance(value, float) and not value.is_integer():
                raise InputError(f"{where} takes a whole number, not {value!r}")
            try:
                converted = self.type(value)
            except (TypeError, ValueError):
                raise InputError(f"{where} takes a value of type {self.type.__name__}, not {value!r}") from None
        if self.choices is not None and converted not in self.choices:
            raise InputError(f"{where} must be one of {', '.join(map(str, self.choices))}, not {value!r}")
        return converted


@dataclass(frozen=True)
class Declaration:
    """A built-in probe as the command line knows it before its code is imported (probes.settings.declared):
    `probes list` prints `name` and `description`; `options` become flags of `probes run` and `probes ablate`.
    The class in `module` takes it with ``class DependencyProbe(Probe, declared=DEP)``, so it has exactly these.
    `presentation` names the probes.results.presentation.Presentation subclass that the class inherits where it shows more
    than the default (``probes show``'s lines, its figures), in a module that imports neither torch nor the
    probe's code, so that showing a result loads neither (probes.results.figures.presentation_of). `score` names what a
    head's score is (the figures' colour bars)."""

    name: str
    module: str  # imported when the probe is run: it registers the class
    description: str
    options: tuple[Option, ...] = ()
    presentation: str | None = None  # "module:Class": how its results are shown, importable without torch or the probe
    score: str = "score"  # what a head's score is, as the figures' colour bars name it
