"""Which corpus fits the probes that need a fit phase (centroids of pos, ner, con).

    fit given, fit_on None or "fit"   fit on the `fit` files, score the corpus (dev → test; the default)
    fit_on "same"                     fit on the scored corpus itself (He & Choi 2021's same-split setting)
    neither                           as "same" (results: fit.on "same", fit.chosen_by "default")

The fit phase is a forward pass over the fit corpus before the scoring pass (the scored corpus'
pass is not repeated for the fit unless fit_on is "same", where the corpus is passed twice).
"""
from __future__ import annotations

from dataclasses import dataclass

from probes.errors import InputError

FIT_ON = ("fit", "same")


@dataclass
class FitPlan:
    on: str  # "fit": the fit files; "same": the scored corpus
    paths: list[str]  # the fit files ([] when on == "same")
    requested: bool  # whether the user chose (fit files or fit_on), or "same" is the fallback

    def settings(self, files: list[str], sentences: int, skipped: dict[str, int]) -> dict:
        """What the results record about the fit: `fit` in the run settings."""
        chosen_by = ("fit" if self.on == "fit" else "fit_on=same") if self.requested else "default (no fit corpus given)"
        return {"on": self.on, "chosen_by": chosen_by, "corpus": files, "sentences": sentences,
                "skipped": sum(skipped.values()), "skipped_reasons": dict(skipped)}


def plan_fit(classes: list[type], fit: list[str], fit_on: str | None) -> FitPlan | None:
    """The fit plan of a run, or None when no selected probe needs one. InputError for contradictions."""
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
