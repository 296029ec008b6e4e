"""Each probe's own per-sentence view (probes.results.presentation ``Presentation.view``, recorded by probes.results.examples), on
a real small run of every registered probe (tests/probe_corpora.py), every scored sentence kept:

- its kind is the probe's (dep, trees: gold arcs; srl: predicate → argument; frames: target → frame element;
  pos, ner, con: units with gold and predicted labels); a probe without one (seg, the analyses) keeps none and
  `probes show` prints none;
- the items are the corpus' own annotation (dep's arcs read again from the CoNLL-U text);
- the marks are what the probe scored: over all items, the share each head gets right is its overall score
  (trees: its directed UAS; frames: the argmax accuracy, and the mean weight its score), and for dep they are
  the argmax rule worked out again from the kept argmax columns;
- `probes show` prints one line per item with the ✓/✗ of the head's mark, and nothing of another probe's view.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import probes
from probes.base.defaults import bundled_corpus
from probes.base.packing import unpack, unpack_marks
from probes.tools.show import format_views
from probe_corpora import probe_run_arguments

KINDS = {"dep": "arcs", "trees": "arcs", "srl": "roles", "frames": "frames", "pos": "units", "ner": "units",
         "con": "units"}
SHARED = {"srl", "frames", "ner", "con", "seg"}  # read excerpts of ../shared/corpora


@pytest.fixture(scope="module")
def runs(minilm, tmp_path_factory, request):
    made = {}

    def run(name: str):
        if name not in made:
            tmp = tmp_path_factory.mktemp(name)
            shared = (lambda: request.getfixturevalue("shared_corpora")) if name in SHARED else None
            arguments = probe_run_arguments(name, tmp, shared)
            if not probes.get_probe(name).needs_fit:
                arguments.pop("fit_on", None)
            made[name] = probes.run([name], encoder=minilm, progress=False, views=1000, **arguments)[name]
        return made[name]
    return run


def _right_share(result) -> np.ndarray:
    """[L,H] the share of all view items each head gets right ("right" marks)."""
    layers, heads = result.info.layers, result.info.heads
    right = [unpack_marks(s, layers, heads)["right"] for s in result.extra["sentence_views"]["sentences"]
             if s["items"]]
    total = np.concatenate(right, axis=1)  # [L*H, all items]
    return total.mean(axis=1).reshape(layers, heads)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(KINDS))
def test_view_marks_are_what_the_probe_scored(runs, name):
    result = runs(name)
    view = result.extra["sentence_views"]
    assert view["kind"] == KINDS[name]
    assert len(view["sentences"]) == result.info.sentences  # every scored sentence kept
    items = sum(len(s["items"]) for s in view["sentences"])
    assert items == result.overall.count > 0
    share = _right_share(result)
    if name == "frames":  # the score is the mean largest weight (kept × 255 rounded); the argmax accuracy in extra
        np.testing.assert_allclose(share, result.overall.extra["accuracy"], rtol=0, atol=1e-9)
        layers, heads = result.info.layers, result.info.heads
        weights = np.concatenate([unpack_marks(s, layers, heads)["weight"] for s in view["sentences"]], axis=1)
        np.testing.assert_allclose(weights.mean(1).reshape(layers, heads), result.overall.scores, rtol=0, atol=0.5 / 255)
    else:
        np.testing.assert_allclose(share, result.overall.scores, rtol=0, atol=1e-9)
    if KINDS[name] == "units":  # right exactly where the predicted label is the gold one
        for s in view["sentences"]:
            if not s["items"]:  # a sentence with no unit has no marks (whatever its batch held)
                assert s["marks"] == {}
                continue
            marks = unpack_marks(s, result.info.layers, result.info.heads)
            gold = np.array([it["label"] for it in s["items"]], dtype=object)
            predicted = np.array(view["labels"], dtype=object)[marks["predicted"]]  # [L*H, items]
            np.testing.assert_array_equal(marks["right"].astype(bool), predicted == gold)


def _conllu_arcs(path) -> dict[str, list[tuple[int, int, str]]]:
    """sent_id → [(head, dependent, universal relation)] read from the CoNLL-U text itself."""
    out = {}
    for block in path.read_text(encoding="utf-8").strip().split("\n\n"):
        lines = block.splitlines()
        sent_id = next(line.split("= ", 1)[1] for line in lines if line.startswith("# sent_id"))
        rows = [line.split("\t") for line in lines if line and not line.startswith("#")]
        out[sent_id] = [(int(r[6]), int(r[0]), r[7].split(":")[0]) for r in rows if r[0].isdigit()]
    return out


def test_dep_view_is_the_gold_arcs_and_the_argmax_rule(runs):
    result = runs("dep")
    gold = _conllu_arcs(Path(bundled_corpus()))
    layers, heads = result.info.layers, result.info.heads
    for s in result.extra["sentence_views"]["sentences"]:
        assert [(it["from"], it["to"], it["label"]) for it in s["items"]] == gold[s["sent_id"]]
        pred = unpack(s["predictions"], np.uint16, (layers * heads, -1)).astype(int)  # [L*H, n+1]
        h = np.array([it["from"] for it in s["items"]])
        d = np.array([it["to"] for it in s["items"]])
        expected = (pred[:, d] == h) | (pred[:, h] == d)  # [L*H, arcs]
        np.testing.assert_array_equal(unpack_marks(s, layers, heads)["right"].astype(bool), expected)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_show_prints_the_probes_own_view(runs, name):
    result = runs(name)
    best = result.best()
    layers, heads = result.info.layers, result.info.heads
    row = best.layer * heads + best.head
    lines = format_views(result, sentences=2).splitlines()
    assert lines[1].startswith(f"head L{best.layer}-H{best.head} on the first 2 sentences")
    assert ("tree decoded from the head" in lines[1]) == (name == "trees")  # trees' → is its decoded tree, not the argmax
    shown = [line for line in lines[2:] if line.startswith("  ")]  # one line per item, after each sentence's words
    expected = []
    for s in result.extra["sentence_views"]["sentences"][:2]:
        marks = {k: v[row] for k, v in unpack_marks(s, layers, heads).items()}
        names = [result.extra["sentence_views"]["specials"][0], *s["words"]]  # MiniLM's [CLS]
        for k, it in enumerate(s["items"]):
            tick = "✓" if marks["right"][k] else "✗"
            if KINDS[name] == "units":
                words = " ".join(names[it["from"]:it["to"] + 1])
                predicted = result.extra["sentence_views"]["labels"][marks["predicted"][k]]
                expected.append(f"  {words}: gold {it['label']}, predicted {predicted} {tick}")
            elif KINDS[name] == "arcs":
                expected.append((f"gold {it['label']:<10} → {it['from']:>3} ", tick))
            else:
                expected.append((f"  {it['label']}: {' '.join(names[c] for c in it['from'])} → ", tick))
    assert len(shown) == len(expected) > 0
    for line, want in zip(shown, expected):
        if isinstance(want, str):
            assert line == want
        else:
            assert want[0] in line and line.endswith(want[1]), (line, want)
    assert not any(" srl " in line or "ARG" in line for line in lines) or name == "srl"


@pytest.mark.parametrize("name", ["seg", "mass"])
def test_probes_without_a_view_show_none(runs, name):
    result = runs(name)
    view = result.extra["sentence_views"]
    assert view["kind"] is None and all("items" not in s for s in view["sentences"])
    assert format_views(result) == ""
