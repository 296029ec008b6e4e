"""Plain-text tables of results (`probes show`, and `probes run` without --out)."""
from __future__ import annotations

import numpy as np

from probes.base.errors import InputError
from probes.base.packing import specials_of, unpack, unpack_marks
from probes.results.figures import presentation_of
from probes.results.probe_result import ProbeResult
from probes.base.wording import counted, fixed


def format_table(result: ProbeResult, top: int = 0, all_labels: bool = False) -> str:
    """Best head per label (most frequent first), or the head ``--select-on`` chose, as ``ProbeResult.reported``
    gives them: its count, its 95% bootstrap interval where the run kept replicates (the best head chosen again
    in every replicate, probes.results.bootstrap; a selected head's own interval), marked * with a line saying why where
    the score lies outside it, marked ~ with a line saying why where the bootstrap resampled few units
    (``ProbeResult.few_units``), and, where the probe has them, the best fixed-offset baseline and the head's margin
    over it (with its paired interval).
    Labels below the run's minimum count are left out unless `all_labels`; a label with no single best head
    (``BestHead.reason``) says why; where ``--select-on`` chose the heads, their score on the selection split
    is a column too. Below the table: a warning naming the labels whose best head does not beat its best
    baseline, or (with intervals) whose margin over it has an interval that reaches 0, the baseline named as the
    result names it (``ProbeResult.compared_with``). The header says what was scored (``ProbeResult.scored``),
    where the labels are spaCy's, that they are silver, and where the model ran in half precision, its dtype."""
    info = result.info
    select_on = info.settings.get("select_on")
    shown = result.shown(all_labels)
    rows = shown[: top or None] + [("overall", result.overall)]
    shows = [result.reported(name) for name, _ in rows]  # every number of a row comes from here
    intervals = any(r.ci_low is not None for r in shows)
    margins = any(r.baseline is not None for r in shows)
    rough = result.few_units()
    mark = "~" if rough else ""  # before each interval resting on few units
    width = max(LABEL_WIDTH, *(len(name) + 1 for name, _ in rows))  # the label column
    dtype = info.settings.get("dtype", "float32")  # results files made before --dtype record none: float32
    lines = [f"{result.probe} · {info.model} · {result.scored()} scored, {sum(info.skipped.values())} skipped"
             + (f" · silver labels ({info.annotator})" if info.annotator else " · silver labels"
                if info.annotation == "silver" else "")
             + f" · {info.layers} layers × {info.heads} heads (0-indexed)"
             + (f" · model run in {dtype}, maps in float32" if dtype != "float32" else "")
             + (f" · 95% intervals: {info.settings.get('replicates')} bootstrap replicates, "
                + ("each selected head's own (chosen on another split)" if select_on else
                   "the best head's counting its selection (its lower bound that of the luckiest close head)")
                if intervals else "")]
    if note := info.skip_note():
        lines.append(f"  {note}")
    if select_on:
        lines.append(f"best heads chosen on {', '.join(select_on['corpus'])} ({select_on['sentences']} sentences); "
                     "scores on the scored corpus")
    header = (f"{'label':<{width}}{'count':>7}  {'sel. head' if select_on else 'best head':<10}{'score':>7}"
              + (f"{'on sel.':>9}" if select_on else "") + (f"  {'95% interval':<16}" if intervals else ""))
    if margins:
        header += f"  {'baseline':<12}{'score':>7}{'margin':>8}" + (f"  {'95% interval':<18}" if intervals else "")
    header = header.rstrip()
    lines += [header, "-" * len(header)]
    beaten = []  # labels whose head is not above the best baseline
    outside = marked = False  # marked: an interval printed with ~
    for best in shows:
        name = best.label
        line = f"{name:<{width}}{best.count:>7}  "
        if not best.found:
            lines.append(line + f"no best head: {best.reason}" + (RARE_MARK if result.below_min_count(name) else ""))
            continue
        line += f"{best.name:<10}{fixed(best.score, '>7.3f')}"
        line += fixed(best.selection_score, ">9.3f") if select_on else ""
        if intervals:
            bounds = _interval((best.ci_low, best.ci_high), mark=mark)
            line += f"  {bounds + ('*' if best.outside else ''):<16}"
            outside, marked = outside or best.outside, marked or bounds.startswith("~")
        if best.baseline is not None:
            offset = f"offset {best.offset:+d}" if isinstance(best.offset, int) else str(best.offset)  # coref: a kind
            line += f"  {offset:<12}{fixed(best.baseline, '>7.3f')}{fixed(best.margin, '>+8.3f')}"
            if intervals:
                line += f"  {_interval((best.margin_low, best.margin_high), '+.3f', mark)}"
            if not best.margin > 0:
                beaten.append(f"{name} ({best.name} {fixed(best.score)} ≤ {offset} {fixed(best.baseline)})")
            elif best.margin_low is not None and not best.margin_low > 0:  # above the baseline, not beyond resampling
                beaten.append(f"{name} ({best.name}: margin over {offset} {fixed(best.margin, '+.3f')}, "
                              f"its interval reaches {fixed(best.margin_low, '+.3f')})")
        lines.append(line.rstrip() + (RARE_MARK if result.below_min_count(name) else ""))
    if outside:
        lines.append("* the score lies outside its interval: "
                     + ("a head's percentile interval need not hold its own score where its replicates are skewed"
                        if select_on else "the best of the L×H heads' scores is biased upward, and its interval "
                        "counts the selection"))
    if marked:
        lines.append(f"~ {rough}")
    if beaten:
        lines.append(f"warning: {'chosen' if select_on else 'best'} head not above its {result.compared_with()}"
                     f"{' (or its interval)' if intervals else ''}: {', '.join(beaten)}")
    rare = sum(result.below_min_count(name) for name, _ in rows)
    if rare:
        lines.append(f"{RARE_MARK.strip()}: {counted(rare, 'label')} below the minimum count ({result.min_count} "
                     "instances), shown as asked: their scores rest on few instances")
    hidden = len(result.labels) - len(shown)
    if hidden:
        lines.append(f"{counted(hidden, 'label')} below the minimum count ({result.min_count} instances) not shown; "
                     "--all-labels shows them")
    return "\n".join(lines)


RARE_MARK = "  (few)"  # after a table line of a label below the run's minimum count
LABEL_WIDTH = 14  # the label column's least width (a longer label widens it)


def _interval(bounds: tuple[float | None, float | None] | None, spec: str = ".3f", mark: str = "") -> str:
    """"[low, high]" after `mark`, or "-" where there is none (no replicates of the label, or no margin)."""
    if not bounds or any(x is None or x != x for x in bounds):
        return "-"
    return f"{mark}[{fixed(bounds[0], spec)}, {fixed(bounds[1], spec)}]"


def format_result(result: ProbeResult, top: int = 0, head: tuple[int, int] | None = None, sentences: int = 3,
                  all_labels: bool = False) -> str:
    """The table, the lines its probe adds below it (probes.results.presentation: ``details``; e.g. seg's example
    sentences segmented by `head`, default the best head), then `head`'s per-sentence view (``format_views``)."""
    details = presentation_of(result).details(result, head=head, sentences=sentences)
    views = format_views(result, head=head, sentences=sentences)
    causal = format_causal(result, top=top, all_labels=all_labels)
    return (format_table(result, top=top, all_labels=all_labels) + (f"\n{causal}" if causal else "")
            + (f"\n{details}" if details else "") + (f"\n{views}" if views else ""))


def format_causal(result: ProbeResult, top: int = 0, all_labels: bool = False) -> str:
    """What a decoder-only model cannot reach, from the result's ``extra["causal_constraint"]`` ("" for an encoder's
    result): its note, and where it has figures, per label of the table (and overall) the share of instances each
    direction can reach ("<direction>_share") and the best baseline a causal model can follow (the offsets k < 0,
    either direction; coref: its best baseline over earlier antecedents)."""
    stated = result.extra.get("causal_constraint")
    if not stated:
        return ""
    lines = [f"{stated['note']} (causal_constraint)"]
    if "overall" not in stated:
        return lines[0]
    lines.append("per label: the share of instances a direction can reach; causal baseline: the best baseline a "
                 "causal model can follow (offsets before the word, either direction)")
    readings = [(name, stated["labels"].get(name)) for name, _ in result.shown(all_labels)[: top or None]]
    readings = [(name, r) for name, r in readings if r is not None] + [("overall", stated["overall"])]
    shares = [key for key in stated["overall"] if key.endswith("_share")]
    baseline = next((key for key in ("causal_offset_baseline", "causal_baseline") if key in stated["overall"]), None)
    columns = [key[: -len("_share")].replace("_", " ") + " share" for key in shares]
    columns += ["causal baseline"] if baseline else []
    header = f"{'label':<14}" + "".join(f"{c:>{max(len(c), 7) + 2}}" for c in columns)
    lines += [header, "-" * len(header)]
    for name, reading in readings:
        values = [reading[key] for key in shares]
        if baseline:
            values.append(reading[baseline]["either" if baseline == "causal_offset_baseline" else "best"])
        lines.append(f"{name:<14}" + "".join(f"{'-' if v is None else f'{v:.3f}':>{max(len(c), 7) + 2}}"
                                             for c, v in zip(columns, values)))
    return "\n".join(lines)


def format_views(result: ProbeResult, head: tuple[int, int] | None = None, sentences: int = 3) -> str:
    """The probe's own per-sentence view (probes.results.examples; ``Presentation.view``) of one head (default: the best
    overall, or where none is single, the first head at the top score) on the first `sentences` kept sentences:
    dep, the gold arcs with each word's most-attended word; trees, the gold arcs with each word's head in the
    head's decoded tree; srl, predicate → argument; frames, target → frame element with the largest attention
    weight between them; pos, ner, con, each unit's gold and predicted label; coref, each anaphor with the word its
    head word attends to most and its antecedents' head words. ✓/✗: whether the head gets the
    item, as the probe scores it. The root column is named by the model's start special token ([CLS], <s>; the
    view's "specials"), and labels a tool made (``RunInfo.annotation``: spaCy's) are called silver, not gold.
    "" when the result keeps no views or its probe has none."""
    views = result.extra.get("sentence_views")
    if not views or not sentences or not views.get("kind"):
        return ""
    best = result.best()
    layer, number = head or (best.layer, best.head)
    layers, heads = result.info.layers, result.info.heads
    if not (0 <= layer < layers and 0 <= number < heads):
        raise InputError(f"no head L{layer}-H{number}: the model has {layers} layers × {heads} heads (0-indexed)")
    row = layer * heads + number
    kind, shown = views["kind"], views["sentences"][:sentences]
    pointed = ("the word each word hangs from in the tree decoded from the head"
               if any("head" in v.get("marks", {}) for v in shown) else "the word each word attends to most")
    gold = result.info.annotation  # "gold", or "silver" where a tool made the labels
    legend = {"arcs": f"{gold} arcs; → {pointed}", "roles": "predicate → argument",
              "frames": "target → frame element, the largest attention weight between them",
              "units": f"each unit's {gold} label and the label the head predicts",
              "mentions": "anaphor (its head word) → the word the head word attends to most; the antecedents' "
                          "head words"}[kind]
    lines = ["", f"head L{layer}-H{number} on the first {counted(len(shown), result.unit[:-1], result.unit)} "
             f"({legend}; ✓/✗ whether the head "
             f"gets it, as {result.probe} scores it)"]
    for view in shown:
        names = [specials_of(views)[0], *view["words"]]
        marks = {k: v[row] for k, v in unpack_marks(view, layers, heads).items()}  # {name: [items]}
        lines.append(f"[{view['sent_id'] or view['index'] + 1}] {' '.join(view['words'])}")
        if kind == "arcs":
            pred = unpack(view["predictions"], np.uint16, (layers * heads, -1))[row]  # [n+1] argmax column per row
            lines += _arc_lines(view["items"], marks, names, pred, gold)
        else:
            lines += [f"  {_item_line(kind, item, marks, k, names, views.get('labels', []), gold)} {_tick(marks, k)}"
                      for k, item in enumerate(view["items"])]
    return "\n".join(lines)


def _arc_lines(items: list[dict], marks: dict, names: list[str], pred: np.ndarray, gold: str) -> list[str]:
    """One line per gold arc (one per word): the word, where the head points it (the tree's head where the view
    has one, else its argmax), its gold head, ✓/✗; `gold`: what the labels are called ("gold" or "silver")."""
    width = min(14, max(len(w) for w in names))
    lines = []
    for k, arc in enumerate(items):
        d, h = arc["to"], arc["from"]
        to = int(marks["head"][k]) if "head" in marks else int(pred[d])
        lines.append(f"  {d:>3} {names[d][:width]:<{width}} → {to:>3} {names[to][:width] if to >= 0 else '-':<{width}}"
                     f"  {gold} {arc['label']:<10} → {h:>3} {names[h][:width]:<{width}} {_tick(marks, k)}")
    return lines


def _item_line(kind: str, item: dict, marks: dict, k: int, names: list[str], labels: list[str], gold: str) -> str:
    """Item k of a roles, frames, units or mentions view: its words and label, and what the head made of it."""
    def words(columns) -> str:
        return " ".join(names[c] for c in columns)

    if kind == "units":
        predicted = labels[int(marks["predicted"][k])] if "predicted" in marks else "-"
        return f"{words(range(item['from'], item['to'] + 1))}: {gold} {item['label']}, predicted {predicted}"
    if kind == "mentions":
        first, last = item["span"]
        looked = names[int(marks["head"][k])] if "head" in marks else "-"
        return (f"{item['label']}: {words(range(first, last + 1))} ({words(item['from'])}) → {looked}; "
                f"antecedents {', '.join(names[c] for c in item['to'])}")
    line = f"{item['label']}: {words(item['from'])} → {words(item['to'])}"
    return line + (f"  weight {fixed(marks['weight'][k])}" if "weight" in marks else "")


def _tick(marks: dict, k: int) -> str:
    """✓ or ✗: the item's "right" mark ("" where the view kept no marks for the sentence)."""
    return ("✓" if marks["right"][k] else "✗") if "right" in marks else ""
