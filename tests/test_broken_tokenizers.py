"""A tokenizer whose vocabulary is empty is refused when the model is loaded, on one line naming the tokenizer files
(issue 42 item 5; it used to fail mid-run with "cannot reshape tensor of 0 elements", a traceback, or "no sentence
can be scored"). Each broken checkpoint is a tiny model (tests/tiny_models.py) copied, its tokenizer written as the
family's own vocabulary files where the test needs them, then emptied."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import probes
from probes.base.errors import InputError
from test_model_checks import refused

pytestmark = pytest.mark.integration
REFILL = "copy the tokenizer files from the model it was trained from"


def copied(tiny_model, family: str, folder: Path, *, vocabulary_files: bool) -> Path:
    """The tiny `family` checkpoint copied into `folder`; vocabulary_files: its tokenizer as vocab.txt (WordPiece) or
    vocab.json + merges.txt (byte-level BPE) instead of tokenizer.json."""
    import transformers

    shutil.copytree(tiny_model(family), folder)
    if vocabulary_files:
        transformers.AutoTokenizer.from_pretrained(folder).backend_tokenizer.model.save(str(folder))
        (folder / "tokenizer.json").unlink()
    return folder


def test_the_copied_vocabulary_files_load(tiny_model, tmp_path):
    """The fixture's unbroken copies load: what the tests below refuse is the emptied vocabulary alone."""
    for family in ("bert", "roberta"):
        encoder = probes.load_encoder(str(copied(tiny_model, family, tmp_path / family, vocabulary_files=True)))
        assert len(encoder.tokenizer.backend_tokenizer.get_vocab(with_added_tokens=False)) > 500


def test_an_empty_vocab_txt(tiny_model, tmp_path, capsys):
    folder = copied(tiny_model, "bert", tmp_path / "bert", vocabulary_files=True)
    (folder / "vocab.txt").write_text("")
    assert refused(capsys, tmp_path, folder) == (f"probes: error: {folder}: tokenizer file vocab.txt: the vocabulary "
                                                 f"is empty (only special tokens); {REFILL}")


def test_an_empty_vocab_json_beside_its_merges(tiny_model, tmp_path, capsys):
    """The tokenizers library cannot build the BPE (its merges name tokens the vocabulary lacks): the empty file is
    named all the same."""
    folder = copied(tiny_model, "roberta", tmp_path / "roberta", vocabulary_files=True)
    (folder / "vocab.json").write_text("{}")
    assert refused(capsys, tmp_path, folder) == (f"probes: error: {folder}: tokenizer file vocab.json: the vocabulary "
                                                 f"is empty; {REFILL}")


def test_an_empty_vocab_json_and_merges(tiny_model, tmp_path, capsys):
    folder = copied(tiny_model, "roberta", tmp_path / "roberta", vocabulary_files=True)
    (folder / "vocab.json").write_text("{}")
    (folder / "merges.txt").write_text("#version: 0.2\n")
    assert refused(capsys, tmp_path, folder) == (f"probes: error: {folder}: tokenizer files vocab.json, merges.txt: "
                                                 f"the vocabulary is empty (only special tokens); {REFILL}")


@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_an_empty_vocabulary_in_tokenizer_json(tiny_model, tmp_path, capsys, family):
    folder = copied(tiny_model, family, tmp_path / family, vocabulary_files=False)
    spec = json.loads((folder / "tokenizer.json").read_text())
    spec["model"]["vocab"] = {}
    if "merges" in spec["model"]:
        spec["model"]["merges"] = []
    (folder / "tokenizer.json").write_text(json.dumps(spec))
    assert refused(capsys, tmp_path, folder) == (f"probes: error: {folder}: tokenizer file tokenizer.json: the "
                                                 f"vocabulary is empty (only special tokens); {REFILL}")


def test_a_wordpiece_vocabulary_without_its_unknown_token(tiny_model, tmp_path):
    """Such a tokenizer fails on the first word it cannot split ("WordPiece error: Missing [UNK] token")."""
    folder = copied(tiny_model, "bert", tmp_path / "bert", vocabulary_files=True)
    words = (folder / "vocab.txt").read_text().splitlines()
    (folder / "vocab.txt").write_text("\n".join(w for w in words if w != "[UNK]") + "\n")
    with pytest.raises(InputError) as refusal:
        probes.load_encoder(str(folder))
    assert str(refusal.value) == (f"{folder}: tokenizer file vocab.txt: the vocabulary lacks its unknown token [UNK]; "
                                  f"{REFILL}")
