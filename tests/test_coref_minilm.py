"""coref end to end with the packaged MiniLM on three LitBank excerpts (tests/data/litbank, CC BY 4.0).

The excerpts (words, subwords with MiniLM's tokenizer): Bleak House 203 words, Persuasion 305 (324 subwords in 4
sentences, the longest 126), Alice 295 (310 in 6, the longest 128): each fits one window of the model's 512.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import probes
from probes.encoding import batching, pooling
from probes.encoding.batching import Batch
from probes.results.bootstrap import replicate_weights
from probes.builtin.coref import CoreferenceProbe
from probes.cli import main
from probes.corpus.coref import read_coref
from probes.encoding.subwords import encode
from probes.encoding.identity import Occurrences, sentence_key
from probes.capture import maps as layer_maps
from probes.capture.maps import LayerMaps
from probe_corpora import same
from state_checks import assert_same

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DATA = Path(__file__).parent / "data" / "litbank"


def run(minilm, **options):
    return probes.run("coref", encoder=minilm, corpus=DATA, progress=False, replicates=200, **options)["coref"]


@pytest.fixture(scope="module")
def reference():
    """Mentions, chains and non-first mentions counted from the reader's documents, apart from the probe."""
    docs = read_coref(DATA).sentences
    chains = [{c for _, _, c in d.ann["mentions"]} for d in docs]
    mentions = sum(len(d.ann["mentions"]) for d in docs)
    return {"documents": len(docs), "mentions": mentions, "chains": sum(map(len, chains)),
            "non_first": mentions - sum(map(len, chains))}


@pytest.fixture(scope="module")
def small(minilm):
    return run(minilm, window=160, stride=80)


def test_counts_add_up(small, reference):
    coref = small.extra["coref"]
    assert {k: coref[k] for k in reference} == reference
    assert coref["scored"] + coref["out_of_window"] + coref["same_head"] == coref["non_first"]
    assert coref["scored"] == small.overall.count == sum(small.labels[t].count for t in ("pronoun", "proper",
                                                                                        "nominal") if t in small.labels)
    assert small.labels["nested"].count + small.labels["non_nested"].count == small.overall.count
    assert coref["windows"] == small.info.sentences > coref["documents"] == 3 and coref["out_of_window"] > 0
    assert (coref["window"], coref["stride"]) == (160, 80) and coref["parser"].startswith("spaCy ")
    best = small.overall.best
    assert best.ci_low < best.score <= best.ci_high  # intervals by document, present
    assert set(small.baselines["overall"]) >= {"nearest", "head_match", "offsets", "best", "best_offset"}


def test_windows_of_a_document_share_its_bootstrap_weights(minilm):
    probe, tokenizer = CoreferenceProbe(1, 1, window=160, stride=80), minilm.tokenizer
    occurrences = Occurrences()
    for doc in read_coref(DATA).sentences:
        key = occurrences.key(doc)
        windows = probe.rows(doc, tokenizer, 512)
        assert len(windows) > 1 and {sentence_key(w) for w in windows} == {key}
        weights = replicate_weights([sentence_key(w) for w in windows], 50, 0)  # [R, windows]
        assert (weights == weights[:, :1]).all()


@pytest.mark.parametrize("in_order", [False, True], ids=["scatter", "tails"])
@pytest.mark.parametrize("pool", ["mean-sum", "first-sum", "mean-mean"])
def test_predictions_at_the_anaphors_are_the_maps_predictions(minilm, pool, in_order, monkeypatch):
    """LayerMaps.predictions_at (the anaphors' rows) and word_attention_of (the views' rows) are the whole map's,
    with segment sums (the CPU's) and with each word's subwords past its second summed apart (CUDA's fixed order:
    probes.base.ordered.in_order)."""
    for module in (pooling, layer_maps, batching):
        monkeypatch.setattr(module, "in_order", lambda device: in_order)
    cutter = CoreferenceProbe(6, 12, window=160)
    windows = [w for d in read_coref(DATA).sentences for w in cutter.rows(d, minilm.tokenizer, 512)]
    items, _ = encode(minilm.tokenizer, windows, 512)
    batch = Batch.from_encoded([windows[e.index] for e in items], items, minilm.tokenizer, pool)
    pairs = [(b, h) for b, w in enumerate(batch.sentences) for h in w.ann["anaphors"].heads]
    rows, heads = torch.tensor(pairs).T  # [N] each anaphor's window row and head word column
    compared = []

    def on_layer(layer, attention, context):
        maps = LayerMaps(batch, layer, attention)
        some = maps.word_attention_of([0, 2]).clone()  # [2,H,C,C] pooled from those rows alone: nothing cached yet
        whole = maps.predictions.transpose(1, 2)[rows, heads]  # [N,H] from the whole pooled map
        compared.append(bool((maps.predictions_at(rows, heads) == whole).all())
                        and torch.equal(some, maps.word_attention[[0, 2]]))

    minilm.layerwise(batch.input_ids, batch.attention_mask, on_layer)
    assert len(rows) > 30 and len(batch.sentences) > 2 and compared == [True] * 6


def test_a_window_holding_the_document_is_the_whole_document(minilm, small):
    whole = run(minilm)  # default window: the model's 512, each document one window
    again = run(minilm, window=400, stride=10)  # another window still holding every document: the same
    assert whole.extra["coref"]["windows"] == 3 and whole.info.settings["max_length"] == 512
    assert_same(again.labels, whole.labels)
    assert_same(again.overall, whole.overall)
    assert whole.extra["coref"]["out_of_window"] == 0  # every antecedent is in the document's one window
    # shrinking the window: the anaphors it loses are those counted out_of_window, nothing else
    assert whole.overall.count - small.overall.count == small.extra["coref"]["out_of_window"]


def test_shards_merge_to_the_single_run(minilm, small, tmp_path):
    whole = run(minilm, window=160, stride=80, state=tmp_path / "one")
    for i in range(2):
        run(minilm, window=160, stride=80, shard=(i, 2), state=tmp_path / "two")
    merged = probes.merge(tmp_path / "two")["coref"]
    per_shard = [s["sentences"] for s in merged.info.provenance["shards"]]
    assert sorted(per_shard) != [0, whole.info.sentences]  # documents went to both shards, whole
    same(merged.extra["coref"], whole.extra["coref"], "coref")
    same({k: v.scores for k, v in merged.labels.items()}, {k: v.scores for k, v in whole.labels.items()}, "labels")
    same(vars(merged.overall.best), vars(whole.overall.best), "best", atol=1e-6)
    same(merged.baselines, whole.baselines, "baselines")


def test_select_on_a_document(minilm, tmp_path):
    bleak, persuasion, alice = sorted(DATA.glob("*.conll"))  # heads chosen on Persuasion, scored on the others
    result = probes.run("coref", encoder=minilm, corpus=[bleak, alice], select_on=[persuasion], progress=False,
                        replicates=0, window=160, stride=80)["coref"]
    assert result.extra["coref"]["documents"] == 2
    assert result.info.settings["select_on"]["corpus"] == [str(persuasion)]
    chosen = result.overall.selected
    assert chosen["layer"] is not None and 0 <= chosen["score_on_selection"] <= 1


def test_cli_writes_and_shows_mentions(minilm, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", "coref", "--corpus", str(DATA), "--window", "160", "--stride", "80", "--replicates",
                 "50", "--out", str(out), "--quiet"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["coref.csv", "coref.json", "coref.png"]
    capsys.readouterr()
    assert main(["show", str(out / "coref.json"), "--head", "L1-H1", "--sentences", "3"]) == 0
    shown = capsys.readouterr().out
    lines = [x for x in shown.splitlines() if x.startswith("  ") and "antecedents" in x]
    assert lines and all(x.rstrip().endswith(("✓", "✗")) for x in lines)
    assert "anaphor (its head word) → the word the head word attends to most" in shown
    assert np.isfinite(probes.load_result(out / "coref.json").overall.scores).all()


def test_a_study_of_two_checkpoints_gives_their_plain_runs(tmp_path):
    """coref in a study (MiniLM and its fine-tuned sre_embedding_model, two shards: a document is never split
    between them): each model's result equals its plain `probes.run`, every count and grid; the study's deltas
    pair the two models' best heads per anaphor type."""
    import importlib.util

    import pandas as pd

    from probes.base.defaults import default_model

    if importlib.util.find_spec("sre_embedding_model") is None:
        pytest.skip("sre-embedding-model is not installed")
    import sre_embedding_model

    models = {"minilm": default_model(), "sre": str(Path(sre_embedding_model.__file__).parent / "model_weights")}
    spec = {"models": models, "shards": 2, "settings": {},
            "probes": {"coref": {"mention_head": "last"}}, "corpora": [{"corpus": str(DATA), "probes": ["coref"]}]}
    done = probes.study(spec, tmp_path / "out", plots="none", progress=False)
    for name, model in models.items():
        plain = probes.run("coref", model=model, corpus=DATA, progress=False, mention_head="last")
        got = done.results[name]["coref"]
        assert got.extra["coref"]["scored"] == plain["coref"].extra["coref"]["scored"] > 0
        same(grids_of(plain["coref"]), grids_of(got), name, atol=1e-12)
    changes = pd.read_csv(tmp_path / "out" / "study-deltas.csv")
    assert set(changes.probe) == {"coref"} and {"overall", "pronoun"} <= set(changes.label)


def grids_of(result) -> dict:
    return {name: {"count": e.count, "scores": e.scores} for name, e in [*result.labels.items(), ("overall", result.overall)]}


@pytest.mark.shared
def test_nearest_on_litbank_never_takes_a_mention_holding_the_anaphor(minilm, shared_corpora):
    """The first 5 LitBank documents (sorted), MiniLM's 512-subword windows: the nearest baseline's word lies before
    each anaphor's first word. Of the 101 nested anaphors it finds an antecedent for 43 (0.43; 3 when a mention
    holding the anaphor counted as preceding it), of the 722 others 333."""
    corpus = sorted(str(p) for p in (shared_corpora / "litbank-coref").glob("*.conll"))[:5]
    cutter = CoreferenceProbe(minilm.layers, minilm.heads)
    hits, counts = {True: 0, False: 0}, {True: 0, False: 0}
    for doc in (d for path in corpus for d in read_coref(path).sentences):
        for w in cutter.rows(doc, minilm.tokenizer, minilm.max_length):
            a = w.ann["anaphors"]
            assert all(near < first for near, (first, _) in zip(a.nearest, a.spans))
            for nested, near, antecedents in zip(a.nested, a.nearest, a.antecedents):
                counts[nested] += 1
                hits[nested] += near in antecedents
    assert (counts, hits) == ({True: 101, False: 722}, {True: 43, False: 333})
