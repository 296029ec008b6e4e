"""The tree rules of UD's validator (levels 1-2) for readers that yield dependency trees.

A sentence's HEAD column is a tree when every HEAD is 0 (the root) or a word of the sentence,
exactly one word has HEAD 0, and every word reaches that root by following HEADs (no cycle,
which includes a word that is its own HEAD). Its IDs are in order when each multiword-token
range ``a-b`` has a < b, stands right before word a, ends at or before the last word and does
not overlap the previous range, and each empty node ``i.k`` stands after word i.

A reader refuses a file with a sentence that breaks a rule (InputError at the sentence's first
line, naming the rule), or with ``invalid_trees="skip"`` sets the sentence aside and counts it
under the rule's own reason: ``invalid_tree_head``, ``invalid_tree_roots``,
``invalid_tree_cycle``, ``invalid_tree_range``. Each check is O(words) per sentence.
"""
from __future__ import annotations

from dataclasses import dataclass

from probes.choices import INVALID_TREES
from probes.errors import InputError

SKIP_HINT = "--invalid-trees skip sets such sentences aside"


@dataclass(frozen=True)
class TreeProblem:
    """A broken rule: `rule` is head, roots, cycle or range; `problem` says how, in words."""

    rule: str
    problem: str

    @property
    def reason(self) -> str:
        """The skip reason: invalid_tree_<rule>."""
        return f"invalid_tree_{self.rule}"

    def error(self, path, line: int) -> InputError:
        """The InputError that refuses the file at `line` (the sentence's first line)."""
        return InputError(f"not a tree ({self.reason}): {self.problem}; {SKIP_HINT}", path, line)


def check_invalid_trees(invalid_trees: str) -> None:
    """InputError unless `invalid_trees` is one of INVALID_TREES."""
    if invalid_trees not in INVALID_TREES:
        raise InputError(f"invalid_trees must be one of {', '.join(INVALID_TREES)}, not {invalid_trees!r}")


def head_problem(heads: list[int]) -> TreeProblem | None:
    """The first tree rule `heads` (1-based, 0 = root, one per word) breaks, or None for a tree."""
    n = len(heads)
    if max(heads) > n or min(heads) < 0:
        i, h = next((i, h) for i, h in enumerate(heads, 1) if not 0 <= h <= n)
        return TreeProblem("head", f"word {i} has HEAD {h}, outside the sentence ({n} words)")
    roots = heads.count(0)
    if roots != 1:
        if roots == 0:
            return TreeProblem("roots", "no word has HEAD 0: a tree has exactly one root")
        ids = [i for i, h in enumerate(heads, 1) if h == 0]
        return TreeProblem("roots", f"{roots} roots (words {_listed(ids)} have HEAD 0): a tree has exactly one")
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
                return TreeProblem("cycle", f"word {j} is its own HEAD")
            loop = " → ".join(str(k) for k in cycle + [j])
            return TreeProblem("cycle", f"HEAD cycle {loop}: these words do not reach the root")
        for k in walk:
            state[k] = 2
    return None


def id_problem(ranges: list[tuple[str, int]], empty_nodes: list[tuple[str, int]], n: int) -> TreeProblem | None:
    """The first ID rule broken by a sentence of `n` words whose multiword-token rows are
    `ranges` and empty-node rows `empty_nodes`: (the ID as written, e.g. "3-4" or "8.1", the
    number of words on the rows before it), in file order; None when all are in place."""
    covered = 0  # last word of the previous range
    for written, before in ranges:
        first, last = (int(x) for x in written.split("-"))
        if last <= first:
            return TreeProblem("range", f"multiword token {written}: a range must end after it starts")
        if last > n:
            return TreeProblem("range", f"multiword token {written} goes past the last word ({n})")
        if first <= covered:
            return TreeProblem("range", f"multiword token {written} overlaps the range before it")
        if first != before + 1:
            return TreeProblem("range", f"multiword token {written} does not stand right before word {first}")
        covered = last
    for written, before in empty_nodes:
        word = int(written.split(".")[0])
        if word > n:
            return TreeProblem("range", f"empty node {written} is past the last word ({n})")
        if word != before:
            return TreeProblem("range", f"empty node {written} does not stand right after word {word}")
    return None


def _listed(ids: list[int]) -> str:
    return ", ".join(map(str, ids[:-1])) + f" and {ids[-1]}"
