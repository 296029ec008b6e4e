"""Segmentation scores of K segmenters at once, from their predicted word ends over N units.

A segmenter says, after each unit, whether a word ends there (a head, a baseline, a union of
heads). ``tally`` turns K of them into additive counts [STATS,K]; ``metrics`` turns counts into
scores. Definitions (the sentence end is always a boundary and never a decision):

    boundary accuracy   right decisions / decisions (gaps between two units of a sentence)
    boundary P, R, F1   over the decisions, "boundary" being the positive class
    word P, R, F1       a predicted word (units between two consecutive predicted boundaries) is
                        right when it is exactly a gold word: both its ends are gold boundaries and
                        no gold boundary lies inside it. P = right / predicted words, R = right /
                        gold words (all of them, unreachable ones included), F1 = 2 right / (predicted
                        + gold): the standard segmentation metric (Sproat & Emerson 2003).

Combining the heads of a set S:
    oracle    a gap takes the gold label when any head in S gives it, the other label when none
              does ("a boundary is right if any head gets it right"); an upper bound that needs
              the gold segmentation, not a segmenter one can run.
    any_end   a word ends where any head in S says it ends: a segmenter that needs no gold.
"""
from __future__ import annotations

import math

import torch

from probes.builtin.seg.units import LENGTH_LABELS, Units

STATS = ("tp", "fp", "fn", "tp_known", "fp_known", "fn_known", "predicted_words", "right_words",
         *(f"right_{label}" for label in LENGTH_LABELS))
COMBINE_RULES = ("oracle", "any_end")
_MAX_CELLS = 1 << 24  # [units, segmenters] cells per chunk: bounds the memory of `tally`


def tally(ends: torch.Tensor, units: Units, live: torch.Tensor | None = None,
          fixed: torch.Tensor | None = None) -> torch.Tensor:
    """[STATS,K] int64 counts of K segmenters.

    Segmenter k ends a word after the j-th live unit when ends[j, k] (ends: [N_live,K] bool, one row
    per live unit), and after any other unit i when fixed[i] (the same for all K); the last unit of
    a sentence always ends a word, whatever ends or fixed say. live: [N] bool, default every unit;
    fixed: [N] bool, default False. Restricting the work to the live units makes greedy cheap.
    """
    n = len(units)
    live = torch.ones(n, dtype=torch.bool) if live is None else live
    ends = ends[~units.final[live]]  # [N_live', K] the rows of live units that are decisions
    live = live & ~units.final
    value = units.final | (fixed if fixed is not None else torch.zeros(n, dtype=torch.bool))  # [N] off live units
    gold, decision = units.gold_end, ~units.final
    known = decision & units.known
    weights = torch.stack([gold & decision, ~gold & decision, gold & known, ~gold & known, torch.ones_like(gold)], 1)
    constant = (value & ~live).double() @ weights.double()  # [5] counts of the units that are not live
    # a word's gaps (the one before its first unit to the one after its last) in the live units' compact index
    position = torch.cat([torch.zeros(1, dtype=torch.long), live.long().cumsum(0)])  # [N+1] live units before i
    fixed_wrong = torch.cat([torch.zeros(1, dtype=torch.long), ((value ^ gold) & ~live).long().cumsum(0)])
    start, stop = units.word_gaps()  # [W] each: the gap before the word .. one past the gap after it
    fixed_ok = fixed_wrong[stop] == fixed_wrong[start]  # [W] no wrong gap among the units that are not live
    has_live = position[stop] > position[start]
    always = fixed_ok & ~has_live  # [W] right for every segmenter
    check = fixed_ok & has_live  # [W] right or not depending on the segmenter
    lo, hi = position[start[check]], position[stop[check]]
    chunk = max(1, _MAX_CELLS // max(len(ends), 1))
    parts = []
    for i in range(0, ends.shape[1], chunk):  # chunks of segmenters, to bound memory
        e = ends[:, i:i + chunk]
        counts = (e.T.double() @ weights[live].double()).round().long() + constant.round().long()  # [k,5]
        wrong = torch.cat([torch.zeros(1, e.shape[1], dtype=torch.int32),
                           (e ^ gold[live][:, None]).cumsum(0, dtype=torch.int32)])  # [N_live+1,k]
        right = wrong[hi] == wrong[lo]  # [W_check,k]
        by_length = torch.bincount(units.word_bucket[always], minlength=len(LENGTH_LABELS))[:, None].repeat(
            1, e.shape[1])
        by_length.index_add_(0, units.word_bucket[check], right.long())
        tp, fp, tp_known, fp_known, predicted = counts.T
        parts.append(torch.cat([torch.stack([tp, fp, (gold & decision).sum() - tp, tp_known, fp_known,
                                             (gold & known).sum() - tp_known, predicted]),
                                by_length.sum(0, keepdim=True), by_length]))
    return torch.cat(parts, dim=1)


def union_ends(ends: torch.Tensor, gold_end: torch.Tensor, rule: str) -> torch.Tensor:
    """[N] ends of the set of all columns of `ends` [N,K] combined by `rule`."""
    if rule == "oracle":
        return torch.where((ends == gold_end[:, None]).any(1), gold_end, ~gold_end)
    return ends.any(1)


def metrics(stats: torch.Tensor, totals: dict[str, int]) -> dict[str, torch.Tensor]:
    """Scores from counts [STATS,...] and the gold totals (decisions, known_decisions, gold_words);
    NaN where a denominator is 0."""
    s = {name: stats[i].double() for i, name in enumerate(STATS)}
    gold_words = torch.full_like(s["tp"], float(totals["gold_words"]))
    decisions = torch.full_like(s["tp"], float(totals["decisions"]))
    known = torch.full_like(s["tp"], float(totals["known_decisions"]))
    return {
        "word_f1": _ratio(2 * s["right_words"], s["predicted_words"] + gold_words),
        "word_precision": _ratio(s["right_words"], s["predicted_words"]),
        "word_recall": _ratio(s["right_words"], gold_words),
        "boundary_accuracy": _ratio(decisions - s["fp"] - s["fn"], decisions),
        "boundary_precision": _ratio(s["tp"], s["tp"] + s["fp"]),
        "boundary_recall": _ratio(s["tp"], s["tp"] + s["fn"]),
        "boundary_f1": _ratio(2 * s["tp"], 2 * s["tp"] + s["fp"] + s["fn"]),
        "boundary_accuracy_known": _ratio(known - s["fp_known"] - s["fn_known"], known),
        "boundary_f1_known": _ratio(2 * s["tp_known"], 2 * s["tp_known"] + s["fp_known"] + s["fn_known"]),
    }


def _ratio(num: torch.Tensor, den: torch.Tensor) -> torch.Tensor:
    return torch.where(den > 0, num / den.clamp(min=1e-300), torch.full_like(den, math.nan))


def greedy(ends: torch.Tensor, units: Units, totals: dict[str, int], rule: str, k: int) -> list[dict]:
    """Greedy best-k ensemble under `rule`: first the head with the best word F1, then, one at a time,
    the head that raises the set's word F1 most (ties: the lowest head index); stop at k heads or
    when no head raises it. ends: [N,K] per head. Returns one entry per step: the heads chosen so
    far (column indices) and the set's scores.

    Exact and cheap: once a set is chosen, a gap that some chosen head gets right (oracle) or marks
    as an end (any_end) keeps that label whatever head is added, so only the other gaps are live.
    """
    chosen: list[int] = []
    curve: list[dict] = []
    best = -math.inf
    live = torch.ones(len(units), dtype=torch.bool)
    fixed = units.gold_end if rule == "oracle" else torch.ones(len(units), dtype=torch.bool)
    for _ in range(min(k, ends.shape[1])):
        scores = metrics(tally(ends[live], units, live, fixed), totals)
        f1 = torch.nan_to_num(scores["word_f1"], nan=-math.inf)
        f1[chosen] = -math.inf
        pick = int(torch.argmax(f1))
        if not f1[pick] > best:
            break
        best = float(f1[pick])
        chosen.append(pick)
        settled = ends[:, pick] == units.gold_end if rule == "oracle" else ends[:, pick]
        live &= ~settled
        curve.append({"heads": list(chosen), **{name: float(v[pick]) for name, v in scores.items()}})
    return curve
