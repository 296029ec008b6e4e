from collections import Counter
from pathlib import Path

import pytest

from probes.corpus import read_corpus
from probes.corpus.iob2 import read_iob2
from probes.corpus.join import join_on_sent_id
from probes.corpus.sentence import Corpus, Sentence
from probes.base.errors import InputError

CORPORA = Path(__file__).resolve().parents[2] / "shared" / "corpora"
UNER = CORPORA / "uner-english-ewt"

GOOD = """\
# newdoc id = doc1
# sent_id = s1
# text = John Smith lives in New York City .
1\tJohn\tB-PER\t-\tann
2\tSmith\tI-PER\t-\tann
3\tlives\tO\t-\t-
4\tin\tO\t-\t-
5\tNew\tB-LOC\t-\tann
6\tYork\tI-LOC\t-\tann
7\tCity\tI-LOC\t-\tann
8\t.\tO\t-\t-

# sent_id = s2
1\tIBM\tB-ORG\t-\tann
2\tParis\tB-LOC\t-\tann
3\tLondon\tB-LOC\t-\tann

"""


def write(tmp_path, text, name="x.iob2"):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_spans_tags_and_ids(tmp_path):
    c = read_iob2(write(tmp_path, GOOD))
    assert len(c.sentences) == 2 and c.skipped == {}
    s1, s2 = c.sentences
    assert s1.sent_id == "s1" and s1.line == 1
    assert s1.words == ["John", "Smith", "lives", "in", "New", "York", "City", "."]
    assert s1.ann["ner"] == [("PER", 0, 2), ("LOC", 4, 7)]
    assert s1.ann["ner_tags"] == ["B-PER", "I-PER", "O", "O", "B-LOC", "I-LOC", "I-LOC", "O"]
    assert s1.ann["ner_repaired"] == []
    # adjacent B- tags are separate spans; a span may end at the end of the sentence
    assert s2.sent_id == "s2" and s2.line == 13
    assert s2.ann["ner"] == [("ORG", 0, 1), ("LOC", 1, 2), ("LOC", 2, 3)]


BAD_I = """\
# sent_id = a
1\tthe\tO\t-\t-
2\tcat\tO\t-\t-

# sent_id = b
1\tin\tO\t-\t-
2\tParis\tI-LOC\t-\tx
3\tand\tO\t-\t-
4\tBob\tB-PER\t-\tx
5\tSmith\tI-ORG\t-\tx
6\tJones\tI-ORG\t-\tx
"""


def test_i_after_o_is_an_error_naming_file_and_line(tmp_path):
    p = write(tmp_path, BAD_I, "bad.iob2")
    with pytest.raises(InputError) as e:
        read_iob2(p)
    msg = str(e.value)
    assert f"{p}:7:" in msg and "I-LOC follows O" in msg and "repair" in msg
    assert e.value.line == 7 and e.value.path == str(p)


def test_i_after_other_type_is_an_error(tmp_path):
    p = write(tmp_path, BAD_I.replace("I-LOC", "B-LOC"), "bad2.iob2")
    with pytest.raises(InputError, match=r"bad2\.iob2:10: I-ORG follows B-PER"):
        read_iob2(p)


def test_i_at_sentence_start_is_an_error(tmp_path):
    p = write(tmp_path, "1\tParis\tI-LOC\t-\tx\n", "start.iob2")
    with pytest.raises(InputError, match=r"start\.iob2:1: I-LOC follows the start"):
        read_iob2(p)


def test_repair_starts_new_spans_and_records_them(tmp_path):
    c = read_iob2(write(tmp_path, BAD_I), repair_i_after_o=True)
    b = c.sentences[1]
    assert b.ann["ner"] == [("LOC", 1, 2), ("PER", 3, 4), ("ORG", 4, 6)]
    assert b.ann["ner_repaired"] == [1, 4]
    assert b.ann["ner_tags"][1] == "I-LOC"  # raw tags are kept as written
    assert sum(len(s.ann["ner_repaired"]) for s in c.sentences) == 2
    assert c.skipped == {}


@pytest.mark.parametrize("line3, problem", [
    ("2\tcat\tO\t-", "4 tab-separated columns, expected 5"),
    ("2\tcat\tO\t-\t-\textra", "6 tab-separated columns"),
    ("2 cat O - -", "1 tab-separated columns"),
    ("two\tcat\tO\t-\t-", "ID 'two' is not an integer"),
    ("3\tcat\tO\t-\t-", "ID 3 out of sequence, expected 2"),
    ("2\tcat\tB-\t-\t-", "tag 'B-' is not IOB2"),
    ("2\tcat\tS-PER\t-\t-", "tag 'S-PER' is not IOB2"),
    ("2\t\tO\t-\t-", "empty FORM"),
    ("# sent_id = late", "comment line inside a sentence"),
])
def test_bad_lines(tmp_path, line3, problem):
    p = write(tmp_path, f"# sent_id = a\n1\tthe\tO\t-\t-\n{line3}\n\n# sent_id = b\n1\tx\tO\t-\t-\n")
    with pytest.raises(InputError) as e:
        read_iob2(p)
    assert e.value.line == 3 and e.value.path == str(p)
    assert problem in str(e.value) and str(e.value).startswith(f"{p}:3: ")


def test_duplicate_sent_id(tmp_path):
    p = write(tmp_path, "# sent_id = a\n1\tx\tO\t-\t-\n\n# sent_id = a\n1\ty\tO\t-\t-\n")
    with pytest.raises(InputError, match=r":4: sent_id 'a' used twice \(first at line 1\)"):
        read_iob2(p)


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(InputError, match="file not found"):
        read_iob2(tmp_path / "nope.iob2")
    with pytest.raises(InputError, match="file is empty"):
        read_iob2(write(tmp_path, "\n\n"))


def _corpus(*sents):
    return Corpus(sentences=[Sentence(words=w, ann=dict(a), sent_id=i, source="f", line=k + 1)
                             for k, (i, w, a) in enumerate(sents)], files=["f"])


def test_join_on_sent_id():
    base = _corpus(("s1", ["a", "b"], {"upos": ["X", "Y"]}),
                   ("s2", ["c"], {"upos": ["Z"]}),
                   ("s3", ["d", "e"], {"upos": ["X", "X"]}),
                   (None, ["f"], {}))
    other = _corpus(("s3", ["d", "e"], {"ner": [("PER", 0, 2)], "other": 1}),
                    ("s2", ["C"], {"ner": []}),
                    ("s9", ["z"], {"ner": []}))
    j = join_on_sent_id(base, other, ["ner"])
    assert [s.sent_id for s in j.sentences] == ["s3"]
    assert j.sentences[0].ann == {"upos": ["X", "X"], "ner": [("PER", 0, 2)]}
    assert j.skipped == {"sent_id_missing": 1, "tokens_differ": 1, "no_sent_id": 1}
    assert j.skipped_ids == {"sent_id_missing": ["s1"], "tokens_differ": ["s2"]}  # the one without an id: counted
    assert "ner" not in base.sentences[2].ann  # inputs untouched
    with pytest.raises(InputError, match="has no 'missing' annotation"):
        join_on_sent_id(base, other, ["missing"])


@pytest.mark.skipif(not UNER.is_dir(), reason=f"shared corpora not found at {UNER}")
def test_real_uner_files():
    dev = read_iob2(UNER / "en_ewt-ud-dev.iob2")
    test = read_iob2(UNER / "en_ewt-ud-test.iob2")
    assert len(dev.sentences) == 2001 and len(test.sentences) == 2077
    for c, lo, hi in ((dev, 900, 1100), (test, 1000, 1200)):
        types = Counter(label for s in c.sentences for label, _, _ in s.ann["ner"])
        assert set(types) == {"PER", "LOC", "ORG"}
        assert lo < sum(types.values()) < hi
        for s in c.sentences:
            assert len(s.ann["ner_tags"]) == len(s.words) and s.sent_id
            assert all(0 <= a < b <= len(s.words) for _, a, b in s.ann["ner"])
    s = dev.sentences[0]
    assert s.sent_id == "answers-20070404104007AAY1Chs_ans-0001" and s.line == 1
    assert len(s.words) == 24 and s.words[6:8] == ["tampa", "bay"]
    assert s.ann["ner"] == [("LOC", 6, 8)]


@pytest.mark.shared
def test_real_ewt_join_lists_the_sentences_whose_tokens_differ(shared_corpora):
    ud, uner = shared_corpora / "ud-english-ewt", shared_corpora / "uner-english-ewt"
    c = read_corpus([ud / "en_ewt-ud-dev.conllu", uner / "en_ewt-ud-dev.iob2"])
    assert len(c.sentences) == 1998 and c.skipped == {"tokens_differ": 3}
    assert c.skipped_ids == {"tokens_differ": [
        "newsgroup-groups.google.com_alt.animals.badgers_1b8e106a9a468d99_ENG_20040220_231100-0003",
        "newsgroup-groups.google.com_alt.animals.bear_1b8e106a9a468d99_ENG_20040220_231100-0003",
        "answers-20090205181308AAZghOH_ans-0009"]}
    ud_words = {s.sent_id: s.words for s in read_corpus([ud / "en_ewt-ud-dev.conllu"]).sentences}
    uner_words = {s.sent_id: s.words for s in read_corpus([uner / "en_ewt-ud-dev.iob2"]).sentences}
    assert all(ud_words[i] != uner_words[i] for i in c.skipped_ids["tokens_differ"])
