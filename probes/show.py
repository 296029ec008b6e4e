"""Plain-text tables of results (`probes show`, and `probes run` without --out)."""
from __future__ import annotations

from probes.presentation import presentation_of
from probes.results import ProbeResult


def format_table(result: ProbeResult, top: int = 0) -> str:
    """Best head per label (most frequent first), with its count and, where the probe has them,
    the best fixed-offset baseline and the head's margin over it."""
    info = result.info
    baselines = result.baselines.get("labels", {})
    lines = [f"{result.probe} · {info.model} · {info.sentences} sentences scored, {sum(info.skipped.values())} skipped"
             f" · {info.layers} layers × {info.heads} heads (0-indexed)"]
    header = f"{'label':<14}{'count':>7}  {'best head':<10}{'score':>7}"
    if baselines:
        header += f"  {'baseline':<12}{'score':>7}{'margin':>8}"
    lines += [header, "-" * len(header)]
    rows = list(result.by_count())[: top or None] + [("overall", result.overall)]
    for name, entry in rows:
        best = result.best(name)
        line = f"{name:<14}{entry.count:>7}  {f'L{best.layer}-H{best.head}':<10}{best.score:>7.3f}"
        base = result.baselines.get("overall") if name == "overall" else baselines.get(name)
        if base:
            offset = f"offset {base['best_offset']:+d}"
            line += f"  {offset:<12}{base['best']:>7.3f}{best.score - base['best']:>+8.3f}"
        lines.append(line)
    return "\n".join(lines)


def format_result(result: ProbeResult, top: int = 0, head: tuple[int, int] | None = None, sentences: int = 3) -> str:
    """The table, then the lines its probe adds below it (probes.presentation: ``details``; e.g. seg's
    example sentences segmented by `head`, default the best head)."""
    details = presentation_of(result).details(result, head=head, sentences=sentences)
    return format_table(result, top=top) + (f"\n{details}" if details else "")
