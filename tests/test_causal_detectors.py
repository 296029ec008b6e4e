"""The causal detectors on hand-built attention (every number worked out in the comments), their OV copying score on
hand-built weights, and the generated sequences end to end on tiny random models of each family."""
from __future__ import annotations

from pathlib import Path

import json

import numpy as np
import pytest
import torch
from helpers import attention, batch, feed, sentence

from causal_models import CONFIGS, make_checkpoint
from probes.builtin.causal.duplicate_token import DuplicateTokenProbe
from probes.builtin.causal.induction import InductionProbe
from probes.builtin.causal.prev_token import PrevTokenProbe
from probes.builtin.causal.sink import SinkProbe
from probes.tools.detect import DETECTORS, detect
from probes.capture.causal_families import copying_scores, fold_norms, norm_parts
from probes.encoding.sequences import repeated_random_tokens
from probes.encoding.subwords import UnknownTokensWarning
from probes.capture.families import Family
from probes.results.probe_result import RunInfo
from probes.capture.maps import LayerMaps

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


def test_a_batch_of_one_token_sequences_has_no_previous_token_and_adds_nothing():
    """Length-sorted batches of a real corpus can hold only one-token sequences ("***" in EWT dev through SmolLM2):
    T = 1, no row has a token before it; the batch adds 0 rows, then the hand batch its 6 as before."""
    probe = PrevTokenProbe(1, 2)
    feed(probe, batch([sentence(["7"]), sentence(["3"])], [[0], [0]], [[attention(1, {})] * 2] * 2,
                      input_ids=torch.tensor([[7], [3]])))
    feed(probe, _hand())
    overall = probe.compute(RunInfo("hand", ["hand"], 1, 2, 3, {}, {}, {})).overall
    assert overall.count == 6 and np.allclose(overall.scores[0], [2.95 / 6, 1.0])


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
    from probes.results.probe_result import load_result

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


@pytest.mark.filterwarnings("ignore::probes.encoding.subwords.UnknownTokensWarning")  # the word-level test vocabularies
@pytest.mark.parametrize("family", list(CONFIGS))
def test_every_probe_of_the_bundled_sample_runs_on_each_family(family, tmp_path):
    """The probes that read the bundled EWT sample, on 6 of its sentences (Qwen2's byte-level BPE reads the words;
    the word-level test vocabularies read them as unknown tokens, scored with allow_unknown): every one gives
    scores for every head."""
    import probes

    folder = make_checkpoint(family, tmp_path / family)
    results = probes.run(BUNDLED, str(folder), limit=6, fit_on="same", replicates=10, progress=False,
                         allow_unknown=True)
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


def test_a_corpus_the_model_cannot_read_is_refused_unless_allowed(tmp_path, capsys):
    """The EWT sample through a word-level vocabulary that lacks every word of it (t2..t63): refused on one line
    naming the share and the file, no scores (issue 42 item 6); with --allow-unknown scored, after the warning."""
    from probes.cli import main
    from probes.corpus import read_corpus
    from probes.base.defaults import bundled_corpus

    folder = make_checkpoint("gpt2", tmp_path / "gpt2")
    capsys.readouterr()  # transformers' "Writing model shards"
    argv = ["run", "induction", "--model", str(folder), "--limit", "6", "--replicates", "0", "--quiet"]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    words = sum(len(s.words) for s in read_corpus([bundled_corpus()]).sentences[:6])  # 104
    assert out == "" and err == (f"probes: error: {bundled_corpus()}: 100.0% of the words ({words} of {words}) "
                                 "tokenize only to the unknown token, e.g. From, the, AP: the model cannot read this "
                                 "corpus; give --allow-unknown (allow_unknown=True) to score it anyway\n")
    with pytest.warns(UnknownTokensWarning, match="the unknown token dominates this run"):
        assert main([*argv, "--allow-unknown"]) == 0
    assert "prefix_matching" in capsys.readouterr().out


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


def test_key_targets_are_every_row_of_each_key():
    """Sequence 0's key is position 0, sequence 1's position 1 (T = 3): every query row of each, keys in (b, j)
    order."""
    from probes.builtin.causal.token_pairs import key_targets

    b, i, j = key_targets(torch.tensor([[True, False, False], [False, True, False]]))
    assert b.tolist() == [0, 0, 0, 1, 1, 1] and i.tolist() == [0, 1, 2, 0, 1, 2] and j.tolist() == [0, 0, 0, 1, 1, 1]


def test_mass_on_key_targets_is_the_product_with_the_keys():
    """The attention on a sequence's keys, read at the targets alone: Σ_j A[b,h,i,j]·keys[b,j] of the whole map, on
    random keys of the hand-built batch (the detectors' maps, sink's targets come from this)."""
    from probes.builtin.causal.token_pairs import key_targets, mass_on

    hand = _hand()
    maps = LayerMaps(hand.batch, 0, hand.attentions[0])
    generator = torch.Generator().manual_seed(0)
    for _ in range(20):
        keys = torch.rand(hand.attentions[0].shape[0], hand.attentions[0].shape[-1], generator=generator) < 0.4
        dense = torch.einsum("bhij,bj->bhi", hand.attentions[0].float(), keys.float())
        torch.testing.assert_close(mass_on(maps, key_targets(keys)), dense, rtol=0, atol=1e-7)


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_sequences_written_by_the_command_score_as_the_default_ones(family, tmp_path, capsys):
    """`probes sequences --repeated` writes the detectors' default sequences (issue 42 item 9): the file holds the
    very ids ``detect`` draws, one sequence a line, and a run on it (read back as ids, not tokenised) gives
    ``detect``'s scores with the same seed (Llama's tokenizer adds <s> before each, as to detect's): the same with
    no per-sentence views, as detect keeps; within float32 rounding with the run's default views (whole maps)."""
    import probes
    from probes.cli import main

    folder = make_checkpoint(family, tmp_path / family)
    out = tmp_path / "repeated.ids"
    assert main(["sequences", "--repeated", "--count", "6", "--length", "10", "--seed", "5", "--model", str(folder),
                 "--out", str(out)]) == 0
    assert capsys.readouterr().out.endswith(f"wrote 6 sequences of 20 token ids (random tokens repeated, seed 5) to "
                                            f"{out}\n")
    encoder = probes.load_encoder(str(folder))
    lines = out.read_text().splitlines()
    assert lines[0] == f"# generated: 6 × random tokens (10) repeated, seed 5; token ids of {folder}"
    assert [[int(x) for x in line.split()] for line in lines[1:]] == \
        repeated_random_tokens(encoder.tokenizer, 6, 10, seed=5).tolist()
    written = probes.run(DETECTORS, encoder=encoder, corpus=out, replicates=20, batch_size=4, views=0, progress=False)
    viewed = probes.run(DETECTORS, encoder=encoder, corpus=out, replicates=20, batch_size=4, progress=False)
    default = detect(DETECTORS, encoder=encoder, count=6, length=10, sequence_seed=5, replicates=20, batch_size=4)
    for name in DETECTORS:
        assert written[name].labels.keys() == default[name].labels.keys(), name
        for label, cell in default[name].labels.items():
            assert written[name].labels[label].count == cell.count, (name, label)
            np.testing.assert_array_equal(written[name].labels[label].scores, cell.scores, err_msg=f"{name} {label}")
            np.testing.assert_allclose(viewed[name].labels[label].scores, cell.scores, atol=1e-6, rtol=0)
    assert written["prev_token"].overall.count == 6 * (20 + (family == "llama") - 1)


def test_the_sequences_file_must_be_a_ids_file(tmp_path, capsys):
    from probes.cli import main

    assert main(["sequences", "--repeated", "--out", str(tmp_path / "repeated.txt")]) == 2
    assert capsys.readouterr().err == (f"probes: error: {tmp_path / 'repeated.txt'}: the sequences file's name must end "
                                       "in .ids (a run reads a .ids file as token ids; any other name would be read as "
                                       "text and tokenised again)\n")


def test_the_causal_constraint_is_printed_under_the_table():
    """A hand-made dep result of a decoder: under its table, the note and, per shown label and overall, the share of
    arcs whose head precedes and the best offset baseline k < 0 (either direction), as its JSON states them."""
    from probes.results.probe_result import LabelScores, ProbeResult
    from probes.tools.show import format_causal, format_result

    stated = {"note": "decoder-only model: a note", "overall": {
        "head_precedes_share": 0.4, "causal_offset_baseline": {"either": 0.35, "dep_to_head": 0.1, "head_to_dep": 0.3}},
        "labels": {"nsubj": {"head_precedes_share": 0.088235, "causal_offset_baseline": {"either": 0.382353}},
                   "det": {"head_precedes_share": 0.0, "causal_offset_baseline": {"either": 0.5}},
                   "iobj": {"head_precedes_share": None, "causal_offset_baseline": {"either": 0.0}}}}
    grid = np.array([[0.25, 0.5], [0.75, 0.125]])
    labels = {"nsubj": LabelScores(34, grid), "det": LabelScores(44, grid), "iobj": LabelScores(2, grid)}
    result = ProbeResult("dep", RunInfo("m", ["c.conllu"], 2, 2, 10, {}, {"min_count": 20}, {}), {}, labels,
                         LabelScores(80, grid), extra={"causal_constraint": stated})
    assert format_causal(result).splitlines() == [
        "decoder-only model: a note (causal_constraint)",
        "per label: the share of instances a direction can reach; causal baseline: the best baseline a causal model "
        "can follow (offsets before the word, either direction)",
        "label           head precedes share  causal baseline",
        "----------------------------------------------------",
        "det                           0.000            0.500",
        "nsubj                         0.088            0.382",
        "overall                       0.400            0.350"]
    assert "\niobj                              -            0.000\n" in format_causal(result, all_labels=True)
    assert format_result(result, sentences=0).endswith(format_causal(result))
    del result.extra["causal_constraint"]
    assert format_causal(result) == ""


@pytest.mark.filterwarnings("ignore::probes.encoding.subwords.UnknownWordsWarning")
def test_dep_on_a_decoder_prints_what_it_cannot_reach(tmp_path, capsys):
    """`probes run dep` on a decoder prints the causal_constraint figures under the table (issue 42 item 9), and
    `probes show` of its results file the same lines, every number the JSON's."""
    from probes.cli import main

    folder = make_checkpoint("gpt2", tmp_path / "gpt2", byte_level=True)
    capsys.readouterr()  # transformers' "Writing model shards"
    argv = ["run", "dep", "--model", str(folder), "--limit", "12", "--replicates", "0", "--min-count", "1", "--quiet"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert main([*argv, "--out", str(tmp_path / "out"), "--no-plots"]) == 0
    capsys.readouterr()
    assert main(["show", str(tmp_path / "out" / "dep.json"), "--sentences", "0"]) == 0
    shown = capsys.readouterr().out
    stated = json.loads((tmp_path / "out" / "dep.json").read_text())["causal_constraint"]
    for text in (printed, shown):
        lines = text.splitlines()
        start = lines.index(f"{stated['note']} (causal_constraint)")
        end = next(i for i in range(start, len(lines)) if lines[i].startswith("overall "))
        rows = {line.split()[0]: line.split()[1:] for line in lines[start + 4:end + 1]}
        assert len(rows) > 3
        assert rows["overall"] == [f"{stated['overall']['head_precedes_share']:.3f}",
                                   f"{stated['overall']['causal_offset_baseline']['either']:.3f}"]
        for label, (share, baseline) in rows.items():
            reading = stated["overall"] if label == "overall" else stated["labels"][label]
            assert [share, baseline] == [f"{reading['head_precedes_share']:.3f}",
                                         f"{reading['causal_offset_baseline']['either']:.3f}"], label
