"""Per-sentence views (probes.results.examples): the kept maps, held where they were made (or, past the budget, written
to the recorder's temporary file) and read back for the chosen heads only, are the word-level attention of an
independent computation (each sentence alone, pooled with matrix products in float64), as uint8 weight × 255."""
from __future__ import annotations

import tempfile

import numpy as np
import torch

import probes
from probes.base.packing import unpack


def _word_maps(encoder, words: list[str]) -> np.ndarray:
    """[L,H,n+2,n+2] float64: mean-sum word attention (rows: root, words, end special) of `words` alone."""
    enc = encoder.tokenizer([words], is_split_into_words=True, return_tensors="pt")
    attention = torch.stack(encoder.forward(enc["input_ids"], enc["attention_mask"]).attentions)[:, 0].double()
    word_ids = enc.word_ids(0)
    n, t = len(words), len(word_ids)
    column = [0 if i == 0 else n + 1 if w is None else w + 1 for i, w in enumerate(word_ids)]  # [CLS] 0, [SEP] n+1
    member = torch.zeros(n + 2, t, dtype=torch.float64)
    member[column, torch.arange(t)] = 1.0  # [n+2,T]
    query = member / member.sum(1, keepdim=True)
    return (query @ attention @ member.T).numpy()  # [L,H,n+2,n+2]


def test_views_hold_the_chosen_heads_word_attention(minilm):
    named = [(0, 0), (3, 7), (5, 11)]
    result = probes.run(["dep"], encoder=minilm, limit=8, batch_size=3, views=4, view_heads=named,
                        progress=False)["dep"]
    view = result.extra["sentence_views"]
    assert [s["index"] for s in view["sentences"]] == [0, 1, 2, 3]
    assert {tuple(h) for h in view["heads"]} >= set(named)
    compared = close = 0
    for sentence in view["sentences"]:
        side = len(sentence["words"]) + 2
        expected = _word_maps(minilm, sentence["words"])
        assert set(sentence["attention"]) == {f"{layer}-{head}" for layer, head in view["heads"]}
        for key, packed in sentence["attention"].items():
            layer, head = map(int, key.split("-"))
            kept = unpack(packed, np.uint8, (side, side)).astype(int)
            reference = np.rint(expected[layer, head] * 255)
            difference = np.abs(kept - reference)
            assert difference.max() <= 1, (sentence["index"], key)  # float16 then × 255: a rounding apart at most
            compared += difference.size
            close += int((difference == 0).sum())
    assert close >= 0.99 * compared


def test_views_are_the_same_whether_the_maps_are_held_or_written_layer_by_layer(minilm, monkeypatch):
    """Within the budget the maps stay where they were made until the views are made (only the chosen heads' maps
    are then copied); past it (HELD_SHARE 0) each layer's are written to the store and read back: the same views,
    byte for byte, and the store is opened only past the budget."""
    from probes.results import examples

    opened, opening = [], tempfile.TemporaryFile
    monkeypatch.setattr(examples.tempfile, "TemporaryFile", lambda: opened.append(1) or opening())

    def views():
        return probes.run(["dep", "pos"], encoder=minilm, limit=8, batch_size=3, views=4, view_heads=[(2, 5)],
                          progress=False)

    held = views()
    assert opened == []
    monkeypatch.setattr(examples, "HELD_SHARE", 0)
    written = views()
    assert opened
    for name in ("dep", "pos"):
        assert held[name].extra["sentence_views"] == written[name].extra["sentence_views"]
        assert held[name].extra["sentence_views"]["sentences"][0]["attention"]


def test_views_are_the_same_whether_each_layer_is_quantised_or_every_layer_at_the_last(minilm, monkeypatch):
    """On CUDA a batch's recorded maps are staged in float32 and their argmaxes and quantisation made at its last
    layer for every layer at once (examples.staged); forced here on the CPU: the same views, byte for byte, on the
    sample's first 40 sentences, 12 of them recorded, in two batches."""
    from probes.results import examples

    staged = []
    plain = examples.ExampleRecorder._held

    def held(self, *args):
        made = plain(self, *args)
        staged.append(made["staged"] is not None)
        return made

    def views():
        return probes.run(["dep", "pos"], encoder=minilm, limit=40, views=12, view_heads=[(2, 5), (4, 0)],
                          progress=False)

    monkeypatch.setattr(examples.ExampleRecorder, "_held", held)
    each_layer = views()
    assert staged and not any(staged)  # the CPU's rule: never staged
    monkeypatch.setattr(examples, "staged", lambda size, device: True)
    staged.clear()
    at_the_last = views()
    assert staged and all(staged)
    for name in ("dep", "pos"):
        view = at_the_last[name].extra["sentence_views"]
        assert view == each_layer[name].extra["sentence_views"]
        assert len(view["sentences"]) == 12 and view["sentences"][0]["attention"]
