"""A small real corpus for every registered probe, shared by the tests that run every probe end to end
(test_family_ports, test_shards): ``CORPORA[probe](tmp, shared)`` gives the ``probes.run`` arguments of a
probe with its own corpus; every other probe (dep, pos, the analyses, any probe added later) runs with
``BUNDLED`` on the bundled EWT sample.

The corpora: excerpts of the full corpora in ../shared/corpora for ner (UNER), srl (UP), con (CRAFT),
seg (GSDSimp, raw text) and frames (three FrameNet documents), and a small pairs file for term_matching.
"""
from __future__ import annotations

from pathlib import Path

LIMIT = 8  # sentences per run (limit=), fit corpora included
PAIRS = ("sentence1\tsentence2\tlabel\n"
         "the cat sat on the mat\tthe dog sat on the rug\tneutral\n"
         "a storm hit the coast last night\tthe coast was hit by a storm\tentailment\n"
         "prices rose sharply in March\tprices fell in March\tcontradiction\n"
         "She bought apples and pears.\tShe bought pears, not apples.\tcontradiction\n")
FRAMENET_DOCUMENTS = ("ANC__110CYL067", "ANC__IntroHongKong", "Miscellaneous__Hijack")


def excerpt(path: Path, blocks: int, out: Path) -> Path:
    """The first `blocks` blank-line-separated blocks (sentences) of a corpus file."""
    out.write_text("\n\n".join(path.read_text(encoding="utf-8").split("\n\n")[:blocks]) + "\n\n", encoding="utf-8")
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
    return {"corpus": excerpt(gsd, LIMIT, tmp / "gsd.conllu"), "tokenize": "text"}


def _framenet(tmp: Path, shared) -> dict:
    (tmp / "documents.txt").write_text("\n".join(FRAMENET_DOCUMENTS) + "\n")
    return {"corpus": shared() / "framenet-1.7", "documents": str(tmp / "documents.txt"), "min_count": 2,
            "limit": None}


# probe -> probes.run arguments giving it a small real corpus it can read (shared(): ../shared/corpora, the
# test skipped where absent). Every other probe reads the bundled EWT sample, all of them in one run
# (pos fits its centroids on the same sentences).
CORPORA = {"term_matching": _pairs, "ner": _uner, "srl": _up, "con": _craft, "seg": _gsd, "frames": _framenet}
BUNDLED = {"fit_on": "same"}
