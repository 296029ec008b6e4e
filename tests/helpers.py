"""Building hand-made batches: sentences, subword→column maps and attention written out by hand."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from probes.encoding.batching import Batch
from probes.corpus.sentence import Sentence
from probes.encoding.subwords import END_COLUMN
from probes.capture.maps import LayerMaps

E = END_COLUMN  # the end special token's column, fixed per batch


def attention(length: int, rows: dict[int, dict[int, float]], pad_to: int | None = None) -> torch.Tensor:
    """One head's [T,T] map from {query position: {key position: weight}}; rows not given attend to themselves."""
    t = pad_to or length
    a = torch.zeros(t, t)
    for q in range(length):
        for k, w in rows.get(q, {q: 1.0}).items():
            a[q, k] = w
    return a


class HandBatch(NamedTuple):
    """A hand-built batch and its maps: attentions L × [B,H,T,T], context L × [B,H,T,d] or None."""

    batch: Batch
    attentions: tuple[torch.Tensor, ...]
    context: tuple[torch.Tensor, ...] | None = None


def batch(sentences: list[Sentence], columns: list[list[int]], heads_per_sentence: list[list[torch.Tensor]],
          pool: str = "mean-sum", **fields) -> HandBatch:
    """A one-layer batch; heads_per_sentence[b][h] is a [T_b,T_b] map, padded here to the batch length.
    fields: more of Batch's arguments (input_ids, offsets, word_spans, unk_token_id, shuffle_seed, ...)."""
    b = Batch(sentences, [np.array(c) for c in columns], pool=pool, **fields)
    t = b.columns.shape[1]
    maps = torch.zeros(len(sentences), len(heads_per_sentence[0]), t, t)
    for i, head_maps in enumerate(heads_per_sentence):
        for h, m in enumerate(head_maps):
            maps[i, h, : m.shape[0], : m.shape[1]] = m
    return HandBatch(b, (maps,))


def feed(probe, hand: HandBatch, method: str = "update", twin: HandBatch | None = None) -> None:
    """Hand every layer of `hand` to probe.<method> as the runner does, layer by layer."""
    for layer, attention in enumerate(hand.attentions):
        other = None if twin is None else LayerMaps(twin.batch, layer, twin.attentions[layer])
        maps = LayerMaps(hand.batch, layer, attention, None if hand.context is None else hand.context[layer], twin=other)
        getattr(probe, method)(hand.batch, maps)


def sentence(words: list[str], head: list[int] | None = None, deprel: list[str] | None = None, **ann) -> Sentence:
    if head is not None:
        ann["head"] = head
    if deprel is not None:
        ann["deprel"] = deprel
    return Sentence(words=words, ann=ann)


# A two-sentence treebank batch for the tree probes' hand-built tests (dep, trees).
# "The playing cat": [CLS] The play ##ing cat [SEP] (positions 0..5); arcs The -det-> cat (1→3),
# playing -amod-> cat (2→3), cat -root-> [CLS] (3→0). "Hi": [CLS] Hi [SEP]; arc Hi -root-> [CLS] (1→0).
CAT = sentence(["The", "playing", "cat"], head=[3, 3, 0], deprel=["det", "amod", "root"])
HI = sentence(["Hi"], head=[0], deprel=["root"])
CAT_COLUMNS = [0, 1, 2, 2, 3, E]
HI_COLUMNS = [0, 1, E]
# A perfect dependent→head head: each word's subwords look at its head's subword, the root at [CLS].
CAT_TO_HEADS = attention(6, {1: {4: 1.0}, 2: {4: 1.0}, 3: {4: 1.0}, 4: {0: 1.0}})
HI_TO_HEADS = attention(3, {1: {0: 1.0}})


def run_refused(capsys, out, probe: str, *args: str) -> str:
    """`probes run PROBE --out OUT --quiet ARGS` on bad input: exit code 2, one line on stderr naming the problem,
    no traceback, nothing written to OUT. Returns that line."""
    from probes.cli import main

    code = main(["run", probe, "--out", str(out), "--quiet", *args])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1, err
    assert err.startswith("probes: error: ") and "Traceback" not in err
    assert not out.exists(), "no output may be written on bad input"
    return err
