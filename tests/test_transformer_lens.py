"""Side by side with TransformerLens' detect_head on the trained induction model and the same sequences: the 64
sequences of 24 random tokens repeated, seed 0 (the benchmark's, benchmarks/test_causal_bench.py).

TransformerLens ("mul" measure) scores a head on one sequence as Σ(A ⊙ pattern) / ΣA = Σ(A ⊙ pattern) / T (rows
sum to 1) and averages the sequences; probes divides the same sums by the rows that have a target instead. On N
sequences of T tokens:
    previous token   TL = probes × (T − 1) / T  (every row but the first has a previous token)
    duplicate token  TL = probes × rows / (N·T)  (rows: tokens with an earlier occurrence)
    induction        TL = probes × rows / (N·T) + self / (N·T): TL's pattern also counts the key k = i where token
                     i − 1 equals token i (a token right after itself), which probes leaves out (it is the query
                     token itself); self is the attention of those rows on themselves, read by detect_head with
                     that key alone as its pattern, and TL's pattern without it gives probes' score alone.
Skipped without transformer-lens (the test extra)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import probes
from probes.encoding.sequences import repeated_random_tokens, write_token_ids

pytestmark = pytest.mark.slow

TRAINED = Path(__file__).resolve().parent / "data" / "induction-gpt2"


def test_scores_equal_detect_head_up_to_the_denominator_and_the_self_key(tmp_path):
    pytest.importorskip("transformer_lens")
    from transformer_lens import TransformerBridge
    from transformer_lens.head_detector import detect_head, get_induction_head_detection_pattern

    encoder = probes.load_encoder(str(TRAINED))
    sequences = repeated_random_tokens(encoder.tokenizer, 64, 24, seed=0)  # [64, 48]
    n, t = sequences.shape
    after_itself = np.pad(sequences[:, 1:] == sequences[:, :-1], ((0, 0), (1, 0)))  # [N,T] token i == token i − 1
    assert after_itself.sum() == 39
    write_token_ids(tmp_path / "seqs.ids", sequences, "side by side")
    ours = probes.run(["prev_token", "duplicate_token", "induction"], encoder=encoder, corpus=tmp_path / "seqs.ids",
                      replicates=0, progress=False)
    bridge = TransformerBridge.boot_transformers(str(TRAINED), device="cpu")
    bridge.cfg.default_prepend_bos = False  # the same token ids, no BOS added
    names = ("previous_token_head", "duplicate_token_head", "induction_head", "induction without k = i", "k = i")
    scores = {name: [] for name in names}  # name -> per sequence [L,H]
    for row, repeats in zip(sequences.tolist(), after_itself):
        text = " ".join(f"t{i}" for i in row)
        tokens = bridge.to_tokens(text)  # [1, T]
        assert tokens[0].tolist() == row
        _, cache = bridge.run_with_cache(tokens, remove_batch_dim=True)
        pattern = get_induction_head_detection_pattern(tokens.cpu())  # [T,T] TL's induction targets
        assert torch.diagonal(pattern).tolist() == repeats.tolist()  # its keys k = i: the rows after themselves
        diagonal = torch.diag(torch.diagonal(pattern))  # [T,T] those keys alone
        patterns = (*names[:3], pattern - diagonal, diagonal)
        for name, given in zip(names, patterns):
            scores[name].append(detect_head(bridge, text, given, cache=cache).numpy())
    theirs = {name: np.mean(per_sequence, axis=0) for name, per_sequence in scores.items()}  # [L,H] each

    previous = ours["prev_token"].overall
    assert np.allclose(theirs["previous_token_head"], previous.scores * (t - 1) / t, atol=1e-5)
    duplicate = ours["duplicate_token"].overall
    assert np.allclose(theirs["duplicate_token_head"], duplicate.scores * duplicate.count / (n * t), atol=1e-5)
    induction = ours["induction"].overall
    scaled = induction.scores * induction.count / (n * t)
    assert np.allclose(theirs["induction without k = i"], scaled, atol=1e-5)
    assert np.allclose(theirs["induction_head"], scaled + theirs["k = i"], atol=1e-5)
    assert 1e-3 < np.abs(theirs["k = i"]).max() < 2e-3  # the term: far beyond the tolerance


def test_folded_copying_scores_equal_those_of_transformer_lens_processed_weights():
    """--copying-norms fold against TransformerLens' own fold_ln: its processed W_E, W_V, W_O and W_U (fold_ln only:
    no centring of the writing weights or of the unembedding) give each head's whole circuit W_E·W_V·W_O·W_U
    [V,V], whose eigenvalues give the score, over the whole vocabulary and without the special token (id 0)."""
    pytest.importorskip("transformer_lens")
    from transformer_lens import TransformerBridge

    encoder = probes.load_encoder(str(TRAINED))
    bridge = TransformerBridge.boot_transformers(str(TRAINED), device="cpu")
    bridge.process_weights(fold_ln=True, center_writing_weights=False, center_unembed=False, fold_value_biases=False)
    with torch.no_grad():
        embedding, value, output, unembedding = (w.double() for w in (bridge.W_E, bridge.W_V, bridge.W_O, bridge.W_U))
    circuits = embedding @ value @ output @ unembedding  # [V,D]·[L,H,D,d]·[L,H,d,D]·[D,V] → [L,H,V,V]
    for vocabulary, tokens in (("all", slice(None)), ("no-special", slice(1, None))):
        eigen = torch.linalg.eigvals(circuits[:, :, tokens, tokens])  # [L,H,V']
        theirs = (eigen.sum(-1).real / eigen.abs().sum(-1)).numpy()  # [L,H]
        ours = encoder.copying_scores(vocabulary, "fold").numpy()
        assert np.allclose(ours, theirs, atol=1e-5, rtol=0)
        assert not np.allclose(encoder.copying_scores(vocabulary, "ignore").numpy(), theirs, atol=1e-3)
