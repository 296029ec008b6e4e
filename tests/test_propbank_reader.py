"""Universal PropBank reader: a hand-written sample (tests/data/sample_up.conllu), its errors, format
guessing, and the counts of the real UP English EWT dev file."""
from __future__ import annotations

from pathlib import Path

import pytest

from probes.corpus import guess_format, read_corpus
from probes.corpus.propbank import looks_like_propbank, read_propbank
from probes.base.errors import InputError

SAMPLE = Path(__file__).parent / "data" / "sample_up.conllu"
UD_SAMPLE_ROW = "1\tHi\thi\tINTJ\tUH\t_\t0\troot\t0:root\t_"


@pytest.fixture(scope="module")
def corpus():
    return read_propbank(SAMPLE)


def test_dependency_annotation_kept_for_dep(corpus):
    s1 = corpus.sentences[0]
    assert s1.sent_id == "s1" and s1.words == ["Kim", "ate", "red", "apples", "."]
    assert s1.ann["head"] == [2, 0, 4, 2, 2] and s1.ann["deprel"] == ["nsubj", "root", "amod", "obj", "punct"]
    assert "extra" not in s1.ann


def test_subtree_argument_and_roleset(corpus):
    # "Kim ate red apples .": ARG1 sits on "apples"; its subtree is "red apples" (words 2, 3).
    assert corpus.sentences[0].ann["srl"] == [
        {"predicate": 1, "lemma": "eat", "frameset": "01",
         "args": [("ARG0", 0, 1), ("V", 1, 2), ("ARG1", 2, 4)],
         "arg_words": [(0,), (1,), (2, 3)], "arg_heads": [0, 1, 3]}]


def test_predicate_and_other_arguments_cut_out_of_a_subtree(corpus):
    # "All you seek is sincerity": sincerity (root) ← All (nsubj) ← seek (acl:relcl) ← you; is = cop of sincerity.
    seek, be = corpus.sentences[1].ann["srl"]
    # ARG1 of seek on "All": subtree {All, you, seek} minus seek's subtree {you, seek} → "All".
    assert seek["predicate"] == 2 and seek["arg_words"] == [(0,), (1,), (2,)]
    # ARG1 of be on "All": the whole relative "All you seek"; ARG2 on the root "sincerity": its subtree is the
    # whole sentence, minus the ARG1 subtree {All, you, seek} and the predicate "is" → "sincerity" alone.
    assert be["predicate"] == 3 and be["args"] == [("ARG1", 0, 3), ("V", 3, 4), ("ARG2", 4, 5)]
    assert be["arg_words"] == [(0, 1, 2), (3,), (4,)]


def test_argument_with_a_gap(corpus):
    # "He wants to be the king": king ← to, be (cop), the. ARG2 of "be" on "king" = {to, the, king}: the
    # predicate "be" leaves a gap, so the extent (2, 6) is not the word set.
    want, be = corpus.sentences[2].ann["srl"]
    assert want["args"][2] == ("ARG1", 2, 6) and want["arg_words"][2] == (2, 3, 4, 5)
    assert be["args"] == [("V", 3, 4), ("ARG2", 2, 6)] and be["arg_words"] == [(3,), (2, 4, 5)]
    assert be["arg_heads"] == [3, 5]


def test_sentence_without_predicates_and_no_up(corpus):
    hello, nice = corpus.sentences[3], corpus.sentences[4]
    assert hello.ann["srl"] == []  # UP writes one empty 12th column: no predicate column
    assert "srl" not in nice.ann and nice.ann["propbank"] == "no-up"
    assert nice.ann["head"] == [2, 0]  # still usable by dep


def test_multiword_predicate_and_empty_node(corpus):
    # "Drop by my house , I can get you some": V on "Drop" (the roleset row) and on "by"; the empty node
    # 7.1 (12 columns in a 13-column sentence) is not a word.
    s = corpus.sentences[5]
    assert len(s.words) == 10
    drop, get = s.ann["srl"]
    assert (drop["predicate"], drop["lemma"], drop["frameset"]) == (0, "drop_by", "02")
    assert drop["args"] == [("V", 0, 1), ("V", 1, 2), ("ARG4", 2, 4)]  # "by" (V) cut out of "by my house"
    assert get["predicate"] == 7 and [r for r, _, _ in get["args"]] == ["ARG0", "ARGM-MOD", "V", "ARG2", "ARG1"]


def _write(tmp_path, rows: list[list[str]], comments=("# sent_id = x",)) -> Path:
    path = tmp_path / "bad.conllu"
    path.write_text("\n".join([*comments, *("\t".join(r) for r in rows)]) + "\n\n", encoding="utf-8")
    return path


def _row(i, form, head, rel, *up):
    return [str(i), form, form.lower(), "X", "X", "_", str(head), rel, "_", "_", *up]


def test_predicate_column_count_disagrees(tmp_path):
    # two rolesets, one predicate column
    path = _write(tmp_path, [_row(1, "Kim", 2, "nsubj", "_", "ARG0"), _row(2, "ate", 0, "root", "eat.01", "V"),
                             _row(3, "fast", 2, "advmod", "fast.01", "_")])
    with pytest.raises(InputError) as e:
        read_propbank(path)
    assert e.value.format() == f"{path}:1: 1 predicate column(s) but 2 predicate(s) (words with a roleset in column " \
                               "11) in this sentence"


def test_ragged_row(tmp_path):
    path = _write(tmp_path, [_row(1, "Kim", 2, "nsubj", "_", "ARG0"), _row(2, "ate", 0, "root", "eat.01")])
    with pytest.raises(InputError, match=r"bad.conllu:3: 11 columns, but the sentence's first word row \(line 2\) "
                                         r"has 12"):
        read_propbank(path)


def test_plain_conllu_is_not_up(tmp_path):
    path = _write(tmp_path, [UD_SAMPLE_ROW.split("\t")])
    with pytest.raises(InputError, match=r"bad.conllu:2: expected at least 11 columns .* not a Universal PropBank"):
        read_propbank(path)


def test_head_cycle_refused_or_skipped(tmp_path):
    cycle = [_row(1, "a", 2, "dep", "_", "_"), _row(2, "b", 1, "dep", "_", "_"), _row(3, "c", 0, "root", "c.01", "V")]
    path = _write(tmp_path, cycle)
    with pytest.raises(InputError, match=r"bad.conllu:2: not a tree \(invalid_tree_cycle\): HEAD cycle 1 → 2 → 1"):  # word 1
        read_propbank(path)
    # skipped: the next sentence keeps its own predicate columns (the SRL is matched by the block's first line)
    good = "\n".join("\t".join(r) for r in [_row(1, "Kim", 2, "nsubj", "_", "ARG0"),
                                            _row(2, "ate", 0, "root", "eat.01", "V")])
    path.write_text(path.read_text(encoding="utf-8") + "# sent_id = y\n" + good + "\n\n", encoding="utf-8")
    c = read_propbank(path, invalid_trees="skip")
    assert c.skipped == {"invalid_tree_cycle": 1} and c.skipped_ids == {"invalid_tree_cycle": ["x"]}
    (s,) = c.sentences
    assert (s.sent_id, s.line) == ("y", 6)
    assert s.ann["srl"] == [{"predicate": 1, "lemma": "eat", "frameset": "01", "args": [("ARG0", 0, 1), ("V", 1, 2)],
                             "arg_words": [(0,), (1,)], "arg_heads": [0, 1]}]


def test_format_guessing(tmp_path, corpus):
    plain = tmp_path / "plain.conllu"
    plain.write_text("# sent_id = p\n" + UD_SAMPLE_ROW + "\n\n", encoding="utf-8")
    assert looks_like_propbank(SAMPLE) and not looks_like_propbank(plain)
    assert guess_format(SAMPLE) == "propbank" and guess_format(plain) == "conllu"
    assert guess_format(tmp_path / "a.v4_gold_conll") == "conll2012" and guess_format("x.conll2012") == "conll2012"
    (tmp_path / "fn" / "fulltext").mkdir(parents=True)
    assert guess_format(tmp_path / "fn") == "framenet" and guess_format(tmp_path) is None
    # options meant for other readers are not passed to this one (dep asks for subtypes, frames for documents)
    assert len(read_corpus([SAMPLE], subtypes=True, documents=["x"]).sentences) == len(corpus.sentences)
    # written with a byte-order mark and CR LF line endings: still Universal PropBank, the same sentences
    marked = tmp_path / "marked.conllu"
    marked.write_bytes(b"\xef\xbb\xbf" + SAMPLE.read_bytes().replace(b"\n", b"\r\n"))
    assert guess_format(marked) == "propbank"
    assert [(s.words, s.ann) for s in read_corpus([marked]).sentences] == [(s.words, s.ann) for s in corpus.sentences]


@pytest.mark.shared
def test_real_up_dev_counts(shared_corpora):
    c = read_propbank(shared_corpora / "up-english-ewt" / "en_ewt-up-dev.conllu")
    assert len(c.sentences) == 2002
    assert sum(s.ann.get("propbank") == "no-up" for s in c.sentences) == 28
    predicates = [p for s in c.sentences for p in s.ann.get("srl", [])]
    assert len(predicates) == 4977  # words with a roleset; every column lines up with one
    args = [(role, words) for p in predicates for (role, _, _), words in zip(p["args"], p["arg_words"])]
    assert sum(role not in ("V", "C-V") for role, _ in args) == 9662
    assert sum(role == "ARG1" for role, _ in args) == 3325 and sum(role == "C-V" for role, _ in args) == 20
    assert all(words == tuple(sorted(set(words))) and words for _, words in args)
