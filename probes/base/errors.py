"""User-facing errors: one line, naming the file and line, exit code 2 in the CLI; a study's units that failed
twice, one line each, exit code 1; a missing optional dependency, one line naming the extra that installs it."""
from __future__ import annotations

import importlib
from pathlib import Path


class InputError(Exception):
    """Bad input from the user (corpus, model, option). The CLI prints it on one line, exit 2."""

    def __init__(self, problem: str, path: str | Path | None = None, line: int | None = None):
        self.problem = one_line(problem)
        self.path = None if path is None else str(path)
        self.line = line
        super().__init__(self.format())

    def format(self) -> str:
        if self.path is None:
            return self.problem
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.problem}"


def one_line(text: str) -> str:
    """`text` with its line breaks (a file's stray CR or NUL quoted into a message, e.g. a tag "B-O\\rRG") written
    as escapes, so that a message stays one line whatever it quotes."""
    return text.translate(_ESCAPES) if any(c in text for c in _BREAKS) else text


_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_ESCAPES = {ord(c): repr(c)[1:-1] for c in _BREAKS}


def require(module: str, extra: str, needed_by: str):
    """`module` imported, for `needed_by` (what the user asked for: "coref", "the ray engine"); InputError, one line
    naming the extra of pyproject.toml that installs it (``pip install 'attention-probes[EXTRA]'``), where it is not
    installed or does not import."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        absent = isinstance(e, ModuleNotFoundError) and f"{module}.".startswith(f"{e.name}.")  # it, or a parent
        why = "is not installed" if absent else f"does not import ({type(e).__name__}: {e})"
        raise InputError(f"{needed_by} needs {module.split('.')[0]}, which {why}: "
                         f"pip install 'attention-probes[{extra}]'") from None


class StudyFailed(Exception):
    """Units that failed twice, by name with their errors (the finished ones are kept in OUT/.units)."""

    def __init__(self, failures: dict[str, str]):
        self.failures = failures
        lines = [f"{name}: {error}" for name, error in failures.items()]
        super().__init__(f"{len(failures)} unit{'s' if len(failures) > 1 else ''} failed twice; "
                         f"the finished ones are kept, run the study again to retry: " + "; ".join(lines))
