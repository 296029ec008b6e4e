"""Wall-clock bounds, kept out of the test suite (a loaded machine fails them without a defect): `probes --version`
answers in well under two seconds, the tree checks of EWT dev cost milliseconds, and FrameNet 1.7 is read in under
half a minute. Figures: docs/benchmarks.md.

    pytest benchmarks/test_wall_clock.py -s
"""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from probes.corpus.conllu_reader import read_conllu
from probes.corpus.trees import head_problem
from probes.corpus.framenet import read_framenet


def test_version_answers_in_well_under_two_seconds():
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "probes", "--version"], capture_output=True, text=True, check=True)
    elapsed = time.perf_counter() - start
    assert done.stdout.startswith("probes ")
    print(f"\nprobes --version: {elapsed:.3f} s")
    assert elapsed < 1.5, f"probes --version took {elapsed:.2f} s"


def test_tree_checks_cost_milliseconds(shared_corpora: Path):
    c = read_conllu(shared_corpora / "ud-english-ewt" / "en_ewt-ud-dev.conllu")
    heads = [s.ann["head"] for s in c.sentences]
    assert len(heads) == 2001
    start = time.perf_counter()
    assert not any(head_problem(h) for h in heads)
    elapsed = time.perf_counter() - start
    print(f"\ntree checks of EWT dev's 25,148 words: {elapsed * 1000:.1f} ms")
    assert elapsed < 0.1


def test_framenet_is_read_in_under_half_a_minute(shared_corpora: Path):
    root = shared_corpora / "framenet-1.7"
    if not (root / "fulltext").is_dir():
        pytest.skip(f"FrameNet 1.7 not found at {root}")
    start = time.perf_counter()
    corpus = read_framenet(root)
    elapsed = time.perf_counter() - start
    assert len(corpus.files) == 106
    print(f"\nFrameNet 1.7 fulltext: {elapsed:.1f} s")
    assert elapsed < 30
