"""What a checkpoint folder must hold, checked before transformers reads it, and its weights fingerprint.

A local checkpoint is a folder with config.json, weights (``*.safetensors``, else ``*.bin``) and the
tokenizer's files, or one GGUF file (probes.base.gguf_file), which holds all three. Missing tokenizer files matter most: transformers then builds a 5-token vocabulary
and every word becomes [UNK], so a folder without them is refused rather than scored. Weights files
are checked for truncation and corruption from their headers (safetensors) or zip directory (PyTorch),
without reading the tensors. Every problem is an InputError naming the folder or file.
"""
from __future__ import annotations

import hashlib
import json
import re
import zipfile
from pathlib import Path

from probes.base.errors import InputError
from probes.base.gguf_file import is_gguf

_HUB_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
_NOT_WEIGHTS = {"training_args.bin"}  # written beside the weights by transformers' Trainer


def resolve_source(name: str) -> str:
    """The checkpoint folder (checked: a folder with config.json and weights), GGUF file or hub name to load."""
    path = Path(name).expanduser()
    if path.exists():
        if is_gguf(path):
            return str(path)
        if not path.is_dir():
            raise InputError("model path is a file and not a GGUF file; expected a checkpoint directory (config.json, "
                             "weights, tokenizer) or a GGUF file", path)
        try:
            empty = not any(path.iterdir())
        except OSError as e:
            raise InputError(f"cannot read the checkpoint folder: {e.strerror or e}", path) from None
        if empty:
            raise InputError("empty folder; expected a checkpoint (config.json, weights, tokenizer files)", path)
        if not (path / "config.json").exists():
            raise InputError("not a checkpoint directory (no config.json)", path)
        if not weight_files(path):
            raise InputError("checkpoint has no weights file (*.safetensors or *.bin)", path)
        return str(path)
    if name.startswith((".", "/", "~")) or not _HUB_NAME.match(name):
        raise InputError("model path does not exist", name)
    return name  # a hub name; from_pretrained reports if it cannot be reached


def weight_files(folder: Path) -> list[Path]:
    """The files transformers reads a folder's weights from: its ``*.safetensors`` if it has any, else
    its ``*.bin`` (not Trainer's training_args.bin), in name order (shards in shard order)."""
    safetensors = sorted(folder.glob("*.safetensors"))
    return safetensors or sorted(p for p in folder.glob("*.bin") if p.name not in _NOT_WEIGHTS)


def check_weight_files(folder: Path) -> None:
    """InputError naming the first weights file that is truncated or not a weights file at all."""
    for path in weight_files(folder):
        problem = _safetensors_problem(path) if path.suffix == ".safetensors" else _torch_file_problem(path)
        if problem:
            raise InputError(f"weights file is unreadable: {problem}", path)


def _safetensors_problem(path: Path) -> str | None:
    """Layout: an 8-byte little-endian header length N, N bytes of JSON giving each tensor's byte range
    (data_offsets), then the tensor data, which must end exactly at the end of the file."""
    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(8)
        n = int.from_bytes(head, "little") if len(head) == 8 else -1
        if n < 0 or 8 + n > size:
            return f"truncated or corrupt: {size:,} bytes, too short for the header it announces"
        try:
            header = json.loads(f.read(n))
            end = max((e["data_offsets"][1] for k, e in header.items() if k != "__metadata__"), default=0)
        except (ValueError, TypeError, KeyError, IndexError, AttributeError):
            return "corrupt: its header is not a safetensors header (valid JSON with data_offsets)"
    if 8 + n + end != size:
        kind = "truncated" if 8 + n + end > size else "corrupt"
        return f"{kind}: its header describes {8 + n + end:,} bytes, the file has {size:,}"
    return None


def _torch_file_problem(path: Path) -> str | None:
    """torch.save writes a zip archive (its directory sits at the end, so truncation removes it);
    files from torch < 1.6 are a bare pickle, which cannot be checked without loading it."""
    with path.open("rb") as f:
        start = f.read(2)
    if zipfile.is_zipfile(path):
        try:
            with zipfile.ZipFile(path) as z:
                z.infolist()
        except (zipfile.BadZipFile, OSError) as e:
            return f"corrupt zip archive ({e})"
        return None
    if start == b"PK":
        return "truncated or corrupt: a zip archive without its directory"
    if start[:1] == b"\x80":  # pickle protocol marker: a legacy torch.save file
        return None
    return "not a PyTorch weights file (neither a zip archive nor a pickle)"


def check_tokenizer_files(folder: Path, tokenizer) -> None:
    """InputError when `folder` lacks the files `tokenizer`'s class builds its vocabulary from:
    tokenizer.json, or the class's own vocabulary files (vocab.txt; vocab.json + merges.txt; spm.model...)."""
    if (folder / "tokenizer.json").exists():
        return
    own = [f for key, f in type(tokenizer).vocab_files_names.items() if key != "tokenizer_file"]
    missing = [f for f in own if not (folder / f).exists()]
    if missing or not own:
        alternative = f" (or {' + '.join(own)})" if own else ""
        raise InputError(f"checkpoint has no tokenizer files: tokenizer.json{alternative} missing; without them "
                         "every word would become the unknown token. Copy them from the model it was trained from",
                         folder)


VOCABULARY_FILES = ("tokenizer.json", "vocab.json", "vocab.txt", "merges.txt", "spm.model", "sentencepiece.bpe.model",
                    "tokenizer.model")  # the files tokenizers build their vocabularies from
_REFILL = "copy the tokenizer files from the model it was trained from"


def tokenizer_files(folder: Path, tokenizer) -> list[str]:
    """The files of `folder` that `tokenizer`'s class builds its vocabulary from: tokenizer.json where there is one,
    else the class's own vocabulary files that are there."""
    if (folder / "tokenizer.json").exists():
        return ["tokenizer.json"]
    return [f for key, f in type(tokenizer).vocab_files_names.items() if key != "tokenizer_file" and (folder / f).exists()]


def check_vocabulary(tokenizer, files: list[str], where) -> None:
    """InputError (at `where`, naming the tokenizer's `files`) when the tokenizer's own vocabulary, its added special
    tokens aside, is empty (an empty vocab.json or vocab.txt: no word would have a subword), or when a WordPiece
    vocabulary lacks the unknown token that it gives every word it cannot split."""
    backend = tokenizer.backend_tokenizer
    vocabulary = backend.get_vocab(with_added_tokens=False)
    if not vocabulary:
        raise InputError(f"{_named(files)}: the vocabulary is empty (only special tokens); {_REFILL}", where)
    unknown = getattr(backend.model, "unk_token", None)
    if type(backend.model).__name__ == "WordPiece" and unknown not in vocabulary:
        raise InputError(f"{_named(files)}: the vocabulary lacks its unknown token {unknown}; {_REFILL}", where)


def unreadable_tokenizer(folder: Path, problem: str) -> InputError:
    """The error for a folder whose tokenizer the tokenizers library could not build (its `problem`): an empty
    vocabulary file (vocab.json of ``{}``, a vocab.txt of no token) named as such, else the files and the problem."""
    files = [f for f in VOCABULARY_FILES if (folder / f).exists()]
    empty = [f for f in files if _empty_vocabulary(folder / f)]
    if empty:
        return InputError(f"{_named(empty)}: the vocabulary is empty; {_REFILL}", folder)
    return InputError(f"{_named(files)} cannot be read ({problem}); {_REFILL}", folder)


def _empty_vocabulary(path: Path) -> bool:
    text = path.read_text(encoding="utf-8", errors="replace").strip()
    if path.name == "vocab.json":
        return text in ("", "{}")
    return path.name == "vocab.txt" and not text


def _named(files: list[str]) -> str:
    if not files:
        return "the tokenizer"
    return f"tokenizer file{'s' if len(files) > 1 else ''} {', '.join(files)}"


_DIGESTS: dict[tuple, str] = {}  # (path, size, modification time) of each weights file -> their sha256


def weights_sha256(model: str) -> str:
    """sha256 of a checkpoint's weights: the bytes of its weight files (see weight_files) in name order.

    model: a checkpoint folder, a GGUF file (its bytes), or a hub name whose snapshot is in the local hub cache (the
    files of the snapshot its "main" revision points to). Reads every weights file once, and
    again in the same process only when a file's size or modification time has changed.
    """
    folder = Path(model).expanduser()
    if is_gguf(folder):
        files = [folder]
    else:
        if not folder.is_dir():
            folder = _cached_snapshot(model)
        files = weight_files(folder)
    if not files:
        raise InputError("checkpoint has no weights file (*.safetensors or *.bin)", folder)
    key = tuple((str(path.resolve()), path.stat().st_size, path.stat().st_mtime_ns) for path in files)
    if key not in _DIGESTS:  # the files read once a process while their sizes and times stay
        digest = hashlib.sha256()
        for path in files:
            with path.open("rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
        _DIGESTS[key] = digest.hexdigest()
    return _DIGESTS[key]


def _cached_snapshot(name: str) -> Path:
    from huggingface_hub import try_to_load_from_cache

    config = try_to_load_from_cache(name, "config.json")
    if not isinstance(config, str):
        raise InputError("model is neither a folder nor in the local hub cache", name)
    return Path(config).parent
