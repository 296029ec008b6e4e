"""The command line answers at once (issue 25 item 6): importing the CLI, --version, --help, `probes list` and
argument errors load neither torch nor transformers (nor numpy); the built-in probes are listed from their
declarations (probes.settings.declared). How fast: benchmarks/startup.py, benchmarks/test_wall_clock.py."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

HEAVY = ("torch", "transformers", "numpy", "matplotlib", "pandas", "scipy")


def _python(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout


def test_importing_the_cli_loads_no_heavy_module():
    loaded = json.loads(_python(f"import json, sys, probes.cli; print(json.dumps([m for m in {HEAVY!r} "
                                "if m in sys.modules]))"))
    assert loaded == []


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["list"], ["run", "--help"], ["ablate", "--help"],
                                  ["run", "dep", "--limt", "50"], ["compare", "--help"], ["show", "nope.json"],
                                  ["sequences", "--help"]])
def test_answers_without_heavy_modules(argv):
    code = (f"import json, sys\nfrom probes.cli import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
            f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(done.stderr.strip().splitlines()[-1]) == []


def test_list_names_every_builtin_probe_as_its_class_does():
    import probes
    from probes.settings.declared import BUILTIN

    listed = _python("from probes.cli import main; main(['list'])").splitlines()
    classes = probes.available()
    assert [line.split()[0] for line in listed] == sorted(BUILTIN) == sorted(classes)
    for line in listed:
        name, description = line.split(maxsplit=1)
        assert description == classes[name].description and BUILTIN[name].options == classes[name].options


def test_version_answers_with_the_version():
    done = subprocess.run([sys.executable, "-m", "probes", "--version"], capture_output=True, text=True, check=True)
    assert done.stdout.startswith("probes ")


def test_showing_a_builtin_probes_result_imports_no_probe_code_nor_torch(tmp_path):
    """A built-in probe's result is presented by the Presentation its declaration names, which its class inherits
    without overriding (checked for every built-in probe), so drawing its figures, `probes show`, `probes compare`
    and `probes report` import none of the probes' code, nor torch, transformers or pandas (the intervals' code
    lives apart from the replicate sums' torch, probes.results.intervals)."""
    import probes
    from probes.settings.declared import BUILTIN
    from probes.results.figures import builtin_presentation
    from probes.results.presentation import Presentation
    from probes.results.probe_result import LabelScores, ProbeResult, RunInfo

    classes = probes.available()
    for name, declaration in BUILTIN.items():
        shown = builtin_presentation(declaration)
        assert issubclass(classes[name], shown), name
        for method in ("details", "figures"):
            unbound = [getattr(f, "__func__", f) for f in (getattr(classes[name], method), getattr(shown, method))]
            assert unbound[0] is unbound[1], (name, method)
    assert sorted(n for n in BUILTIN if builtin_presentation(BUILTIN[n]) is not Presentation) == \
        ["con", "head_distance", "ner", "pos", "seg", "trees"]
    scores = LabelScores(30, np.array([[0.25, 0.5], [0.75, 0.125]]))
    for probe in ("dep", "trees", "seg", "pos", "head_distance"):
        ProbeResult(probe, RunInfo("m", ["c.conllu"], 2, 2, 30, {}, {}, {}), {}, {"nsubj": scores}, scores).save(
            tmp_path)
    path = str(tmp_path / "dep.json")
    code = (f"import json, sys\nfrom probes.results.figures import figures_of, presentation_of\n"
            f"from probes.results.probe_result import load_result\nfrom probes.cli import main\n"
            f"figures_of(load_result({path!r}))\nmain(['show', {path!r}])\nmain(['compare', {path!r}, {path!r}])\n"
            f"main(['report', {str(tmp_path)!r}, '--out', {str(tmp_path / 'report.html')!r}])\n"
            f"shown = [presentation_of(load_result({str(tmp_path)!r} + f'/{{p}}.json')).__name__ for p in "
            f"('trees', 'seg', 'pos', 'head_distance')]\n"
            f"print(json.dumps([shown, sorted(m for m in sys.modules if m.startswith('probes.builtin.') or m in "
            f"('torch', 'transformers', 'pandas'))]))")
    shown, modules = json.loads(_python(code).splitlines()[-1])
    assert shown == ["TreesPresentation", "SegPresentation", "FitPresentation", "HeadDistancePresentation"]
    presenting = ("probes.settings.declared", "probes.builtin.trees.details", "probes.builtin.seg.show",
                  "probes.builtin.fitted", "probes.builtin.analyses.head_layout")
    packages = ("probes.builtin.trees", "probes.builtin.seg", "probes.builtin.analyses")  # their empty __init__
    assert [m for m in modules if m not in presenting + packages] == []


@pytest.mark.parametrize("argv, line", [
    (["run", "depp"], "unknown probe 'depp'; available: {probes}; did you mean dep?"),
    (["run", "dep", "srl", "entropyy", "--limit", "5"], "unknown probe 'entropyy'; available: {probes}; "
                                                         "did you mean entropy?"),
    (["ablate", "depp"], "unknown probe 'depp'; available: {probes}; did you mean dep?"),
    (["run", "dep", "--model", "./no-such-model"], "./no-such-model: model path does not exist"),
    (["run", "dep", "--model", "models/base/no-such"], "models/base/no-such: model path does not exist"),
    (["ablate", "classify", "--model", "~/no-such-classifier"], "~/no-such-classifier: model path does not exist"),
    (["run", "dep", "--corpus", "no-such.conllu"], "no-such.conllu: file not found"),
    (["run", "pos", "--fit", "no-such-dev.conllu"], "no-such-dev.conllu: file not found"),
    (["run", "dep", "--dtype", "bf16"], "unknown dtype 'bf16'; choose one of float32, bfloat16, float16")])
def test_argument_errors_come_before_torch(argv, line, tmp_path):
    """An unknown probe (with the closest name), a missing model path, a missing corpus and a --dtype not among the
    choices are one line, exit 2, given before torch, transformers or numpy is imported (issue 42 item 4; timings:
    benchmarks/startup.py)."""
    from probes.settings.declared import BUILTIN

    code = (f"import json, sys\nfrom probes.cli import main\ncode = main({argv!r})\n"
            f"print(json.dumps([code, [m for m in {HEAVY!r} if m in sys.modules]]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path)
    assert json.loads(done.stdout) == [2, []]
    assert done.stderr == f"probes: error: {line.format(probes=', '.join(sorted(BUILTIN)))}\n"


@pytest.mark.parametrize("model", ["bert-base-cased", "google/electra-small-discriminator", "org/name.v2"])
def test_a_hub_name_passes_the_early_check(model):
    """A model that is not on disk but reads as a hub id (NAME or ORG/NAME) is left to the hub (its loading says
    whether it can be reached)."""
    from probes.cli import build_parser, check_names

    check_names(build_parser().parse_args(["run", "dep", "--model", model]))
