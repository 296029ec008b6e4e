"""The numbers move nowhere (issue 17 item 3, issue 16 §5, issue 24 item 1): given the same maps, every registered
probe (``probes.available()``, so a probe added later is covered without being named), each on a small real
corpus it can read (tests/probe_corpora.py), gives the same numbers (counts equal, scores within float32
rounding of a probe's own terms: rows_alone.FLOAT32_ROUNDING, most of them bit for bit) whether the maps are
captured layer by layer by hooks or all at once from the model's outputs, at batch sizes 1 and 128, and
under a small --max-tokens budget that forces batches of several shapes; at torch threads 1 and 2. The maps
are the real MiniLM's, each row run alone (tests/rows_alone.py), since on some CPUs a padded batch's maps
differ from a lone sentence's in their last bits (what that does to the scores: test_invariance_and_minilm).
A batch that runs out of memory, split in two and retried, leaves the scores of an undisturbed run.
"""
from __future__ import annotations

import dataclasses
import weakref

import pytest
import torch

import probes
from probe_corpora import CORPORA, grids, probe_run_arguments, same
from probes.capture.model import Encoder
from probes.running.runner import Feed
from rows_alone import FLOAT32_ROUNDING, THREADS, rows_alone, torch_threads

pytestmark = [pytest.mark.integration]
REFERENCE_BATCH = 8
SMALL_BUDGET = 120  # padded subword positions per forward pass: several batch shapes on the corpora here


def _shapes(monkeypatch) -> list[tuple[int, int]]:
    """Records the [rows, T] shape of every forward pass from now on."""
    seen: list[tuple[int, int]] = []
    layerwise = Encoder.layerwise

    def spy(self, input_ids, *args, **kwargs):
        seen.append(tuple(input_ids.shape))
        return layerwise(self, input_ids, *args, **kwargs)

    monkeypatch.setattr(Encoder, "layerwise", spy)
    return seen


def _run(names: list[str], encoder, kwargs: dict, **settings) -> dict:
    return probes.run(names, encoder=encoder, progress=False, **{"batch_size": REFERENCE_BATCH, **kwargs, **settings})


def _groups() -> list[tuple[str, ...]]:
    """The probes reading the bundled sample together (one run per setting), every other probe alone."""
    bundled = tuple(n for n in probes.available() if n not in CORPORA)
    return [bundled, *[(n,) for n in probes.available() if n in CORPORA]]


@pytest.mark.parametrize("threads", [t if t == 1 else pytest.param(t, marks=pytest.mark.slow) for t in THREADS])
@pytest.mark.parametrize("names", _groups(), ids=lambda names: "+".join(names))
def test_given_the_same_maps_every_probe_gives_the_same_numbers_however_captured_and_batched(names, threads, minilm,
                                                                                            tmp_path, request,
                                                                                            monkeypatch):
    kwargs = probe_run_arguments(names[0], tmp_path, lambda: request.getfixturevalue("shared_corpora"))
    assert minilm.capture == "hooks"
    with torch_threads(threads):
        rows_alone(monkeypatch)
        shapes = _shapes(monkeypatch)
        reference = _run(list(names), minilm, kwargs)
        variants = {"outputs capture": _run(list(names), dataclasses.replace(minilm, capture="outputs"), kwargs),
                    "batch size 1": _run(list(names), minilm, kwargs, batch_size=1),
                    "batch size 128": _run(list(names), minilm, kwargs, batch_size=128)}
        assert any(b > 2 and t > 8 for b, t in shapes)  # padded batches of several sentences were scored
        shapes.clear()
        variants["max tokens"] = _run(list(names), minilm, kwargs, batch_size=None, max_tokens=SMALL_BUDGET)
    rows = 2 if any(probes.get_probe(n)(1, 1).shuffle_seed() is not None for n in names) else 1
    assert all(b * t <= SMALL_BUDGET or b == rows for b, t in shapes)  # the budget binds, twin rows counted
    if sum(b for b, _ in shapes) * max(t for _, t in shapes) > SMALL_BUDGET:  # not all in one batch: several shapes
        assert len(set(shapes)) > 1
    for name in names:
        assert reference[name].info.sentences > 0
        for what, runs in variants.items():
            same(grids(reference[name]), grids(runs[name]), f"{name}: {what}", atol=0, rtol=FLOAT32_ROUNDING)


def short_of_memory(monkeypatch, most_rows: int) -> list[int]:
    """Every forward pass of more than `most_rows` rows fails after its layer 2 (its updates up to there made), as
    an accelerator's out-of-memory error, which the runner then catches on the CPU too; returns the rows of every
    pass tried, filled as the runs go."""
    layerwise = Encoder.layerwise
    tried: list[int] = []

    def failing_pass(self, input_ids, attention_mask, on_layer, **kwargs):
        tried.append(input_ids.shape[0])

        def failing(layer, attention, context):
            on_layer(layer, attention, context)
            if layer == 2 and input_ids.shape[0] > most_rows:
                raise torch.OutOfMemoryError("CUDA out of memory (simulated)")

        return layerwise(self, input_ids, attention_mask, failing, **kwargs)

    monkeypatch.setattr(Encoder, "layerwise", failing_pass)
    monkeypatch.setattr(Feed, "retry_on_cpu", True)  # the CPU's memory errors are not caught: pretend an accelerator
    return tried


@pytest.mark.slow
def test_a_batch_out_of_memory_is_split_and_retried_without_counting_twice(minilm, monkeypatch, capsys):
    """A forward pass of more than 3 sentences fails after its first layers (their updates already made):
    the state is restored, the batch split until it fits, and the scores are those of an undisturbed run."""
    names = ["dep", "pos", "head_distance", "word_order"]
    settings = {"limit": 12, "batch_size": 12, "fit_on": "same"}
    rows_alone(monkeypatch)  # the same maps in the batches of 12 and their halves
    undisturbed = probes.run(names, encoder=minilm, progress=False, **settings)
    tried = short_of_memory(monkeypatch, 6)  # more than 6 rows (3 sentences and their twins) fail
    split = probes.run(names, encoder=minilm, progress=False, **settings)
    # pos's fit (no twin): 12 → 6 + 6; scoring (with twin rows): 24 → 12 → 6 + 6, each half
    assert tried == [12, 6, 6, 24, 12, 6, 6, 12, 6, 6]
    assert capsys.readouterr().err.count("ran out of memory") == 1
    for name in names:
        same(grids(undisturbed[name]), grids(split[name]), f"{name}: split", atol=0, rtol=FLOAT32_ROUNDING)


def test_a_retry_point_copies_the_state_its_pass_adds_to_alone():
    """Before each batch on an accelerator the runner copies the state the batch may add to: in the scoring pass
    not trees' selection sample (fit state, fixed by then) or pos's centroids, unless pos fits them there (beside
    the scoring); in a fit pass only the fit state. Restoring leaves what was not copied as it is."""
    from probes.builtin.pos import PosProbe
    from probes.builtin.trees.probe import TreesProbe

    trees, pos = TreesProbe(2, 3), PosProbe(2, 3)
    scored = {"hits", "arcs", "relation_hits", "relation_arcs", "baseline_hits", "ensemble_hits"}
    assert set(trees.retry_point("update")[0]) == scored
    assert set(trees.retry_point("fit_update")[0]) == {"sample"}
    assert "centroids" not in pos.retry_point("update")[0] and set(pos.retry_point("fit_update")[0]) == {"centroids"}
    pos.fit_beside()
    assert "centroids" in pos.retry_point("update")[0]
    point = trees.retry_point("update")
    trees.arcs += 5
    trees.sample.keys.append(7)  # as if the sample had changed (it does not in a scoring pass)
    trees.restore(point)
    assert int(trees.arcs) == 0 and trees.sample.keys == [7]


@pytest.mark.parametrize("decoding", ["host", "device"])
def test_trees_split_and_retried_scores_every_batch_once(minilm, monkeypatch, capsys, decoding):
    """trees scores a batch at the next batch's last layer; a batch that runs out of memory in between is undone back
    to before it (the runner's retry point), the batch before it still to score: every batch scored once, the
    result that of an undisturbed run (batches of 4, each failing at layer 2 and run as 2 + 2)."""
    settings = {"limit": 12, "batch_size": 4, "fit_on": "same", "tree_decoding": decoding}
    undisturbed = probes.run(["trees"], encoder=minilm, progress=False, batch_size=2,
                             **{k: v for k, v in settings.items() if k != "batch_size"})
    tried = short_of_memory(monkeypatch, 2)
    split = probes.run(["trees"], encoder=minilm, progress=False, **settings)
    assert tried == [4, 2, 2] * 6  # the fit pass' 3 batches, then the scoring pass' 3
    assert capsys.readouterr().err.count("ran out of memory") == 1
    assert split["trees"].overall.count == undisturbed["trees"].overall.count
    same(grids(undisturbed["trees"]), grids(split["trees"]), "trees: split", atol=0, rtol=FLOAT32_ROUNDING)


@pytest.mark.filterwarnings("ignore::probes.encoding.subwords.UnknownTokensWarning")  # MiniLM reads few Chinese characters
def test_seg_split_and_retried_adds_every_batch_once(minilm, monkeypatch, capsys, tmp_path, request):
    """seg adds a batch's part (scored on its own thread) at the next batch's last layer; a batch that runs out of
    memory in between is undone back to before it, the batch before it still to add: every batch added once, the
    result that of an undisturbed run (batches of 4, each failing at layer 2 and run as 2 + 2)."""
    arguments = {**probe_run_arguments("seg", tmp_path, lambda: request.getfixturevalue("shared_corpora")),
                 "limit": 12}
    undisturbed = probes.run(["seg"], encoder=minilm, progress=False, batch_size=2, **arguments)
    tried = short_of_memory(monkeypatch, 2)
    split = probes.run(["seg"], encoder=minilm, progress=False, batch_size=4, **arguments)
    scored = split["seg"].info.sentences
    assert scored == undisturbed["seg"].info.sentences and scored > 4  # the sentences MiniLM can read
    assert tried == [4, 2, 2] * (scored // 4) + [scored % 4] * (scored % 4 > 0)  # the last batch fits
    assert capsys.readouterr().err.count("ran out of memory") == 1
    assert split["seg"].extra["units"] == undisturbed["seg"].extra["units"]
    assert [e["index"] for e in split["seg"].extra["examples"]] == list(range(min(scored, 10)))
    same(grids(undisturbed["seg"]), grids(split["seg"]), "seg: split", atol=0, rtol=FLOAT32_ROUNDING)


def test_a_failed_pass_is_freed_before_its_halves_run(minilm, monkeypatch, capsys):
    """The halves of a batch that ran out of memory need its memory back: when they run, the failed pass's maps are
    gone (inside the except block its exception's traceback still held them: on a real GPU, filled but 2 GiB,
    every half ran out of memory in turn; benchmarks/gpu_check.py step 4)."""
    layerwise = Encoder.layerwise
    failed: list[weakref.ref] = []
    alive_when_retried: list[bool] = []

    def short_of_memory(self, input_ids, attention_mask, on_layer, **kwargs):
        alive_when_retried.extend(ref() is not None for ref in failed)

        def failing(layer, attention, context):
            on_layer(layer, attention, context)
            if layer == 1 and input_ids.shape[0] > 2:
                failed.append(weakref.ref(attention))
                raise torch.OutOfMemoryError("CUDA out of memory (simulated)")

        return layerwise(self, input_ids, attention_mask, failing, **kwargs)

    monkeypatch.setattr(Encoder, "layerwise", short_of_memory)
    monkeypatch.setattr(Feed, "retry_on_cpu", True)
    probes.run(["dep"], encoder=minilm, progress=False, limit=4, batch_size=4)
    assert len(failed) == 1 and alive_when_retried == [False, False]  # the batch of 4 failed; its halves of 2 ran
    assert capsys.readouterr().err.count("ran out of memory") == 1


def test_a_single_sentence_out_of_memory_is_raised(minilm, monkeypatch):
    def no_memory(self, *args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory (simulated)")

    monkeypatch.setattr(Encoder, "layerwise", no_memory)
    with pytest.raises(torch.OutOfMemoryError):
        probes.run(["dep"], encoder=minilm, progress=False, limit=2)


def test_on_the_cpu_a_batch_out_of_memory_is_raised_not_split(minilm, monkeypatch):
    """torch raises OutOfMemoryError on accelerators only: on the CPU no state is kept to restore, nothing retried."""
    tried: list[int] = []

    def no_memory(self, input_ids, *args, **kwargs):
        tried.append(input_ids.shape[0])
        raise torch.OutOfMemoryError("out of memory (simulated)")

    monkeypatch.setattr(Encoder, "layerwise", no_memory)
    with pytest.raises(torch.OutOfMemoryError):
        probes.run(["dep"], encoder=minilm, progress=False, limit=4, batch_size=4)
    assert tried == [4]
