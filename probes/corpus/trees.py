"""The tree rules of UD's validator (levels 1-2) for readers that yield dependency trees.

A sentence's HEAD column is a tree when every HEAD is 0 (the root) or a word of the sentence,
exactly one word has HEAD 0, and every word reaches that root by following HEADs (no cycle,
which includes a word that is its own HEAD). Its IDs are in order when each multiword-token
range ``a-b`` has a < b, stands right before word a, ends at or before the last word and does
not overlap the previous range, and each empty node ``i.k`` stands after word i.

A reader refuses a file with a sentence that breaks a rule (InputError naming the rule, at the
line of the word or row at fault, below), or with ``invalid_trees="skip"`` sets the sentence aside
and counts it under the rule's own reason: ``invalid_tree_head``, ``invalid_tree_roots``,
``invalid_tree_cycle``, ``invalid_tree_range``. Each check is O(words) per sentence.

The line at fault (``TreeProblem.line``, where the reader gives the checks its lines):
- a HEAD outside the sentence: the first such word's;
- no root: the sentence's first word's (no word is more at fault than another: every word has a head);
- several roots: the second word with HEAD 0 (the first root is the tree's, the second breaks the rule);
- a cycle: the first word the message names, the one at which the walk up the HEADs came back onto
  itself (a word that is its own HEAD: that word's);
- a multiword-token range or an empty node out of place: that row's.
"""
from __future__ import annotations

from dataclasses import dataclass

from probes.base.errors import InputError

SKIP_HINT = "--invalid-trees skip sets such sentences aside"


@dataclass(frozen=True)
class TreeProblem:
    """A broken rule: `rule` is head, roots, cycle or range; `problem` says how, in words; `line` the line of
    the word or row at fault (see the module docstring; None where the check was not given the lines)."""

    rule: str
    problem: str
    line: int | None = None

    @property
    def reason(self) -> str:
        """The skip reason: invalid_tree_<rule>."""
        return f"invalid_tree_{self.rule}"

    def error(self, path) -> InputError:
        """The InputError that refuses the file at the line at fault."""
        return InputError(f"not a tree ({self.reason}): {self.problem}; {SKIP_HINT}", path, self.line)


def head_problem(heads: list[int], lines: list[int] | None = None) -> TreeProblem | None:
    """The first tree rule `heads` (1-based, 0 = root, one per word) breaks, or None for a tree; `lines`:
    each word's line, for the problem's line at fault (see the module docstring)."""
    n = len(heads)

    def at(word: int) -> int | None:  # the line of word `word` (1-based)
        return None if lines is None else lines[word - 1]

    if max(heads) > n or min(heads) < 0:
        i, h = next((i, h) for i, h in enumerate(heads, 1) if not 0 <= h <= n)
        return TreeProblem("head", f"word {i} has HEAD {h}, outside the sentence ({n} words)", at(i))
    roots = heads.count(0)
    if roots != 1:
        if roots == 0:
            return TreeProblem("roots", "no word has HEAD 0: a tree has exactly one root", at(1))
        ids = [i for i, h in enumerate(heads, 1) if h == 0]
        return TreeProblem("roots", f"{roots} roots (words {_listed(ids)} have HEAD 0): a tree has exactly one",
                           at(ids[1]))
    state = [0] * (n + 1)  # per node (0 = the root): 0 not seen, 1 on the current walk, 2 reaches the root
    state[0] = 2
    for i in range(1, n + 1):
        walk = []
        j = i
        while state[j] == 0:
            state[j] = 1
            walk.append(j)
            j = heads[j - 1]
        if state[j] == 1:  # the walk came back onto itself
            cycle = walk[walk.index(j):]
            if len(cycle) == 1:
                return TreeProblem("cycle", f"word {j} is its own HEAD", at(j))
            loop = " → ".join(str(k) for k in cycle + [j])
            return TreeProblem("cycle", f"HEAD cycle {loop}: these words do not reach the root", at(j))
        for k in walk:
            state[k] = 2
    return None


def id_problem(ranges: list[tuple[str, int, int]], empty_nodes: list[tuple[str, int, int]],
               n: int) -> TreeProblem | None:
    """The first ID rule broken by a sentence of `n` words whose multiword-token rows are
    `ranges` and empty-node rows `empty_nodes`: (the ID as written, e.g. "3-4" or "8.1", the
    number of words on the rows before it, the row's line), in file order; None when all are in place."""
    covered = 0  # last word of the previous range
    for written, before, line in ranges:
        first, last = (int(x) for x in written.split("-"))
        if last <= first:
            return TreeProblem("range", f"multiword token {written}: a range must end after it starts", line)
        if last > n:
            return TreeProblem("range", f"multiword token {written} goes past the last word ({n})", line)
        if first <= covered:
            return TreeProblem("range", f"multiword token {written} overlaps the range before it", line)
        if first != before + 1:
            return TreeProblem("range", f"multiword token {written} does not stand right before word {first}", line)
        covered = last
    for written, before, line in empty_nodes:
        word = int(written.split(".")[0])
        if word > n:
            return TreeProblem("range", f"empty node {written} is past the last word ({n})", line)
        if word != before:
            return TreeProblem("range", f"empty node {written} does not stand right after word {word}", line)
    return None


def _listed(ids: list[int]) -> str:
    return ", ".join(map(str, ids[:-1])) + f" and {ids[-1]}"
