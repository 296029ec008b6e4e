"""Segmentation scores of K segmenters at once, from their predicted word ends over N units.

A segmenter is a [N] bool column "a word ends after this unit" (a head, a baseline, a union of
heads); ``tally`` turns K of them into additive counts [STATS,K], ``metrics`` turns counts into
scores. Definitions (the sentence end is always a boundary and never a decision):

    boundary accuracy   right decisions / decisions (gaps between two units of a sentence)
    boundary P, R, F1   over the decisions, "boundary" being the positive class
    word P, R, F1       a predicted word (units between two consecutive predicted boundaries) is
                        right when it is exactly a gold word: both its ends are gold boundaries and
                        no gold boundary lies inside it. P = right / predicted words, R = right /
                        gold words (all of them, unreachable ones included), F1 = 2 right / (predicted
                        + gold): the standard segmentation metric (Sproat & Emerson 2003).

Combining heads (``combine``), for a set S of heads:
    oracle    a gap takes the gold label when any head in S gives it, the other label when none
              does ("a boundary is right if any head gets it right"); an upper bound that needs
              the gold segmentation, so not a segmenter one can run.
    any_end   a word ends where any head in S says it ends: a segmenter that needs no gold.
"""
from __future__ import annotations

import math

import torch

from probes.builtin.seg_units import LENGTH_LABELS, Units

STATS = ("tp", "fp", "fn", "tp_known", "fp_known", "fn_known", "predicted_words", "right_words",
         *(f"right_{label}" for label in LENGTH_LABELS))
COMBINE_RULES = ("oracle", "any_end")
_MAX_CELLS = 1 << 24  # cumulative-sum cells per chunk of segmenters: bounds the memory of `tally`


def tally(ends: torch.Tensor, units: Units) -> torch.Tensor:
    """[STATS,K] int64 counts of K segmenters, given their predicted ends [N,K] bool."""
    chunk = max(1, _MAX_CELLS // max(len(units), 1))
    return torch.cat([_tally(ends[:, i:i + chunk], units) for i in range(0, ends.shape[1], chunk)], dim=1)


def _tally(ends: torch.Tensor, units: Units) -> torch.Tensor:
    predicted = ends | units.final[:, None]  # [N,K] the sentence end is always a boundary
    gold = units.gold_end[:, None]  # [N,1]
    decision = ~units.final[:, None]
    known = decision & units.known[:, None]
    hit, false_end, missed = predicted & gold, predicted & ~gold, ~predicted & gold
    wrong = (predicted != gold).to(torch.int32)  # [N,K], 0 at sentence ends
    errors = torch.cat([wrong.new_zeros(1, wrong.shape[1]), wrong.cumsum(0, dtype=torch.int32)])  # [N+1,K]
    # word w is right when no gap from the one before its first unit to the one after its last is wrong
    # (the gap before a sentence's first unit is the previous sentence's end: never wrong)
    right = (errors[units.word_last + 1] - errors[(units.word_first - 1).clamp(min=0)]) == 0  # [W,K]
    by_length = torch.zeros(len(LENGTH_LABELS), ends.shape[1], dtype=torch.int64)
    by_length.index_add_(0, units.word_bucket, right.long())
    rows = [(hit & decision), (false_end & decision), (missed & decision), (hit & known), (false_end & known),
            (missed & known), predicted]
    return torch.cat([torch.stack([r.sum(0) for r in rows]), right.sum(0, keepdim=True), by_length])


def combine(ends: torch.Tensor, gold_end: torch.Tensor, rule: str, base: torch.Tensor | None = None) -> torch.Tensor:
    """Ends [N,K] of each head (column) of `ends` combined with a set already chosen.

    base: [N] for the chosen set: the gaps some chosen head gets right (oracle) or marks as an end
    (any_end); None for the empty set.
    """
    if rule == "oracle":
        right = ends == gold_end[:, None]
        if base is not None:
            right = right | base[:, None]
        return torch.where(right, gold_end[:, None], ~gold_end[:, None])
    return ends if base is None else ends | base[:, None]


def set_state(ends: torch.Tensor, gold_end: torch.Tensor, rule: str) -> torch.Tensor:
    """[N] the `base` of combine() for the set of all columns of `ends` [N,K]."""
    if rule == "oracle":
        return (ends == gold_end[:, None]).any(1)
    return ends.any(1)


def union_ends(ends: torch.Tensor, gold_end: torch.Tensor, rule: str) -> torch.Tensor:
    """[N] predicted ends of the set of all columns of `ends` [N,K] under `rule`."""
    if rule == "oracle":
        return torch.where(set_state(ends, gold_end, rule), gold_end, ~gold_end)
    return set_state(ends, gold_end, rule)


def metrics(stats: torch.Tensor, totals: dict[str, int]) -> dict[str, torch.Tensor]:
    """Scores from counts [STATS,...] and the gold totals (decisions, gold_words, ...); NaN where a
    denominator is 0."""
    s = {name: stats[i].double() for i, name in enumerate(STATS)}
    gold_words = float(totals["gold_words"])
    out = {
        "word_f1": _ratio(2 * s["right_words"], s["predicted_words"] + gold_words),
        "word_precision": _ratio(s["right_words"], s["predicted_words"]),
        "word_recall": _ratio(s["right_words"], torch.full_like(s["right_words"], gold_words)),
        "boundary_accuracy": _ratio(totals["decisions"] - s["fp"] - s["fn"],
                                    torch.full_like(s["fp"], float(totals["decisions"]))),
        "boundary_precision": _ratio(s["tp"], s["tp"] + s["fp"]),
        "boundary_recall": _ratio(s["tp"], s["tp"] + s["fn"]),
        "boundary_f1": _ratio(2 * s["tp"], 2 * s["tp"] + s["fp"] + s["fn"]),
        "boundary_accuracy_known": _ratio(totals["known_decisions"] - s["fp_known"] - s["fn_known"],
                                          torch.full_like(s["fp"], float(totals["known_decisions"]))),
        "boundary_f1_known": _ratio(2 * s["tp_known"], 2 * s["tp_known"] + s["fp_known"] + s["fn_known"]),
    }
    return out


def _ratio(num, den: torch.Tensor) -> torch.Tensor:
    num = torch.as_tensor(num, dtype=torch.float64)
    return torch.where(den > 0, num / den.clamp(min=1e-300), torch.full_like(den, math.nan))


def greedy(ends: torch.Tensor, units: Units, totals: dict[str, int], rule: str, k: int) -> list[dict]:
    """Greedy best-k ensemble: start from the head with the best word F1, then add, one at a time,
    the head that raises the set's word F1 most (ties: the lowest head index); stop at k heads or
    when no head raises it. ends: [N,K] per head. Returns one entry per step: the heads chosen so
    far (column indices) and the set's scores."""
    base = None
    chosen: list[int] = []
    curve: list[dict] = []
    best = -math.inf
    for _ in range(min(k, ends.shape[1])):
        scores = metrics(tally(combine(ends, units.gold_end, rule, base), units), totals)
        f1 = torch.nan_to_num(scores["word_f1"], nan=-math.inf)
        f1[chosen] = -math.inf
        pick = int(torch.argmax(f1))
        if not f1[pick] > best:
            break
        best = float(f1[pick])
        chosen.append(pick)
        base = set_state(ends[:, chosen], units.gold_end, rule)
        curve.append({"heads": list(chosen), **{name: float(v[pick]) for name, v in scores.items()}})
    return curve
