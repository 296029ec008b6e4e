"""Results files: full precision on a round trip, the probe's own figures and detail lines, recovery copies when
the output folder fails at the end, and results objects that print briefly."""
from __future__ import annotations

import errno
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import probes
from probes.capture.ablation_masks import Mask
from probes.tools.ablation.result import AblationResult
from probes.cli import main
from probes.results.figures import figures_of, presentation_of, save_result
from probes.results.presentation import Presentation
from probes.base.files import write_result_files
from probes.results.probe_result import LabelScores, ProbeResult, RunInfo, load_result

# values that 6 decimals would change: 1/3, 0.1 + 0.2 (≠ 0.3 in binary), tiny and huge numbers, a NaN cell
GRID = np.array([[1 / 3, 0.1 + 0.2, 1e-17], [np.nan, 2 / 3 * 1e6, -7.123456789012345]])


def hand_result(probe: str = "dep", grid: np.ndarray = GRID, **extra) -> ProbeResult:
    info = RunInfo("m", ["dev.conllu"], 2, 3, 10, {"too_long": 1}, {"pool": "mean-sum"}, {"probes": "test"})
    return ProbeResult(probe, info, {}, {"nsubj": LabelScores(4, grid, {"dep_to_head": grid / 7})},
                       LabelScores(9, grid * 3), extra=extra)


def test_round_trip_keeps_every_digit(tmp_path):
    result = hand_result(weights=[1 / 3, 2 / 7])
    result.save(tmp_path)
    back = load_result(tmp_path / "dep.json")
    np.testing.assert_array_equal(back.labels["nsubj"].scores, GRID)  # exact, NaN where NaN
    np.testing.assert_array_equal(back.labels["nsubj"].extra["dep_to_head"], GRID / 7)
    np.testing.assert_array_equal(back.overall.scores, GRID * 3)
    assert back.extra["weights"] == [1 / 3, 2 / 7]
    csv = pd.read_csv(tmp_path / "dep.csv")
    nsubj = csv[csv["label"] == "nsubj"]["score"].to_numpy()
    np.testing.assert_array_equal(nsubj, GRID.ravel())


def test_ablation_file_keeps_every_digit(tmp_path):
    result = ablation_result()
    result.save(tmp_path)
    data = json.loads((tmp_path / "ablation-dep.json").read_text())
    assert data["baseline"]["best"] == 1 / 3 and data["masks"][1]["delta"]["best"] == 0.1 - 1 / 3
    np.testing.assert_array_equal(np.array(data["masks"][0]["grid"], dtype=float), GRID)


def ablation_result() -> AblationResult:
    info = RunInfo("m", ["dev.conllu"], 2, 3, 10, {}, {}, {"probes": "test"})
    masks = [Mask("none", "none", ()), Mask("L0-H1", "heads", ((0, 1),)), Mask("L1-H2", "heads", ((1, 2),))]
    values = {"best": np.array([1 / 3, 0.1, 0.5])}
    return AblationResult("dep", "zero", masks, values, info, grids=np.stack([GRID, GRID / 2, GRID * 2]),
                          extra={"label": "overall"})


def test_ablation_result_prints_briefly():
    result = ablation_result()
    assert str(result) == result.summary()
    assert str(result).splitlines()[1] == "baseline: best 0.3333"
    assert repr(result) == ("AblationResult(target='dep', mode='zero', model='m', masks=3, metrics=['best'], "
                            "sentences=10)")
    assert "array(" not in str(result) + repr(result)


def test_recovery_copy_when_the_folder_fails_at_the_end(tmp_path, monkeypatch):
    """The disk fills after dep.json: nothing half-written stays in the folder, and every file is in the copy."""
    import probes.base.files

    out = tmp_path / "out"
    real_write = probes.base.files.write_atomic
    calls = []

    def disk_full_after_one(path, data):
        calls.append(path)
        if path.parent == out and len(calls) > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(path, data)

    monkeypatch.setattr(probes.base.files, "write_atomic", disk_full_after_one)
    result = hand_result()
    with pytest.raises(probes.InputError) as caught:
        save_result(result, out)
    message = str(caught.value)
    prefix = f"{out}: cannot write the results (No space left on device); all 3 files were written to "
    assert message.startswith(prefix) and message.endswith(" instead")
    recovery = Path(message[len(prefix):-len(" instead")])
    assert sorted(p.name for p in out.iterdir()) == []  # dep.json, written first, was taken back
    assert sorted(p.name for p in recovery.iterdir()) == ["dep.csv", "dep.json", "dep.png"]
    np.testing.assert_array_equal(load_result(recovery / "dep.json").labels["nsubj"].scores, GRID)


def test_no_recovery_copy_either(tmp_path, monkeypatch):
    import probes.base.files

    def always_full(path, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(probes.base.files, "write_atomic", always_full)
    with pytest.raises(probes.InputError, match=r"cannot write the results \(No space left on device\), nor a "
                                                r"recovery copy in .*probes-recovery-.* \(No space left on device\)"):
        write_result_files(tmp_path / "out", {"x.json": {"a": 1}})


def test_show_a_folder(tmp_path, capsys):
    """Every results file in the folder, one table each; other JSON files (compare.json) are passed over."""
    hand_result("dep").save(tmp_path)
    hand_result("mass").save(tmp_path)
    (tmp_path / "compare.json").write_text('{"a": "x"}')
    assert main(["show", str(tmp_path)]) == 0
    tables = capsys.readouterr().out.split("\n\n")
    assert [t.split()[0] for t in tables] == ["dep", "mass"]
    assert tables[0].splitlines()[3].split()[:3] == ["nsubj", "4", "L1-H1"]  # best: 666666.67
    (tmp_path / "dep.json").unlink()
    (tmp_path / "mass.json").unlink()
    assert main(["show", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == (f"probes: error: {tmp_path}: no probe results here (the "
                                               "DIR/<probe>.json files of `probes run --out`)")


def test_presentation_belongs_to_the_probe_class(tmp_path):
    """A built-in probe's results are shown by the Presentation its declaration names, which its class inherits
    (seg's SegPresentation); a plugin's by its class (tests/test_plugins.py), an unknown one's by the default."""
    from probes.builtin.fitted import format_fit
    from probes.builtin.seg.probe import SegmentationProbe
    from probes.builtin.seg.show import SegPresentation

    assert presentation_of(hand_result("seg")) is SegPresentation and issubclass(SegmentationProbe, SegPresentation)
    assert presentation_of(hand_result("not_loaded_plugin")) is Presentation
    array = hand_result("seg")
    array.info.provenance["array_file"] = "seg.npy"  # an array file named seg.npy is not a seg result
    assert presentation_of(array) is Presentation
    assert Presentation.details(hand_result()) == ""
    assert sorted(figures_of(hand_result("not_loaded_plugin"))) == ["not_loaded_plugin.png"]
    assert sorted(figures_of(hand_result("not_loaded_plugin"), "labels")) == [
        "not_loaded_plugin-nsubj.png", "not_loaded_plugin-overall.png", "not_loaded_plugin.png"]
    fit = {"on": "fit", "corpus": ["dev.conllu"], "sentences": 3, "units": {"NOUN": 5, "VERB": 2}}
    pos = hand_result("pos", fit=fit, labels_without_centroid=[])
    assert presentation_of(pos).details(pos) == format_fit(pos)
    assert format_fit(pos).startswith("centroids fitted on the --fit corpus: dev.conllu (3 sentences, 7 units")


@pytest.mark.integration
def test_head_distance_figures_and_round_trip(tiny_model, tmp_path, capsys):
    encoder = probes.load_encoder(str(tiny_model("bert")))
    result = probes.run(["head_distance"], encoder=encoder, limit=12)["head_distance"]
    names = {p.name for p in save_result(result, tmp_path)}
    assert names == {"head_distance.json", "head_distance.csv", "head_distance.png", "head_distance-layout.png", "head_distance-dendrogram.png",
                     "head_distance-matrix.png"}
    back = load_result(tmp_path / "head_distance.json")
    np.testing.assert_array_equal(back.overall.scores, result.overall.scores)
    assert back.extra["distance"] == result.extra["distance"] and back.extra["layout"] == result.extra["layout"]
    assert main(["plot", str(tmp_path / "head_distance.json"), "--out", str(tmp_path / "again")]) == 0
    assert {p.name for p in (tmp_path / "again").iterdir()} == names - {"head_distance.json", "head_distance.csv"} | {
        "head_distance-overall.png", "head_distance-nearest.png"}  # `plot` draws a heatmap per label too


def test_a_folder_corpus_has_a_digest_of_its_files(tmp_path):
    """A corpus given as a folder (LitBank, FrameNet) is digested as its files' relative paths and digests, in
    sorted order: the same for the same files, another when one file changes (studies record it per group)."""
    import hashlib

    from probes.base.provenance import sha256

    (tmp_path / "sub").mkdir()
    (tmp_path / "b.conll").write_bytes(b"two")
    (tmp_path / "sub" / "a.conll").write_bytes(b"one")
    expected = hashlib.sha256()
    for name, data in (("b.conll", b"two"), ("sub/a.conll", b"one")):
        expected.update(f"{name}\0{hashlib.sha256(data).hexdigest()}\0".encode())
    assert sha256(str(tmp_path)) == expected.hexdigest()
    (tmp_path / "b.conll").write_bytes(b"2")
    assert sha256(str(tmp_path)) != expected.hexdigest()
