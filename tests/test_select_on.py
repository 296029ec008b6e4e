"""--select-on: every label's best head chosen on one split and reported on another, checked against two plain
runs of the packaged MiniLM (one on each split)."""
from __future__ import annotations

import json

import numpy as np
import pytest

import probes
from probes.cli import main
from probes.base.defaults import bundled_corpus
from probes.base.errors import InputError

pytestmark = [pytest.mark.integration, pytest.mark.slow]
LIMIT = 30


@pytest.fixture(scope="module")
def splits(shared_corpora):
    """(selection split, scored corpus): the bundled EWT dev sample and EWT test (first LIMIT sentences each)."""
    return bundled_corpus(), str(shared_corpora / "ud-english-ewt" / "en_ewt-ud-test.conllu")


@pytest.fixture(scope="module")
def runs(minilm, splits):
    """dep and pos selected on the dev sample, scored on test; and the plain runs on each split (pos fitted on
    the dev sample in all three)."""
    dev, test = splits
    common = dict(encoder=minilm, limit=LIMIT, progress=False, views=0)
    return {"selected": probes.run(["dep", "pos"], corpus=test, select_on=dev, **common),
            "dev": probes.run(["dep", "pos"], corpus=dev, fit=dev, **common),
            "test": probes.run(["dep", "pos"], corpus=test, fit=dev, **common)}


@pytest.mark.parametrize("probe", ["dep", "pos"])
def test_heads_chosen_on_one_split_scored_on_the_other(runs, splits, probe):
    selected, dev, test = (runs[k][probe] for k in ("selected", "dev", "test"))
    assert selected.info.settings["select_on"] == {"corpus": [splits[0]], "sentences": LIMIT, "skipped": 0,
                                                   "skipped_reasons": {}}
    named = 0
    for label, entry in [*selected.labels.items(), ("overall", selected.overall)]:
        np.testing.assert_array_equal(entry.scores, test.entry(label).scores)  # the scores themselves do not move
        best = selected.best(label)
        if label not in dev.labels and label != "overall":
            assert entry.selected == {"reason": "absent"} and not best.found
            continue
        on_dev = dev.best(label)
        assert best.found == on_dev.found
        if not on_dev.found:
            assert best.reason == f"{on_dev.reason} on the selection split"
            continue
        named += 1
        assert (best.layer, best.head) == (on_dev.layer, on_dev.head)
        assert best.selection_score == on_dev.score and best.score == test.entry(label).scores[best.layer, best.head]
        assert entry.selected["count_on_selection"] == dev.entry(label).count
        at = best.layer, best.head  # the block's interval and margin: the selected head's own, on the scored corpus
        assert (entry.selected["ci_low"], entry.selected["ci_high"]) == (entry.ci_low[at], entry.ci_high[at])
        assert entry.selected["ci_low"] <= best.score <= entry.selected["ci_high"]
        base = (selected.baselines.get("overall") if label == "overall"
                else selected.baselines.get("labels", {}).get(label))
        if base is None:  # pos: no offset baselines
            assert all(entry.selected[k] is None for k in ("margin", "margin_low", "margin_high"))
        else:
            assert entry.selected["margin"] == best.score - base["best"]
            assert (entry.selected["margin_low"], entry.selected["margin_high"]) == \
                (entry.margins["margin_low"][at], entry.margins["margin_high"][at])
    assert named >= 5
    assert selected.best().score <= test.best().score  # chosen elsewhere: never above the best head here


def test_pos_is_fitted_on_the_selection_split(runs, splits):
    fit = runs["selected"]["pos"].info.settings["fit"]
    assert fit["on"] == "fit" and fit["chosen_by"] == "select_on" and fit["corpus"] == [splits[0]]


def test_select_on_through_the_cli(minilm, splits, tmp_path, capsys, runs):
    dev, test = splits
    assert main(["run", "dep", "--corpus", test, "--select-on", dev, "--limit", str(LIMIT), "--quiet",
                 "--out", str(tmp_path), "--no-plots", "--examples", "0"]) == 0
    data = json.loads((tmp_path / "dep.json").read_text())
    expected = runs["selected"]["dep"].best()
    assert data["overall"]["selected"] == {"layer": expected.layer, "head": expected.head,
                                           "score_on_corpus": expected.score,
                                           "score_on_selection": expected.selection_score,
                                           "count_on_selection": runs["dev"]["dep"].overall.count,
                                           **{k: runs["selected"]["dep"].overall.selected[k] for k in
                                              ("ci_low", "ci_high", "margin", "margin_low", "margin_high")}}
    capsys.readouterr()
    assert main(["show", str(tmp_path / "dep.json")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == f"best heads chosen on {dev} ({LIMIT} sentences); scores on the scored corpus"
    assert out[0].endswith("95% intervals: 1000 bootstrap replicates, each selected head's own (chosen on another split)")
    overall = next(line for line in out if line.startswith("overall")).split()
    assert overall[2:5] == [expected.name, f"{expected.score:.3f}", f"{expected.selection_score:.3f}"]


def test_select_on_refuses_shards(splits):
    with pytest.raises(InputError, match="--select-on cannot be combined with --shard or --state"):
        probes.run(["dep"], select_on=splits[0], shard="0/2")
