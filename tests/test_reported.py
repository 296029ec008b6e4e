"""ProbeResult.reported, the one source of every shown head and number, on hand-made results (2 layers × 3 heads):
the best head with its selection-aware interval, the --select-on head with its own interval and margin (from its
``selected`` block where recorded, else from the grid), the table's * where a score lies outside its interval,
compare pairing like with like, and the figures' text chunk."""
from __future__ import annotations

import io
import json

import numpy as np
import pytest
from PIL import Image

from probes.results.figures import figures_of
from probes.tools.compare.results_diff import compare_results
from probes.results.probe_result import BestInterval, LabelScores, ProbeResult, RunInfo
from probes.tools.show import format_table

SCORES = np.array([[0.1, 0.5, 0.2], [0.3, 0.4, 0.6]])  # [L,H]: best L1-H2 = 0.6
CHOSEN = {"layer": 0, "head": 1, "score_on_corpus": 0.5, "score_on_selection": 0.7, "count_on_selection": 5}


def hand(selected: dict | None = None) -> ProbeResult:
    """nsubj (count 40) and overall on SCORES, each head's interval [score − 0.05, score + 0.1], a best interval
    [0.62, 0.70] that misses its score 0.6 (as a best-of-L×H estimate may), baseline 0.5 at offset −1."""
    settings = {"min_count": 20, "replicates": 200}
    if selected is not None:
        settings["select_on"] = {"corpus": ["dev.conllu"], "sentences": 5}

    def entry(count: int) -> LabelScores:
        return LabelScores(count, SCORES.copy(), selected=None if selected is None else dict(selected),
                           ci_low=SCORES - 0.05, ci_high=SCORES + 0.1,
                           best=BestInterval(1, 2, 0.6, 0.62, 0.7, 0.1, 0.05, 0.2))

    info = RunInfo("m", ["test.conllu"], 2, 3, 100, {}, settings, {"probes": "test"})  # 100 sentences: not few
    base = {"best": 0.5, "best_offset": -1}
    return ProbeResult("dep", info, {}, {"nsubj": entry(40)}, entry(40), baselines={"labels": {"nsubj": base},
                                                                                      "overall": base})


def test_best_head_with_its_selection_aware_interval():
    shown = hand().reported("nsubj")
    assert (shown.kind, shown.name, shown.score, shown.count) == ("best", "L1-H2", 0.6, 40)
    assert (shown.ci_low, shown.ci_high) == (0.62, 0.7)
    assert (shown.margin, shown.margin_low, shown.margin_high) == (0.1, 0.05, 0.2)
    assert (shown.baseline, shown.offset, shown.outside) == (0.5, -1, True)


def test_a_score_outside_its_interval_is_marked_and_explained():
    lines = format_table(hand()).splitlines()
    row = next(line for line in lines if line.startswith("nsubj"))
    assert row.split()[2:6] == ["L1-H2", "0.600", "[0.620,", "0.700]*"]
    assert any(line.startswith("* the score lies outside its interval: the best of the L×H heads") for line in lines)


def test_selected_head_from_the_grid_where_its_block_has_no_interval():
    result = hand(CHOSEN)
    shown = result.reported("nsubj")
    assert (shown.kind, shown.name, shown.score, shown.selection_score) == ("selected", "L0-H1", 0.5, 0.7)
    assert (shown.ci_low, shown.ci_high) == (0.45, 0.6)  # that head's own interval, not the best head's
    assert (shown.margin, shown.margin_low, shown.margin_high) == (0.0, None, None)
    assert result.reported("nsubj", "best").name == "L1-H2"
    row = next(line for line in format_table(result).splitlines() if line.startswith("nsubj"))
    assert row.split()[2:] == ["L0-H1", "0.500", "0.700", "[0.450,", "0.600]", "offset", "-1", "0.500", "+0.000", "-"]


def test_selected_head_reads_its_block_and_survives_a_round_trip(tmp_path):
    block = {**CHOSEN, "ci_low": 0.41, "ci_high": 0.58, "margin": 0.0, "margin_low": -0.12, "margin_high": 0.09}
    hand(block).save(tmp_path)
    from probes.results.probe_result import load_result

    shown = load_result(tmp_path / "dep.json").reported("nsubj")
    assert (shown.name, shown.ci_low, shown.ci_high) == ("L0-H1", 0.41, 0.58)
    assert (shown.margin, shown.margin_low, shown.margin_high) == (0.0, -0.12, 0.09)


def test_selection_naming_no_head():
    shown = hand({"reason": "absent"}).reported("nsubj")
    assert (shown.kind, shown.found, shown.reason) == ("selected", False, "absent on the selection split")
    row = next(line for line in format_table(hand({"reason": "absent"})).splitlines() if line.startswith("nsubj"))
    assert row.endswith("no best head: absent on the selection split")


def test_compare_pairs_like_with_like():
    both = compare_results({"dep": hand(CHOSEN)}, {"dep": hand(CHOSEN)})
    nsubj = next(d for d in both.labels if d.label == "nsubj")
    assert (nsubj.kind, nsubj.best("a").name, nsubj.best("b").name) == ("selected", "L0-H1", "L0-H1")
    assert nsubj.paired is None
    assert "dep: heads chosen on each side's selection split" in both.format_table()
    mixed = compare_results({"dep": hand(CHOSEN)}, {"dep": hand()})
    nsubj = next(d for d in mixed.labels if d.label == "nsubj")
    assert (nsubj.kind, nsubj.best("a").name, nsubj.best("b").name) == ("best", "L1-H2", "L1-H2")
    assert "dep: only A chose its heads on a selection split; both sides' best heads on their scored corpora " \
           "compared" in mixed.notes
    assert nsubj.row()["heads"] == "best" and "dep: best heads on the scored corpora" in mixed.format_table()


def test_figures_box_and_carry_the_reported_head():
    pictures = figures_of(hand(CHOSEN), "labels")
    chunk = json.loads(Image.open(io.BytesIO(pictures["dep-nsubj.png"])).text["probes"])
    assert [(t["label"], t["kind"], t["layer"], t["head"], t["score"], t["ci_low"]) for t in chunk] == [
        ("nsubj", "selected", 0, 1, 0.5, 0.45)]
    tiles = json.loads(Image.open(io.BytesIO(pictures["dep.png"])).text["probes"])
    assert [(t["label"], t["layer"], t["head"]) for t in tiles] == [("overall", 0, 1), ("nsubj", 0, 1)]


def test_no_selected_head_without_a_selection():
    with pytest.raises(ValueError, match="no 'selected' head"):
        hand().reported("nsubj", "selected")
