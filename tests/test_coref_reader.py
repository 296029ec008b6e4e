"""The coreference reader: brackets, documents, heads, and bad input (one line at FILE:LINE, exit 2, nothing written)."""
from __future__ import annotations

from pathlib import Path

import pytest

from helpers import run_refused
from probes.corpus import guess_format, iter_corpus
from probes.corpus.coref import read_coref
from probes.corpus.mention_heads import mention_head
from probes.base.errors import InputError

DATA = Path(__file__).parent / "data" / "litbank"

# The hand document of test_coref_probe, LitBank's layout (tabs, an empty last cell where no bracket is).
HAND = [("He", "(0)"), ("saw", ""), ("Mary", "(1)"), (".", ""), None,
        ("John", "(0)"), ("and", ""), ("his", "(2|(0)"), ("dog", "2)"), ("ran", ""), (".", ""), None,
        ("The", "(2"), ("dog", "2)"), ("barked", ""), ("a", "(2"), None,
        ("mutt", "2)"), ("slept", ""), (".", ""), None,
        ("Morning", "(4)"), ("she", "(1)"), ("woke", ""), ("it", "(2)"), (".", ""), None]


def litbank(rows=HAND, name="hand", blanks="\t_" * 8) -> str:
    lines, i = [f"#begin document ({name}); part 0"], 0
    for row in rows:
        if row is None:
            lines.append("")
            i = 0
            continue
        lines.append(f"{name}\t0\t{i}\t{row[0]}{blanks}\t{row[1]}")
        i += 1
    return "\n".join([*lines, "#end document", ""])


def write(tmp_path, text, name="x.conll") -> Path:
    f = tmp_path / name
    f.write_text(text, encoding="utf-8")
    return f


def test_hand_document(tmp_path):
    f = write(tmp_path, litbank())
    assert guess_format(f) == "coref"
    (doc,) = read_coref(f, mention_head="last").sentences
    assert doc.sent_id == "hand/0" and doc.line == 1 and len(doc.words) == 22
    assert doc.ann["sentences"] == [(0, 4), (4, 10), (10, 14), (14, 17), (17, 22)]
    assert doc.ann["sentence_lines"] == [2, 7, 14, 19, 23]  # each sentence's first token line
    assert doc.ann["mentions"] == [(0, 1, "0"), (2, 3, "1"), (4, 5, "0"), (6, 8, "2"), (6, 7, "0"), (10, 12, "2"),
                                   (13, 15, "2"), (17, 18, "4"), (18, 19, "1"), (20, 21, "2")]
    assert doc.ann["mention_heads"] == [0, 2, 4, 7, 6, 11, 14, 17, 18, 20]  # last words
    assert doc.ann["upos"][0] == "PRON" and doc.ann["upos"][4] == "PROPN"  # spaCy's parse
    (first,) = read_coref(f, mention_head="first").sentences
    assert first.ann["mention_heads"] == [0, 2, 4, 6, 6, 10, 13, 17, 18, 20]


def test_ontonotes_layout(tmp_path):
    # blanks between cells, "-" where no bracket is, two documents (parts) with their own chain ids
    rows = [("Kim", "(5)"), ("slept", "-"), (".", "-"), None]
    text = litbank(rows, "bc/a", blanks=" -" * 8).replace("\t", " ")
    text += litbank([("She", "(6)"), ("woke", "-"), None], "bc/b", blanks=" -" * 8).replace("\t", " ")
    f = write(tmp_path, text, "a.gold_conll")
    docs = list(iter_corpus([f], "coref", mention_head="last"))
    assert [(d.sent_id, d.words, d.ann["mentions"], d.line) for d in docs] == [
        ("bc/a/0", ["Kim", "slept", "."], [(0, 1, "5")], 1), ("bc/b/0", ["She", "woke"], [(0, 1, "6")], 7)]


def test_spacy_heads_on_litbank():
    docs = {d.sent_id: d for d in read_coref(DATA).sentences}
    doc = docs["105_persuasion_brat/0"]
    heads = dict(zip([(s, e) for s, e, _ in doc.ann["mentions"]], doc.ann["mention_heads"]))
    words = doc.words
    # "Sir Walter Elliot , of Kellynch Hall , in Somersetshire" → the syntactic head of "Sir Walter Elliot"
    assert words[2:5] == ["Sir", "Walter", "Elliot"] and words[heads[(2, 5)]] == "Elliot"
    assert words[heads[(7, 9)]] == "Hall"  # Kellynch Hall


def test_mention_head_rule_by_hand():
    # words 0..4, heads: 0→1, 1→1 (root), 2→1, 3→4, 4→2; depth 1, 0, 1, 3, 2
    head, depth = [1, 1, 1, 4, 2], [1, 0, 1, 3, 2]
    assert mention_head(2, 5, "spacy", head, depth) == 2  # 2's head lies outside: the top word
    assert mention_head(3, 5, "spacy", head, depth) == 4  # 4's head 2 is outside, 3's is 4 inside
    assert mention_head(0, 5, "spacy", head, depth) == 1  # the root
    assert mention_head(3, 5, "first", head, depth) == 3 and mention_head(3, 5, "last", head, depth) == 4


def edited(k: int, cell: str) -> str:
    """The hand document with HAND[k]'s coreference cell replaced (HAND[k] is on line k + 2)."""
    rows = list(HAND)
    rows[k] = (rows[k][0], cell)
    return litbank(rows)


BAD = [  # (text, line, problem)
    (edited(13, ""), 14, "unbalanced brackets in coreference: a mention of chain 2 opened here is never closed"),
    (edited(2, "7)"), 4, "unbalanced brackets in coreference: '7)' closes no open mention of chain 7"),
    (edited(2, "(x)"), 4, "malformed coreference cell '(x)' (expected e.g. '(12', '12)', '(12)', '(3|(5')"),
    (litbank().replace("hand\t0\t1\tsaw", "hand\t0\t5\tsaw"), 3,
     "word index '5', expected 1 (missing blank line between sentences?)"),
]


@pytest.mark.parametrize("text, line, problem", BAD)
def test_bad_brackets(tmp_path, text, line, problem):
    f = write(tmp_path, text)
    with pytest.raises(InputError) as e:
        read_coref(f, mention_head="last")
    assert str(e.value) == f"{f}:{line}: {problem}"


def test_chain_reused_and_no_mentions(tmp_path):
    two = litbank([("Kim", "(5)"), None], "a") + litbank([("Kim", "(5)"), None], "b")
    f = write(tmp_path, two)
    with pytest.raises(InputError) as e:
        read_coref(f, mention_head="last")
    assert str(e.value) == f"{f}:6: chain id 5 was used in an earlier document of this file (ids are per document)"
    f = write(tmp_path, litbank([("Kim", "(5)"), None], "a") + litbank([("Kim", ""), None], "b"))
    with pytest.raises(InputError) as e:
        read_coref(f, mention_head="last")
    assert str(e.value) == f"{f}:5: document without any coreference mention"



@pytest.mark.parametrize("text, line, problem", [
    BAD[0],
    (litbank([("Kim", "(5)"), None], "a") + litbank([("Kim", "(5)"), None], "b"), 6,
     "chain id 5 was used in an earlier document of this file (ids are per document)"),
    (litbank([("Kim", ""), None], "a"), 1, "document without any coreference mention"),
])
def test_cli_bad_input(tmp_path, capsys, text, line, problem):
    f = write(tmp_path, text)
    err = run_refused(capsys, tmp_path / "out", "coref", "--corpus", str(f))
    assert err == f"probes: error: {f}:{line}: {problem}"


def test_cli_window_smaller_than_a_sentence(tmp_path, capsys, minilm):
    # Persuasion's first sentence has 126 subwords: a window of 64 cannot hold it
    err = run_refused(capsys, tmp_path / "out", "coref", "--corpus", str(DATA / "105_persuasion_brat.conll"), "--window", "64")
    assert err == (f"probes: error: {DATA / '105_persuasion_brat.conll'}:2: sentence 1 of document "
                   "105_persuasion_brat/0 has 126 subwords, more than a window of 64 holds with its special tokens; "
                   "give a larger --window")
