"""How a probe's results are shown: the lines under `probes show`'s table and the pictures saved with them.

Every probe class inherits ``Presentation`` (``class Probe(Presentation, ABC)``) and overrides
``details`` or ``figures`` where it has more to show (seg: segmented example sentences; pos, ner,
con: what the centroids were fitted on; head_distance: the head layout and dendrogram).
``presentation_of(result)`` finds the class for a result: its probe's, or these defaults for an array
file or a probe that is not registered in this process (a plugin not loaded with ``--code``).
"""
from __future__ import annotations

import numpy as np

from probes.results import ProbeResult, safe_name, short_model_name


class Presentation:
    """Default presentation: no detail lines, one heatmap per label and one for overall."""

    @classmethod
    def details(cls, result: ProbeResult, head: tuple[int, int] | None = None, sentences: int = 3) -> str:
        """Lines printed under `probes show`'s table ("" for none). head: (layer, head) a probe may
        illustrate (seg: the head whose segmentation is printed); sentences: examples to print."""
        return ""

    @classmethod
    def figures(cls, result: ProbeResult) -> dict[str, bytes]:
        """{file name: PNG}: ``<probe>-<label>.png``, a layer × head heatmap per label and overall, best head
        boxed; the colour scale is [0, 1] where the scores fit it, their own range otherwise."""
        from probes.plots import heatmap_png

        pictures = {}
        for name, entry in [("overall", result.overall), *result.labels.items()]:
            finite = entry.scores[np.isfinite(entry.scores)]
            scale = {} if finite.size == 0 or (finite.min() >= 0 and finite.max() <= 1) else \
                {"vmin": None, "vmax": None}  # scores outside [0, 1] (entropy in nats, cluster numbers)
            title = f"{result.probe}: {name}" + (f" (n={entry.count})" if entry.count else "")
            pictures[f"{safe_name(result.probe)}-{safe_name(name)}.png"] = heatmap_png(
                entry.scores, title, short_model_name(result.info.model), **scale)
        return pictures


def presentation_of(result: ProbeResult) -> type[Presentation]:
    """The class presenting `result`: its probe's class when that probe is registered, else the defaults
    (an array file loaded as a result, or a plugin's result read without its code)."""
    from probes.registry import available

    if result.info.provenance.get("array_file"):  # named after its file, whatever probe that name may be
        return Presentation
    cls = available().get(result.probe)
    return cls if isinstance(cls, type) and issubclass(cls, Presentation) else Presentation

