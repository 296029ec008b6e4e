"""`python3 dev.py test --all`: before pytest it makes sure the report's browser tests can run, installing Debian's chromium
and chromium-driver with apt-get where that is there and this is root, else printing the command that does; nothing
where both are on PATH. (pytest itself, the venv set-up and apt-get are replaced here: nothing is installed.)"""
from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def dev(monkeypatch):
    """dev.py as a module, its set-up a no-op and its pytest call recorded (exit 0)."""
    spec = importlib.util.spec_from_file_location("dev_script", ROOT / "dev.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.calls = []
    monkeypatch.setattr(module, "_set_up", lambda: None)
    monkeypatch.delenv("CI", raising=False)

    def run(command, **kwargs):
        module.calls.append(command)
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(module.subprocess, "run", run)
    monkeypatch.setattr(module.subprocess, "call", lambda command, **kwargs: module.calls.append(command) or 0)
    return module


def on_path(monkeypatch, dev, *found: str) -> None:
    monkeypatch.setattr(dev.shutil, "which", lambda name: f"/usr/bin/{name}" if name in found else None)


def test_installs_chromium_with_apt_as_root(dev, monkeypatch, capsys):
    on_path(monkeypatch, dev, "apt-get")
    monkeypatch.setattr(dev.os, "geteuid", lambda: 0)
    assert dev.main(["test", "--all", "-q"]) == 0
    install, pytest_run = dev.calls
    assert install[:2] == ["sh", "-c"] and install[2].endswith("apt-get install -y -qq chromium chromium-driver")
    assert install[2].startswith("apt-get update -qq && ")
    assert pytest_run[-3:] == ["-m", "pytest", "-q"]
    assert capsys.readouterr().out == ("dev.py: installing Debian's chromium and chromium-driver for the report's "
                                       "browser tests\n")


@pytest.mark.parametrize("apt", [True, False])
def test_prints_the_command_when_it_cannot_install(dev, monkeypatch, capsys, apt):
    on_path(monkeypatch, dev, *(["apt-get"] if apt else []))
    monkeypatch.setattr(dev.os, "geteuid", lambda: 1000)
    assert dev.main(["test", "--all"]) == 0
    assert len(dev.calls) == 1 and dev.calls[0][-2:] == ["-m", "pytest"]  # pytest only: nothing installed
    assert capsys.readouterr().out == ("dev.py: the report's browser tests are skipped without Chromium; to run them: "
                                       "sudo apt-get install chromium chromium-driver\n")


def test_nothing_to_do_when_chromium_and_its_driver_are_there(dev, monkeypatch, capsys):
    on_path(monkeypatch, dev, "chromium", "chromedriver", "apt-get")
    monkeypatch.setattr(dev.os, "geteuid", lambda: 0)
    assert dev.main(["test", "--all"]) == 0
    assert len(dev.calls) == 1 and capsys.readouterr().out == ""


def test_without_all_the_slow_tests_and_the_browser_are_left_out(dev, monkeypatch, capsys):
    on_path(monkeypatch, dev, "apt-get")
    monkeypatch.setattr(dev.os, "geteuid", lambda: 0)
    assert dev.main(["test", "-x"]) == 0
    assert dev.calls == [[str(dev.PYTHON), "-m", "pytest", "-m", "not slow", "-x"]]  # nothing installed
    assert capsys.readouterr().out == ""
