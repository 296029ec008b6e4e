"""patterns: the attention-pattern class of every map (Kovaleva et al. 2019, "Revealing the Dark Secrets
of BERT", Fig. 1; Clark et al. 2019), by documented rules instead of the paper's trained classifier.

Token level. For one head on one sentence (a map), three features, each a mean over the map's
real query rows (special tokens included):
    v  vertical mass: the weight on special tokens ([CLS], [SEP], </s>, ...)
    d  diagonal mass: the weight on the previous plus the next token (offsets ±1), where that
       token is a word's subword (a special neighbour counts as vertical, not diagonal)
    w  (sentence pairs only) block mass: the weight a word's subword puts on subwords of words in
       its own sentence, mean over the word subwords' rows
(v and d are disjoint masses, so v + d <= 1). Rules, in this order (thresholds are options; major
0.6, minor 0.2 by default):
    vertical           v >= major
    diagonal           d >= major
    vertical+diagonal  neither alone reaches major, but v >= minor, d >= minor and v + d >= major
    block              the map is a sentence pair and w >= major
    heterogeneous      everything else
A previous-token head on a sentence of n words has d = n / (n + 2) (the [CLS] row and the first
word's row look at special tokens), so it is diagonal from 3 words on.
A single sentence is one segment, so its maps are never "block". Per head, each label is the share
of maps in that class; "overall" is the share in any class but heterogeneous. Extra grids of the
overall entry: the mean features vertical_mass, diagonal_mass.
"""
from __future__ import annotations

import torch

from probes.encoding.batching import Batch, token_segments
from probes.builtin.analyses.mean_analysis import MeanAnalysis
from probes.builtin.analyses.token_view import TokenView
from probes.settings.declared import PATTERNS
from probes.capture.maps import LayerMaps
from probes.settings.registry import register
from probes.results.probe_result import ProbeResult, RunInfo

CLASSES = ("vertical", "diagonal", "vertical+diagonal", "block", "heterogeneous")


def classify(v: torch.Tensor, d: torch.Tensor, w: torch.Tensor, pair: torch.Tensor, major: float,
             minor: float) -> torch.Tensor:
    """Class index into CLASSES of each map from its features (all of one shape; `pair` bool)."""
    vertical = v >= major
    diagonal = ~vertical & (d >= major)
    both = ~vertical & ~diagonal & (v >= minor) & (d >= minor) & (v + d >= major)
    block = ~vertical & ~diagonal & ~both & pair & (w >= major)
    out = torch.full(v.shape, CLASSES.index("heterogeneous"), dtype=torch.long, device=v.device)
    for name, mask in (("vertical", vertical), ("diagonal", diagonal), ("vertical+diagonal", both), ("block", block)):
        out.masked_fill_(mask, CLASSES.index(name))
    return out


def block_mass(batch: Batch, attention: torch.Tensor) -> torch.Tensor:
    """[B,H] feature w: mean over word-subword rows of the weight on subwords of the row's own sentence."""
    same, word_rows = batch.memo(("patterns.blocks", attention.device, attention.dtype),
                                 lambda: _blocks(batch, attention.device, attention.dtype))
    own = torch.einsum("bhij,bij->bhi", attention, same)  # [B,H,T]
    return torch.einsum("bhi,bi->bh", own, word_rows) / word_rows.sum(1).clamp(min=1)[:, None]


def _blocks(batch: Batch, device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """[B,T,T] 1 where two word subwords share a sentence of the pair; [B,T] 1 on word subwords."""
    segments = token_segments(batch).to(device)  # [B,T], -1 for special tokens and padding
    same = (segments[:, :, None] == segments[:, None, :]) & (segments[:, :, None] >= 0)
    return same.to(dtype), (segments >= 0).to(dtype)


@register
class PatternAnalysis(MeanAnalysis, declared=PATTERNS):
    measures = (*CLASSES, "vertical_mass", "diagonal_mass")

    def update(self, batch: Batch, maps: LayerMaps) -> None:
        t = TokenView(maps)
        rows = t.row_weights()  # [B,T]
        per_map = rows.sum(1)[:, None]  # [B,1] real rows of each sentence
        special = torch.einsum("bhij,bj->bhi", t.attention, t.masks.special.to(rows.dtype))  # [B,H,T]
        prev, nxt = t.neighbour_mass(words_only=True)
        v = torch.einsum("bhi,bi->bh", special, rows) / per_map  # [B,H]
        d = torch.einsum("bhi,bi->bh", prev + nxt, rows) / per_map
        pair = batch.memo("patterns.pair", lambda: torch.tensor(["pair" in s.ann for s in batch.sentences]))  # [B]
        pair = pair.to(rows.device)[:, None]  # [B,1]
        any_pair = any("pair" in s.ann for s in batch.sentences)  # from the host's sentences: no read of the device
        w = block_mass(batch, t.attention) if any_pair else torch.zeros_like(v)
        classes = classify(v, d, w, pair.expand_as(v), self.config["pattern_major"], self.config["pattern_minor"])
        counts = torch.nn.functional.one_hot(classes, len(CLASSES)).sum(0)  # [H,classes]
        n_maps = len(batch.sentences)
        for k, name in enumerate(CLASSES):
            self.add(maps, name, counts[:, k], n_maps)
        self.add(maps, "vertical_mass", v.double().sum(0), n_maps)  # float64 sums over the maps, as the state
        self.add(maps, "diagonal_mass", d.double().sum(0), n_maps)

    def compute(self, info: RunInfo) -> ProbeResult:
        labels = {name: self.mean(name) for name in CLASSES}
        overall = self.mean("heterogeneous")
        overall.scores = 1.0 - overall.scores
        overall.extra = {"vertical_mass": self.mean("vertical_mass").scores,
                         "diagonal_mass": self.mean("diagonal_mass").scores}
        return self.result(info, overall, labels)
