from collections import Counter
from pathlib import Path

import pytest

from probes.corpus.ptb import read_craft, read_ptb, strip_function_tags
from probes.base.errors import InputError

CORPORA = Path(__file__).resolve().parents[2] / "shared" / "corpora"
CRAFT = CORPORA / "craft-treebank"

TRACE = ("( (S (NP-SBJ-1 (DT The) (NN cat)) (VP (VBD sat) (S (NP-SBJ (-NONE- *-1)) "
         "(VP (TO to) (VP (VB eat))))) (. .)) )")


def write(tmp_path, text, name="x.tree"):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_trace_and_function_tags(tmp_path):
    # After removing (-NONE- *-1) the subject NP of the inner S is empty and goes too:
    #   (S (NP (DT The) (NN cat)) (VP (VBD sat) (S (VP (TO to) (VP (VB eat))))) (. .))
    # heights (word 0, preterminal 1): NP 2, VP(eat) 2, VP(to eat) 3, S 4, VP(sat ..) 5, S 6
    c = read_ptb(write(tmp_path, TRACE + "\n"))
    (s,) = c.sentences
    assert s.words == ["The", "cat", "sat", "to", "eat", "."]
    assert s.ann["xpos"] == ["DT", "NN", "VBD", "TO", "VB", "."]
    assert s.ann["constituents"] == [
        ("S", 0, 6, 6),
        ("NP", 0, 2, 2),
        ("VP", 2, 5, 5),
        ("S", 3, 5, 4),
        ("VP", 3, 5, 3),
        ("VP", 4, 5, 2),
    ]
    assert s.sent_id == "x:1" and s.line == 1 and c.skipped == {}


def test_several_trees_unescape_wrappers_and_blank_lines(tmp_path):
    text = ("( (NP (NN cell) (-LRB- -LRB-) (NN x) (-RRB- -RRB-)) )\n"
            "\n"
            "(ROOT (NP-SBJ=2 (NP (NNS mice))  (PP-LOC (IN in) (NP (NN vivo)))))\n"
            "(S (NP (PRP It)) (VP (VBZ works)))\n"
            "( (X (-NONE- *)) )\n"  # nothing but a trace: set aside, counted
            "(TOP\n   (NP (NN multi)\n       (NN line)))\n")
    c = read_ptb(write(tmp_path, text))
    a, b, d, e = c.sentences
    assert a.words == ["cell", "(", "x", ")"]
    assert a.ann["xpos"] == ["NN", "-LRB-", "NN", "-RRB-"]
    assert a.ann["constituents"] == [("NP", 0, 4, 2)]
    assert b.line == 3 and b.words == ["mice", "in", "vivo"]
    assert b.ann["constituents"] == [("NP", 0, 3, 4), ("NP", 0, 1, 2), ("PP", 1, 3, 3),
                                     ("NP", 2, 3, 2)]
    # no wrapper: the top S is a constituent
    assert d.ann["constituents"] == [("S", 0, 2, 3), ("NP", 0, 1, 2), ("VP", 1, 2, 2)]
    assert e.line == 6 and e.words == ["multi", "line"] and e.ann["constituents"] == [("NP", 0, 2, 2)]
    assert c.skipped == {"no_words": 1} and c.skipped_ids == {"no_words": ["x:4"]}  # the 4th tree of x.tree
    kept = read_ptb(write(tmp_path, text, "y.tree"), unescape=False).sentences[0]
    assert kept.words == ["cell", "-LRB-", "x", "-RRB-"]


def test_strip_function_tags():
    assert strip_function_tags("NP-SBJ-2") == "NP"
    assert strip_function_tags("NP-SBJ-1=3") == "NP"
    assert strip_function_tags("PP-LOC=2") == "PP"
    assert strip_function_tags("PRP$") == "PRP$"
    for keep in ("-NONE-", "-LRB-", "-RRB-"):
        assert strip_function_tags(keep) == keep


GOOD = "( (S (NP (NN a)) (VP (VB b))) )"


@pytest.mark.parametrize("bad, line, problem", [
    # a ')' missing on line 2: reported when line 3 begins a new tree, at line 2
    ("( (S (NP (NN a)) (VP (VB b)) )", 2, "unbalanced brackets: tree never closed"),
    ("( (S (NP (NN a)) (VP (VB b)))) )", 2, "unbalanced brackets: ')' closes nothing"),
    ("( )", 2, "empty tree"),
    ("( (S (NP ) (VP (VB b))) )", 2, "empty constituent (NP)"),
    ("( (S The (NN cat)) )", 2, "leaf 'The' outside a preterminal"),
    ("( (S (NN a b)) )", 2, "leaf 'b' outside a preterminal"),
    ("( (NN a) b )", 2, "leaf 'b' outside a preterminal"),
    ("( (S (NN a) (VP (VB b)) c) )", 2, "leaf 'c' outside a preterminal"),
    ("( (S (NN a (VB b))) )", 2, "leaf 'a' outside a preterminal: (NN a ...) also holds"),
    ("word ( (S (NN a)) )", 2, "text 'word' outside any tree"),
])
def test_errors_name_file_and_line(tmp_path, bad, line, problem):
    p = write(tmp_path, f"{GOOD}\n{bad}\n{GOOD}\n", "bad.tree")
    with pytest.raises(InputError) as e:
        read_ptb(p)
    assert e.value.path == str(p) and e.value.line == line
    assert problem in str(e.value) and str(e.value).startswith(f"{p}:{line}: ")


def test_unclosed_at_end_of_file(tmp_path):
    p = write(tmp_path, f"{GOOD}\n{GOOD}\n( (S (NN a)\n", "eof.tree")
    with pytest.raises(InputError, match=r"eof\.tree:3: unbalanced brackets: 2 '\(' not closed"):
        read_ptb(p)


def test_read_craft_ids_file(tmp_path):
    penn = tmp_path / "penn"
    penn.mkdir()
    write(penn, f"{GOOD}\n", "111.tree")
    write(penn, f"{TRACE}\n{GOOD}\n", "222.tree")
    c = read_craft(penn, write(tmp_path, "222\n111\n", "ids.txt"))
    assert [s.sent_id for s in c.sentences] == ["222:1", "222:2", "111:1"]
    assert c.files == [str(penn / "222.tree"), str(penn / "111.tree")]
    with pytest.raises(InputError, match=r"ids2\.txt:2: article 333: no file"):
        read_craft(penn, write(tmp_path, "111\n333\n", "ids2.txt"))


@pytest.mark.skipif(not CRAFT.is_dir(), reason=f"shared corpora not found at {CRAFT}")
def test_real_craft_dev():
    c = read_craft(CRAFT / "penn", CRAFT / "craft-ids-dev.txt")
    assert len(c.files) == 7 and len(c.sentences) == 2780 and c.skipped == {}
    h2 = Counter(lab for s in c.sentences for lab, _, _, h in s.ann["constituents"] if h == 2)
    assert 15_000 < sum(h2.values()) < 22_000
    assert h2.most_common(2) == [("NP", 12647), ("NML", 2338)]
    for s in c.sentences:
        assert len(s.ann["xpos"]) == len(s.words) > 0
        assert "-NONE-" not in s.ann["xpos"]
        assert all(0 <= a < b <= len(s.words) and h >= 2 and "-" not in lab and "=" not in lab
                   for lab, a, b, h in s.ann["constituents"])
    # 17194222.tree line 3: "Bone morphogenetic protein (BMP) family members, including BMP2,
    # BMP4, and BMP7, are expressed (NP-1 (-NONE- *)) throughout limb development."
    s = c.sentences[2]
    assert s.sent_id == "17194222:3" and s.line == 3
    assert s.words[:8] == ["Bone", "morphogenetic", "protein", "(", "BMP", ")", "family", "members"]
    assert len(s.words) == 23 and s.ann["xpos"][3:6] == ["-LRB-", "NN", "-RRB-"]
    assert [(lab, a, b) for lab, a, b, h in s.ann["constituents"] if h == 2] == [
        ("NML", 0, 3), ("NML", 4, 5), ("NP", 10, 16), ("NP", 20, 22)]
    # (VP (VBN expressed) (NP-1 (-NONE- *)) (PP-TMP (IN throughout) (NP ..))): the trace's NP-1
    # is gone, PP has height 3 and the VP 4
    assert [c for c in s.ann["constituents"] if c[1] >= 18] == [
        ("VP", 18, 22, 4), ("PP", 19, 22, 3), ("NP", 20, 22, 2)]
