"""How the clustering probes' results (pos, ner, con: probes.builtin.clustering) are shown: the lines under `probes
show`'s table say what the centroids were fitted on and the majority-label baseline. Imports neither torch nor the
probes' code (probes.base.options.Declaration.presentation)."""
from __future__ import annotations

from probes.results.presentation import Presentation
from probes.results.probe_result import ProbeResult


class FitPresentation(Presentation):
    """The default presentation, with ``format_fit``'s lines under the table."""

    details = classmethod(lambda cls, result, head=None, sentences=3: format_fit(result))


def format_fit(result: ProbeResult) -> str:
    """Lines under the table: what the centroids were fitted on, the majority-label baseline."""
    fit = result.extra["fit"]
    units = fit.get("units", {})
    where = "the --fit corpus" if fit.get("on") == "fit" else "the scored corpus itself (same split)"
    lines = [f"centroids fitted on {where}: {', '.join(fit.get('corpus', []))} ({fit.get('sentences', '?')} "
             f"sentences, {sum(units.values())} units, {len(units)} labels)"]
    if str(fit.get("chosen_by", "")).startswith("default"):
        lines[0] += "; give --fit DEV_FILE to fit on another split"
    majority = result.baselines.get("majority")
    if majority:
        lines.append(f"baseline, always the fit corpus' most frequent label ({majority['label']}): "
                     f"{majority['overall']:.3f}")
    missing = result.extra.get("labels_without_centroid") or []
    if missing:
        lines.append(f"labels with no centroid (never predicted): {', '.join(missing)}")
    return "\n".join(lines)
