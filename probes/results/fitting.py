"""Which corpus fits the probes that need a fit phase (centroids of pos, ner, con), and the selection split.

    fit given, fit_on None or "fit"   fit on the `fit` files, score the corpus (dev → test; the default)
    fit_on "same"                     fit on the scored corpus itself (He & Choi 2021's same-split setting)
    neither, select_on given          fit on the `select_on` files
    none of them                      as "same" (results: fit.on "same", fit.chosen_by "default")

The fit phase is a forward pass over the fit corpus before the scoring pass (the scored corpus'
pass is not repeated for the fit unless fit_on is "same", where the corpus is passed twice).

Selection (``select_on``, ``--select-on FILE``): fresh instances of every probe are scored on the
selection split, each label's best head is chosen there (``choose_heads``) and its score reported on
the scored corpus, in a pass of its own after the fit phase (read in chunks, probes.running.chunks); the probes with
a fit phase are given the run's fitted state first (``Probe.merge_fit``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from probes.base.errors import InputError
from probes.results.probe_result import ProbeResult

FIT_ON = ("fit", "same")


@dataclass
class FitPlan:
    on: str  # "fit": the fit files; "same": the scored corpus
    paths: list[str]  # the fit files ([] when on == "same")
    requested: bool  # whether the user chose (fit files or fit_on), or "same" is the fallback
    chosen_by: str = "fit"  # which option named the fit files: "fit", or "select_on" where they default to it

    def settings(self, files: list[str], sentences: int, skipped: dict[str, int]) -> dict:
        """What the results record about the fit: `fit` in the run settings."""
        chosen_by = (self.chosen_by if self.on == "fit" else "fit_on=same") if self.requested \
            else "default (no fit corpus given)"
        return {"on": self.on, "chosen_by": chosen_by, **split_settings(files, sentences, skipped)}


def split_settings(files: list[str], sentences: int, skipped: dict[str, int]) -> dict[str, Any]:
    """What the results record about a split read besides the corpus (fit, selection)."""
    return {"corpus": files, "sentences": sentences, "skipped": sum(skipped.values()), "skipped_reasons": dict(skipped)}


def plan_fit(classes: list[type], fit: list[str], fit_on: str | None, select_on: list[str] = ()) -> FitPlan | None:
    """The fit plan of a run, or None when no selected probe needs one. InputError for contradictions.
    select_on: the selection split's files, the fit files where neither `fit` nor `fit_on` is given."""
    if select_on and not fit and fit_on is None and any(getattr(c, "needs_fit", False) for c in classes):
        return FitPlan(on="fit", paths=list(select_on), requested=True, chosen_by="select_on")
    if fit_on is not None and fit_on not in FIT_ON:
        raise InputError(f"fit-on must be one of {', '.join(FIT_ON)}, not {fit_on!r}")
    if not any(getattr(c, "needs_fit", False) for c in classes):
        if fit or fit_on:
            names = ", ".join(c.name for c in classes)
            raise InputError(f"--fit/--fit-on given, but no selected probe fits anything (probes: {names})")
        return None
    if fit_on == "same" and fit:
        raise InputError("give either --fit FILE (fit on it, score --corpus) or --fit-on same (fit on --corpus), "
                         "not both")
    if fit_on == "fit" and not fit:
        raise InputError("--fit-on fit needs --fit FILE")
    if fit:
        return FitPlan(on="fit", paths=list(fit), requested=True)
    return FitPlan(on="same", paths=[], requested=fit_on == "same")


def choose_heads(result: ProbeResult, selection: ProbeResult) -> None:
    """Record in `result` (the scored corpus) each label's best head as chosen on `selection` (the same probe on
    the selection split): ``LabelScores.selected`` = {layer, head, score_on_corpus, score_on_selection,
    count_on_selection, ci_low, ci_high, margin, margin_low, margin_high}, or {reason} where the selection split
    names no head for the label (absent there, or tied or 0: probes.results.probe_result.best_head); ``ProbeResult.best``
    then returns that head. ci_low, ci_high: the head's own interval on the scored corpus (chosen elsewhere, it
    needs no selection correction; None without replicates); margin: its score minus the label's best offset
    baseline's score on the scored corpus, margin_low, margin_high its paired interval (None where the probe has
    no baselines, or, for the interval, no replicates)."""
    for name, entry in [*result.labels.items(), ("overall", result.overall)]:
        if name != "overall" and name not in selection.labels:
            entry.selected = {"reason": "absent"}
            continue
        best = selection.best(name)
        if not best.found:
            entry.selected = {"reason": best.reason}
            continue
        at = best.layer, best.head
        score = float(entry.scores[at])
        base = result.baselines.get("overall") if name == "overall" else result.baselines.get("labels", {}).get(name)
        offset = base.get("best") if isinstance(base, dict) else None  # the best baseline (dep, srl, coref)
        margins = entry.margins or {}
        entry.selected = {
            "layer": best.layer, "head": best.head, "score_on_corpus": score,
            "score_on_selection": best.score, "count_on_selection": best.count,
            **{k: None if grid is None else float(grid[at]) for k, grid in (("ci_low", entry.ci_low),
                                                                            ("ci_high", entry.ci_high))},
            "margin": None if offset is None else score - offset,
            **{k: float(margins[k][at]) if k in margins else None for k in ("margin_low", "margin_high")}}
