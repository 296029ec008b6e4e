"""The pictures of any result (a probe's, or an array file's), by file name: `probes plot`."""
from __future__ import annotations

import numpy as np

from probes.results import ProbeResult, safe_name


def result_pngs(result: ProbeResult) -> dict[str, bytes]:
    """{file name: PNG}: one heatmap per label and overall (colour scale [0, 1] where the scores fit it,
    their own range otherwise), plus the layout, dendrogram and matrix of a head_distance result."""
    from probes.plots import heatmap_png

    pictures = {}
    for name, entry in [("overall", result.overall), *result.labels.items()]:
        finite = entry.scores[np.isfinite(entry.scores)]
        scale = {} if finite.size == 0 or (finite.min() >= 0 and finite.max() <= 1) else {"vmin": None, "vmax": None}
        title = f"{result.probe}: {name}" + (f" (n={entry.count})" if entry.count else "")
        pictures[f"{safe_name(result.probe)}-{safe_name(name)}.png"] = heatmap_png(entry.scores, title,
                                                                                   result.info.model, **scale)
    if result.probe == "head_distance" and "layout" in result.extra:
        from probes.builtin.analyses.head_layout import dendrogram_png, layout_png, matrix_png

        for suffix, draw in (("layout", layout_png), ("dendrogram", dendrogram_png), ("matrix", matrix_png)):
            pictures[f"head_distance-{suffix}.png"] = draw(result)
    return pictures
