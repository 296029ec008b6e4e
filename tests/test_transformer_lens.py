"""Side by side with TransformerLens' detect_head on the trained induction model and the same sequences.

TransformerLens ("mul" measure) scores a head on one sequence as Σ(A ⊙ pattern) / ΣA = Σ(A ⊙ pattern) / T (rows
sum to 1) and averages the sequences; probes divides the same sums by the rows that have a target instead. On N
sequences of T tokens:
    previous token   TL = probes × (T − 1) / T  (every row but the first has a previous token)
    duplicate token  TL = probes × rows / (N·T)  (rows: tokens with an earlier occurrence)
    induction        TL = probes × rows / (N·T)  where no token follows itself: TL's pattern also counts the key
                     k = i when token i − 1 equals token i (probes leaves that key out: it is the token itself),
                     so the sequences here have no such pair.
Skipped without transformer-lens (the test extra)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import probes
from probes.causal.sequences import repeated_random_tokens, write_token_ids

pytestmark = pytest.mark.slow

TRAINED = Path(__file__).resolve().parent / "data" / "induction-gpt2"


def test_scores_equal_detect_head_up_to_the_denominator(tmp_path):
    pytest.importorskip("transformer_lens")
    from transformer_lens import TransformerBridge
    from transformer_lens.head_detector import detect_head

    encoder = probes.load_encoder(str(TRAINED))
    drawn = repeated_random_tokens(encoder.tokenizer, 16, 20, seed=7)  # [16, 40]
    sequences = drawn[(drawn[:, 1:] != drawn[:, :-1]).all(1)]  # no token right after itself
    n, t = sequences.shape
    assert n >= 8
    write_token_ids(tmp_path / "seqs.ids", sequences, "side by side")
    ours = probes.run(["prev_token", "duplicate_token", "induction"], encoder=encoder, corpus=tmp_path / "seqs.ids",
                      replicates=0, progress=False)
    bridge = TransformerBridge.boot_transformers(str(TRAINED), device="cpu")
    bridge.cfg.default_prepend_bos = False  # the same token ids, no BOS added
    text = [" ".join(f"t{i}" for i in row) for row in sequences.tolist()]
    assert torch.equal(bridge.to_tokens(text[0])[0], torch.from_numpy(sequences[0]))

    def theirs(pattern: str) -> np.ndarray:
        return detect_head(bridge, text, pattern).numpy()  # [L,H], one pass per sequence

    previous = ours["prev_token"].overall
    assert np.allclose(theirs("previous_token_head"), previous.scores * (t - 1) / t, atol=1e-5)
    for name, pattern in (("duplicate_token", "duplicate_token_head"), ("induction", "induction_head")):
        entry = ours[name].overall
        assert np.allclose(theirs(pattern), entry.scores * entry.count / (n * t), atol=1e-5)
