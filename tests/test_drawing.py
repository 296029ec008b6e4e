"""probes.drawing: the figures drawn by the child process are the bytes drawn in-process; a plugin's result, a
child that died and a child that raised all fall back to drawing here; no child outlives its Drawing."""
from __future__ import annotations

import warnings

import pytest

import probes
from probes.drawing import Drawing
from probes.figures import figures_of


@pytest.fixture(scope="module")
def dep_result(minilm):
    return probes.run(["dep"], encoder=minilm, limit=20, progress=False)["dep"]


@pytest.mark.slow
def test_the_child_draws_the_same_bytes(dep_result):
    here = figures_of(dep_result, "labels")
    with Drawing() as drawing:
        child = drawing.child
        assert child is not None and child.poll() is None
        drawn = drawing.figures(dep_result, "labels")
        assert drawing.child is child  # it answered: still the same process, waiting for the next result
    assert drawn.keys() == here.keys() and len(drawn) > 2
    assert all(drawn[name] == here[name] for name in here)
    assert child.returncode == 0  # its input closed: it ended by itself


def test_an_unused_child_is_ended_at_once(dep_result):
    with Drawing() as drawing:
        child = drawing.child
    assert child.returncode is not None  # killed while it may still import: no process outlives the command
    assert drawing.figures(dep_result) == figures_of(dep_result)  # after close: drawn here


def test_a_dead_child_falls_back_to_drawing_here(dep_result):
    with Drawing() as drawing:
        drawing.child.kill()
        drawing.child.wait()
        assert drawing.figures(dep_result) == figures_of(dep_result)
        assert drawing.child is None


def test_an_error_in_the_child_is_the_one_drawing_here_gives(dep_result, monkeypatch):
    """The child draws with its own copy of the code; where it fails, this process draws and raises (or warns)."""
    broken = dep_result.__class__(**{**dep_result.__dict__, "probe": "pos"})  # pos's presentation on dep's data
    with Drawing() as drawing:
        try:
            expected = figures_of(broken)
        except Exception as e:  # noqa: BLE001
            with pytest.raises(type(e)):
                drawing.figures(broken)
        else:
            assert drawing.figures(broken) == expected


def test_plugins_and_none_are_drawn_here(dep_result, monkeypatch):
    calls = []
    monkeypatch.setattr("probes.drawing.figures_of", lambda result, kind: calls.append(kind) or {})
    with Drawing() as drawing:
        assert drawing.figures(dep_result, "none") == {}
        plugin = dep_result.__class__(**{**dep_result.__dict__, "probe": "my_plugin_probe"})
        assert drawing.figures(plugin) == {}
        assert not drawing.used
    assert calls == ["none", "overview"]


@pytest.mark.slow
def test_the_run_command_draws_through_the_child(tmp_path):
    """probes run --out: the PNG written equals the one drawn from the saved JSON in this process."""
    import subprocess
    import sys

    from probes.results import load_result

    done = subprocess.run([sys.executable, "-m", "probes", "run", "dep", "--limit", "12", "--out", str(tmp_path),
                           "--quiet"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        drawn = figures_of(load_result(tmp_path / "dep.json"))
    assert (tmp_path / "dep.png").read_bytes() == drawn["dep.png"]


def test_a_result_is_sent_without_torch(dep_result):
    """What the child unpickles names no torch class (the provenance's versions are plain strings): it draws without
    importing torch (once, TorchVersion in the provenance cost the child 1.5 s of imports)."""
    import pickle
    import pickletools

    strings, named = [], set()
    for op, arg, _ in pickletools.genops(pickle.dumps(dep_result, protocol=pickle.HIGHEST_PROTOCOL)):
        if op.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE"):
            strings.append(arg)
        elif op.name == "STACK_GLOBAL":
            named.add(strings[-2])
    assert named and not any(module.split(".")[0] in ("torch", "transformers") for module in named), named
    assert type(dep_result.info.provenance["torch"]) is str
