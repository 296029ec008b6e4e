"""The `probes` command's process policy (probes.cli.entry): the garbage collector's (import_heavy): torch and
transformers imported with the collector paused and what they made frozen, the collector back on after; a library
call or main() alone leaves the collector as it is. And its SDPA order (sdpa_order)."""
from __future__ import annotations

import gc
import os
import subprocess
import sys

import pytest

from probes.cli import HEAVY_COMMANDS, import_heavy, main


@pytest.fixture
def thawed():
    gc.unfreeze()
    yield
    gc.unfreeze()  # the test session's objects back in the collector's reach
    gc.enable()


def test_main_alone_leaves_the_collector_as_it_is(thawed, capsys):
    assert main(["list"]) == 0
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_the_heavy_imports_load_with_the_collector_off_then_frozen(thawed, monkeypatch):
    seen, pause = [], gc.disable
    monkeypatch.setattr(gc, "disable", lambda: seen.append("disable") or pause())
    import_heavy()
    assert seen == ["disable"] and gc.isenabled() and gc.get_freeze_count() > 0


def test_a_paused_collector_is_left_paused(thawed):
    gc.disable()
    import_heavy()
    assert not gc.isenabled() and gc.get_freeze_count() == 0


def test_before_heavy_runs_for_the_heavy_commands_only(thawed, capsys, tmp_path):
    called = []
    assert main(["list"], before_heavy=lambda: called.append("list")) == 0
    assert called == [] and "run" in HEAVY_COMMANDS and "list" not in HEAVY_COMMANDS
    assert main(["merge", str(tmp_path)], before_heavy=lambda: called.append("merge")) == 2  # no state files there
    assert called == ["merge"]


def test_the_command_runs_in_its_own_process_and_exits_as_before(tmp_path):
    """python -m probes goes through entry(): the exit code and the output are main()'s."""
    done = subprocess.run([sys.executable, "-m", "probes", "show", str(tmp_path / "missing.json")],
                          capture_output=True, text=True)
    assert done.returncode == 2 and done.stdout == "" and done.stderr.startswith("probes: error: ")
    done = subprocess.run([sys.executable, "-m", "probes", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("probes ")


def test_the_command_puts_cudnn_attention_last_unless_the_user_chose(monkeypatch):
    """probes.cli.sdpa_order (the command's, before torch is imported): TORCH_CUDNN_SDPA_DEPRIORITIZED set to 1 where
    the environment has no value, a user's own value kept."""
    from probes.cli import sdpa_order

    monkeypatch.delenv("TORCH_CUDNN_SDPA_DEPRIORITIZED", raising=False)
    sdpa_order()
    assert os.environ["TORCH_CUDNN_SDPA_DEPRIORITIZED"] == "1"
    monkeypatch.setenv("TORCH_CUDNN_SDPA_DEPRIORITIZED", "0")
    sdpa_order()
    assert os.environ["TORCH_CUDNN_SDPA_DEPRIORITIZED"] == "0"
