"""Loading an encoder with eager attention, and capturing per-layer attention and context vectors.

Shapes: B batch, T subword positions, L layers, H heads, d head size (hidden / H).

transformers 5.x returns no attentions under SDPA (silently), so every model is loaded with
``attn_implementation="eager"`` and each forward pass checks that one [B,H,T,T] tensor per layer
came back. Per-head context vectors (softmax(QKᵀ/√d)·V, before the output projection W_O) are
read with forward hooks on the self-attention modules: DeBERTa (v1 and v2) does not go through
``AttentionInterface``, hooks reach every family the same way.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import torch

from probes.errors import InputError

# Families whose position ids start after the padding index (positions = pad_token_id + 1 + i).
_OFFSET_POSITION_FAMILIES = {"roberta", "xlm-roberta", "camembert", "longformer", "xlm-roberta-xl", "data2vec-text"}
_HUB_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


@dataclass
class Capture:
    """What one forward pass yields for the probes."""

    attentions: tuple[torch.Tensor, ...]  # L × [B,H,T,T] attention probabilities
    context: tuple[torch.Tensor, ...] | None = None  # L × [B,H,T,d] per-head context vectors


@dataclass
class Encoder:
    """A loaded encoder with its fast tokenizer and the facts the probes need."""

    name: str
    model: torch.nn.Module
    tokenizer: object
    layers: int
    heads: int
    head_dim: int
    max_length: int  # most subword positions (special tokens included) the model accepts
    device: torch.device
    _self_attention: list[torch.nn.Module] = field(default_factory=list, repr=False)

    @torch.inference_mode()
    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *, vectors: bool = False,
                token_type_ids: torch.Tensor | None = None) -> Capture:
        """Run the model once; return L attention maps (and L per-head context tensors if asked).
        token_type_ids: the segment ids of sentence pairs (None: the model's default, all zero)."""
        stash: list[torch.Tensor] = []
        hooks = []
        if vectors:
            def keep(_module, _inputs, output):
                stash.append(output[0])  # [B,T,H*d], before the output projection
            hooks = [m.register_forward_hook(keep) for m in self._self_attention]
        try:
            types = {} if token_type_ids is None else {"token_type_ids": token_type_ids.to(self.device)}
            out = self.model(input_ids=input_ids.to(self.device), attention_mask=attention_mask.to(self.device),
                             output_attentions=True, **types)
        finally:
            for h in hooks:
                h.remove()
        attentions = tuple(out.attentions or ())
        if len(attentions) != self.layers or any(a is None or a.dim() != 4 for a in attentions):
            raise InputError(f"model {self.name!r} returned attention for {len(attentions)} of {self.layers} layers;"
                             " its attention cannot be captured")
        context = None
        if vectors:
            if len(stash) != self.layers:
                raise InputError(f"model {self.name!r}: captured context vectors for {len(stash)} of {self.layers} layers")
            b, t = input_ids.shape
            context = tuple(c.view(b, t, self.heads, self.head_dim).transpose(1, 2) for c in stash)
        return Capture(attentions=attentions, context=context)

    @torch.inference_mode()
    def bare_forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The plain eager forward pass, no capture: the benchmarks' reference."""
        return self.model(input_ids=input_ids.to(self.device), attention_mask=attention_mask.to(self.device)).last_hidden_state


def load_encoder(name: str, *, device: str = "cpu", max_length: int | None = None) -> Encoder:
    """Load a local checkpoint directory or a hub name as an encoder with eager attention.

    Task checkpoints (``...ForSequenceClassification`` etc.) give their encoder. Raises InputError
    for a path that does not exist, a checkpoint that cannot be loaded, a tokenizer that is not a
    fast one (word alignment needs ``word_ids``), or a model whose attention cannot be captured.
    """
    import transformers

    transformers.utils.logging.set_verbosity_error()
    import huggingface_hub

    huggingface_hub.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    source = _resolve_source(name)
    try:
        tokenizer = _load_tokenizer(transformers, source)
        model = transformers.AutoModel.from_pretrained(source, attn_implementation="eager")
    except InputError:
        raise
    except (OSError, ValueError, KeyError, ImportError) as e:
        hint = "" if Path(source).exists() else " (not a local directory, so it was looked up as a hub name)"
        raise InputError(f"cannot load model {name!r}{hint}: {_first_line(e)}") from None
    dev = to_device(model, device)
    config = model.config
    layers = getattr(config, "num_hidden_layers", None)
    heads = getattr(config, "num_attention_heads", None)
    if not layers or not heads:
        raise InputError(f"model {name!r} ({type(model).__name__}) has no attention layers; its attention cannot be captured")
    head_dim = getattr(config, "attention_head_size", None) or config.hidden_size // heads
    encoder = Encoder(name=name, model=model, tokenizer=tokenizer, layers=layers, heads=heads, head_dim=head_dim,
                      max_length=_max_length(config, tokenizer, max_length), device=dev,
                      _self_attention=_self_attention_modules(model))
    _check_capture(encoder)
    return encoder


def to_device(model: torch.nn.Module, device: str) -> torch.device:
    """Move a model to `device` in eval mode; an unavailable device is a bad argument (InputError)."""
    try:
        dev = torch.device(device)
        model.to(dev)
    except (RuntimeError, AssertionError) as e:
        raise InputError(f"device {device!r} is not available: {_first_line(e)}") from None
    model.eval()
    return dev


def _resolve_source(name: str) -> str:
    path = Path(name).expanduser()
    if path.exists():
        if not path.is_dir():
            raise InputError("model path is a file; expected a checkpoint directory (config.json, weights, tokenizer)", path)
        if not (path / "config.json").exists():
            raise InputError("not a checkpoint directory (no config.json)", path)
        return str(path)
    if name.startswith((".", "/", "~")) or not _HUB_NAME.match(name):
        raise InputError("model path does not exist", name)
    return name  # a hub name; from_pretrained reports if it cannot be reached


def _load_tokenizer(transformers, source: str):
    tokenizer = transformers.AutoTokenizer.from_pretrained(source)
    if not getattr(tokenizer, "is_fast", False):
        raise InputError(f"model {source!r}: its tokenizer is not a fast tokenizer; word alignment needs word_ids()")
    if _needs_prefix_space(tokenizer):
        # Byte-level BPE (RoBERTa, DeBERTa v1, ...) must see pre-split words with a leading space.
        tokenizer = transformers.AutoTokenizer.from_pretrained(source, add_prefix_space=True)
    tokenizer.padding_side = "right"
    return tokenizer


def _needs_prefix_space(tokenizer) -> bool:
    pre = getattr(tokenizer.backend_tokenizer, "pre_tokenizer", None)
    return pre is not None and "ByteLevel" in repr(pre)


def _max_length(config, tokenizer, requested: int | None) -> int:
    limits = []
    positions = getattr(config, "max_position_embeddings", None)
    if positions and getattr(config, "position_embedding_type", "absolute") != "none":
        offset = (config.pad_token_id or 0) + 1 if config.model_type in _OFFSET_POSITION_FAMILIES else 0
        limits.append(positions - offset)
    if 0 < tokenizer.model_max_length < 1_000_000:
        limits.append(tokenizer.model_max_length)
    limit = min(limits) if limits else 512
    return limit if requested is None else min(limit, requested)


def _self_attention_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The per-layer self-attention modules whose first output is the per-head context [B,T,H*d]."""
    target = (getattr(model, "_can_record_outputs", None) or {}).get("attentions")
    target = getattr(target, "target_class", target)
    if isinstance(target, type):
        found = [m for m in model.modules() if isinstance(m, target)]
    else:
        found = [m for m in model.modules() if type(m).__name__.endswith("SelfAttention") and "Cross" not in type(m).__name__]
    return found


def _check_capture(encoder: Encoder) -> None:
    enc = encoder.tokenizer([["probe"]], is_split_into_words=True, return_tensors="pt")
    try:
        encoder.forward(enc["input_ids"], enc["attention_mask"], vectors=True)
    except InputError:
        raise
    except Exception as e:  # an architecture that will not run here is a bad model argument
        raise InputError(f"model {encoder.name!r} ({type(encoder.model).__name__}) cannot be run: {_first_line(e)}") from None


def _first_line(e: Exception) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__
