"""A batch's gold dependency arcs, flattened, as dep and trees read them (made once a batch, shared: ``gold_arcs``)."""
from __future__ import annotations

import numpy as np
import torch

from probes.encoding.batching import Batch


def gold_arcs(batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[str]]:
    """The batch's gold arcs (its sentences' "head" and "deprel"), once a batch: sentence row, dependent column and
    head column [N] each (int64, on the host; column 0 the root), and each arc's relation."""
    return batch.memo("gold_arcs", lambda: _flattened(batch))


def _flattened(batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[str]]:
    heads = [s.ann["head"] for s in batch.sentences]
    sizes = np.fromiter(map(len, heads), dtype=np.int64, count=len(heads))  # [B] words
    rows = np.repeat(np.arange(len(sizes)), sizes)  # [N]
    starts = np.cumsum(sizes) - sizes  # [B] each sentence's first arc
    dependents = np.arange(int(sizes.sum())) - starts[rows] + 1  # [N] 1..n within each sentence
    head_columns = np.fromiter((h for hs in heads for h in hs), dtype=np.int64, count=len(rows))
    labels = [r for s in batch.sentences for r in s.ann["deprel"]]
    return torch.from_numpy(rows), torch.from_numpy(dependents), torch.from_numpy(head_columns), labels
