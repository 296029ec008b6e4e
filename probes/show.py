"""Plain-text tables of results (`probes show`, and `probes run` without --out)."""
from __future__ import annotations

import numpy as np

from probes.errors import InputError
from probes.packing import unpack
from probes.presentation import presentation_of
from probes.results import ProbeResult


def format_table(result: ProbeResult, top: int = 0, all_labels: bool = False) -> str:
    """Best head per label (most frequent first), with its count, its 95% bootstrap interval (the best head
    chosen again in every replicate, probes.bootstrap) where the run kept replicates, and, where the probe
    has them, the best fixed-offset baseline and the head's margin over it (with its paired interval).
    Labels below the run's minimum count are left out unless `all_labels`; a label with no single best head
    (``BestHead.reason``) says why; where ``--select-on`` chose the heads, their score on the selection split
    is a column too. Below the table: a warning naming the labels whose best head does not beat its best
    baseline, or (with intervals) whose margin over it has an interval that reaches 0."""
    info = result.info
    baselines = result.baselines.get("labels", {})
    select_on = info.settings.get("select_on")
    shown = result.shown(all_labels)
    rows = shown[: top or None] + [("overall", result.overall)]
    intervals = any(entry.best is not None for _, entry in rows)
    lines = [f"{result.probe} · {info.model} · {info.sentences} sentences scored, {sum(info.skipped.values())} skipped"
             f" · {info.layers} layers × {info.heads} heads (0-indexed)"
             + (f" · 95% intervals: {info.settings.get('replicates')} bootstrap replicates, "
                + ("each selected head's own (chosen on another split)" if select_on else
                   "the best head's counting its selection (its lower bound that of the luckiest close head)")
                if intervals else "")]
    if select_on:
        lines.append(f"best heads chosen on {', '.join(select_on['corpus'])} ({select_on['sentences']} sentences); "
                     "scores on the scored corpus")
    header = (f"{'label':<14}{'count':>7}  {'best head':<10}{'score':>7}" + (f"{'on sel.':>9}" if select_on else "")
              + (f"  {'95% interval':<16}" if intervals else ""))
    if baselines:
        header += f"  {'baseline':<12}{'score':>7}{'margin':>8}" + (f"  {'95% interval':<18}" if intervals else "")
    header = header.rstrip()
    lines += [header, "-" * len(header)]
    beaten = []  # labels whose best head is not above the best baseline
    for name, entry in rows:
        best = result.best(name)
        line = f"{name:<14}{entry.count:>7}  "
        if not best.found:
            lines.append(line + f"no best head: {best.reason}")
            continue
        line += f"{best.name:<10}{best.score:>7.3f}" + (f"{best.selection_score:>9.3f}" if select_on else "")
        if intervals:
            line += f"  {_interval(entry.best and (entry.best.ci_low, entry.best.ci_high)):<16}"
        base = result.baselines.get("overall") if name == "overall" else baselines.get(name)
        if base:
            offset = f"offset {base['best_offset']:+d}"
            line += f"  {offset:<12}{base['best']:>7.3f}{best.score - base['best']:>+8.3f}"
            if intervals:
                line += f"  {_interval(entry.best and (entry.best.margin_low, entry.best.margin_high), '+.3f')}"
            margin_low = entry.best.margin_low if intervals and entry.best is not None else None
            if not best.score > base["best"]:
                beaten.append(f"{name} ({best.name} {best.score:.3f} ≤ {offset} {base['best']:.3f})")
            elif margin_low is not None and not margin_low > 0:  # above the baseline, but not beyond resampling
                beaten.append(f"{name} ({best.name}: margin over {offset} {best.score - base['best']:+.3f}, "
                              f"its interval reaches {margin_low:+.3f})")
        lines.append(line.rstrip())
    if beaten:
        lines.append(f"warning: best head not above its best offset baseline{' (or its interval)' if intervals else ''}: "
                     f"{', '.join(beaten)}")
    hidden = len(result.labels) - len(shown)
    if hidden:
        lines.append(f"{hidden} labels below the minimum count ({result.min_count} instances) not shown; "
                     "--all-labels shows them")
    return "\n".join(lines)


def _interval(bounds: tuple[float | None, float | None] | None, spec: str = ".3f") -> str:
    """"[low, high]", or "-" where there is none (no replicates of the label, or no margin)."""
    if not bounds or any(x is None or x != x for x in bounds):
        return "-"
    return f"[{format(bounds[0], spec)}, {format(bounds[1], spec)}]"


def format_result(result: ProbeResult, top: int = 0, head: tuple[int, int] | None = None, sentences: int = 3,
                  all_labels: bool = False) -> str:
    """The table, the lines its probe adds below it (probes.presentation: ``details``; e.g. seg's example
    sentences segmented by `head`, default the best head), then `head`'s per-sentence view (``format_views``)."""
    details = presentation_of(result).details(result, head=head, sentences=sentences)
    views = format_views(result, head=head, sentences=sentences)
    return format_table(result, top=top, all_labels=all_labels) + (f"\n{details}" if details else "") + (f"\n{views}" if views else "")


def format_views(result: ProbeResult, head: tuple[int, int] | None = None, sentences: int = 3) -> str:
    """The per-sentence view of one head (default: the best overall, or where none is single, the first head at
    the top score) on the first `sentences` kept sentences
    (``extra["sentence_views"]``, see probes.examples): each word's most-attended word, and where the corpus
    has them the gold dependency arcs and semantic roles, ✓ where the head gets the arc (either direction,
    as dep and srl score it), ✗ where not. "" when the result keeps no views."""
    views = result.extra.get("sentence_views")
    if not views or not sentences:
        return ""
    best = result.best()
    layer, number = head or (best.layer, best.head)
    if not (0 <= layer < result.info.layers and 0 <= number < result.info.heads):
        raise InputError(f"no head L{layer}-H{number}: the model has {result.info.layers} layers × "
                         f"{result.info.heads} heads (0-indexed)")
    lines = ["", f"head L{layer}-H{number} on the first {min(sentences, len(views['sentences']))} sentences "
             "(→ the word each word attends to most; ✓/✗ whether the head gets the gold arc)"]
    for view in views["sentences"][:sentences]:
        pred = unpack(view["predictions"], np.uint16, (result.info.layers * result.info.heads, -1))[
            layer * result.info.heads + number].tolist()  # [n+1] argmax column per row
        names = ["[ROOT]", *view["words"]]
        width = min(14, max(len(w) for w in names))
        gold = view["gold"]
        lines.append(f"[{view['sent_id'] or view['index'] + 1}] {' '.join(view['words'])}")
        arcs = {a["dependent"]: a for a in dependency_arcs(gold, pred)}
        for i, word in enumerate(view["words"], start=1):
            line = f"  {i:>3} {word[:width]:<{width}} → {pred[i]:>3} {names[pred[i]][:width]:<{width}}"
            if i in arcs:
                a = arcs[i]
                line += f"  gold {a['label']:<10} → {a['head']:>3} {names[a['head']][:width]:<{width}} " \
                        f"{'✓' if a['right'] else '✗'}"
            lines.append(line)
        for a in role_arcs(gold, pred):
            lines.append(f"  srl {names[a['predicate']]} → {a['label']}: "
                         f"{' '.join(names[w] for w in a['words'])} {'✓' if a['right'] else '✗'}")
    return "\n".join(lines)


def dependency_arcs(gold: dict, pred: list[int]) -> list[dict]:
    """Gold dependency arcs (columns: 0 the root, i the word i) with whether the head's argmax `pred` [n+1] gets
    each, as dep scores it: pred[dependent] == head or pred[head] == dependent."""
    if "head" not in gold:
        return []
    return [{"dependent": d, "head": h, "label": label, "right": pred[d] == h or pred[h] == d}
            for d, (h, label) in enumerate(zip(gold["head"], gold["deprel"]), start=1)]


def role_arcs(gold: dict, pred: list[int]) -> list[dict]:
    """Gold predicate → argument arcs (columns) with whether `pred` [n+1] gets each, as srl scores it: the
    predicate's argmax is a word of the argument, or some argument word's argmax is the predicate."""
    arcs = []
    for frame in gold.get("srl", []):
        p = frame["predicate"] + 1
        for (role, _, _), words in zip(frame["args"], frame["arg_words"]):
            if role in ("V", "C-V"):
                continue
            columns = [w + 1 for w in words if w + 1 != p]
            right = pred[p] in columns or any(pred[c] == p for c in columns)
            arcs.append({"predicate": p, "label": role, "words": columns, "right": bool(right)})
    return arcs
