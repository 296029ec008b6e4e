"""The causal detectors on hand-built attention (every number worked out in the comments), their OV copying score on
hand-built weights, and the generated sequences end to end on tiny random models of each family."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import attention, batch, feed, sentence

from causal_models import CONFIGS, make_checkpoint
from probes.builtin.causal.duplicate_token import DuplicateTokenProbe
from probes.builtin.causal.induction import InductionProbe
from probes.builtin.causal.prev_token import PrevTokenProbe
from probes.builtin.causal.sink import SinkProbe
from probes.causal.detect import DETECTORS, detect
from probes.causal.families import copying_scores, fold_norms, norm_parts
from probes.causal.sequences import repeated_random_tokens
from probes.families import Family
from probes.results import RunInfo

TRAINED = Path(__file__).resolve().parent / "data" / "induction-gpt2"

# Sequence A: ids 7 3 5 7 3 (no start token), positions 0..4. Sequence B: <s>(1) 9 9, padded to 5.
#   A duplicates: 3 → 0 (id 7), 4 → 1 (id 3); induction targets: 3 → 1, 4 → 2.  B duplicate: 2 → 1; no induction
#   row (its earlier occurrence's next token is itself).
# Head 0 of A:  row 0 {0: 1}; row 1 {0: .5, 1: .5}; row 2 {1: .8, 2: .2}; row 3 {0: .1, 1: .6, 2: .3};
#               row 4 {1: .25, 2: .5, 3: .25}
# Head 0 of B:  row 0 {0: 1}; row 1 {0: .7, 1: .3}; row 2 {0: .2, 1: .4, 2: .4}
# Head 1 of both: every row on its previous token (row 0 on itself).
A = attention(5, {1: {0: .5, 1: .5}, 2: {1: .8, 2: .2}, 3: {0: .1, 1: .6, 2: .3}, 4: {1: .25, 2: .5, 3: .25}})
B = attention(3, {1: {0: .7, 1: .3}, 2: {0: .2, 1: .4, 2: .4}})
PREVIOUS = {1: {0: 1.0}, 2: {1: 1.0}, 3: {2: 1.0}, 4: {3: 1.0}}


def _hand(replicates: int = 0):
    sentences = [sentence([str(i) for i in (7, 3, 5, 7, 3)]), sentence(["9", "9"])]
    ids = torch.tensor([[7, 3, 5, 7, 3], [1, 9, 9, 0, 0]])
    return batch(sentences, [[1, 2, 3, 4, 5], [0, 1, 2]],
                 [[A, attention(5, PREVIOUS)], [B, attention(3, PREVIOUS)]], input_ids=ids)


def _scores(cls, label: str | None = None, replicates: int = 0):
    probe = cls(1, 2, replicates=replicates)
    feed(probe, _hand())
    result = probe.compute(RunInfo("hand", ["hand"], 1, 2, 2, {}, {}, {}))
    entry = result.overall if label is None else result.labels[label]
    return entry.count, entry.scores[0], result


def test_prev_token():
    # head 0: A rows 1..4 .5 + .8 + .3 + .25 = 1.85, B rows 1, 2: .7 + .4 = 1.1; 2.95 / 6 rows
    count, scores, _ = _scores(PrevTokenProbe)
    assert count == 6 and np.allclose(scores, [2.95 / 6, 1.0])


def test_duplicate_token():
    # head 0: A row 3 on 0: .1, row 4 on 1: .25; B row 2 on 1: .4; .75 / 3 rows. Head 1: only B row 2 → 1 is its
    # previous token (1 of 3)
    count, scores, _ = _scores(DuplicateTokenProbe)
    assert count == 3 and np.allclose(scores, [0.75 / 3, 1 / 3])


def test_induction_attention_side():
    # head 0: A row 3 on 1: .6, row 4 on 2: .5 → 1.1 / 2 rows; head 1 attends to 2 and 3 from those rows: 0
    count, scores, result = _scores(InductionProbe)
    assert count == 2 and np.allclose(scores, [0.55, 0.0])
    assert "copying" not in result.labels and result.extra["induction_heads"] == []  # no model was read


def test_sink_first_and_start_tokens():
    # first: A rows 1..4 .5 + 0 + .1 + 0, B rows 1, 2: .7 + .2 → 1.5 / 6; start: B only (A has no start token): .9 / 2
    count, scores, result = _scores(SinkProbe)
    assert count == 6 and np.allclose(scores, [1.5 / 6, 2 / 6])  # head 1: each row 1's previous token is the first
    start = result.labels["start"]
    assert start.count == 2 and np.allclose(start.scores[0], [0.45, 0.5])


def test_intervals_by_sequence():
    """Replicates reweight whole sequences: every head's interval holds its score; the best head is head 1 (1.0 on
    every row), whose rows all score 1, so its interval is the single point 1."""
    probe = PrevTokenProbe(1, 2, replicates=200)
    feed(probe, _hand())
    overall = probe.compute(RunInfo("hand", ["hand"], 1, 2, 2, {}, {}, {})).overall
    assert np.all(overall.ci_low <= overall.scores + 1e-12) and np.all(overall.scores <= overall.ci_high + 1e-12)
    assert (overall.best.layer, overall.best.head) == (0, 1) and overall.best.score == 1.0
    assert overall.ci_low[0, 0] < 2.95 / 6 < overall.ci_high[0, 0]  # head 0: the two sequences' means differ


def test_copying_score_of_hand_built_circuits():
    """W_E = W_U = I (V = D = 2), W_V = I: the circuit is W_O. Head 0 copies (W_O = I: eigenvalues 1, 1 → 1), head 1
    inverts (−I → −1), head 2 half and half (diag(1, −1): (1 − 1) / 2 → 0), head 3 rotates by 90° (eigenvalues ±i:
    real sum 0 → 0)."""
    output = torch.stack([torch.eye(2), -torch.eye(2), torch.diag(torch.tensor([1.0, -1.0])),
                          torch.tensor([[0.0, -1.0], [1.0, 0.0]])])  # [H,D,d]
    family = Family("hand", ("hand",), causal=True, blocks=lambda base: [],
                    ov=lambda module, heads, kv: (torch.eye(2).expand(4, 2, 2), output))
    scores = copying_scores(family, [object()], torch.eye(2), torch.eye(2), 4, 4)
    assert scores.shape == (1, 4) and torch.allclose(scores[0], torch.tensor([1.0, -1.0, 0.0, 0.0]).double(),
                                                      atol=1e-12)


def test_folding_a_norm_scales_the_columns_and_centres_the_rows_of_a_layer_norm():
    """weights [[1, 2], [3, 4]] read a norm with scale (2, −1): the columns scaled, [[2, −2], [6, −4]]; a LayerNorm
    also subtracts its input's mean, so each row less its mean (0 and 1): [[2, −2], [5, −5]]."""
    weights, scale = torch.tensor([[1.0, 2.0], [3.0, 4.0]]), torch.tensor([2.0, -1.0])
    assert torch.equal(fold_norms(weights, scale, torch.tensor(False)), torch.tensor([[2.0, -2.0], [6.0, -4.0]]))
    assert torch.equal(fold_norms(weights, scale, torch.tensor(True)), torch.tensor([[2.0, -2.0], [5.0, -5.0]]))
    rms, layer = torch.nn.Module(), torch.nn.LayerNorm(2)
    rms.weight = torch.nn.Parameter(scale)
    parts = norm_parts([rms, layer, torch.nn.LayerNorm(2, elementwise_affine=False)], 2)
    assert torch.equal(parts[0], torch.tensor([[2.0, -1.0], [1.0, 1.0], [1.0, 1.0]]).double())
    assert parts[1].tolist() == [False, True, True]


def test_copying_score_with_the_norms_folded_in():
    """W_E = W_U = W_V = W_O = I (V = D = d = 2): every head copies (1) with the norms left out. Folded in, an RMS
    input norm of scale (2, −1) and a final one of scale (1, 3) make the circuit diag(1·2, 3·(−1)) = diag(2, −3):
    (2 − 3) / (2 + 3) = −0.2."""
    rms_in, rms_final = torch.nn.Module(), torch.nn.Module()
    rms_in.weight, rms_final.weight = torch.nn.Parameter(torch.tensor([2.0, -1.0])), torch.nn.Parameter(
        torch.tensor([1.0, 3.0]))
    family = Family("hand", ("hand",), causal=True, blocks=lambda base: [],
                    ov=lambda module, heads, kv: (torch.eye(2)[None], torch.eye(2)[None]))
    left_out = copying_scores(family, [object()], torch.eye(2), torch.eye(2), 1, 1)
    folded = copying_scores(family, [object()], torch.eye(2), torch.eye(2), 1, 1, norms=([rms_in], rms_final))
    assert torch.allclose(left_out, torch.ones(1, 1).double(), atol=1e-12)
    assert torch.allclose(folded, torch.full((1, 1), -0.2).double(), atol=1e-12)


def test_the_copying_options_are_recorded_and_move_the_trained_model_s_scores(tmp_path):
    """The trained GPT-2 (tests/data/induction-gpt2): with its special token (<|endoftext|>, id 0) in the vocabulary
    layer 0's head 0 moves from 0.325 to 0.414; the JSON records both options, the defaults too."""
    from probes.cli import main
    from probes.results import load_result

    corpus = tmp_path / "seqs.ids"
    corpus.write_text("5 9 17 33 5 9 17 33\n", encoding="utf-8")
    copying = {}
    for vocab in ("no-special", "all"):
        out = tmp_path / vocab
        flags = [] if vocab == "no-special" else ["--copying-vocab", "all"]
        assert main(["run", "induction", "--model", str(TRAINED), "--corpus", str(corpus), *flags, "--replicates",
                     "0", "--no-plots", "--out", str(out), "--quiet"]) == 0
        result = load_result(out / "induction.json")
        assert result.options["copying_vocab"] == vocab and result.options["copying_norms"] == "ignore"
        copying[vocab] = result.labels["copying"].scores
    assert round(float(copying["no-special"][0, 0]), 3) == 0.325 and round(float(copying["all"][0, 0]), 3) == 0.414


def test_repeated_random_tokens_leave_out_special_tokens(tmp_path):
    from causal_models import tokenizer

    tok = tokenizer(bos=True)
    seqs = repeated_random_tokens(tok, 50, 20, seed=3)
    assert seqs.shape == (50, 40) and (seqs[:, :20] == seqs[:, 20:]).all()
    assert seqs.min() >= 2 and seqs.max() <= 63  # <|endoftext|> (0) and <s> (1) are special
    assert (repeated_random_tokens(tok, 50, 20, seed=3) == seqs).all()
    assert not (repeated_random_tokens(tok, 50, 20, seed=4) == seqs).all()


@pytest.mark.parametrize("family", list(CONFIGS))
def test_detectors_end_to_end_on_each_family(family, tmp_path):
    folder = make_checkpoint(family, tmp_path / family)
    results = detect(DETECTORS, str(folder), count=6, length=10, sequence_seed=5, replicates=20, batch_size=4)
    assert set(results) == set(DETECTORS)
    induction = results["induction"]
    assert induction.info.settings["sequences"] == {"kind": "random tokens repeated", "count": 6, "length": 10,
                                                    "seed": 5}
    # every token of the second copy is a row (its first occurrence m is followed by m + 1, earlier than m + 10);
    # a token drawn twice within the first copy adds rows there
    assert induction.overall.count >= 6 * 10
    copying = induction.labels["copying"].scores
    assert copying.shape == (2, 4) and np.all(np.abs(copying) <= 1)
    bos = family in ("llama", "mistral")
    assert (results["sink"].labels["start"].count > 0) == bos
    assert results["prev_token"].overall.count == 6 * (20 + bos - 1)


BUNDLED = ["dep", "pos", "trees", "mass", "entropy", "positional", "rare", "patterns", "head_distance", "word_order",
           "prev_token", "duplicate_token", "induction", "sink"]


@pytest.mark.filterwarnings("ignore::probes.encoding.UnknownTokensWarning")  # the word-level test vocabularies
@pytest.mark.parametrize("family", list(CONFIGS))
def test_every_probe_of_the_bundled_sample_runs_on_each_family(family, tmp_path):
    """The probes that read the bundled EWT sample, on 6 of its sentences (Qwen2's byte-level BPE reads the words;
    the word-level test vocabularies read them as unknown tokens): every one gives scores for every head."""
    import probes

    folder = make_checkpoint(family, tmp_path / family)
    results = probes.run(BUNDLED, str(folder), limit=6, fit_on="same", replicates=10, progress=False)
    assert set(results) == set(BUNDLED)
    for name, result in results.items():
        assert result.overall.scores.shape == (2, 4), name
        assert result.info.sentences > 0, name
    for name in ["trees", "mass", "entropy", "positional", "rare", "patterns", "head_distance", "word_order"]:
        assert results[name].extra["causal_constraint"]["note"].startswith("decoder-only model"), name
    assert np.nanmax(results["mass"].labels["next"].scores) == 0  # 0 by construction, as the note says
    assert np.nanmin(results["mass"].labels["prev"].scores) >= 0
    stated = results["dep"].extra["causal_constraint"]["overall"]  # no head above what its direction can reach
    assert results["dep"].overall.extra["dep_to_head"].max() <= stated["head_precedes_share"] + 1e-6
    assert results["dep"].overall.extra["head_to_dep"].max() <= 1 - stated["head_precedes_share"] + 1e-6


CORPUS_PROBES = ("srl", "ner", "con", "seg", "frames", "coref")


@pytest.mark.parametrize("family", list(CONFIGS))
def test_the_probes_of_the_other_corpora_run_on_each_family(family, tmp_path, shared_corpora):
    """srl, ner, con, seg, frames and coref on excerpts of their corpora (tests/probe_corpora.py: UP, UNER, CRAFT,
    GSDSimp raw text, FrameNet, LitBank in windows of 1,024 subwords), through a byte-level tokenizer (every word of
    several subwords; <s> first for Llama and Mistral): every one gives scores for every head and states what a
    causal model rules out, and no head scores a direction above the share of instances that direction can
    reach (a word's row has no weight after it, so its argmax never lies there; the shares are rounded to 6 places)."""
    import probes
    from probe_corpora import probe_run_arguments

    folder = make_checkpoint(family, tmp_path / family, byte_level=True, positions=1024)
    encoder = probes.load_encoder(str(folder))
    results = {}
    for name in CORPUS_PROBES:
        arguments = probe_run_arguments(name, tmp_path, lambda: shared_corpora)
        arguments.update(limit=4 if arguments.get("limit") else None, **({"window": 1024, "stride": 512}
                                                                         if name == "coref" else {}))
        results[name] = probes.run([name], encoder=encoder, replicates=10, progress=False, **arguments)[name]
    for name, result in results.items():
        assert result.overall.scores.shape == (2, 4) and result.info.sentences > 0, name
        assert result.overall.count > 0 and np.isfinite(result.overall.scores).all(), name
        assert result.extra["causal_constraint"]["note"].startswith("decoder-only model"), name
    srl = results["srl"].extra["causal_constraint"]
    for role, stated in [("overall", srl["overall"]), *srl["labels"].items()]:
        entry = results["srl"].overall if role == "overall" else results["srl"].labels[role]
        assert entry.extra["pred_to_arg"].max() <= stated["argument_before_predicate_share"] + 1e-6, role
        assert entry.extra["arg_to_pred"].max() <= stated["argument_after_predicate_share"] + 1e-6, role
        assert stated["argument_before_predicate_share"] + stated["argument_after_predicate_share"] >= 1, role
    frames = results["frames"]
    stated = frames.extra["causal_constraint"]["overall"]
    assert frames.overall.extra["accuracy_target_to_fe"].max() <= stated["fe_before_target_share"] + 1e-6
    assert frames.overall.extra["accuracy_fe_to_target"].max() <= stated["target_before_fe_share"] + 1e-6
    coref = results["coref"]
    assert coref.overall.scores.max() <= coref.extra["causal_constraint"]["overall"]["antecedent_before_share"] + 1e-6
    seg = results["seg"]  # every unit predicted a word end by every head: each head scores the all_ends baseline
    assert np.allclose(seg.overall.scores, seg.baselines["all_ends"]["word_f1"])


def test_earlier_occurrences_from_a_sort_equal_their_definition():
    """token_pairs finds every (b, i, j), j < i both real with the same id, without a [B,T,T] comparison: on random
    ids over small vocabularies (many repeats), right-padded, the very triples of the comparison, in its order."""
    from probes.builtin.causal.token_pairs import earlier_occurrences

    generator = torch.Generator().manual_seed(0)
    for _ in range(100):
        b, t, vocabulary = (int(torch.randint(1, n, (1,), generator=generator)) for n in (4, 30, 8))
        ids = torch.randint(0, vocabulary, (b, t), generator=generator)
        real = torch.arange(t)[None] < torch.randint(1, t + 1, (b, 1), generator=generator)  # [B,T]
        positions = torch.arange(t)
        defined = (ids[:, :, None] == ids[:, None, :]) & (positions[None, :] < positions[:, None]) \
            & real[:, :, None] & real[:, None, :]  # [B,T,T]
        found = earlier_occurrences(ids, real)
        assert all(torch.equal(a, e) for a, e in zip(found, defined.nonzero(as_tuple=True), strict=True))
