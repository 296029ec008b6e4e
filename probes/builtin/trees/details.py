"""The lines `probes show` prints under the trees table: the other variants' best heads, the baselines and the
head ensemble."""
from __future__ import annotations

import numpy as np

from probes.results import ProbeResult


def format_trees(result: ProbeResult) -> str:
    overall = result.overall
    lines = [f"main variant: {result.extra.get('main', 'cle_attention')} (directed UAS); best head of the others:"]
    for name, grid in overall.extra.items():
        if np.isfinite(grid).any():
            layer, head = np.unravel_index(int(np.nanargmax(grid)), grid.shape)
            lines.append(f"  {name:<28} L{layer}-H{head}  {grid[layer, head]:.3f}")
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
