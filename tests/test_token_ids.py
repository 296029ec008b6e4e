"""Sequences of token ids as a corpus (probes.corpus.token_ids): the reader, the encoding and `probes run` on them."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from probes.cli import main
from probes.corpus import read_corpus
from probes.base.errors import InputError

TRAINED = Path(__file__).resolve().parent / "data" / "induction-gpt2"


def test_the_reader_keeps_ids_and_skips_comments(tmp_path):
    path = tmp_path / "seqs.ids"
    path.write_text("# made by hand\n5 9 17\n\n3 3\n", encoding="utf-8")
    corpus = read_corpus([path])  # the format from the .ids suffix
    assert [s.ann["token_ids"] for s in corpus.sentences] == [[5, 9, 17], [3, 3]]
    assert [s.words for s in corpus.sentences] == [["5", "9", "17"], ["3", "3"]]
    assert [s.line for s in corpus.sentences] == [2, 4]
    path.write_text("5 9\n5 x\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"seqs.ids:2: token ids must be whole numbers of at least 0, not 'x'"):
        read_corpus([path])


def test_probes_run_on_a_file_of_ids(tmp_path, capsys):
    """The trained model on two sequences r r (r: 6 tokens): row 6..11 of each are the induction rows (12 of them)."""
    path = tmp_path / "seqs.ids"
    path.write_text("# two sequences repeated\n5 9 17 33 2 40 5 9 17 33 2 40\n7 8 12 60 3 21 7 8 12 60 3 21\n",
                    encoding="utf-8")
    main(["run", "induction", "prev_token", "sink", "--model", str(TRAINED), "--corpus", str(path), "--out",
          str(tmp_path / "out"), "--no-plots", "--quiet"])
    induction = json.loads((tmp_path / "out" / "induction.json").read_text())
    assert induction["sentences"] == 2
    assert induction["overall"]["count"] == 12
    found = {(h["layer"], h["head"]) for h in induction["induction_heads"]}
    assert found and {layer for layer, _ in found} == {1}  # at period 6 (trained on 12-28): heads 2 and 3
    too_big = tmp_path / "big.ids"
    too_big.write_text("5 9 64\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["run", "induction", "--model", str(TRAINED), "--corpus", str(too_big), "--quiet"]) == 2
    assert capsys.readouterr().err == (f"probes: error: {too_big}:1: token id 64 is not in the model's vocabulary "
                                       "of 64\n")
