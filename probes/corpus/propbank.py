"""Universal PropBank reader (UP 1.0, e.g. ``en_ewt-up-dev.conllu``).

File layout: CoNLL-U (10 columns) plus column 11, the roleset of each predicate (``come.03``,
``have.LV``, ``_`` elsewhere), plus one column per predicate, in sentence order: column 11 + k
belongs to the k-th word that has a roleset. A role label (``ARG0``, ``ARGM-TMP``, ``R-ARG1``,
``C-ARG1``, ``V``, ``C-V``, ...) sits on the argument's head token only; ``_`` elsewhere.

Per Sentence, everything :func:`read_conllu` gives (``head``, ``deprel``, ``upos``, ``xpos``,
``text``), so one pass can feed ``dep`` and ``srl``, plus ``ann["srl"]``, one dict per
predicate in sentence order, in the same format as the CoNLL-2012 reader::

    {"predicate": 3, "lemma": "come", "frameset": "03",
     "args": [("ARG2", 0, 3), ("V", 3, 4), ("ARG1", 4, 6)],   # (role, start, end_exclusive)
     "arg_words": [(0, 1, 2), (3,), (4, 5)],                  # the exact words of each argument
     "arg_heads": [2, 3, 5]}                                  # the labelled (head) token

All indices are 0-based words. ``predicate`` is the row holding the roleset (a multi-word
predicate such as "drop by" marks V on several tokens; "two-timing" marks V on "two" and C-V
on "timing", whose row holds the roleset). ``lemma``/``frameset`` split the roleset at its
last dot. Arguments are listed in the order of their head tokens, V and C-V included (the
srl probe leaves them out).

Argument words: the dependency subtree of the labelled token, minus the subtrees of the
predicate and of the column's other labelled tokens (other arguments, V, C-V) that lie inside
it, since the arguments of one predicate never overlap each other or the predicate. So in
"All you seek is sincerity" (UD: "sincerity" is the root, "is" its cop, "All" its nsubj,
"seek" an acl:relcl of "All"), ARG1 of "seek" is "All" (not "All you seek"), ARG1 of "is" is
"All you seek" and ARG2 of "is" is "sincerity" (not the whole sentence); the particle "by" of
"drop by" (marked V) is not part of the ARG4 "my house" it depends on. A word set can have
gaps (non-projective trees, or after these removals), so ``args`` gives the argument's extent
(first word, last word + 1) and ``arg_words`` its exact words; the argument is contiguous
exactly when ``len(words) == end - start``. V and C-V are the labelled token alone.

Not scored, counted: sentences marked ``# propbank = no-up`` (EWT sentences that PropBank
does not cover) keep their dependency annotation but get no ``srl``, and carry
``ann["propbank"] = "no-up"``, so the srl probe skips them with the reason
``propbank_no_up`` while ``dep`` still uses them.

Errors (:class:`InputError`, file and line): everything :func:`read_conllu` rejects (HEADs
that are not a tree among them, unless ``invalid_trees="skip"`` sets such sentences aside); a
word row with fewer than 11 columns (not a UP file); word rows of one sentence with different
column counts; a number of predicate columns different from the number of rolesets; a missing
HEAD. A predicate column count that disagrees with the predicates is an
error rather than a skipped sentence because the columns can then not be matched to the
predicates without guessing; the UP 1.0 EWT files have no such sentence. UP writes a
sentence without predicates with one empty 12th column: that is read as no predicate column.
The file is read line by line (``iter_propbank``), each sentence checked whole as it comes: the error
raised is that of the first sentence at fault.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

from probes.corpus.conllu_reader import conllu_sentences
from probes.corpus.sentence import Corpus, Sentence
from probes.base.errors import InputError

__all__ = ["read_propbank", "iter_propbank", "looks_like_propbank"]

_NONE = ("_", "")
_WORD_ID = re.compile(r"^[1-9][0-9]*$")
_NO_UP = re.compile(r"^#\s*propbank\s*=\s*no-up\s*$")
_PREDICATE_WORDS = ("V", "C-V")  # parts of the predicate, not arguments


def read_propbank(path: str | Path, *, subtypes: bool = False, invalid_trees: str = "refuse") -> Corpus:
    """Read a Universal PropBank CoNLL-U file (see the module docstring); ``subtypes`` and
    ``invalid_trees`` as in :func:`read_conllu` (keep ``nmod:poss`` rather than ``nmod``; refuse
    the file, or skip and count sentences, whose HEADs are not a tree)."""
    corpus = Corpus(sentences=[], files=[])
    corpus.sentences = list(iter_propbank(path, corpus, subtypes=subtypes, invalid_trees=invalid_trees))
    return corpus


def iter_propbank(path: str | Path, counts: Corpus | None = None, *, subtypes: bool = False,
                  invalid_trees: str = "refuse") -> Iterator[Sentence]:
    """The sentences :func:`read_propbank` reads, one at a time, the file read line by line (the file's name
    and the sentences set aside added to `counts` as they come, as by :func:`iter_conllu`)."""
    path = Path(path)
    for sentence, block in conllu_sentences(path, counts, subtypes=subtypes, extra_columns=True,
                                            invalid_trees=invalid_trees):
        _add_srl(sentence, *_markings(block), path)
        yield sentence


def _markings(block: list[tuple[int, str]]) -> tuple[bool, list[int]]:
    """Whether a sentence block is marked ``# propbank = no-up``, and the line numbers of its word rows."""
    no_up = any(_NO_UP.match(text) for _, text in block if text.startswith("#"))
    word_lines = [number for number, text in block
                  if not text.startswith("#") and _WORD_ID.match(text.split("\t", 1)[0])]
    return no_up, word_lines


def looks_like_propbank(path: str | Path, max_lines: int = 200) -> bool:
    """True when the first word rows of a CoNLL-U file have more than 10 columns (UP's roleset
    and predicate columns); used to pick this reader for a ``.conllu`` file."""
    try:
        with open(path, encoding="utf-8-sig", errors="replace") as f:  # a byte-order mark dropped
            for _, line in zip(range(max_lines), f):
                if line.strip() and not line.startswith("#"):
                    return len(line.rstrip("\r\n").split("\t")) > 10
    except OSError:
        return False
    return False


def _add_srl(sentence: Sentence, no_up: bool, word_lines: list[int], path: Path) -> None:
    extra = sentence.ann.pop("extra")
    start = sentence.line
    if no_up:
        sentence.ann["propbank"] = "no-up"
        return
    for number, cells in zip(word_lines, extra):
        if not cells:
            raise InputError("expected at least 11 columns (CoNLL-U + roleset), found 10: "
                             "not a Universal PropBank file (use --format conllu)", path, number)
        if len(cells) != len(extra[0]):
            raise InputError(f"{10 + len(cells)} columns, but the sentence's first word row (line {word_lines[0]}) "
                             f"has {10 + len(extra[0])}", path, number)
    if "head" not in sentence.ann:
        raise InputError("a word has no HEAD (_): argument spans need the dependency tree", path, start)
    rolesets = [(i, cells[0]) for i, cells in enumerate(extra) if cells[0] not in _NONE]
    columns = [cells[1:] for cells in extra]
    width = len(columns[0])
    if width == 1 and all(c[0] == "" for c in columns):
        width = 0  # how UP writes a sentence without predicates
    if width != len(rolesets):
        raise InputError(f"{width} predicate column(s) but {len(rolesets)} predicate(s) (words with a roleset "
                         f"in column 11) in this sentence", path, start)
    preorder, first, last = _subtrees(sentence.ann["head"])
    srl = []
    for k, (p, roleset) in enumerate(rolesets):
        labelled = [(i, c[k]) for i, c in enumerate(columns) if c[k] not in _NONE]
        lemma, _, frameset = roleset.rpartition(".")
        srl.append({"predicate": p, "lemma": lemma or roleset, "frameset": frameset if lemma else "", "args": [],
                    "arg_words": [], "arg_heads": []})
        taken = [i for i, _ in labelled] + [p]  # subtrees that belong to another argument or the predicate
        for i, role in labelled:
            words = (i,) if role in _PREDICATE_WORDS else _argument_words(i, taken, preorder, first, last)
            srl[-1]["args"].append((role, words[0], words[-1] + 1))
            srl[-1]["arg_words"].append(words)
            srl[-1]["arg_heads"].append(i)
    sentence.ann["srl"] = srl


def _subtrees(heads: list[int]) -> tuple[list[int], list[int], list[int]]:
    """Depth-first preorder of the 0-based words of a tree (read_conllu checked it is one), and
    for each word the slice [first, last) of that order holding its subtree."""
    n = len(heads)
    children: list[list[int]] = [[] for _ in range(n + 1)]  # node 0 = root, node i = word i - 1
    for i, h in enumerate(heads, 1):
        children[h].append(i)
    preorder: list[int] = []
    first, last = [0] * (n + 1), [0] * (n + 1)
    stack = [(0, False)]
    while stack:
        node, done = stack.pop()
        if done:
            last[node] = len(preorder)
            continue
        first[node] = len(preorder)
        preorder.append(node - 1)
        stack.append((node, True))
        stack.extend((c, False) for c in reversed(children[node]))
    return preorder, first[1:], last[1:]  # preorder[0] is the root (-1); first/last indexed by word


def _argument_words(head: int, others: list[int], preorder, first, last) -> tuple[int, ...]:
    """Sorted words of the subtree of `head`, minus the subtrees of the `others` that lie inside it."""
    words = set(preorder[first[head]:last[head]])
    for other in others:
        if other != head and first[head] <= first[other] < last[head]:
            words.difference_update(preorder[first[other]:last[other]])
    return tuple(sorted(words))
