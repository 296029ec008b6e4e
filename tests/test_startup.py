"""The command line answers at once (issue 25 item 6): importing the CLI, --version, --help, `probes list` and
argument errors load neither torch nor transformers (nor numpy); the built-in probes are listed from their
declarations (probes.builtin.declared). Timings on this machine: benchmarks/startup.py."""
from __future__ import annotations

import json
import subprocess
import sys
import time

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
                                  ["run", "dep", "--limt", "50"], ["compare", "--help"], ["show", "nope.json"]])
def test_answers_without_heavy_modules(argv):
    code = (f"import json, sys\nfrom probes.cli import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
            f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(done.stderr.strip().splitlines()[-1]) == []


def test_list_names_every_builtin_probe_as_its_class_does():
    import probes
    from probes.builtin.declared import BUILTIN

    listed = _python("from probes.cli import main; main(['list'])").splitlines()
    classes = probes.available()
    assert [line.split()[0] for line in listed] == sorted(BUILTIN) == sorted(classes)
    for line in listed:
        name, description = line.split(maxsplit=1)
        assert description == classes[name].description and BUILTIN[name].options == classes[name].options


def test_version_answers_in_well_under_two_seconds():
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "probes", "--version"], capture_output=True, text=True, check=True)
    elapsed = time.perf_counter() - start
    assert done.stdout.startswith("probes ")
    assert elapsed < 1.5, f"probes --version took {elapsed:.2f} s"


def test_saving_a_results_figures_imports_only_its_own_probe(tmp_path):
    """figures_of imports the result's probe alone: a dep run's figures import no other probe (trees' numba,
    head_distance's scipy), which cost a dep run more than drawing its overview did."""
    from probes.builtin.declared import BUILTIN
    from probes.results import LabelScores, ProbeResult, RunInfo

    scores = LabelScores(30, np.array([[0.25, 0.5], [0.75, 0.125]]))
    ProbeResult("dep", RunInfo("m", ["c.conllu"], 2, 2, 30, {}, {}, {}), {}, {"nsubj": scores}, scores).save(tmp_path)
    code = (f"import json, sys\nfrom probes.figures import figures_of\nfrom probes.results import load_result\n"
            f"figures_of(load_result({str(tmp_path / 'dep.json')!r}))\n"
            f"print(json.dumps(sorted(m for m in sys.modules if m.startswith('probes.builtin.'))))")
    modules = json.loads(_python(code))
    assert "probes.builtin.dep" in modules
    assert [BUILTIN[n].module for n in BUILTIN if BUILTIN[n].module in modules] == ["probes.builtin.dep"]
