"""`probes ablate` through the CLI: bad input (exit 2, one line, nothing written) and the real MiniLM on EWT."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from tiny_classifier import fine_tune, genre_examples, write_tsv

import probes
from probes.tools.ablation.classifier import ClassifierTarget
from probes.cli import main

EWT_GENRES = ("answers", "email", "newsgroup", "reviews", "weblog")


@pytest.fixture(scope="module")
def untrained(tiny_model, tmp_path_factory):
    """A tiny BertForSequenceClassification (labels email, weblog) saved with no training, and a TSV it can read."""
    root = tmp_path_factory.mktemp("ablate_cli")
    examples = genre_examples(5)
    return fine_tune(tiny_model("bert"), root / "classifier", examples, steps=0), write_tsv(examples, root / "ok.tsv")


def _fails(capsys, out, *args) -> str:
    code = main(["ablate", *args, "--out", str(out), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1, err
    assert err.startswith("probes: error: ") and "Traceback" not in err
    assert not out.exists(), "no output may be written on bad input"
    return err


def test_head_out_of_range(untrained, tmp_path, capsys):
    model, data = untrained
    err = _fails(capsys, tmp_path / "out", "classify", "--model", str(model), "--corpus", str(data),
                 "--mask", "0:1,2:0")
    assert err == ("probes: error: head 2:0 in mask '0:1,2:0' is out of range: the model has 2 layers × 4 heads "
                   "(layers 0-1, heads 0-3)")


def test_malformed_mask(untrained, tmp_path, capsys):
    model, data = untrained
    err = _fails(capsys, tmp_path / "out", "classify", "--model", str(model), "--corpus", str(data), "--mask", "L1-H2")
    assert err == "probes: error: bad head 'L1-H2' in mask 'L1-H2': expected LAYER:HEAD or LAYER:* (0-indexed)"


def test_checkpoint_without_classification_head(untrained, tiny_model, tmp_path, capsys):
    base = tiny_model("bert")
    err = _fails(capsys, tmp_path / "out", "classify", "--model", str(base), "--corpus", str(untrained[1]))
    assert err == (f"probes: error: {base}: checkpoint has no sequence-classification head (architectures: "
                   "BertModel); a classify target needs a fine-tuned ...ForSequenceClassification checkpoint")


def test_label_the_model_does_not_know(untrained, tmp_path, capsys):
    data = tmp_path / "test.tsv"
    data.write_text("text\tlabel\nthe cat sat\temail\nwe won the match\tsports\n", encoding="utf-8")
    err = _fails(capsys, tmp_path / "out", "classify", "--model", str(untrained[0]), "--corpus", str(data))
    assert err == f"probes: error: {data}:3: label 'sports' is not one the model knows (its labels: email, weblog)"


@pytest.mark.parametrize("content, line, problem", [
    ("a\temail\nb\tc\td\temail\n", 2, "expected 2 or 3 tab-separated columns (text[, text_pair], label), found 4"),
    ("a\tb\temail\nc\temail\n", 2, "found 2 columns where the first example has 3"),
    ("a\temail\nb\n", 2, "expected 2 or 3 tab-separated columns (text[, text_pair], label), found 1"),
    ("a\temail\n \temail\n", 2, "empty column (text, text pair and label must not be empty)"),
])
def test_bad_tsv(untrained, tmp_path, capsys, content, line, problem):
    data = tmp_path / "bad.tsv"
    data.write_text(content, encoding="utf-8")
    err = _fails(capsys, tmp_path / "out", "classify", "--model", str(untrained[0]), "--corpus", str(data))
    assert err == f"probes: error: {data}:{line}: {problem}"


def test_conllu_without_label(untrained, tmp_path, capsys):
    data = tmp_path / "nolabel.conllu"
    data.write_text("# label = email\n# text = Hi\n1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_\n\n"
                    "# text = Bye\n1\tBye\tbye\tINTJ\tUH\t_\t0\troot\t_\t_\n\n", encoding="utf-8")
    err = _fails(capsys, tmp_path / "out", "classify", "--model", str(untrained[0]), "--corpus", str(data))
    assert err == f"probes: error: {data}:5: sentence has no '# label = ...' comment (the label)"


def test_classify_needs_data(untrained, tmp_path, capsys):
    err = _fails(capsys, tmp_path / "out", "classify", "--model", str(untrained[0]))
    assert err == "probes: error: the classify target needs labelled data: give a TSV or CoNLL-U file"


def test_unknown_target(tmp_path, capsys):
    assert _fails(capsys, tmp_path / "out", "nosuch").startswith("probes: error: unknown probe 'nosuch'; available: ")


# ---------------------------------------------------------------------------------------------
# The packaged MiniLM on UD English EWT test
# ---------------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.shared
def test_dep_target_on_ewt(minilm, shared_corpora, tmp_path, capsys):
    """Zero-masking all of layer 2 cannot change the attention of layers 0-1 (so their dep scores stay exactly
    as they were), leaves layer 2 unscored (NaN) and does change later layers; likewise the top half (layers 3-5)
    leaves layers 0-2 as they were and is itself unscored."""
    # The first 24 sentences of EWT test, copied as they are.
    blocks = (shared_corpora / "ud-english-ewt" / "en_ewt-ud-test.conllu").read_text(encoding="utf-8").split("\n\n")
    test = tmp_path / "ewt-test-24.conllu"
    test.write_text("\n\n".join(blocks[:24]) + "\n\n", encoding="utf-8")
    out = tmp_path / "out"
    code = main(["ablate", "dep", "--corpus", str(test), "--mask", "2:*", "--sweep", "halves", "--out", str(out),
                 "--quiet"])
    assert code == 0, capsys.readouterr().err
    data = json.loads((out / "ablation-dep.json").read_text())
    grids = {m["name"]: np.array(m["grid"], dtype=float) for m in data["masks"]}
    assert list(grids) == ["none", "bottom", "top", "2:*"]
    plain = probes.run("dep", encoder=minilm, corpus=str(test), progress=False)["dep"]
    np.testing.assert_array_equal(grids["none"], plain.scores["overall"])  # the JSON keeps every digit
    np.testing.assert_array_equal(grids["2:*"][:2], grids["none"][:2])
    assert np.isnan(grids["2:*"][2]).all() and not np.isnan(np.delete(grids["2:*"], 2, axis=0)).any()
    assert np.abs(grids["2:*"][3:] - grids["none"][3:]).max() > 0.01
    np.testing.assert_array_equal(grids["top"][:3], grids["none"][:3])
    assert np.isnan(grids["top"][3:]).all() and np.isnan(grids["bottom"][:3]).all()
    assert data["baseline"]["best"] == np.nanmax(plain.scores["overall"])
    assert data["masks"][-1]["delta"]["best"] == np.nanmax(grids["2:*"]) - np.nanmax(grids["none"])
    assert data["sentences"] == 24 and data["count"] == plain.overall.count > 0
    assert (out / "ablation-dep-mask-2_.png").exists()


def _shortest_blocks(conllu: Path, per_genre: int, out: Path) -> Path:
    """A CoNLL-U file of the `per_genre` shortest sentences of each EWT genre, as they are in `conllu`."""
    blocks = [b for b in conllu.read_text(encoding="utf-8").split("\n\n") if "# sent_id = " in b]
    genre = {b: b.split("# sent_id = ", 1)[1].split("-", 1)[0] for b in blocks}
    picked = [b for g in EWT_GENRES for b in sorted((b for b in blocks if genre[b] == g), key=len)[:per_genre]]
    out.write_text("\n\n".join(picked) + "\n\n", encoding="utf-8")
    return out


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.shared
def test_classify_on_ewt(shared_corpora, tmp_path, capsys):
    """MiniLM with a genre head trained for a few steps on EWT dev, swept by layer and half on 40 EWT test
    sentences (the 8 shortest of each genre), read from CoNLL-U with the label from the sent_id prefix."""
    from probes.base.defaults import default_model

    ewt = shared_corpora / "ud-english-ewt"
    model = fine_tune(default_model(), tmp_path / "genre", genre_examples(8, ewt / "en_ewt-ud-dev.conllu", EWT_GENRES),
                      steps=6, lr=1e-2, head_only=True)
    test = _shortest_blocks(ewt / "en_ewt-ud-test.conllu", 8, tmp_path / "test.conllu")
    out = tmp_path / "out"
    code = main(["ablate", "classify", "--model", str(model), "--corpus", str(test), "--label-from", "sent_id-prefix",
                 "--sweep", "layers", "--sweep", "halves", "--out", str(out), "--quiet"])
    printed = capsys.readouterr().out
    assert code == 0
    data = json.loads((out / "ablation-classify.json").read_text())
    assert [m["name"] for m in data["masks"]] == ["none", "L0", "L1", "L2", "L3", "L4", "L5", "bottom", "top"]
    assert data["sentences"] == 40 and data["labels"] == list(EWT_GENRES)
    assert np.array(data["confusion"]).sum(1).tolist() == [8] * 5  # gold counts per genre
    target = ClassifierTarget(str(model), [test], label_from="sent_id-prefix")
    right = sum(int((target.predict(chunk)[0] == chunk.gold).sum()) for chunk in target.chunks(32))
    assert data["baseline"]["accuracy"] == pytest.approx(right / 40, abs=1e-6)
    layers = np.array(data["sweeps"]["layers"]["accuracy"], dtype=float)
    assert layers.shape == (6,) and np.isfinite(layers).all()
    assert data["sweeps"]["halves"]["accuracy"].keys() == {"bottom", "top"}
    assert "baseline: accuracy" in printed and (out / "ablation-classify-layers-accuracy.png").exists()
