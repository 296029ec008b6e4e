"""pos, ner, con end to end through the CLI with the packaged MiniLM on the shared corpora, and bad input.

Real-data runs use the first LIMIT sentences of each file (--limit applies to the fit and the scored
corpus alike) to keep the suite fast; the full-file figures are in docs/benchmarks.md.
"""
from __future__ import annotations

import json
from collections import Counter
from functools import lru_cache

import numpy as np
import pytest

import probes
from probes.cli import main
from probes.corpus import read_corpus

LIMIT = 60


def _run(tmp_path, *args) -> dict[str, dict]:
    out = tmp_path / "out"
    assert main(["run", *args, "--out", str(out), "--quiet", "--no-plots"]) == 0
    return {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}


def _best(entry) -> float:
    return max(x for row in entry["scores"] for x in row if x is not None)


@pytest.fixture(scope="module")
def ewt(shared_corpora, tmp_path_factory):
    """pos and ner in one run (one forward pass per batch feeds both): UD EWT + UNER, fit on dev, scored on test."""
    ud, uner = shared_corpora / "ud-english-ewt", shared_corpora / "uner-english-ewt"
    files = {"test": [ud / "en_ewt-ud-test.conllu", uner / "en_ewt-ud-test.iob2"],
             "dev": [ud / "en_ewt-ud-dev.conllu", uner / "en_ewt-ud-dev.iob2"]}
    args = ["pos", "ner", "--limit", str(LIMIT)]
    for f in files["test"]:
        args += ["--corpus", str(f)]
    for f in files["dev"]:
        args += ["--fit", str(f)]
    return _run(tmp_path_factory.mktemp("ewt"), *args), {k: [str(f) for f in v] for k, v in files.items()}


@lru_cache(maxsize=None)
def _first_sentences(files: tuple[str, ...], format: str | None = None, limit: int = LIMIT):
    return read_corpus(list(files), format=format).sentences[:limit]


def _units(files, key):
    sentences = _first_sentences(tuple(files))
    if key == "ner":
        return Counter(label for s in sentences for label, _, _ in s.ann["ner"])
    return Counter(t for s in sentences for t in s.ann[key] if t != "_")


@pytest.mark.slow
@pytest.mark.integration
def test_pos_fit_on_ewt_dev_scored_on_ewt_test(ewt):
    results, files = ewt
    r = results["pos"]
    assert r["fit"]["on"] == r["fit"]["chosen_by"] == "fit" and r["fit"]["corpus"] == files["dev"]
    assert r["fit"]["sentences"] == LIMIT
    assert r["corpus"] == files["test"] and r["sentences"] == LIMIT
    # every UPOS-tagged word of the scored sentences is a unit, every dev one went into a centroid
    assert {k: v["count"] for k, v in r["labels"].items()} == dict(_units(files["test"], "upos"))
    assert r["fit"]["units"] == dict(_units(files["dev"], "upos"))
    assert r["overall"]["count"] == sum(_units(files["test"], "upos").values())
    # nearest-centroid heads do far better than always answering the most frequent tag (NOUN, < 25% here)
    assert max(_units(files["test"], "upos").values()) / r["overall"]["count"] < 0.25
    assert _best(r["overall"]) > 0.35
    assert _best(r["labels"]["PUNCT"]) > 0.6 and _best(r["labels"]["DET"]) > 0.6


@pytest.mark.slow
@pytest.mark.integration
def test_ner_on_uner_dev_and_test(ewt):
    results, files = ewt
    r = results["ner"]
    assert set(r["labels"]) <= {"PER", "LOC", "ORG"}
    assert {k: v["count"] for k, v in r["labels"].items()} == dict(_units(files["test"], "ner"))
    assert r["fit"]["units"] == dict(_units(files["dev"], "ner"))
    assert r["labels_without_centroid"] == []
    assert _best(r["overall"]) > 0.6  # three types: chance is about 1/3


@pytest.fixture(scope="module")
def craft(shared_corpora, tmp_path_factory):
    """con fit on the first CRAFT dev article, scored on the first test article (first 40 trees of each)."""
    root = shared_corpora / "craft-treebank"
    dev, test = ((root / "penn" / f"{(root / f'craft-ids-{split}.txt').read_text().split()[0]}.tree")
                 for split in ("dev", "test"))
    result = _run(tmp_path_factory.mktemp("craft"), "con", "--limit", "40", "--corpus", str(test), "--fit", str(dev))
    return result["con"], dev, test


@pytest.mark.slow
@pytest.mark.integration
def test_con_on_craft_dev_and_test_articles(craft):
    r, dev, test = craft
    lowest = Counter(label for s in _first_sentences((str(test),), None, 40)
                     for label, _, _, height in s.ann["constituents"] if height == 2)
    assert r["options"] == {"phrases": "lowest"} and r["skipped"] == 0 and r["sentences"] == 40
    assert {k: v["count"] for k, v in r["labels"].items()} == dict(lowest)
    assert r["fit"]["on"] == "fit" and r["fit"]["corpus"] == [str(dev)] and r["fit"]["sentences"] == 40
    assert lowest.most_common(1)[0][0] == "NP"
    assert _best(r["labels"]["NP"]) > 0.4 and _best(r["overall"]) > 0.4


def test_craft_ids_files_name_articles_in_the_penn_folder_beside_them(shared_corpora, tmp_path):
    """--format craft --corpus IDS: the trees of the listed articles, from penn/ beside the ids file."""
    (tmp_path / "penn").symlink_to(shared_corpora / "craft-treebank" / "penn")
    ids = _write(tmp_path, "two.txt", "11319941\n17194222\n")
    corpus = read_corpus([ids], format="craft")
    assert [f.split("/")[-1] for f in corpus.files] == ["11319941.tree", "17194222.tree"]
    assert corpus.sentences[0].sent_id == "11319941:1"
    missing = _write(tmp_path, "bad.txt", "11319941\n99999999\n")
    with pytest.raises(probes.InputError, match=r"bad.txt:2: article 99999999: no file"):
        read_corpus([missing], format="craft")


@pytest.mark.slow
@pytest.mark.integration
def test_same_split_and_batch_size_invariance(minilm):
    """--fit-on same fits on the scored sentences; scores do not depend on batch size (1 vs 12)."""
    runs = {bs: probes.run(["pos"], encoder=minilm, fit_on="same", limit=12, batch_size=bs, progress=False)["pos"]
            for bs in (1, 12)}
    a, b = runs[1], runs[12]
    assert a.extra["fit"]["on"] == "same" and a.extra["fit"]["chosen_by"] == "fit_on=same"
    assert a.extra["fit"]["corpus"] == a.info.corpus and a.info.corpus[0].endswith("en_ewt-ud-dev-sample.conllu")
    assert a.extra["fit"]["units"] == {k: v.count for k, v in a.labels.items()}  # fit units = scored units
    for label in a.labels:
        np.testing.assert_array_equal(a.labels[label].scores, b.labels[label].scores, err_msg=label)


# ---- bad input ---------------------------------------------------------------------------------------
UD = ("# sent_id = s1\n1\tJohn\tJohn\tPROPN\tNNP\t_\t2\tnsubj\t_\t_\n2\truns\trun\tVERB\tVBZ\t_\t0\troot\t_\t_\n\n"
      "# sent_id = s2\n1\tParis\tParis\tPROPN\tNNP\t_\t2\tnsubj\t_\t_\n2\tsleeps\tsleep\tVERB\tVBZ\t_\t0\troot\t_\t_\n\n")
UNER = ("# sent_id = s1\n1\tJohn\tB-PER\t-\t-\n2\truns\tO\t-\t-\n\n"
        "# sent_id = s2\n1\tParis\tB-LOC\t-\t-\n2\tsleeps\tO\t-\t-\n\n")


def _fails(capsys, out, *args) -> str:
    code = main(["run", *args, "--out", str(out), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert not out.exists(), "nothing may be written on bad input"
    return err


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_unbalanced_brackets(tmp_path, capsys):
    tree = _write(tmp_path, "bad.tree", "( (S (NP (DT The) (NN cat)) (VP (VBD sat))) )\n( (S (NP (NN dog)) )\n")
    err = _fails(capsys, tmp_path / "out", "con", "--corpus", str(tree))
    assert err == f"probes: error: {tree}:2: unbalanced brackets: 1 '(' not closed at end of file"


def test_i_after_o_is_an_error_unless_repaired(tmp_path, capsys, tiny_model):
    bad = _write(tmp_path, "bad.iob2", "# sent_id = s1\n1\tJohn\tB-PER\t-\t-\n2\truns\tO\t-\t-\n3\thome\tI-LOC\t-\t-\n\n"
                 "# sent_id = s2\n1\tParis\tB-LOC\t-\t-\n2\tsleeps\tO\t-\t-\n\n")
    err = _fails(capsys, tmp_path / "out", "ner", "--corpus", str(bad))
    assert err == (f"probes: error: {bad}:4: I-LOC follows O; pass --repair-i-after-o (repair_i_after_o=True) "
                   "to read it as B-LOC")
    # repaired: s1 has PER (John) and LOC (home, the I-LOC read as B-LOC), s2 has LOC (Paris)
    r = _run(tmp_path, "ner", "--corpus", str(bad), "--repair-i-after-o", "--model", str(tiny_model("bert")))["ner"]
    assert {k: v["count"] for k, v in r["labels"].items()} == {"PER": 1, "LOC": 2}
    assert r["fit"]["on"] == "same" and r["fit"]["chosen_by"] == "default (no fit corpus given)"


def test_sentences_whose_tokens_differ_from_the_ud_sentence_are_counted(tmp_path, tiny_model):
    ud = _write(tmp_path, "x.conllu", UD)
    uner = _write(tmp_path, "x.iob2", UNER.replace("2\tsleeps\tO", "2\tslept\tO"))
    r = _run(tmp_path, "pos", "ner", "--corpus", str(ud), "--corpus", str(uner), "--model", str(tiny_model("bert")))
    for probe in ("pos", "ner"):
        assert r[probe]["sentences"] == 1 and r[probe]["skipped_reasons"] == {"tokens_differ": 1}
    assert r["ner"]["labels"]["PER"]["count"] == 1 and "LOC" not in r["ner"]["labels"]


@pytest.mark.parametrize("args, problem", [
    (["dep", "--fit", "x.conllu"], "--fit/--fit-on given, but no selected probe fits anything (probes: dep)"),
    (["pos", "--fit", "x.conllu", "--fit-on", "same"], "give either --fit FILE (fit on it, score --corpus) or "
     "--fit-on same (fit on --corpus), not both"),
    (["pos", "--fit-on", "fit"], "--fit-on fit needs --fit FILE"),
    (["pos", "--annotate", "spacy", "--format", "conllu"], "--annotate spacy reads raw text; it cannot be combined "
     "with --format conllu"),
    (["pos", "--annotate", "stanza"], "unknown annotator 'stanza'; available: spacy"),
])
def test_contradictory_settings(tmp_path, capsys, monkeypatch, args, problem):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.conllu").write_text("", encoding="utf-8")  # --fit FILE must exist (checked as it is parsed)
    assert _fails(capsys, tmp_path / "out", *args) == f"probes: error: {problem}"


def test_a_fit_corpus_without_units(tmp_path, capsys, tiny_model):
    scored = _write(tmp_path, "test.iob2", UNER)
    fit = _write(tmp_path, "dev.iob2", UNER.replace("B-PER", "O").replace("B-LOC", "O"))
    err = _fails(capsys, tmp_path / "out", "ner", "--corpus", str(scored), "--fit", str(fit),
                 "--model", str(tiny_model("bert")))
    assert err == "probes: error: ner: no centroids: the fit corpus has no labelled entities"


def test_con_on_a_corpus_without_trees(tmp_path, capsys, tiny_model):
    ud = _write(tmp_path, "x.conllu", UD)
    err = _fails(capsys, tmp_path / "out", "con", "--corpus", str(ud), "--model", str(tiny_model("bert")))
    assert err == (f"probes: error: {ud}: no sentence can be scored (of 2: 2 no constituents; model limit 64 subwords)"
                   "; constituents comes from --format ptb (the bracketed phrases) or craft (the bracketed phrases)")


def test_ner_on_conll2012_brackets(tmp_path, tiny_model):
    """CoNLL-2012 NER brackets: (GPE) Boston, (PERSON* Mary Jones *) ... counted from the file."""
    sample = __import__("pathlib").Path(__file__).parent / "data" / "sample.conll2012"
    entities = Counter(label for s in read_corpus([sample]).sentences for label, _, _ in s.ann["ner"])
    r = _run(tmp_path, "ner", "--corpus", str(sample), "--fit-on", "same", "--model", str(tiny_model("bert")))["ner"]
    assert {k: v["count"] for k, v in r["labels"].items()} == dict(entities) and entities["GPE"] >= 1
