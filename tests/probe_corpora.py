"""Every registered probe with a small real corpus it can read, and how to compare two runs' numbers:
shared by the tests that loop over ``probes.available()`` (test_family_ports, test_capture_invariance),
so a probe added to the registry is covered without being named.

``probe_run_arguments(name, tmp, shared)`` gives the ``probes.run`` arguments for one probe: the bundled
EWT sample (dep, pos, the analyses, any probe added later), excerpts of the full corpora in
../shared/corpora for ner (UNER), srl (UP), con (CRAFT), seg (GSDSimp, raw text) and frames (three
FrameNet documents; `shared()` skips the test where that folder is absent), three LitBank excerpts for coref
(tests/data/litbank), and a small pairs file for term_matching; ``selection_split(name, tmp, shared)`` a second corpus of that kind for ``select_on`` (test_shown_numbers).
``same(a, b, where, atol, rtol)`` asserts equal structure and numbers within atol (default 1e-6) plus rtol times
their scale; ``grids(result)`` is everything a result reports but the model's name and provenance.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

LIMIT = 8  # sentences per run (limit=), fit corpora included
PAIRS = ("sentence1\tsentence2\tlabel\n"
         "the cat sat on the mat\tthe dog sat on the rug\tneutral\n"
         "a storm hit the coast last night\tthe coast was hit by a storm\tentailment\n"
         "prices rose sharply in March\tprices fell in March\tcontradiction\n"
         "She bought apples and pears.\tShe bought pears, not apples.\tcontradiction\n")
FRAMENET_DOCUMENTS = ("ANC__110CYL067", "ANC__IntroHongKong", "Miscellaneous__Hijack")


def excerpt(path: Path, blocks: int, out: Path, skip: int = 0) -> Path:
    """`blocks` blank-line-separated blocks (sentences) of a corpus file, after the first `skip`."""
    kept = path.read_text(encoding="utf-8").split("\n\n")[skip:skip + blocks]
    out.write_text("\n\n".join(kept) + "\n\n", encoding="utf-8")
    return out


def _pairs(tmp: Path, shared) -> dict:
    (tmp / "pairs.tsv").write_text(PAIRS, encoding="utf-8")
    return {"corpus": tmp / "pairs.tsv"}


def _uner(tmp: Path, shared) -> dict:
    uner = shared() / "uner-english-ewt" / "en_ewt-ud-dev.iob2"
    return {"corpus": excerpt(uner, 40, tmp / "uner.iob2"), "fit_on": "same", "limit": None}


def _up(tmp: Path, shared) -> dict:
    return {"corpus": excerpt(shared() / "up-english-ewt" / "en_ewt-up-dev.conllu", LIMIT, tmp / "up.conllu")}


def _craft(tmp: Path, shared) -> dict:
    craft = shared() / "craft-treebank"
    article = (craft / "craft-ids-dev.txt").read_text().split()[0]
    return {"corpus": craft / "penn" / f"{article}.tree", "fit_on": "same"}


def _gsd(tmp: Path, shared) -> dict:
    gsd = shared() / "ud-chinese-gsdsimp" / "zh_gsdsimp-ud-test.conllu"
    # MiniLM's vocabulary lacks many of its characters: a shard of a few sentences can be mostly unknown words
    return {"corpus": excerpt(gsd, LIMIT, tmp / "gsd.conllu"), "tokenize": "text", "allow_unknown": True}


def _framenet(tmp: Path, shared) -> dict:
    (tmp / "documents.txt").write_text("\n".join(FRAMENET_DOCUMENTS) + "\n")
    return {"corpus": shared() / "framenet-1.7", "documents": str(tmp / "documents.txt"), "min_count": 2,
            "limit": None}


def _litbank(tmp: Path, shared) -> dict:
    """Three LitBank excerpts (tests/data/litbank), cut into windows of 200 subwords (the selection document's
    longest sentence has 177)."""
    return {"corpus": Path(__file__).parent / "data" / "litbank", "window": 200, "stride": 100}


# probe -> probes.run arguments giving it a small real corpus it can read (shared(): ../shared/corpora, the
# test skipped where absent). Every other probe (dep, pos, the analyses, any probe added later) reads the
# bundled EWT sample with BUNDLED (pos fits its centroids on the same sentences).
CORPORA = {"term_matching": _pairs, "ner": _uner, "srl": _up, "con": _craft, "seg": _gsd, "frames": _framenet,
           "coref": _litbank}
BUNDLED = {"fit_on": "same"}


def same(a, b, where: str, atol: float = 1e-6, rtol: float = 0.0) -> None:
    """Equal structure, non-numbers equal; numbers within atol + rtol × scale, NaN where the other has NaN. The
    scale of a number is its magnitude, that of an array's numbers the array's largest magnitude (a float32
    rounding of a sum is relative to its terms, not to a small difference of them). atol=rtol=0: equal."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for k in a:
            same(a[k], b[k], f"{where}.{k}", atol, rtol)
    elif isinstance(a, (np.ndarray, list, tuple)) and _numeric(a):
        x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        scale = float(np.nanmax(np.abs(np.concatenate([x.ravel(), y.ravel()])), initial=0.0))
        np.testing.assert_allclose(y, x, rtol=0, atol=atol + rtol * scale, equal_nan=True, err_msg=where)
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{where}[{i}]", atol, rtol)
    elif isinstance(a, float) and math.isnan(a):
        assert isinstance(b, float) and math.isnan(b), where
    elif isinstance(a, (float, np.floating)):
        assert abs(a - b) <= atol + rtol * max(abs(a), abs(b)), (where, a, b)
    else:
        assert a == b, (where, a, b)


def _numeric(a) -> bool:
    """Whether `a` is a rectangular array of numbers (a ragged list, e.g. per-sentence views, is not)."""
    try:
        return np.asarray(a).dtype.kind in "fiub"
    except ValueError:
        return False


def grids(result) -> dict:
    """Everything a result reports but the model's name and provenance: counts, score grids, baselines, extras."""
    return {"sentences": result.info.sentences, "skipped": result.info.skipped, "options": result.options,
            "labels": {k: {"count": v.count, "scores": v.scores, **v.extra} for k, v in result.labels.items()},
            "overall": {"count": result.overall.count, "scores": result.overall.scores, **result.overall.extra},
            "baselines": result.baselines, "extra": result.extra}




def selection_split(name: str, tmp: Path, shared) -> str:
    """A second small corpus for probe `name`, of the kind its ``probe_run_arguments`` corpus is, to give
    ``select_on``: the next sentences of the same file (the next CRAFT dev article for con, the pairs with their
    sentences swapped for term_matching). frames: the same documents (its ``documents`` option filters both)."""
    from probes.base.defaults import bundled_corpus

    if name == "frames":
        return str(shared() / "framenet-1.7")
    if name == "coref":  # a LitBank document the excerpts do not hold
        return str(shared() / "litbank-coref" / "1064_the_masque_of_the_red_death_brat.conll")
    if name == "con":
        craft = shared() / "craft-treebank"
        return str(craft / "penn" / f"{(craft / 'craft-ids-dev.txt').read_text().split()[1]}.tree")
    if name == "term_matching":
        swapped = ["\t".join([b, a, label]) for a, b, label in (line.split("\t") for line in PAIRS.splitlines())]
        (tmp / "pairs-swapped.tsv").write_text("\n".join(swapped) + "\n", encoding="utf-8")
        return str(tmp / "pairs-swapped.tsv")
    sources = {"ner": (shared() / "uner-english-ewt" / "en_ewt-ud-dev.iob2", 40),
               "srl": (shared() / "up-english-ewt" / "en_ewt-up-dev.conllu", LIMIT),
               "seg": (shared() / "ud-chinese-gsdsimp" / "zh_gsdsimp-ud-test.conllu", LIMIT)}
    path, blocks = sources.get(name, (Path(bundled_corpus()), LIMIT))
    return str(excerpt(path, blocks, tmp / f"selection-{name}{path.suffix}", skip=blocks))


def probe_run_arguments(name: str, tmp: Path, shared) -> dict:
    """probes.run arguments (but the encoder) giving probe `name` its corpus, LIMIT sentences where not said."""
    return {"limit": LIMIT, **(CORPORA[name](tmp, shared) if name in CORPORA else BUNDLED)}
