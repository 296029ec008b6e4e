"""The causal detectors' generated sequences: random tokens repeated (Olsson et al. 2022's test of induction heads).

Sequence s is r_s r_s, r_s of `length` token ids drawn uniformly (with replacement) from the model's vocabulary
without its special tokens, with numpy's PCG64 seeded by `seed`: every row of the second copy has an earlier
occurrence (in the first) whose next token is the one an induction head attends to. Written as a ``.ids`` file
(probes.corpus.token_ids) whose first line records how it was made.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from probes.base.errors import InputError


def repeated_random_tokens(tokenizer, count: int, length: int, seed: int) -> np.ndarray:
    """[count, 2·length] int64: `count` sequences of `length` random non-special token ids, each repeated once."""
    if count < 1 or length < 2:
        raise InputError(f"generated sequences need a count of at least 1 and a length of at least 2, not {count} "
                         f"and {length}")
    special = set(tokenizer.all_special_ids)
    vocabulary = np.array(sorted(set(tokenizer.get_vocab().values()) - special), dtype=np.int64)  # [V']
    first = np.random.default_rng(seed).choice(vocabulary, size=(count, length))  # [count, length]
    return np.concatenate([first, first], axis=1)


def repeated_description(count: int, length: int, seed: int) -> str:
    """How `count` sequences of `length` random tokens repeated, drawn with `seed`, are named (a results file's
    corpus, a ``.ids`` file's first line)."""
    return f"generated: {count} × random tokens ({length}) repeated, seed {seed}"


def write_token_ids(path: str | Path, sequences: np.ndarray, header: str) -> None:
    """Write sequences [N,T] as a ``.ids`` file, one a line after the comment line "# header"; atomically (a
    temporary file renamed into place)."""
    path = Path(path)
    partial = path.with_name(path.name + ".partial")
    lines = [f"# {header}", *(" ".join(map(str, row)) for row in sequences.tolist())]
    partial.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(partial, path)

