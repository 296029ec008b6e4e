"""Penn-Treebank bracketed constituency trees (e.g. CRAFT's `penn/*.tree`).

    ( (S (NP-SBJ (DT The) (NN striatum)) (VP (VBZ plays) ...) (. .)) )

Trees may sit one per line (CRAFT) or span several lines (classic `.mrg` files, where the
lines after a tree's first are indented). Blank lines are ignored.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from probes.corpus.sentence import Corpus, Sentence
from probes.corpus.textio import read_text_lines
from probes.base.errors import InputError

#: labels of an outermost node that only wraps the tree, excluded from the constituents
ROOT_LABELS = ("", "ROOT", "TOP")

#: PTB escapes of bracket characters in leaves, undone in Sentence.words (not in xpos tags)
UNESCAPE = {"-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}"}

_TOKEN = re.compile(r"\(|\)|[^ \t\r\f\v()]+")  # ASCII blanks separate tokens
_TAG_SPLIT = re.compile(r"[-=]")


def strip_function_tags(label: str) -> str:
    """`NP-SBJ-2` -> `NP`, `PP-LOC=2` -> `PP`, `NP-SBJ-1=3` -> `NP`; labels that begin with
    '-' (`-NONE-`, `-LRB-`, `-RRB-`) are returned unchanged."""
    if label.startswith("-"):
        return label
    return _TAG_SPLIT.split(label, maxsplit=1)[0]


@dataclass
class _Node:
    label: str
    line: int
    children: list["_Node"] = field(default_factory=list)
    word: str | None = None  # set for a preterminal


def _tokens(lines: list[str]):
    """Yield (token, line number, token is at column 0) over the lines of a file."""
    for n, text in enumerate(lines, start=1):
        for m in _TOKEN.finditer(text):
            tok = m.group().strip()  # other Unicode blanks (CRAFT has a few U+00A0) are trimmed
            if tok:
                yield tok, n, m.start() == 0


def _parse_file(path: Path) -> list[_Node]:
    lines = read_text_lines(path)
    trees: list[_Node] = []
    stack: list[_Node] = []
    # after '(' the next token may be the label; `expect_label` is that state
    expect_label = False
    for tok, n, col0 in _tokens(lines):
        # PTB layout: a tree starts at column 0, its continuation lines (if any) are indented
        if tok == "(" and col0 and stack:
            raise InputError(f"unbalanced brackets: tree never closed ({len(stack)} '(' "
                             "still open when the next tree begins)", path, stack[0].line)
        if expect_label:
            expect_label = False
            node = stack[-1]
            if tok not in ("(", ")"):
                node.label = tok
                continue
        if tok == "(":
            node = _Node(label="", line=n)
            if stack:
                parent = stack[-1]
                if parent.word is not None:
                    raise InputError(f"leaf {parent.word!r} outside a preterminal: "
                                     f"({parent.label} {parent.word} ...) also holds "
                                     "constituents", path, n)
                parent.children.append(node)
            stack.append(node)
            expect_label = True
        elif tok == ")":
            if not stack:
                raise InputError("unbalanced brackets: ')' closes nothing", path, n)
            node = stack.pop()
            if node.word is None and not node.children:
                what = f"({node.label})" if node.label else "()"
                raise InputError(f"empty tree {what}: no words" if not stack else
                                 f"empty constituent {what}", path, node.line)
            if not stack:
                trees.append(node)
        else:  # a leaf
            if not stack:
                raise InputError(f"text {tok!r} outside any tree", path, n)
            node = stack[-1]
            if node.children or node.word is not None or not node.label:
                raise InputError(f"leaf {tok!r} outside a preterminal (a leaf must be the only "
                                 "child of a labelled node, as in (NN cat))", path, n)
            node.word = tok
    if stack:
        raise InputError(f"unbalanced brackets: {len(stack)} '(' not closed at end of file",
                         path, stack[0].line)
    return trees


def _prune(node: _Node) -> _Node | None:
    """Drop -NONE- preterminals and constituents left empty by that; strip function tags."""
    if node.word is not None:
        if node.label == "-NONE-":
            return None
        return _Node(strip_function_tags(node.label), node.line, word=node.word)
    kids = [k for k in (_prune(c) for c in node.children) if k is not None]
    if not kids:
        return None
    return _Node(strip_function_tags(node.label), node.line, kids)


def _walk(node: _Node, words: list[str], xpos: list[str], cons: list, unescape: bool) -> int:
    """Append node's words/tags/constituents; return its height (preterminal = 1)."""
    if node.word is not None:
        words.append(UNESCAPE.get(node.word, node.word) if unescape else node.word)
        xpos.append(node.label)
        return 1
    start = len(words)
    index = len(cons)
    cons.append(None)  # placeholder, keeps pre-order
    height = 1 + max(_walk(c, words, xpos, cons, unescape) for c in node.children)
    cons[index] = (node.label, start, len(words), height)
    return height


def read_ptb(paths: str | Path | list[str | Path], *, unescape: bool = True) -> Corpus:
    """Read Penn-Treebank bracketed trees from one file or a list of files.

    Every tree becomes one Sentence (sent_id = "<file stem>:<tree number from 1>", line = the
    line where the tree starts) with
      words               the leaves, in order, after removing `-NONE-` leaves; the PTB
                          escapes -LRB- -RRB- -LSB- -RSB- -LCB- -RCB- are turned back into the
                          bracket characters ( ) [ ] { } (pass unescape=False to keep them);
      ann["xpos"]         the preterminal tags, one per word, as written (`NN`, `-LRB-`, ...;
                          function tags, if any, stripped as for phrases);
      ann["constituents"] every phrase as (label, start, end, height), start/end word indices
                          (0-based, end exclusive), in pre-order (a parent before its children,
                          left to right).

    Normalisation: function tags and indices are stripped from labels (`NP-SBJ-2`, `PP-LOC=2`
    -> `NP`, `PP`; labels that start with '-' such as -NONE-, -LRB-, -RRB- are kept whole);
    `-NONE-` preterminals (traces, empty elements) are removed, and so is every constituent
    left without words by that; nothing else is collapsed (unary chains such as (NP (NP ..))
    stay, giving two constituents with the same span). The outermost node is excluded when
    it is a wrapper labelled "", ROOT or TOP (CRAFT's `( (S ...) )`); its children are the
    top constituents. Preterminals are not constituents.

    Height: counted in edges down to the words, after the removals above. A word has height
    0, a preterminal 1, a phrase 1 + the largest height of its children. So height 2 means
    "every child is a preterminal" (e.g. (NP (DT The) (NN cat))); these are the height-3
    subtrees of He & Choi 2021 / NLTK's Tree.height(), which counts a word as 1. The con
    probe uses height == 2 by default.

    A tree whose words are all `-NONE-` is set aside and counted in
    corpus.skipped["no_words"]. InputError (file:line) for unbalanced brackets (a ')' that
    closes nothing, or a tree still open at the end of the file or when a line starting with
    '(' begins; the line is where that tree starts), an empty tree `( )` or constituent
    `(NP )` (also `( cat )`, read as a node labelled "cat" with no children), a leaf outside
    a preterminal (`(S The (NN cat))`, `(NN a b)`, `( (NN a) b )`), and text outside any tree.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    corpus = Corpus(sentences=[], files=[str(Path(p)) for p in paths])
    for p in paths:
        p = Path(p)
        for k, tree in enumerate(_parse_file(p), start=1):
            pruned = _prune(tree)
            if pruned is None:
                corpus.skip("no_words", sent_id=f"{p.stem}:{k}")
                continue
            if pruned.word is None and pruned.label in ROOT_LABELS:
                tops = pruned.children
            else:
                tops = [pruned]
            words: list[str] = []
            xpos: list[str] = []
            cons: list = []
            for t in tops:
                _walk(t, words, xpos, cons, unescape)
            corpus.sentences.append(Sentence(
                words=words, ann={"xpos": xpos, "constituents": cons},
                sent_id=f"{p.stem}:{k}", source=str(p), line=tree.line))
    return corpus


def read_craft(penn_dir: str | Path, ids_file: str | Path, *, unescape: bool = True) -> Corpus:
    """Read the CRAFT articles listed in `ids_file` (one article id a line, e.g. `17194222`)
    from `penn_dir/<id>.tree`, in the order listed. See read_ptb for the Sentence format.

    InputError naming the ids file and line for an article with no .tree file, an id listed
    twice, or an ids file with no ids."""
    penn_dir = Path(penn_dir)
    if not penn_dir.is_dir():
        raise InputError("not a directory (expected CRAFT's penn/ folder of .tree files)", penn_dir)
    paths: list[Path] = []
    seen: dict[str, int] = {}
    for n, text in enumerate(read_text_lines(ids_file), start=1):
        art = text.strip()
        if not art or art.startswith("#"):
            continue
        shown = art if art.isprintable() else repr(art)  # messages stay on one line
        if art in seen:
            raise InputError(f"article {shown} listed twice (first at line {seen[art]})", ids_file, n)
        seen[art] = n
        p = penn_dir / f"{art}.tree"
        if not _is_file(p):
            raise InputError(f"article {shown}: no file {penn_dir / shown}.tree", ids_file, n)
        paths.append(p)
    if not paths:
        raise InputError("no article ids listed", ids_file)
    return read_ptb(paths, unescape=unescape)


def _is_file(path: Path) -> bool:
    """Path.is_file, False also where the name cannot be a file (too long for the file system)."""
    try:
        return path.is_file()
    except OSError:
        return False
