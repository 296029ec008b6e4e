"""The lines `probes show` prints under the trees table: the other variants' best heads, the baselines and the
head ensemble."""
from __future__ import annotations

import numpy as np

from probes.results.presentation import Presentation
from probes.results.probe_result import ProbeResult, best_head


class TreesPresentation(Presentation):
    """The default presentation, with ``format_trees``'s lines under the table."""

    details = classmethod(lambda cls, result, head=None, sentences=3: format_trees(result))


def format_trees(result: ProbeResult) -> str:
    overall = result.overall
    lines = [f"main variant: {result.extra.get('main', 'cle_attention')} (directed UAS); best head of the others:"]
    for name, grid in overall.extra.items():
        best = best_head(grid, name)
        if best.found:
            lines.append(f"  {name:<28} {best.name}  {best.score:.3f}")
        elif np.isfinite(grid).any():
            lines.append(f"  {name:<28} no best head: {best.reason}")
    for name, base in result.baselines.items():
        lines.append(f"baseline {name.replace('_', '-')}: UAS {base['uas']:.3f}, undirected {base['undirected_uas']:.3f} "
                     f"({base['count']} arcs)")
    ensemble = result.extra.get("ensemble")
    if ensemble:
        heads = ", ".join(f"L{layer}-H{head}" for layer, head in ensemble["heads"])
        fit = ensemble.get("selected_on") or {}
        where = "the --select-on split" if fit.get("on") == "fit" else "the scored corpus itself (same split)"
        lines.append(f"head ensemble {heads}: UAS {ensemble['uas']:.3f}, undirected {ensemble['undirected_uas']:.3f} "
                     f"({ensemble['count']} arcs); chosen on {ensemble['sample_sentences']} sentences of {where}")
    return "\n".join(lines)
