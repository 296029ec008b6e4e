"""Comparing results (`probes compare`), any L×H array as a result, Spearman over heads, checkpoint
cosine similarity on hand-made maps, and the sentence-pair reader; bad input gives one-line errors."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from probes.cli import main
from probes.tools.compare import compare_results, load_any
from probes.tools.compare import correlate
from probes.tools.compare.checkpoints import map_cosines
from probes.corpus import guess_format, read_corpus
from probes.base.errors import InputError
from probes.results.probe_result import LabelScores, ProbeResult, RunInfo


def result(probe: str, overall, labels: dict | None = None, *, layers=2, heads=3, model="m", options=None,
           family="bert", corpus="dev.conllu", sentences=10) -> ProbeResult:
    info = RunInfo(model, [corpus], layers, heads, sentences, {}, {"pool": "mean-sum"},
                   {"model_type": family, "probes": "test"})
    return ProbeResult(probe, info, options or {}, {k: LabelScores(5, np.array(v, dtype=float))
                                                    for k, v in (labels or {}).items()},
                       LabelScores(10, np.array(overall, dtype=float)))


A_GRID = [[0.1, 0.5, 0.2], [0.3, 0.4, 0.0]]
B_GRID = [[0.1, 0.3, 0.2], [0.9, 0.4, 0.1]]  # L1-H0 gains 0.6, L0-H1 loses 0.2, L1-H2 gains 0.1


def save_pair(tmp_path, a=None, b=None):
    a = a or result("dep", A_GRID, {"nsubj": A_GRID})
    b = b or result("dep", B_GRID, {"nsubj": B_GRID}, model="m2")
    a.save(tmp_path / "A")
    b.save(tmp_path / "B")
    return tmp_path / "A", tmp_path / "B"


def test_compare_worked_example(tmp_path):
    a, b = save_pair(tmp_path)
    c = compare_results(a, b)
    row = next(d for d in c.labels if d.label == "overall").row()
    # best in A: L0-H1 0.5; best in B: L1-H0 0.9; Δbest +0.4; A's best head in B: 0.3; mean Δ = (−.2 + .6 + .1) / 6
    assert (row["best_a"], row["score_a"], row["best_b"], row["score_b"]) == ("L0-H1", 0.5, "L1-H0", 0.9)
    assert row["delta_best"] == pytest.approx(0.4) and row["a_best_in_b"] == pytest.approx(0.3)
    assert row["mean_delta"] == pytest.approx(0.5 / 6)
    assert row["gained"] == "L1-H0 +0.600; L1-H2 +0.100" and row["lost"] == "L0-H1 -0.200"
    layers = c.layer_changes()  # mean |Δ| per layer over the two labels: L0 (0 + .2 + 0) / 3, L1 (.6 + 0 + .1) / 3
    np.testing.assert_allclose([r["mean_abs_delta"] for r in layers], [0.2 / 3, 0.7 / 3])
    assert c.to_table().to_csv() == c.to_frame().to_csv(index=False)  # the CSV without pandas, as pandas writes it
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "out")]) == 0
    data = json.loads((tmp_path / "out" / "compare.json").read_text())
    assert [d["label"] for d in data["labels"]] == ["nsubj", "overall"]
    np.testing.assert_allclose(data["labels"][1]["delta"], np.subtract(B_GRID, A_GRID), atol=1e-9)
    assert (tmp_path / "out" / "dep-overall-delta.png").exists() and (tmp_path / "out" / "compare.csv").exists()


def _fails(capsys, *argv) -> str:
    code = main(list(argv))
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("probes: error: "), err
    return err


def test_compare_what_both_hold(tmp_path, capsys):
    """B also holds pos, A also holds mass: dep, which both hold, is compared; one line on stderr names the rest."""
    a, b = save_pair(tmp_path)
    result("pos", A_GRID).save(b)
    result("mass", A_GRID).save(a)
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "out"), "--no-plots"]) == 0
    printed = capsys.readouterr()
    assert printed.err == "probes: compared the probes both hold; left out mass (only in A), pos (only in B)\n"
    data = json.loads((tmp_path / "out" / "compare.json").read_text())
    assert {d["probe"] for d in data["labels"]} == {"dep"}
    assert data["left_out"] == ["mass (only in A)", "pos (only in B)"]
    np.testing.assert_array_equal(data["labels"][1]["delta"], np.subtract(B_GRID, A_GRID))
    (tmp_path / "A" / "dep.json").unlink()
    err = _fails(capsys, "compare", str(a), str(b), "--out", str(tmp_path / "none"))
    assert err == f"probes: error: {a} and {b} hold no probe in common (A: mass; B: dep, pos)"
    assert not (tmp_path / "none").exists()


def test_compare_refuses_different_models(tmp_path, capsys):
    big = result("dep", np.zeros((12, 12)), layers=12, heads=12)
    a, b = save_pair(tmp_path, b=big)
    err = _fails(capsys, "compare", str(a), str(b))
    assert "dep: A has 2 layers × 3 heads, B 12 × 12" in err and "one architecture" in err
    roberta = result("dep", B_GRID, family="roberta")
    (tmp_path / "B" / "dep.json").unlink()
    roberta.save(tmp_path / "B")
    assert "A is a bert model, B a roberta model" in _fails(capsys, "compare", str(a), str(b))


def test_compare_refuses_different_options_and_empty_folders(tmp_path, capsys):
    a, b = save_pair(tmp_path, b=result("dep", B_GRID, options={"subtypes": True}))
    assert "different options in A and B (subtypes: None vs True)" in _fails(capsys, "compare", str(a), str(b))
    (tmp_path / "empty").mkdir()
    assert "no probe results here" in _fails(capsys, "compare", str(a), str(tmp_path / "empty"))


def test_compare_notes_other_differences(tmp_path):
    a, b = save_pair(tmp_path, b=result("dep", B_GRID, corpus="test.conllu", sentences=9))
    notes = compare_results(a, b).notes
    assert notes == ["different corpora (dev.conllu vs test.conllu)", "dep: 10 sentences scored in A, 9 sentences in B"]


def test_any_grid_loads_as_a_result(tmp_path):
    grid = np.array(A_GRID)
    np.save(tmp_path / "gates.npy", grid)
    (tmp_path / "gates.json").write_text(json.dumps(A_GRID))
    (tmp_path / "wrapped.json").write_text(json.dumps({"scores": A_GRID}))
    (tmp_path / "gates.csv").write_text(",h0,h1,h2\nL0,0.1,0.5,0.2\nL1,0.3,0.4,0.0\n")
    (tmp_path / "plain.csv").write_text("0.1,0.5,0.2\n0.3,0.4,0.0\n")
    (tmp_path / "long.csv").write_text("layer,head,value\n0,0,0.1\n0,1,0.5\n0,2,0.2\n1,0,0.3\n1,1,0.4\n1,2,0\n")
    for name in ("gates.npy", "gates.json", "wrapped.json", "gates.csv", "plain.csv", "long.csv"):
        r = load_any(tmp_path / name)
        np.testing.assert_allclose(r.overall.scores, grid, err_msg=name)
        assert (r.info.layers, r.info.heads) == (2, 3)
    probes_csv = tmp_path / "dep.csv"  # the CSV `probes run` writes loads back with its labels
    probes_csv.write_text(result("dep", A_GRID, {"nsubj": B_GRID}).to_frame().to_csv(index=False))
    back = load_any(probes_csv)
    np.testing.assert_allclose(back.labels["nsubj"].scores, B_GRID)
    assert back.overall.count == 10


@pytest.mark.parametrize("name, content, problem", [
    ("x.npy", None, "expected a 2-D layers × heads array, found shape (3,)"),
    ("x.json", "[[1, 2], [3]]", "expected a layers × heads array of numbers (rows of equal length)"),
    ("x.json", "[[1, 2], [3", "not valid JSON"),
    ("x.csv", "1,2\n3,oops\n", "x.csv:2: expected numbers (rows: layers, columns: heads)"),
    ("x.csv", "layer,head\n0,0\n", "needs a score (or value) column"),
    ("x.txt", "1 2", "cannot read .txt as layers × heads"),
])
def test_bad_grid_files(tmp_path, name, content, problem):
    path = tmp_path / name
    if content is None:
        np.save(path, np.arange(3.0))
    else:
        path.write_text(content)
    with pytest.raises(InputError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        load_any(path)


def test_grid_compares_with_a_grid(tmp_path):
    np.save(tmp_path / "before.npy", np.array(A_GRID))
    np.save(tmp_path / "after.npy", np.array(B_GRID))
    c = compare_results(tmp_path / "before.npy", tmp_path / "after.npy")
    np.testing.assert_allclose(c.labels[0].delta, np.subtract(B_GRID, A_GRID))


def test_spearman_over_heads(tmp_path, capsys):
    # gates rank the 6 heads 1..6; label "same" has the same order (ρ = 1), "reversed" the opposite (ρ = −1);
    # overall has one NaN head, left out: the other 5 keep the gates' order (ρ = 1 over 5 heads)
    gates = np.array([[1, 2, 3], [4, 5, 6]], dtype=float)
    r = result("dep", [[0.1, 0.2, 0.3], [0.4, np.nan, 0.6]], {"same": gates * 10, "reversed": -gates})
    table = correlate(gates, {"dep": r}).set_index("label")
    assert table.loc["same", "spearman"] == pytest.approx(1.0) and table.loc["reversed", "spearman"] == -1.0
    assert table.loc["overall", "heads"] == 5 and table.loc["overall", "spearman"] == pytest.approx(1.0)
    np.save(tmp_path / "gates.npy", gates)
    r.save(tmp_path / "res")
    out = tmp_path / "c.csv"
    assert main(["correlate", str(tmp_path / "gates.npy"), str(tmp_path / "res"), "--out", str(out)]) == 0
    assert "reversed" in capsys.readouterr().out and (tmp_path / "c.csv").exists()
    np.save(tmp_path / "small.npy", np.ones((1, 3)))
    err = _fails(capsys, "correlate", str(tmp_path / "small.npy"), str(tmp_path / "res"))
    assert "dep: 2 layers × 3 heads, but the grid is 1 × 3" in err


def test_plot_any_grid(tmp_path, capsys):
    np.save(tmp_path / "importance.npy", np.array([[0.0, 3.0], [1.5, 2.0]]))
    assert main(["plot", str(tmp_path / "importance.npy"), "--out", str(tmp_path / "png")]) == 0
    assert sorted(p.name for p in (tmp_path / "png").iterdir()) == ["importance-overall.png", "importance.png"]


def test_map_cosines_by_hand():
    # two 2-token maps: a = [[1, 0], [0, 1]], b = [[1, 0], [1, 0]] → a·b = 1, |a| = √2, |b| = √2 → cos = 0.5;
    # padding: a third position, zero columns, and a padded row that must be ignored (it is all 1/3 here)
    a = torch.tensor([[1.0, 0, 0], [0, 1, 0], [1 / 3, 1 / 3, 1 / 3]])
    b = torch.tensor([[1.0, 0, 0], [1, 0, 0], [0.0, 0.0, 1.0]])
    real = torch.tensor([[True, True, False]])
    cos = map_cosines(a[None, None, None], b[None, None, None], real)
    assert cos.shape == (1, 1, 1) and cos.item() == pytest.approx(0.5)
    assert map_cosines(a[None, None, None], a[None, None, None], real).item() == pytest.approx(1.0)


def test_pairs_reader(tmp_path):
    f = tmp_path / "pairs.tsv"
    f.write_text("sentence1\tsentence2\tlabel\nThe cat sat .\tA cat sat down\tentailment\n\nHi there\tHello\n")
    assert guess_format(f) == "pairs"
    corpus = read_corpus([f])
    first, second = corpus.sentences
    assert first.words == ["The", "cat", "sat", ".", "A", "cat", "sat", "down"] and first.ann["pair"] == 4
    assert first.ann["label"] == "entailment" and first.line == 2
    assert second.ann == {"pair": 2} and second.line == 4


@pytest.mark.parametrize("content, line, problem", [
    ("one sentence only\n", 1, "expected 2 or 3 tab-separated columns (sentence1, sentence2[, label]), found 1"),
    ("a b\tc d\n\tc\n", 2, "sentence1 is empty"),
    ("a\tb\tc\td\n", 1, "expected 2 or 3 tab-separated columns (sentence1, sentence2[, label]), found 4"),
])
def test_bad_pairs_file_through_the_cli(tmp_path, capsys, content, line, problem):
    f = tmp_path / "bad.tsv"
    f.write_text(content)
    err = _fails(capsys, "run", "term_matching", "--corpus", str(f), "--out", str(tmp_path / "out"), "--quiet")
    assert err == f"probes: error: {f}:{line}: {problem}"
    assert not (tmp_path / "out").exists()


def test_similarity_needs_two_models(capsys):
    assert "exactly two --model arguments, got 1" in _fails(capsys, "similarity", "--model", "x")
