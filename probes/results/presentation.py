"""How a probe's results are shown: the lines under `probes show`'s table and the pictures saved with them.

Every probe class inherits ``Presentation`` (``class Probe(Presentation, ABC)``) and overrides
``details`` or ``figures`` where it has more to show (seg: segmented example sentences; pos, ner,
con: what the centroids were fitted on; head_distance: the head layout and dendrogram).
(probes.results.figures finds the class for a saved result by its probe's name.)
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from probes.settings.declared import BUILTIN
from probes.base.choices import PLOT_KINDS
from probes.base.files import safe_name, short_model_name
from probes.results.probe_result import ProbeResult
from probes.base.wording import counted

if TYPE_CHECKING:  # annotations only: showing a result needs neither torch nor the corpus code
    import torch

    from probes.corpus.sentence import Sentence


class Presentation:
    """Default presentation: per-sentence views of the named heads (where the result keeps them), an overview
    figure of the labels, and on request one heatmap per label.

    A probe's own per-sentence view (``probes show``, the report; recorded by probes.results.examples.ExampleRecorder) is
    the probe's units of a sentence (``view_items``) with, per head, what the probe made of each (``kept_view``,
    set by the probe's ``update`` from the very tensors it scores with, through ``keep_view``). ``view`` names its
    kind (VIEW_KINDS); None: the probe has no per-sentence view."""

    view: str | None = None
    score: str = "score"  # what a head's score is, named on the figures' colour bars (built-ins: their declaration's)
    kept_view: tuple[int, torch.Tensor, dict[str, torch.Tensor]] | None = None  # layer, rows [N], marks {name: [N,H]}

    def view_items(self, sentence: Sentence) -> list[dict]:
        """The sentence's units as the view shows them, in the order of ``keep_view``'s rows for this sentence. Word
        columns count from 1 (0: the root). "arcs": {"from": head column, "to": dependent column, "label"};
        "roles" and "frames": {"from": [predicate or target columns], "to": [argument or element columns],
        "label"}; "units": {"from": first column, "to": last column, "label"}; "mentions": {"from": [the anaphor's
        head column], "to": [its antecedents' head columns], "label": its type, "span": [first, last column]}."""
        return []

    def view_labels(self) -> list[str]:
        """The names that a "predicted" mark indexes (units views: the labels a head can predict)."""
        return []

    def keep_view(self, layer: int, rows: torch.Tensor, **marks: torch.Tensor) -> None:
        """Keep, until the next call, what this layer's heads made of the batch's view items: rows [N] the sentence
        row of each item (a sentence's items in ``view_items`` order), marks [N,H] each: "right" (bool, whether
        the head gets the item, as the probe scores it), "predicted" (an index into ``view_labels``), "head" (the
        column the head hangs the item's dependent from), "weight" (an attention weight in [0, 1])."""
        self.kept_view = (layer, rows, marks)

    @classmethod
    def details(cls, result: ProbeResult, head: tuple[int, int] | None = None, sentences: int = 3) -> str:
        """Lines printed under `probes show`'s table ("" for none). head: (layer, head) a probe may
        illustrate (seg: the head whose segmentation is printed); sentences: examples to print."""
        return ""

    @classmethod
    def figures(cls, result: ProbeResult, kind: str = "overview") -> dict[str, bytes]:
        """{file name: PNG}. kind "overview" (the default): ``<probe>.png``, small multiples of overall and of
        the labels with at least the run's minimum count of instances (``--min-count``; ``OVERVIEW_MIN_COUNT``
        for results that record none; most frequent first, at most ``OVERVIEW_MOST``; the labels the result calls
        trivial, "trivial_labels", last and faded), each label's reported head boxed (ProbeResult.reported: the
        best, or the head ``--select-on`` chose) where one is named, a hatched "tie" beside its title where heads
        tie at the top, and a white dot on each head whose 95% interval lies above the label's baseline
        (``above_baseline``: the baseline the result names, ``ProbeResult.compared_with``, or overall's majority-label
        baseline); "labels": that, and a
        layer × head heatmap per label at or above the minimum count and overall, ``<probe>-<label>.png``;
        "all-labels": as "labels", labels below the minimum count included; "none": nothing. The colour scale is
        [0, 1] where the scores fit it, their own range otherwise (entropy in nats, cluster numbers), its bar
        named by ``score_name``."""
        from probes.results.plots import Grid, heatmap_pngs, overview_png

        if kind not in PLOT_KINDS:
            raise ValueError(f"plot kind {kind!r}; expected one of {', '.join(PLOT_KINDS)}")
        if kind == "none":
            return {}
        all_labels = kind == "all-labels"
        entries = [("overall", result.overall), *result.shown(all_labels)]
        finite = np.concatenate([e.scores[np.isfinite(e.scores)] for _, e in entries])
        limits = (0.0, 1.0) if finite.size == 0 or (finite.min() >= 0 and finite.max() <= 1) else (None, None)
        model = short_model_name(result.info.model)
        scale = cls.score_name(result)
        least = result.min_count if "min_count" in result.info.settings else OVERVIEW_MIN_COUNT
        trivial = result.extra.get("trivial_labels") or {}
        shown = [(name, e) for name, e in entries if name == "overall" or all_labels or e.count >= least]
        shown.sort(key=lambda item: item[0] in trivial)  # stable: the trivial labels last, each in its place
        few = {name: ", few" if result.below_min_count(name) else "" for name, _ in entries}  # below --min-count
        tiles = [Grid(e.scores, f"{name} ({e.count}{few[name]})" if e.count else name, *limits,
                      above_baseline(result, name), result.reported(name), trivial.get(name, ""))
                 for name, e in shown]
        hidden = len(result.labels) + 1 - min(len(shown), OVERVIEW_MOST)
        dotted = any(t.marked is not None for t in tiles)
        faded = [name for name, _ in shown[:OVERVIEW_MOST] if name in trivial]
        chosen = "head chosen on the selection split" if result.info.settings.get("select_on") else "best head"
        title = (f"{result.probe} · {model} · {chosen} boxed · (count)"
                 + (f" · few: below --min-count {least}" if any(few[name] for name, _ in shown) else "")
                 + (f" · dot: 95% interval above {baseline_name(result)}" if dotted else "")
                 + "".join(f" · {name} faded: trivial ({trivial[name]})" for name in faded)
                 + (f" · {counted(hidden, 'label')} under {least} not shown" if hidden else ""))
        pictures = {f"{safe_name(result.probe)}.png": overview_png(tiles[:OVERVIEW_MOST], title, scale=scale)}
        if kind in ("labels", "all-labels"):
            grids = [Grid(e.scores, f"{result.probe}: {name}" + (f" (n={e.count}{few[name]})" if e.count else ""),
                          *limits, above_baseline(result, name), result.reported(name)) for name, e in entries]
            for (name, _), png in zip(entries, heatmap_pngs(grids, model, scale=scale)):
                pictures[f"{safe_name(result.probe)}-{safe_name(name)}.png"] = png
        return pictures

    @classmethod
    def score_name(cls, result: ProbeResult) -> str:
        """What `result`'s scores are, named on its figures' colour bars: a built-in probe's declared ``score``
        (probes.settings.declared), else the presenting class's ``score`` (a plugin probe's class attribute)."""
        declared = BUILTIN.get(result.probe)
        return declared.score if declared is not None else cls.score


def arc_items(sentence: Sentence) -> list[dict]:
    """An "arcs" view's items: the sentence's gold dependency arcs, one per word in word order (head column, the
    word's column, relation)."""
    return [{"from": head, "to": d, "label": label}
            for d, (head, label) in enumerate(zip(sentence.ann["head"], sentence.ann["deprel"]), start=1)]


def above_baseline(result: ProbeResult, label: str) -> np.ndarray | None:
    """[L,H] bool: the heads whose 95% interval (ci_low) lies above the label's baseline score (``baseline_score``);
    None where the label has no baseline or no intervals."""
    entry = result.entry(label)
    point = baseline_score(result, label)
    if entry.ci_low is None or point is None:
        return None
    with np.errstate(invalid="ignore"):
        return np.nan_to_num(entry.ci_low, nan=-np.inf) > point


def baseline_score(result: ProbeResult, label: str) -> float | None:
    """The score a label's heads are measured against on the figures: its best offset baseline (dep, srl), or for
    overall the majority-label baseline (pos, ner, con: always the fit corpus' most frequent label); None where the
    result has neither."""
    base = result.baseline(label)
    if base and base.get("best") is not None:
        return float(base["best"])
    majority = result.baselines.get("majority") if isinstance(result.baselines, dict) else None
    return float(majority["overall"]) if label == "overall" and majority else None


def baseline_name(result: ProbeResult) -> str:
    """The baseline that ``baseline_score`` measures against, as the figures' titles name it."""
    majority = result.baselines.get("majority") if isinstance(result.baselines, dict) else None
    if majority and not result.baseline("overall"):
        return f"the majority-label baseline ({majority['label']}: {majority['overall']:.3f})"
    return f"its {result.compared_with()}"


VIEW_KINDS = ("arcs", "roles", "frames", "units", "mentions")
OVERVIEW_MIN_COUNT = 20  # results that record no --min-count: labels with fewer instances are left out of the overview
OVERVIEW_MOST = 48  # tiles in one overview, overall included
