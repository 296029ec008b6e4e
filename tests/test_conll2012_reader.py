"""CoNLL-2012 reader, on the hand-made tests/data/sample.conll2012 (values checked by hand)."""
from __future__ import annotations

from pathlib import Path

import pytest

from probes.corpus.conll2012 import read_conll2012
from probes.base.errors import InputError

SAMPLE = Path(__file__).resolve().parent / "data" / "sample.conll2012"


@pytest.fixture(scope="module")
def corpus():
    return read_conll2012(SAMPLE)


def test_sentences_ids_lines(corpus):
    assert corpus.files == [str(SAMPLE)]
    assert corpus.skipped == {}
    assert [s.sent_id for s in corpus.sentences] == [
        "nw/sample/00/sample_0001/0#0",
        "nw/sample/00/sample_0001/0#1",
        "nw/sample/00/sample_0001/0#2",
        "bc/sample/00/sample_0002/0#0",
        "bc/sample/00/sample_0002/0#1",
    ]
    assert [s.line for s in corpus.sentences] == [2, 16, 26, 40, 47]
    assert all(s.source == str(SAMPLE) for s in corpus.sentences)
    s = corpus.sentences[0]
    assert s.words == "The man who bought the house in Boston said it was cheap .".split()
    assert s.ann["pos"] == ["DT", "NN", "WP", "VBD", "DT", "NN", "IN", "NNP", "VBD", "PRP", "VBD", "JJ", "."]


def test_srl_with_relative_argument_and_three_predicates(corpus):
    # "house" has a lemma and a word sense but no frameset: not a predicate, no SRL column.
    srl = corpus.sentences[0].ann["srl"]
    for predicate in srl:  # the exact words of each argument: its whole span in CoNLL-2012
        assert predicate.pop("arg_words") == [tuple(range(s, e)) for _, s, e in predicate["args"]]
    assert srl == [
        {"predicate": 3, "lemma": "buy", "frameset": "01",
         "args": [("ARG0", 0, 2), ("R-ARG0", 2, 3), ("V", 3, 4), ("ARG1", 4, 6), ("ARGM-LOC", 6, 8)]},
        {"predicate": 8, "lemma": "say", "frameset": "01",
         "args": [("ARG0", 0, 8), ("V", 8, 9), ("ARG1", 9, 12)]},
        {"predicate": 10, "lemma": "be", "frameset": "01",
         "args": [("ARG1", 9, 10), ("V", 10, 11), ("ARG2", 11, 12)]},
    ]


def test_srl_continuation_argument_and_c_v(corpus):
    # "The report , analysts said , was wrong ."
    said, was = corpus.sentences[1].ann["srl"]
    assert said["predicate"] == 4
    assert said["args"] == [("ARG1", 0, 2), ("ARG0", 3, 4), ("V", 4, 5), ("C-ARG1", 6, 8)]
    assert was["predicate"] == 6 and was["args"] == [("ARG1", 0, 2), ("V", 6, 7), ("ARG2", 7, 8)]
    # "Mary Jones gave up her job at IBM in March ." : V and C-V kept as given
    (gave,) = corpus.sentences[2].ann["srl"]
    assert gave.pop("arg_words") == [(0, 1), (2,), (3,), (4, 5, 6, 7), (8, 9)]
    assert gave == {"predicate": 2, "lemma": "give", "frameset": "08",
                    "args": [("ARG0", 0, 2), ("V", 2, 3), ("C-V", 3, 4), ("ARG1", 4, 8), ("ARGM-TMP", 8, 10)]}
    assert corpus.sentences[4].ann["srl"] == []  # a sentence without predicates


def test_named_entities(corpus):
    assert [s.ann["ner"] for s in corpus.sentences] == [
        [("GPE", 7, 8)],
        [],
        [("PERSON", 0, 2), ("ORG", 7, 8), ("DATE", 9, 10)],
        [("GPE", 2, 3), ("DATE", 3, 5)],
        [],
    ]


def test_parse_trees(corpus):
    assert corpus.sentences[0].ann["parse"] == (
        "(TOP (S (NP (NP (DT The) (NN man)) (SBAR (WHNP (WP who)) (S (VP (VBD bought) "
        "(NP (DT the) (NN house)) (PP (IN in) (NP (NNP Boston))))))) (VP (VBD said) "
        "(SBAR (S (NP (PRP it)) (VP (VBD was) (ADJP (JJ cheap)))))) (. .)))"
    )
    assert corpus.sentences[1].ann["parse"] == (
        "(TOP (S (NP (DT The) (NN report)) (PRN (, ,) (S (NP (NNS analysts)) (VP (VBD said))) (, ,)) "
        "(VP (VBD was) (ADJP (JJ wrong))) (. .)))"
    )
    # round brackets in words are escaped so the tree stays well-formed
    assert corpus.sentences[4].ann["parse"] == (
        "(TOP (FRAG (INTJ (UH Thanks)) (PRN (-LRB- -LRB-) (ADVP (RB again)) (-RRB- -RRB-)) (. .)))"
    )


# --------------------------------------------------------------------------- errors


def edited(tmp_path: Path, line: int, edit) -> Path:
    """A copy of the sample with 1-based line `line` replaced by edit(columns) (a list)."""
    lines = SAMPLE.read_text(encoding="utf-8").split("\n")
    lines[line - 1] = "   ".join(edit(lines[line - 1].split()))
    out = tmp_path / "bad.conll2012"
    out.write_text("\n".join(lines), encoding="utf-8")
    return out


def error(path: Path) -> str:
    with pytest.raises(InputError) as e:
        read_conll2012(path)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_wrong_number_of_srl_columns(tmp_path):
    # line 26 starts "Mary Jones gave up ...": 1 predicate; make "up" (line 29) a predicate too
    path = edited(tmp_path, 29, lambda c: c[:6] + ["up", "01"] + c[8:])
    assert error(path).startswith(f"{path}:26: 1 SRL column(s) but 2 predicate(s)")
    # a row with one column too many
    path = edited(tmp_path, 30, lambda c: c[:-1] + ["*", c[-1]])
    assert error(path).startswith(f"{path}:30: 14 columns, but the sentence's first row (line 26) has 13")
    path = edited(tmp_path, 48, lambda c: c[:5])
    assert error(path).startswith(f"{path}:48: expected at least 12 columns")


def test_unbalanced_brackets(tmp_path):
    # NER: "(PERSON*" on "Mary" (line 26) whose closing "*)" on line 27 is removed
    path = edited(tmp_path, 27, lambda c: c[:10] + ["*"] + c[11:])
    assert error(path).startswith(f"{path}:26: unbalanced brackets in named-entity column: span 'PERSON'")
    # SRL: a ')' that closes nothing (line 24, sentence 2, first SRL column)
    path = edited(tmp_path, 24, lambda c: c[:11] + ["*)"] + c[12:])
    assert error(path).startswith(f"{path}:24: unbalanced brackets in SRL column 1: ')' closes no open span")
    # SRL: an argument that is never closed
    path = edited(tmp_path, 35, lambda c: c[:11] + ["*"] + c[12:])
    assert error(path).startswith(f"{path}:34: unbalanced brackets in SRL column 1: span 'ARGM-TMP'")
    # parse: one ')' too few at the end of the first sentence
    path = edited(tmp_path, 14, lambda c: c[:5] + ["*)"] + c[6:])
    assert error(path).startswith(f"{path}:14: unbalanced brackets in parse")
    # malformed cell
    path = edited(tmp_path, 42, lambda c: c[:10] + ["GPE"] + c[11:])
    assert error(path).startswith(f"{path}:42: malformed named-entity column cell 'GPE'")


def test_bad_word_index(tmp_path):
    path = edited(tmp_path, 19, lambda c: c[:2] + ["three"] + c[3:])
    assert error(path).startswith(f"{path}:19: word index 'three' is not a number")
    path = edited(tmp_path, 19, lambda c: c[:2] + ["4"] + c[3:])
    assert error(path).startswith(f"{path}:19: word index 4, expected 3")


def test_srl_column_without_v(tmp_path):
    path = edited(tmp_path, 41, lambda c: c[:11] + ["*"] + c[12:])
    assert error(path).startswith(f"{path}:40: SRL column 1 has no V (predicate) span")


def test_empty_or_missing_file(tmp_path):
    assert "file not found" in error(tmp_path / "none.conll2012")
    p = tmp_path / "comments.conll2012"
    p.write_text("#begin document (x); part 000\n#end document\n", encoding="utf-8")
    assert error(p).startswith(f"{p}: no sentences found")
