"""Honest best heads (no head named where the top score ties or is 0), minimum counts in show, compare and the
figures, and the warning where a best head does not beat its best offset baseline: hand-built results."""
from __future__ import annotations

import json

import numpy as np
import pytest

from probes.cli import main
from probes.tools.compare import compare_results
from probes.results.figures import figures_of
from probes.results.probe_result import BestHead, LabelScores, ProbeResult, RunInfo, best_head, load_result
from probes.tools.show import format_table

NAN = float("nan")


def result(labels: dict, overall, *, min_count: int | None = 20, baselines: dict | None = None,
           model: str = "m") -> ProbeResult:
    """A 2 × 3 dep result; labels: {name: (count, grid)}."""
    settings = {"pool": "mean-sum", **({"min_count": min_count} if min_count is not None else {})}
    info = RunInfo(model, ["dev.conllu"], 2, 3, 10, {}, settings, {"model_type": "bert", "probes": "test"})
    return ProbeResult("dep", info, {}, {k: LabelScores(n, np.array(g, dtype=float)) for k, (n, g) in labels.items()},
                       LabelScores(sum(n for n, _ in labels.values()), np.array(overall, dtype=float)),
                       baselines=baselines or {}, baseline_name="best offset baseline" if baselines else "")


# ---------------------------------------------------------------------------------------------- best_head
def test_one_head_above_the_rest_is_named():
    best = best_head(np.array([[0.1, 0.5, NAN], [0.3, 0.4, 0.0]]), "nsubj", 7)
    assert best == BestHead("nsubj", 0, 1, 0.5, 7)
    assert best.found and best.name == "L0-H1" and best.tied == []


def test_a_tie_at_the_top_names_no_head():
    best = best_head(np.array([[0.5, 0.2, 0.5], [0.1, 0.5, NAN]]))
    assert not best.found and best.name is None
    assert best.reason == "3 heads tie at 0.500" and best.tied == [(0, 0), (0, 2), (1, 1)]
    assert (best.layer, best.head, best.score) == (0, 0, 0.5)  # the first head at the top, for views


def test_zero_and_nan_name_no_head():
    assert best_head(np.zeros((2, 3))).reason == "every head scores 0"
    assert best_head(np.array([[0.0, NAN, 0.0], [NAN, NAN, NAN]])).reason == "every head scores 0"
    assert best_head(np.array([[0.0, -0.2, -0.1], [-1.0, -0.3, -0.5]])).reason == "the top score is 0"
    assert best_head(np.array([[0.0, 0.0, -0.1], [-1.0, -0.3, -0.5]])).reason == "2 heads tie at 0.000"
    empty = best_head(np.full((2, 3), NAN))
    assert empty.reason == "no instance (every score is NaN)" and np.isnan(empty.score)
    assert best_head(np.array([[-0.4, -0.2, -0.3], [NAN, -0.5, -0.6]])).name == "L0-H1"  # negative scores: the max


# ---------------------------------------------------------------------------------------------- show
TIE = [[0.5, 0.5, 0.1], [0.2, 0.5, 0.3]]
ZERO = [[0.0] * 3] * 2
GOOD = [[0.1, 0.6, 0.2], [0.3, 0.4, 0.0]]
BASELINES = {"labels": {"nsubj": {"best_offset": -1, "best": 0.7}, "obj": {"best_offset": 1, "best": 0.2}},
             "overall": {"best_offset": -1, "best": 0.4}}


def table_lines(r: ProbeResult, **kwargs) -> list[str]:
    return format_table(r, **kwargs).splitlines()


def test_show_says_why_no_head_is_best_and_leaves_rare_labels_out():
    r = result({"nsubj": (30, TIE), "obj": (25, ZERO), "iobj": (3, GOOD)}, GOOD)
    lines = table_lines(r)
    assert lines[3].split(None, 2) == ["nsubj", "30", "no best head: 3 heads tie at 0.500"]
    assert lines[4].split(None, 2) == ["obj", "25", "no best head: every head scores 0"]
    assert lines[5].split() == ["overall", "58", "L0-H1", "0.600"]
    assert lines[6] == "1 label below the minimum count (20 instances) not shown; --all-labels shows them"
    assert len(lines) == 7
    every = table_lines(r, all_labels=True)
    assert every[5].split() == ["iobj", "3", "L0-H1", "0.600", "(few)"] and every[6].startswith("overall")
    # nothing hidden, no line about it; a line saying what "(few)" means
    assert every[7] == "(few): 1 label below the minimum count (20 instances), shown as asked: their scores rest on few instances"
    assert len(every) == 8


def test_show_warns_where_the_best_head_does_not_beat_its_baseline():
    r = result({"nsubj": (30, GOOD), "obj": (25, GOOD)}, [[0.1, 0.4, 0.2], [0.3, 0.35, 0.0]], baselines=BASELINES)
    lines = table_lines(r)
    assert lines[3].split() == ["nsubj", "30", "L0-H1", "0.600", "offset", "-1", "0.700", "-0.100"]
    assert lines[4].split() == ["obj", "25", "L0-H1", "0.600", "offset", "+1", "0.200", "+0.400"]
    # overall: 0.400 is not above the baseline's 0.400 (a tie with the baseline is no win)
    assert lines[-1] == ("warning: best head not above its best offset baseline: nsubj (L0-H1 0.600 ≤ offset -1 "
                         "0.700), overall (L0-H1 0.400 ≤ offset -1 0.400)")


def test_results_without_a_minimum_count_show_every_label():
    r = result({"iobj": (3, GOOD)}, GOOD, min_count=None)
    assert r.min_count == 0 and not r.below_min_count("iobj")
    assert [line.split()[0] for line in table_lines(r)[3:]] == ["iobj", "overall"]


def test_min_count_marks_in_json_and_round_trips(tmp_path):
    r = result({"nsubj": (30, TIE), "iobj": (3, GOOD)}, GOOD, min_count=20)
    r.overall.selected = {"layer": 1, "head": 2, "score_on_corpus": 0.0, "score_on_selection": 0.9,
                          "count_on_selection": 40}
    r.labels["nsubj"].selected = {"reason": "absent"}
    r.save(tmp_path)
    data = json.loads((tmp_path / "dep.json").read_text())
    assert data["settings"]["min_count"] == 20
    assert data["labels"]["nsubj"]["below_min_count"] is False and data["labels"]["iobj"]["below_min_count"] is True
    back = load_result(tmp_path / "dep.json")
    assert back.below_min_count("iobj") and not back.below_min_count("nsubj")
    assert set(back.labels["iobj"].extra) == set()  # the marks are no grids
    # the selection split's choice: the head it named, scored here; or why none
    best = back.best()
    assert (best.name, best.score, best.selection_score) == ("L1-H2", 0.0, 0.9)
    assert back.best("nsubj").reason == "absent on the selection split" and back.best("iobj").name == "L0-H1"


def test_show_cli_all_labels(tmp_path, capsys):
    result({"nsubj": (30, GOOD), "iobj": (3, GOOD)}, GOOD).save(tmp_path)
    assert main(["show", str(tmp_path / "dep.json")]) == 0
    out = capsys.readouterr().out
    assert "iobj" not in out and "1 label below the minimum count (20 instances) not shown" in out
    assert main(["show", str(tmp_path / "dep.json"), "--all-labels"]) == 0
    assert "\niobj " in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------- figures
def test_figures_leave_out_rare_labels_unless_asked():
    r = result({"nsubj": (30, TIE), "iobj": (3, GOOD)}, GOOD, min_count=20)
    assert sorted(figures_of(r, "labels")) == ["dep-nsubj.png", "dep-overall.png", "dep.png"]
    assert sorted(figures_of(r, "all-labels")) == ["dep-iobj.png", "dep-nsubj.png", "dep-overall.png", "dep.png"]


# ---------------------------------------------------------------------------------------------- compare
def test_compare_counts_lost_and_few(tmp_path, capsys):
    a = result({"nsubj": (30, GOOD), "obj": (25, GOOD), "iobj": (9, GOOD), "vocative": (2, GOOD)}, GOOD)
    b = result({"nsubj": (28, TIE), "obj": (12, [[0.1, 0.2, 0.9], [0, 0, 0]]), "iobj": (9, ZERO)},
               [[0.1, 0.6, 0.2], [0.3, 0.7, 0.0]], model="m2")
    a.save(tmp_path / "A")
    b.save(tmp_path / "B")
    c = compare_results(tmp_path / "A", tmp_path / "B")
    rows = {d.label: d.row() for d in c.labels}
    # nsubj: B's top ties, so no Δbest; obj: 25 in A, 12 in B: lost, and its delta rests on 12 < 20 instances
    assert (rows["nsubj"]["best_b"], rows["nsubj"]["no_best_b"]) == (None, "3 heads tie at 0.500")
    assert np.isnan(rows["nsubj"]["delta_best"]) and rows["nsubj"]["a_best_in_b"] == 0.5
    assert (rows["obj"]["label_lost"], rows["obj"]["few"]) == (True, True)
    assert rows["obj"]["delta_best"] == pytest.approx(0.3) and rows["obj"]["min_count"] == 20
    assert (rows["nsubj"]["label_lost"], rows["nsubj"]["few"]) == (False, False)
    assert (rows["vocative"]["label_lost"], rows["vocative"]["count_b"]) == (False, 0)  # never frequent in A
    assert rows["overall"]["delta_best"] == pytest.approx(0.1) and not rows["overall"]["few"]
    assert main(["compare", str(tmp_path / "A"), str(tmp_path / "B")]) == 0
    lines = capsys.readouterr().out.splitlines()
    body = {line.split()[1]: line.split()[2:] for line in lines if line.startswith("dep ")}
    assert set(body) == {"nsubj", "obj", "overall"}  # iobj and vocative: below 20 in A and B
    assert body["nsubj"][:6] == ["30", "28", "L0-H1", "0.600", "tie×3", "-"]
    assert body["obj"][:9] == ["25", "12", "L0-H1", "0.600", "L0-H2", "0.900", "+0.300", "0.200", "lost"]
    assert body["obj"][9] == "few"
    assert "2 labels below the minimum count (20 instances) in A and B not shown; --all-labels shows them" in lines
    assert main(["compare", str(tmp_path / "A"), str(tmp_path / "B"), "--all-labels"]) == 0
    every = {line.split()[1]: line.split()[2:] for line in capsys.readouterr().out.splitlines()
             if line.startswith("dep ")}
    assert every["iobj"][:5] == ["9", "9", "L0-H1", "0.600", "0"] and every["vocative"][:5] == [
        "2", "0", "L0-H1", "0.600", "-"]


def test_plot_cli_all_labels(tmp_path, capsys):
    result({"nsubj": (30, TIE), "iobj": (3, GOOD)}, GOOD).save(tmp_path)
    assert main(["plot", str(tmp_path / "dep.json"), "--out", str(tmp_path / "few")]) == 0
    assert sorted(p.name for p in (tmp_path / "few").iterdir()) == ["dep-nsubj.png", "dep-overall.png", "dep.png"]
    assert main(["plot", str(tmp_path / "dep.json"), "--out", str(tmp_path / "all"), "--all-labels"]) == 0
    assert "dep-iobj.png" in {p.name for p in (tmp_path / "all").iterdir()}
