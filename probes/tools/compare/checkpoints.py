"""Per-head similarity of two checkpoints' attention (Kovaleva et al. 2019, "Revealing the Dark Secrets of
BERT", Fig. 5: pre-trained vs fine-tuned).

The same batches (same tokens, same padding) go through both models. For every sentence and head,
the two [T,T] token-level maps (real tokens only) are flattened and compared by cosine similarity;
the score of a head is the mean over sentences (1 = the head attends exactly as before). Both models
must have the same layers × heads and tokenize the corpus identically (a fine-tuned model and its
base do); otherwise positions do not correspond and an InputError says so.

Result: a ProbeResult "similarity" (model = A; B in extra["model_b"]), overall = the cosine grid,
extra["layer_means"] = the mean over each layer's heads, the "which layers changed most" view.
Saving also draws similarity-change.png, 1 − cosine on its own colour scale, the most changed head boxed.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Iterable

import numpy as np
import torch

from probes.encoding.batching import Batch, length_sorted_batches
from probes.corpus import guess_format, read_corpus
from probes.base.defaults import bundled_corpus
from probes.encoding.subwords import encode
from probes.base.errors import InputError
from probes.capture.model import Encoder, load_encoder
from probes.base.files import short_model_name, write_result_files
from probes.results.probe_result import LabelScores, ProbeResult, RunInfo


def map_cosines(a: torch.Tensor, b: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """[B,L,H] cosine similarity of each sentence's maps in two [B,L,H,T,T] tensors, over real rows
    ([B,T] bool; padded keys hold no weight, padded rows are left out)."""
    rows = real.to(a.dtype)[:, None, None, :, None]  # [B,1,1,T,1]
    a, b = a * rows, b * rows
    dot = (a * b).sum((-2, -1))
    norms = a.square().sum((-2, -1)).sqrt() * b.square().sum((-2, -1)).sqrt()
    return dot / norms.clamp(min=1e-30)


def checkpoint_similarity(model_a: str | Encoder, model_b: str | Encoder,
                          corpus: str | Path | Iterable[str | Path] | None = None, *, format: str | None = None,
                          batch_size: int = 32, max_length: int | None = None, limit: int | None = None,
                          device: str = "cpu") -> ProbeResult:
    """Per-head cosine similarity of the attention maps of two checkpoints (see the module docstring)."""
    started = time.perf_counter()
    if batch_size < 1:
        raise InputError(f"batch size must be at least 1, not {batch_size}")
    given = [corpus] if isinstance(corpus, (str, Path)) else list(corpus or [])
    paths = [str(p) for p in given] or [bundled_corpus()]
    data = read_corpus(paths, format=format or guess_format(paths[0]))
    sentences = data.sentences[:limit] if limit else data.sentences
    enc_a = model_a if isinstance(model_a, Encoder) else load_encoder(model_a, device=device, max_length=max_length)
    enc_b = model_b if isinstance(model_b, Encoder) else load_encoder(model_b, device=device, max_length=max_length)
    if (enc_a.layers, enc_a.heads) != (enc_b.layers, enc_b.heads):
        raise InputError(f"{enc_b.name}: {enc_b.layers} layers × {enc_b.heads} heads, but {enc_a.name} has "
                         f"{enc_a.layers} × {enc_a.heads}; heads can only be compared between models of one shape")
    limit_tokens = min(enc_a.max_length, enc_b.max_length)
    items, skipped = encode(enc_a.tokenizer, sentences, limit_tokens)
    _check_same_tokens(enc_a, enc_b, sentences, items, limit_tokens)
    if not items:
        raise InputError(f"no sentence can be compared (of {len(sentences)}; limit {limit_tokens} subwords)", paths[0])
    sums = torch.zeros(enc_a.layers, enc_a.heads, dtype=torch.float64)
    for chunk in length_sorted_batches(items, batch_size):
        batch = Batch.from_encoded([sentences[e.index] for e in chunk], chunk, enc_a.tokenizer, "mean-sum")
        maps = [torch.stack(enc.forward(batch.input_ids, batch.attention_mask,
                                        token_type_ids=batch.token_type_ids).attentions, 1) for enc in (enc_a, enc_b)]
        real = batch.attention_mask.to(maps[0].device).bool()
        sums += map_cosines(maps[0].float(), maps[1].float(), real).sum(0).double().cpu()
    n = len(items)
    grid = (sums / n).numpy()
    info = RunInfo(model=enc_a.name, corpus=data.files, layers=enc_a.layers, heads=enc_a.heads, sentences=n,
                   skipped={**data.skipped, **skipped},
                   settings={"batch_size": batch_size, "max_length": limit_tokens, "limit": limit, "device": device,
                             "format": format},
                   provenance={"model_b": enc_b.name, "model_type": enc_a.model.config.model_type,
                               "model_type_b": enc_b.model.config.model_type,
                               "seconds": round(time.perf_counter() - started, 3)})
    return SimilarityResult(probe="similarity", info=info, options={}, labels={}, overall=LabelScores(n, grid),
                       extra={"model_b": enc_b.name, "measure": "cosine similarity of attention maps, mean over "
                              "sentences (Kovaleva et al. 2019)",
                              "layer_means": [float(x) for x in np.mean(grid, 1)]})


class SimilarityResult(ProbeResult):
    """The similarity grid; its figures: similarity.png (cosine per head, on the grid's own range so that values
    between 0.85 and 1 stay apart) and similarity-change.png (1 − cosine, most changed head boxed), both
    naming the two models."""

    def figures(self, kind: str = "overview") -> dict[str, bytes]:
        from probes.results.plots import heatmap_png

        if kind == "none":
            return {}
        models = f"A {short_model_name(self.info.model)} · B {short_model_name(self.extra['model_b'])}"
        same = heatmap_png(self.overall.scores, f"attention similarity, cosine (n={self.overall.count})", models,
                           vmin=None, vmax=None)
        change = heatmap_png(1.0 - self.overall.scores, f"attention change, 1 − cosine (n={self.overall.count}); most "
                             f"changed boxed", models, vmin=0.0, vmax=None, cmap="magma")
        return {"similarity.png": same, "similarity-change.png": change}

    def save(self, directory: str | Path, *, plots: bool = True) -> list[Path]:
        """Write the JSON, the CSV and (with `plots`) the two figures into `directory`; return the paths written."""
        return write_result_files(directory, {**self.data_files(), **self.figures("overview" if plots else "none")})


def _check_same_tokens(enc_a: Encoder, enc_b: Encoder, sentences, items, limit_tokens: int) -> None:
    kept = [sentences[e.index] for e in items]
    other, _ = encode(enc_b.tokenizer, kept, limit_tokens)
    by_index = {e.index: e.input_ids for e in other}
    for i, e in enumerate(items):
        if by_index.get(i) != e.input_ids:
            s = sentences[e.index]
            raise InputError(f"{enc_b.name} tokenizes this sentence differently from {enc_a.name}; attention maps "
                             "can only be compared between models with one tokenizer", s.source or None,
                             s.line or None)
