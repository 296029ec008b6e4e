"""probes.collector: the collector is off only inside loading() within process(), and what exists is frozen after."""
from __future__ import annotations

import gc
import subprocess
import sys

import pytest

from probes.collector import loading, process


@pytest.fixture
def thawed():
    gc.unfreeze()
    yield
    gc.unfreeze()  # the test session's objects back in the collector's reach
    gc.enable()


def test_outside_the_command_process_nothing_changes(thawed):
    with loading():
        assert gc.isenabled()
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_inside_the_command_process_imports_load_with_the_collector_off_then_frozen(thawed):
    with process():
        assert gc.isenabled()
        with loading():
            assert not gc.isenabled()
            made = [[] for _ in range(1000)]  # tracked containers made while "importing"
        assert gc.isenabled() and gc.get_freeze_count() >= 1000
        gc.unfreeze()
        later = [[] for _ in range(10)]
        assert gc.get_freeze_count() == 0
    assert gc.isenabled() and gc.get_freeze_count() >= 1010  # the end: everything left frozen
    del made, later


def test_an_error_inside_loading_turns_the_collector_back_on(thawed):
    with pytest.raises(ImportError), process(), loading():
        raise ImportError("no such module")
    assert gc.isenabled()


def test_the_command_runs_in_its_own_process_and_exits_as_before(tmp_path):
    """python -m probes goes through entry(): the exit code and the output are main()'s."""
    done = subprocess.run([sys.executable, "-m", "probes", "show", str(tmp_path / "missing.json")],
                          capture_output=True, text=True)
    assert done.returncode == 2 and done.stdout == "" and done.stderr.startswith("probes: error: ")
    done = subprocess.run([sys.executable, "-m", "probes", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("probes ")
