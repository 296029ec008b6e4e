"""CoNLL-U reader: the tree rules of UD's validator (refuse the file, or skip and count), raw text
given as CoNLL-U, and the full treebanks at hand."""
from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probes.cli import main
from probes.corpus import read_corpus
from probes.corpus import conllu_reader
from probes.corpus.conllu_reader import read_conllu
from probes.corpus.propbank import read_propbank
from probes.corpus.trees import SKIP_HINT, head_problem
from probes.base.errors import InputError


def row(i, form, head, rel="dep"):
    return f"{i}\t{form}\t_\tX\tX\t_\t{head}\t{rel}\t_\t_"


def sentence(sent_id: str, *rows: str) -> str:
    return "\n".join([f"# sent_id = {sent_id}", *rows]) + "\n\n"


GOOD = sentence("good", row(1, "Dogs", 2, "nsubj"), row(2, "bark", 0, "root"))
# each breaks one rule, with the line a refusal names when the sentence stands after GOOD (lines 1-4): its
# sent_id comment is line 5, its first row line 6; the line is the word's or row's at fault
BROKEN = {
    "cycle": (sentence("cyc", row(1, "a", 0, "root"), row(2, "b", 3), row(3, "c", 2)),
              "HEAD cycle 2 → 3 → 2: these words do not reach the root", 7),
    # the walk from word 2 enters the cycle 4 → 3 at word 4: that word's line
    "cycle_entered": (sentence("cyc4", row(1, "a", 0, "root"), row(2, "b", 4), row(3, "c", 4), row(4, "d", 3)),
                      "HEAD cycle 4 → 3 → 4: these words do not reach the root", 9),
    "self": (sentence("self", row(1, "a", 0, "root"), row(2, "b", 2)), "word 2 is its own HEAD", 7),
    "two_roots": (sentence("two", row(1, "a", 0, "root"), row(2, "b", 0, "root"), row(3, "c", 2)),
                  "2 roots (words 1 and 2 have HEAD 0): a tree has exactly one", 7),
    "three_roots": (sentence("three", row(1, "a", 2), row(2, "b", 0, "root"), row(3, "c", 0, "root"),
                             row(4, "d", 0, "root")),
                    "3 roots (words 2, 3 and 4 have HEAD 0): a tree has exactly one", 8),
    "no_root": (sentence("none", row(1, "a", 2), row(2, "b", 1)),
                "no word has HEAD 0: a tree has exactly one root", 6),  # no word is at fault: the first word's line
    "head_out": (sentence("out", row(1, "a", 0, "root"), row(2, "b", 9)),
                 "word 2 has HEAD 9, outside the sentence (2 words)", 7),
    "head_out_first": (sentence("out3", row(1, "a", 0, "root"), row(2, "b", 1), row(3, "c", 9), row(4, "d", 8)),
                       "word 3 has HEAD 9, outside the sentence (4 words)", 8),
    "range_past": (sentence("past", row(1, "a", 0, "root"), row(2, "b", 1), "3-4\tcd\t_\t_\t_\t_\t_\t_\t_\t_",
                            row(3, "c", 1)), "multiword token 3-4 goes past the last word (3)", 8),
    "range_backwards": (sentence("back", "2-1\tab\t_\t_\t_\t_\t_\t_\t_\t_", row(1, "a", 0, "root"), row(2, "b", 1)),
                        "multiword token 2-1: a range must end after it starts", 6),
    "range_overlap": (sentence("lap", "1-2\tab\t_\t_\t_\t_\t_\t_\t_\t_", row(1, "a", 0, "root"),
                               "2-3\tbc\t_\t_\t_\t_\t_\t_\t_\t_", row(2, "b", 1), row(3, "c", 1)),
                      "multiword token 2-3 overlaps the range before it", 8),
    "range_misplaced": (sentence("mis", "2-3\tbc\t_\t_\t_\t_\t_\t_\t_\t_", row(1, "a", 0, "root"), row(2, "b", 1),
                                 row(3, "c", 1)), "multiword token 2-3 does not stand right before word 2", 6),
    "empty_past": (sentence("emp", row(1, "a", 0, "root"), row(2, "b", 1), "5.1\tx\t_\t_\t_\t_\t_\t_\t_\t_"),
                   "empty node 5.1 is past the last word (2)", 8),
    "empty_misplaced": (sentence("emp1", row(1, "a", 0, "root"), "1.1\tx\t_\t_\t_\t_\t_\t_\t_\t_", row(2, "b", 1),
                                 "1.2\tx\t_\t_\t_\t_\t_\t_\t_\t_"),
                        "empty node 1.2 does not stand right after word 1", 9),
}
REASON = {"cycle": "invalid_tree_cycle", "cycle_entered": "invalid_tree_cycle", "self": "invalid_tree_cycle",
          "two_roots": "invalid_tree_roots", "three_roots": "invalid_tree_roots", "no_root": "invalid_tree_roots",
          "head_out": "invalid_tree_head", "head_out_first": "invalid_tree_head"}


def write(tmp_path, text: str, name: str = "c.conllu"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_each_rule_refuses_the_file_at_the_word(tmp_path, case):
    text, problem, line = BROKEN[case]
    path = write(tmp_path, GOOD + text + GOOD.replace("good", "good2"))
    reason = REASON.get(case, "invalid_tree_range")
    with pytest.raises(InputError) as e:
        read_conllu(path)
    assert (e.value.path, e.value.line) == (str(path), line)
    assert e.value.problem == f"not a tree ({reason}): {problem}; --invalid-trees skip sets such sentences aside"
    # the same lines read with CR LF line endings, a byte-order mark and comments before the words: the
    # line moves with the comments (two more), not with the bytes
    commented = text.replace("\n", "\n# a comment\n# another\n", 1)
    crlf = write(tmp_path, "\ufeff" + (GOOD + commented).replace("\n", "\r\n"), "crlf.conllu")
    with pytest.raises(InputError) as e:
        read_conllu(crlf)
    assert (e.value.line, e.value.problem.split(": ", 1)[1]) == (line + 2, f"{problem}; {SKIP_HINT}")


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_each_rule_skipped_and_counted(tmp_path, case):
    text, _, _ = BROKEN[case]
    path = write(tmp_path, GOOD + text + GOOD.replace("good", "good2"))
    c = read_conllu(path, invalid_trees="skip")
    reason = REASON.get(case, "invalid_tree_range")
    assert [s.sent_id for s in c.sentences] == ["good", "good2"]
    assert c.skipped == {reason: 1} and c.skipped_ids == {reason: [text.split(" = ")[1].split("\n")[0]]}


def test_counts_by_rule_through_read_corpus(tmp_path):
    path = write(tmp_path, GOOD + "".join(text for text, _, _ in BROKEN.values()) + sentence("", row(1, "x", 0, "root"), row(2, "y", 2)))
    with pytest.raises(InputError, match=r"c\.conllu:7: not a tree \(invalid_tree_cycle\)"):  # cyc's word 2
        read_corpus([path])
    c = read_corpus([path], invalid_trees="skip")
    assert [s.sent_id for s in c.sentences] == ["good"]
    assert c.skipped == {"invalid_tree_cycle": 4, "invalid_tree_roots": 3, "invalid_tree_head": 2,
                         "invalid_tree_range": 6}
    # the last one's "# sent_id = " has no value: counted, but it has no id to list
    assert c.skipped_ids["invalid_tree_cycle"] == ["cyc", "cyc4", "self"]
    assert c.skipped_ids["invalid_tree_roots"] == ["two", "three", "none"]
    assert c.skipped_ids["invalid_tree_head"] == ["out", "out3"]
    assert c.skipped_ids["invalid_tree_range"] == ["past", "back", "lap", "mis", "emp", "emp1"]
    with pytest.raises(InputError, match="invalid_trees must be one of refuse, skip, not 'drop'"):
        read_corpus([path], invalid_trees="drop")


def test_sentence_without_heads_is_not_checked(tmp_path):
    path = write(tmp_path, sentence("h", row(1, "a", "_"), row(2, "b", "_")))
    (s,) = read_conllu(path).sentences
    assert "head" not in s.ann and s.words == ["a", "b"]


def test_valid_ranges_and_empty_nodes_pass(tmp_path):
    # "don't" = do + n't; an empty node 0.1 before the first word and 2.1 after word 2
    path = write(tmp_path, sentence("ok", "0.1\tE\t_\t_\t_\t_\t_\t_\t_\t_", "1-2\tdon't\t_\t_\t_\t_\t_\t_\t_\t_",
                                    row(1, "do", 3), row(2, "n't", 3), "2.1\tE\t_\t_\t_\t_\t_\t_\t_\t_",
                                    row(3, "go", 0, "root")))
    (s,) = read_conllu(path).sentences
    assert s.words == ["do", "n't", "go"] and s.ann["head"] == [3, 3, 0]


def test_all_file_is_skipped_gives_an_empty_corpus_with_counts(tmp_path):
    path = write(tmp_path, BROKEN["cycle"][0])
    c = read_conllu(path, invalid_trees="skip")
    assert c.sentences == [] and c.skipped == {"invalid_tree_cycle": 1}


def test_propbank_checks_the_same_rules(tmp_path):
    up = lambda i, form, head, rel, *cols: row(i, form, head, rel) + "\t" + "\t".join(cols)  # noqa: E731
    two = sentence("two", up(1, "a", 0, "root", "a.01", "V"), up(2, "b", 0, "root", "_", "_"))
    ok = sentence("ok", up(1, "a", 0, "root", "a.01", "V"), up(2, "b", 1, "dep", "_", "ARG1"))
    path = write(tmp_path, two + ok)
    with pytest.raises(InputError, match=r"c\.conllu:3: not a tree \(invalid_tree_roots\): 2 roots"):  # word 2
        read_propbank(path)
    c = read_corpus([path], format="propbank", invalid_trees="skip")
    assert c.skipped == {"invalid_tree_roots": 1} and [s.sent_id for s in c.sentences] == ["ok"]
    assert c.sentences[0].ann["srl"][0]["args"] == [("V", 0, 1), ("ARG1", 1, 2)]


def iob2(sent_id: str, *words: str) -> str:
    return f"# sent_id = {sent_id}\n" + "".join(f"{i}\t{w}\tO\t-\t-\n" for i, w in enumerate(words, 1)) + "\n"


def test_layers_joined_onto_trees(tmp_path):
    cyc, _, line = BROKEN["cycle"]
    ud = write(tmp_path, GOOD + cyc + sentence("changed", row(1, "Cats", 2), row(2, "purr", 0, "root")), "c.conllu")
    ner = write(tmp_path, iob2("good", "Dogs", "bark") + iob2("cyc", "a", "b", "c") + iob2("changed", "Cats", "mew"),
                "c.iob2")
    with pytest.raises(InputError, match=rf"c\.conllu:{line}: not a tree \(invalid_tree_cycle\)"):
        read_corpus([ud, ner])
    c = read_corpus([ud, ner], invalid_trees="skip")  # UD is the base
    assert [s.sent_id for s in c.sentences] == ["good"] and c.sentences[0].ann["ner"] == []
    assert c.skipped == {"invalid_tree_cycle": 1, "tokens_differ": 1}
    assert c.skipped_ids == {"invalid_tree_cycle": ["cyc"], "tokens_differ": ["changed"]}
    # the trees as a layer over the entities: a sentence whose tree the layer set aside keeps its reason
    c = read_corpus([ner, ud], invalid_trees="skip")
    assert [s.sent_id for s in c.sentences] == ["good"] and c.sentences[0].ann["head"] == [2, 0]
    assert c.skipped == {"invalid_tree_cycle": 1, "tokens_differ": 1}
    assert c.skipped_ids == {"invalid_tree_cycle": ["cyc"], "tokens_differ": ["changed"]}


def test_raw_text_without_annotate_says_what_to_do(tmp_path, capsys):
    f = write(tmp_path, "The cat sat on the mat.\nIt purred.\n", "story.txt")
    out = tmp_path / "out"
    capsys.readouterr()
    assert main(["run", "dep", "--corpus", str(f), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err == (f"probes: error: {f}:1: no tab-separated columns, so not CoNLL-U: raw text needs --annotate spacy "
                   "(or --format NAME for another corpus format)\n")
    assert not out.exists()


@pytest.mark.shared
@pytest.mark.parametrize("name", ["ud-english-ewt/en_ewt-ud-dev.conllu", "ud-english-ewt/en_ewt-ud-test.conllu",
                                  "up-english-ewt/en_ewt-up-dev.conllu", "up-english-ewt/en_ewt-up-test.conllu",
                                  "ud-chinese-gsdsimp/zh_gsdsimp-ud-dev.conllu",
                                  "ud-chinese-gsdsimp/zh_gsdsimp-ud-test.conllu"])
def test_full_treebanks_are_trees(shared_corpora, name):
    c = read_corpus([shared_corpora / name])  # refuses any sentence that is not a tree
    assert c.skipped == {} and len(c.sentences) >= 500
    assert all(len(s.ann["head"]) == len(s.words) for s in c.sentences)


@pytest.mark.shared
def test_ewt_dev_has_no_tree_problem(shared_corpora):
    c = read_conllu(shared_corpora / "ud-english-ewt" / "en_ewt-ud-dev.conllu")
    heads = [s.ann["head"] for s in c.sentences]
    assert len(heads) == 2001
    assert not any(head_problem(h) for h in heads)


ROWS = ["1\ta\ta\tX\tX\t_\t0\troot\t_\t_", "2\tb\tb\tX\tX\t_\t1\tdep:sub\t_\tNER=B-ORG", "2\tb\tb\tX\tX\t_\t_\tdep\t_\t_",
        "3\tc\tc\tX\tX\t_\t２\tdep\t_\t_", "3\tc\tc\tX\tX\t_\t02\tdep\t_\t_", "2-3\tbc\t_\t_\t_\t_\t_\t_\t_\t_",
        "1.1\te\te\tX\tX\t_\t_\t_\t_\t_", "01\ta\ta\tX\tX\t_\t0\troot\t_\t_", "3\tc\tc\tX\tX\t_\t2\tdep\t_\t_\textra",
        "3\tc", "3 c", "# text = a b c", "x\ta\ta\tX\tX\t_\t0\troot\t_\t_", "3\tc\tc\tX\tX\t_\t\tdep\t_\t_"]


@settings(max_examples=300, deadline=None, database=None)
@given(st.lists(st.sampled_from(ROWS), min_size=1, max_size=6), st.booleans(), st.booleans())
def test_plain_rows_read_as_the_checks_read_them(tmp_path_factory, rows, subtypes, extra):
    # the common case's shortcut (ten columns, IDs 1..n, HEADs digits or _) gives what the row-by-row checks give
    path = tmp_path_factory.mktemp("plain") / "c.conllu"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")

    def read():
        try:
            c = read_conllu(path, subtypes=subtypes, extra_columns=extra, invalid_trees="skip")
            return [(s.words, s.ann, s.line) for s in c.sentences], c.skipped
        except InputError as e:
            return str(e)

    shortcut = read()
    with mock.patch.object(conllu_reader, "_plain", lambda rows: False):
        assert read() == shortcut
