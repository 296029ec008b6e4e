"""A study file (TOML) or dict, read and checked into a StudySpec before any model is loaded.

    out = "results/study"              # optional; `probes study --out` wins
    shards = 2                         # every corpus in 2 shards (default 1); a [[corpora]] may set its own
    reference = "step-0"               # optional; default the first model
    models = "checkpoints/step-*"      # a glob of checkpoint folders, or a list of paths, or a table:
    # [models]
    # step-0 = "checkpoints/step-0"    # name = path (the results folder OUT/<name>/)

    [settings]                         # probes.run settings of every unit (a [[corpora]] may override)
    batch_size = 32
    limit = 500

    [probes.dep]                       # a probe's options (an empty table, or none: the defaults)
    subtypes = true

    [[corpora]]                        # a corpus and the probes scored on it: one forward pass feeds them all
    corpus = "en_ewt-ud-dev.conllu"    # a path or a list of paths
    probes = ["dep", "pos"]
    fit = "en_ewt-ud-test.conllu"      # for the probes with a fit phase (pos, ner, con); or fit_on = "same"

Paths are relative to the study file's folder. Every problem is an InputError naming the file, the
line of the offending key where it can be found in the text (tomllib gives no positions), and the key
path (``corpora[1].probes``).
"""
from __future__ import annotations

import glob as globbing
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser as the tomli package
    import tomli as tomllib

from probes.base.checkpoint import resolve_source
from probes.base.errors import InputError
from probes.results.fitting import plan_fit
from probes.base.protocols import apply_protocol
from probes.settings.registry import available, get_probe, load_code
from probes.base.files import safe_name, short_model_name
from probes.settings.run_settings import RunSettings, study_types

TOP_KEYS = ("out", "shards", "reference", "models", "settings", "probes", "corpora", "code")
SETTINGS = study_types()  # probes.run settings a study may set, with their types (None: the setting's "no limit")
GROUP_KEYS = ("corpus", "probes", "fit", "fit_on", "format", "annotate", "shards", "name", *SETTINGS)


@dataclass(frozen=True)
class Model:
    name: str  # the results folder OUT/<name>/
    path: str  # a checkpoint folder or a hub name, as probes.run's model


@dataclass(frozen=True)
class Group:
    """A corpus and the probes scored on it (one forward pass per unit feeds them all)."""

    name: str
    probes: tuple[str, ...]
    corpus: tuple[str, ...]
    options: dict[str, Any]  # the probes' options given, flat as probes.run takes them
    settings: dict[str, Any]  # probes.run keyword arguments: the settings, fit, fit_on, format, annotate
    shards: int


@dataclass
class StudySpec:
    models: list[Model]
    reference: str
    groups: list[Group]
    out: Path | None
    code: list[str] = field(default_factory=list)
    source: str | None = None  # the study file, where one was read


def read_study(source: str | Path | dict[str, Any]) -> StudySpec:
    """The StudySpec of a study file (TOML) or of a dict of the same shape (paths relative to the cwd)."""
    if isinstance(source, dict):
        return _Reader(source, None, "", Path.cwd()).spec()
    path = Path(source)
    if not path.is_file():
        raise InputError("study file not found" if not path.exists() else "is not a study file (TOML)", path)
    text = path.read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        line = re.search(r"at line (\d+)", str(e))
        raise InputError(f"not valid TOML: {str(e).split(' (at line')[0]}", path,
                         int(line.group(1)) if line else None) from None
    return _Reader(data, path, text, path.resolve().parent).spec()


class _Reader:
    def __init__(self, data: dict[str, Any], path: Path | None, text: str, base: Path):
        self.data, self.path, self.text, self.base = data, path, text, base

    def fail(self, problem: str, *keys: str | int) -> InputError:
        """An InputError naming the key path; the line where the key sits in the file, where it is found."""
        where = _key_path(keys)
        return InputError(f"{where}: {problem}" if where else problem, self.path or "study",
                          _line_of(self.text, keys) if self.path else None)

    def spec(self) -> StudySpec:
        for key in self.data:
            if key not in TOP_KEYS:
                raise self.fail(f"unknown key {key!r} (a study file has {', '.join(TOP_KEYS)})", key)
        code = [str(self.file(p, "code")) for p in self.paths("code")]
        for path in code:
            load_code(path)
        models = self.models()
        reference = self.data.get("reference", models[0].name)
        if reference not in {m.name for m in models}:
            raise self.fail(f"{reference!r} is none of the models ({', '.join(m.name for m in models)})", "reference")
        shards = self.whole_number(self.data.get("shards", 1), "shards")
        settings = self.settings(self.table("settings"), ("settings",))
        options = self.options()
        groups = self.groups(settings, options, shards)
        unused = [p for p in options if all(p not in g.probes for g in groups)]
        if unused:
            raise self.fail(f"probe {unused[0]!r} has options but is in no [[corpora]] group", "probes", unused[0])
        out = self.data.get("out")
        if out is not None and not isinstance(out, str):
            raise self.fail("must be a folder path (text)", "out")
        return StudySpec(models, reference, groups, None if out is None else self.base / out, code,
                         None if self.path is None else str(self.path))

    def table(self, *keys: str | int) -> dict[str, Any]:
        value = _get(self.data, keys, {})
        if not isinstance(value, dict):
            raise self.fail(f"must be a table, not {type(value).__name__}", *keys)
        return value

    def paths(self, *keys: str | int) -> list[str]:
        value = _get(self.data, keys, [])
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
            raise self.fail("must be a path or a list of paths", *keys)
        return items

    def file(self, path: str, *keys: str | int) -> Path:
        full = _under(self.base, path)
        if not full.exists():
            raise self.fail(f"file not found: {full}", *keys)
        return full

    def whole_number(self, value: Any, *keys: str | int) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise self.fail(f"must be a whole number ≥ 1, not {value!r}", *keys)
        return value

    def models(self) -> list[Model]:
        value = self.data.get("models")
        if isinstance(value, dict):
            pairs = list(value.items())
            for name, path in pairs:
                if not isinstance(path, str):
                    raise self.fail("must be a checkpoint folder or hub name (text)", "models", name)
                if not name or name.startswith(".") or "/" in name or "\\" in name:
                    raise self.fail("a model name is a folder name (no /, not starting with .)", "models", name)
        elif isinstance(value, str):
            found = sorted((p for p in globbing.glob(str(self.base / value)) if Path(p).is_dir()), key=_natural)
            if not found:
                raise self.fail(f"no checkpoint folder matches {value!r}", "models")
            pairs = [(safe_name(short_model_name(p)), p) for p in found]
        elif isinstance(value, list) and all(isinstance(x, str) for x in value):
            pairs = [(safe_name(short_model_name(p)), p) for p in value]
        elif value is None:
            raise self.fail("no models: give models = [paths], a glob, or a [models] table of name = path", "models")
        else:
            raise self.fail("must be a list of paths, a glob, or a table of name = path", "models")
        if not pairs:
            raise self.fail("the model list is empty", "models")
        models = []
        for name, path in pairs:
            local = _under(self.base, path)
            try:
                source = resolve_source(str(local) if local.exists() else path)
            except InputError as e:
                raise self.fail(f"model {name!r}: {e}", "models", *([name] if isinstance(value, dict) else [])) from None
            if name in {m.name for m in models}:
                raise self.fail(f"two models would be written to OUT/{name}/: name them (a [models] table of "
                                "name = path)", "models")
            models.append(Model(name, source))
        return models

    def settings(self, table: dict[str, Any], keys: tuple, known: tuple[str, ...] = tuple(SETTINGS)) -> dict[str, Any]:
        out = {}
        for key, value in table.items():
            if key not in known:
                raise self.fail(f"unknown key {key!r} (known: {', '.join(known)})", *keys, key)
            if key in SETTINGS:
                if not isinstance(value, SETTINGS[key]) or isinstance(value, bool):
                    kinds = " or ".join("none" if t is type(None) else t.__name__ for t in SETTINGS[key])
                    raise self.fail(f"must be {kinds}, not {value!r}", *keys, key)
                out[key] = value
        try:
            RunSettings(**out)  # its checks
        except InputError as e:
            raise self.fail(str(e), *keys) from None
        return out

    def options(self) -> dict[str, dict[str, Any]]:
        """{probe: {option: value}}, each value converted by its Option (a wrong type is refused)."""
        options = {}
        for name, table in self.table("probes").items():
            if name not in available():
                raise self.fail(f"unknown probe {name!r}; registered: {', '.join(available())}", "probes", name)
            if not isinstance(table, dict):
                raise self.fail("must be a table of the probe's options", "probes", name)
            declared = {o.name: o for o in get_probe(name).options}
            for key, value in table.items():
                if key not in declared:
                    raise self.fail(f"probe {name!r} has no option {key!r} (options: {', '.join(declared) or 'none'})",
                                    "probes", name, key)
                try:
                    declared[key].convert(value, name)
                except InputError as e:
                    raise self.fail(e.problem, "probes", name, key) from None
            options[name] = dict(table)
        return options

    def groups(self, settings: dict[str, Any], options: dict[str, dict[str, Any]], shards: int) -> list[Group]:
        entries = self.data.get("corpora")
        if not isinstance(entries, list) or not entries or not all(isinstance(e, dict) for e in entries):
            raise self.fail("give one [[corpora]] table or more (corpus, probes, ...)", "corpora")
        groups, seen = [], {}
        for i, entry in enumerate(entries):
            own = self.settings(entry, ("corpora", i), GROUP_KEYS)
            names = self.paths("corpora", i, "probes")
            if not names:
                raise self.fail("no probes named", "corpora", i, "probes")
            for name in names:
                if name not in available():
                    raise self.fail(f"unknown probe {name!r}; registered: {', '.join(available())}",
                                    "corpora", i, "probes")
                if name in seen:
                    raise self.fail(f"probe {name!r} is already scored on corpora[{seen[name]}] (its results would "
                                    "collide in OUT/<model>/)", "corpora", i, "probes")
                seen[name] = i
            corpus = tuple(str(self.file(p, "corpora", i, "corpus")) for p in self.paths("corpora", i, "corpus"))
            fit = [str(self.file(p, "corpora", i, "fit")) for p in self.paths("corpora", i, "fit")]
            run = {**settings, **own}
            for key in ("format", "annotate", "fit_on"):
                if key in entry:
                    if not isinstance(entry[key], str):
                        raise self.fail("must be text", "corpora", i, key)
                    run[key] = entry[key]
            if fit:
                run["fit"] = fit
            flat = self.flat_options(names, options, i)
            try:
                classes = [get_probe(n) for n in names]
                apply_protocol(run.get("protocol"), classes, run.get("pool"), dict(flat))
                plan_fit(classes, fit, run.get("fit_on"))
            except InputError as e:
                raise self.fail(e.problem, "corpora", i) from None
            name = entry.get("name", Path(corpus[0]).name if corpus else f"corpora[{i}]")
            if not isinstance(name, str):
                raise self.fail("must be text", "corpora", i, "name")
            if not corpus:
                raise self.fail("no corpus file given", "corpora", i, "corpus")
            count = self.whole_number(entry.get("shards", shards), "corpora", i, "shards")
            groups.append(Group(str(name), tuple(names), corpus, flat, run, count))
        return groups

    def flat_options(self, names: list[str], options: dict[str, dict[str, Any]], i: int) -> dict[str, Any]:
        """The group's probe options as one dict (probes.run's **options): an option that two probes of the
        group share must have one value for both."""
        flat: dict[str, Any] = {}
        for name in names:
            for key, value in options.get(name, {}).items():
                sharing = [n for n in names if n != name and any(o.name == key for o in get_probe(n).options)]
                for other in sharing:
                    if options.get(other, {}).get(key, _UNSET) != value:
                        raise self.fail(f"option {key!r} of {name!r} is an option of {other!r} too, which is scored on "
                                        "the same corpus: give both the same value, or score them in separate "
                                        "[[corpora]] groups", "probes", name, key)
                flat[key] = value
        return flat


_UNSET = object()


def _under(base: Path, path: str) -> Path:
    """`path` (~ expanded) relative to `base`, with its ``..`` resolved."""
    return Path(os.path.normpath(base / Path(path).expanduser()))


def _get(data: dict[str, Any], keys: tuple, default: Any) -> Any:
    for key in keys:
        if isinstance(data, list) and isinstance(key, int) and key < len(data):
            data = data[key]
        elif isinstance(data, dict) and key in data:
            data = data[key]
        else:
            return default
    return data


def _key_path(keys: tuple) -> str:
    text = ""
    for key in keys:
        text += f"[{key}]" if isinstance(key, int) else (f".{key}" if text else str(key))
    return text


def _natural(path: str) -> list:
    """Sort key: step-10 after step-9."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path)]


def _line_of(text: str, keys: tuple) -> int | None:
    """The line (1-based) of the key path `keys` in the TOML text: the key's assignment inside its table, else
    the header of the table it names; None where it is written otherwise (dotted keys, inline tables)."""
    if not keys:
        return None
    lines = text.splitlines()
    *parent, last = keys
    if not isinstance(last, int):
        header = _header_line(lines, parent) if parent else -1
        if header is not None:
            end = next((j for j in range(header + 1, len(lines)) if lines[j].lstrip().startswith("[")), len(lines))
            found = next((j + 1 for j in range(header + 1, end) if _assigns(lines[j], last)), None)
            if found:
                return found
    header = _header_line(lines, list(keys))
    return None if header is None else header + 1


def _assigns(line: str, key: Any) -> bool:
    return re.match(rf"\s*[\"']?{re.escape(str(key))}[\"']?\s*=", line) is not None


def _header_line(lines: list[str], tables: list) -> int | None:
    """The line index of the header of table path `tables` (``probes.dep``, or the i-th ``[[corpora]]``)."""
    names = [t for t in tables if not isinstance(t, int)]
    index = next((t for t in tables if isinstance(t, int)), None)
    dotted = r"\s*\.\s*".join(rf"[\"']?{re.escape(str(n))}[\"']?" for n in names)
    pattern = re.compile(rf"\s*\[\[\s*{dotted}\s*\]\]" if index is not None else rf"\s*\[\s*{dotted}\s*\]")
    found = [j for j, line in enumerate(lines) if pattern.match(line)]
    if index is not None:
        return found[index] if index < len(found) else None
    return found[0] if found else None
