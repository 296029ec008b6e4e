"""Reading a seg result: summary lines, ensemble curves, and sentences segmented by a head or an
ensemble beside the gold segmentation (`probes show DIR/seg.json`)."""
from __future__ import annotations

from probes.base.errors import InputError
from probes.results.presentation import Presentation
from probes.results.probe_result import ProbeResult

_COLUMNS = (("word_f1", "word F1"), ("word_precision", "word P"), ("word_recall", "word R"),
            ("boundary_accuracy", "bnd acc"), ("boundary_f1", "bnd F1"), ("boundary_accuracy_known", "acc known"))


def segmentations(result: ProbeResult, heads: list[tuple[int, int]], rule: str = "any_end") -> list[dict]:
    """The kept example sentences (option `seg_examples`), each segmented by one head or a set of heads.

    heads: [(layer, head), ...]; one head is that head's own segmentation; several are combined by
    `rule` ("any_end": a word ends where any of them says so; "oracle": each gap takes the gold
    label where any of them gives it). Returns [{"sent_id", "gold": [words], "predicted": [words]}].
    """
    layers, width = result.info.layers, result.info.heads
    for layer, head in heads:
        if not (0 <= layer < layers and 0 <= head < width):
            raise InputError(f"no head L{layer}-H{head}: the model has {layers} layers × {width} heads (0-indexed)")
    out = []
    for ex in result.extra.get("examples", []):
        bits = [ex["ends"][layer * width + head] for layer, head in heads]
        gold = ex["gold_ends"]
        if rule == "oracle":
            ends = [g if any(b[i] == g for b in bits) else "10"[int(g)] for i, g in enumerate(gold)]
        else:
            ends = ["1" if any(b[i] == "1" for b in bits) else "0" for i in range(len(gold))]
        out.append({"sent_id": ex["sent_id"], "gold": ex["gold"], "predicted": _words(ex["units"], ends)})
    return out


def _words(units: list[str], ends: list[str]) -> list[str]:
    words, current = [], ""
    for i, unit in enumerate(units):
        current += unit
        if ends[i] == "1" or i == len(units) - 1:
            words.append(current)
            current = ""
    return words


def format_seg(result: ProbeResult, head: tuple[int, int] | None = None, sentences: int = 3) -> str:
    """Summary of a seg result and `sentences` example sentences segmented by `head` (default: the
    best head by word F1) and by the best-5 ensembles."""
    units = result.extra.get("units", {})
    best = result.best()
    ensembles = result.extra.get("ensembles", {})
    lines = ["(labels len1..len4+: recall of the gold words that many units long; overall: word F1)",
             f"segmentation · tokenize={result.info.settings.get('tokenize', 'words')} · "
             f"end_rule={result.options['end_rule']} · {units.get('units', 0)} units ({units.get('unk_units', 0)} "
             f"[UNK]), {units.get('decisions', 0)} decisions, {units.get('gold_words', 0)} gold words "
             f"({units.get('unreachable_words', 0)} unreachable)",
             f"{'':<24}" + "".join(f"{title:>10}" for _, title in _COLUMNS)]

    def row(name: str, scores: dict) -> None:
        cells = "".join(f"{'-' if scores.get(k) is None else format(scores[k], '.3f'):>10}" for k, _ in _COLUMNS)
        lines.append(f"{name:<24}{cells}")

    grids = {"word_f1": result.overall.scores, **result.overall.extra}
    if best.found:
        row(f"best head {best.name}", {k: float(g[best.layer, best.head]) for k, g in grids.items()})
    else:
        lines.append(f"no best head: {best.reason}")
    for name, scores in result.baselines.items():
        row(f"baseline {name}", scores)
    for rule, scores in result.extra.get("union", {}).items():
        row(f"union of all, {rule}", scores)
    for rule, curve in ensembles.items():
        if curve:
            step = curve[min(5, len(curve)) - 1]
            row(f"best-{len(step['heads'])} {rule}", step)
    for rule, curve in ensembles.items():
        f1 = " ".join(f"{s['word_f1']:.3f}" for s in curve)
        heads = " ".join(f"L{layer}-H{h}" for layer, h in (curve[-1]["heads"] if curve else []))
        lines.append(f"greedy {rule}: word F1 by k = {f1}  (heads in order: {heads})")
    if sentences and result.extra.get("examples"):
        lines += _examples(result, head or (best.layer, best.head), ensembles, sentences)
    return "\n".join(lines)


def _examples(result: ProbeResult, head: tuple[int, int], ensembles: dict, n: int) -> list[str]:
    rows = [(f"L{head[0]}-H{head[1]}", segmentations(result, [head]))]
    for rule, curve in ensembles.items():
        if curve:
            heads = [tuple(h) for h in curve[min(5, len(curve)) - 1]["heads"]]
            rows.append((f"best-{len(heads)} {rule}", segmentations(result, heads, rule)))
    lines = ["", "examples (words separated by spaces):"]
    for i, first in enumerate(rows[0][1][:n]):
        lines.append(f"[{first['sent_id'] or i + 1}]")
        lines.append(f"  {'gold':<16}{' '.join(first['gold'])}")
        lines += [f"  {name:<16}{' '.join(segs[i]['predicted'])}" for name, segs in rows]
    return lines


class SegPresentation(Presentation):
    """The default presentation, with ``format_seg``'s lines under the table: baselines, ensembles, segmented
    examples."""

    details = staticmethod(format_seg)
