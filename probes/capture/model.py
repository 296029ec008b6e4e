"""Loading an encoder (or a decoder-only model), and reading its per-layer attention and context vectors.

Shapes: B batch, T subword positions, L layers, H heads, d head size (hidden / H).

The maps are read by a capture backend (probes.capture, ``Encoder.capture``): "hooks" (the default for encoders:
forward hooks on the eager self-attention modules, one layer held at a time), "outputs" (transformers' own
output_attentions, every layer at once: the reference, and the fallback for a model of no family) or "sdpa-qk" (the
model runs SDPA and the maps are computed from its queries and keys: the default for decoders). The model is loaded
with the attention implementation its backend needs. transformers 5.x returns no attentions under SDPA (silently),
so the eager backends load eager attention. Every forward pass checks that each layer's attention was captured
exactly once.

Decoder-only models of the decoder families of the table (``Family.causal``: GPT-2, GPT-NeoX, Llama, Qwen2, Mistral)
load with their language-model head; for a callback that reads entries only (``layerwise(full=False)``) capture
"sdpa-qk" hands on AttentionEntries from SDPA's logsumexp instead of maps.

Half precision (``load_encoder(dtype="bfloat16")`` or "float16"): the model's weights and pass run in that dtype,
and every map, context vector and entry is handed on in float32. Capture "sdpa-qk" (the default in half precision)
computes the maps in float32 from the half-precision queries and keys; a model that cannot run SDPA (DeBERTa's own
attention) is read with "hooks", its half-precision maps and context upcast to float32. An eager capture asked for a
model that can run SDPA is refused in half precision (its maps would be the model's half-precision softmax).

``layerwise`` and ``forward`` take ``weights``: "attention" (the probabilities) or "norm", the norm-based
map of Kobayashi et al. 2020 (probes.capture.norms: forward hooks on the value projections read each layer's values
as it runs; the map handed on in place of the probabilities is α_ij‖f_h(x_j)‖, rows renormalised to sum to 1).

A model that cannot be right is refused (InputError) before anything is scored: what a checkpoint
folder must hold is checked first (probes.base.checkpoint), what was loaded after (weights that fit the
config, tokenizer ids that fit the embedding table, attention that is finite and looks both ways).
"""
from __future__ import annotations

import pickle
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterator

import torch
from safetensors import SafetensorError
from tokenizers.pre_tokenizers import ByteLevel

from probes.capture import backend_named
from probes.capture.backend import CaptureBackend, LayerCallback
from probes.capture.norms import FactorCache, NormWeights, factor_cache
from probes.capture.causal_families import copying_scores, kv_heads
from probes.base.checkpoint import (check_tokenizer_files, check_vocabulary, check_weight_files, resolve_source,
                               tokenizer_files, unreadable_tokenizer)
from probes.base.choices import COPYING_NORMS, COPYING_VOCABULARIES, check_dtype, check_weights
from probes.base.defaults import default_model
from probes.base.errors import InputError
from probes.capture.families import Family, decoder_families, family_of, model_family, warn_unknown
from probes.base.gguf_file import GgufFile, is_gguf, read_gguf

# What reading a bad checkpoint raises inside transformers, torch.load and safetensors.
_LOAD_ERRORS = (OSError, ValueError, KeyError, ImportError, RuntimeError, EOFError, pickle.UnpicklingError,
                SafetensorError)


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
    capture: str = "hooks"  # the backend that reads the maps (probes.capture.CAPTURES); load_encoder checks it
    attention_modules: list[torch.nn.Module] = field(default_factory=list, repr=False)  # per layer, in order
    family: Family | None = None  # its entry in the family table (probes.capture.families); None: all-maps mode only
    windows: list[int | None] = field(default_factory=list, repr=False)  # a causal model's sliding window per layer
    gguf: GgufFile | None = None  # the GGUF file it was loaded from (its header's quantisation), else None
    dtype: str = "float32"  # the weights' and the pass's dtype (probes.base.choices.DTYPES); the maps are float32
    # copying_scores(vocabulary, norms) -> [L,H], each computed once
    _copying: dict[tuple[str, str], torch.Tensor] = field(default_factory=dict, init=False, repr=False)
    _factors: FactorCache = field(default_factory=factor_cache, init=False, repr=False)  # norm weights' (probes.capture.norms)

    @torch.inference_mode()
    def layerwise(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, on_layer: LayerCallback, *,
                  vectors: bool = False, token_type_ids: torch.Tensor | None = None,
                  weights: str = "attention", full: bool = True, capture: str | None = None) -> None:
        """Run the model once, calling ``on_layer(layer, attention, context)`` for layers 0..L-1 in order with
        that layer's [B,H,T,T] probabilities and [B,H,T,d] per-head context (None unless `vectors`), read by the
        encoder's capture backend (probes.capture; `capture` names another of the same attention implementation).
        With "hooks" and "sdpa-qk" each call happens while the model runs, the layer's maps dropped after it, and
        the pass stops once the last layer's are handed on (nothing after it feeds a map).
        token_type_ids: the segment ids of sentence pairs (None: the model's default, all zero).
        weights: "attention", or "norm" to hand on the norm-based map instead (probes.capture.norms; rows sum to 1).
        full=False (the callback reads entries only, probes.capture.maps.LayerMaps.entries): a causal model's layer where
        SDPA runs its CPU flash kernel is handed on as AttentionEntries, not as its map (capture "sdpa-qk").
        Maps and context are handed on in float32 whatever the model's dtype (a half-precision model's eager ones
        upcast)."""
        norms = self._norm_weights(weights)
        inputs = {"input_ids": input_ids.to(self.device), "attention_mask": attention_mask.to(self.device)}
        if token_type_ids is not None:
            inputs["token_type_ids"] = token_type_ids.to(self.device)
        weighed = on_layer if norms is None else lambda layer, a, c: on_layer(layer, norms.weigh(layer, a), c)

        def hand_on(layer: int, attention, context: torch.Tensor | None) -> None:  # float32 from here on
            weighed(layer, attention.float() if isinstance(attention, torch.Tensor) else attention,
                    None if context is None else context.float())
        with norms or nullcontext():
            self._backend(capture).run(self, inputs, hand_on, vectors=vectors, full=full)

    @torch.inference_mode()
    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *, vectors: bool = False,
                token_type_ids: torch.Tensor | None = None, weights: str = "attention",
                capture: str | None = None) -> Capture:
        """Run the model once and return every layer's maps (and per-head context tensors if asked) at once, read
        with capture "outputs" (transformers' own output_attentions) where the model runs eager attention, else with
        its own backend; `capture` names another. Memory grows with L: prefer ``layerwise``.
        token_type_ids: the segment ids of sentence pairs (None: the model's default, all zero).
        weights: "attention", or "norm" for the L norm-based maps instead (probes.capture.norms; rows sum to 1)."""
        kept: list[tuple[torch.Tensor, torch.Tensor | None]] = []
        own = "outputs" if self._backend(None).implementation == "eager" else self.capture
        self.layerwise(input_ids, attention_mask, lambda _, a, c: kept.append((a, c)), vectors=vectors,
                       token_type_ids=token_type_ids, weights=weights, capture=capture or own)
        return Capture(attentions=tuple(a for a, _ in kept), context=tuple(c for _, c in kept) if vectors else None)

    @property
    def backend(self) -> CaptureBackend:
        """The capture backend that reads this encoder's maps (probes.capture)."""
        return backend_named(self.capture)

    def with_capture(self, capture: str | None) -> "Encoder":
        """This encoder (the same model) read with capture `capture` (None: as it is); InputError where the model's
        attention implementation does not allow it (sdpa-qk needs a model loaded for it, hooks and outputs one loaded
        with eager attention)."""
        if capture is None or capture == self.capture:
            return self
        self._backend(capture)
        return replace(self, capture=capture)

    def in_dtype(self, dtype: str | None) -> "Encoder":
        """This encoder, refused (InputError) where `dtype` (None: any) is not the dtype it was loaded in: a loaded
        model's dtype is not changed in place (``load_encoder(dtype=...)`` loads it in another)."""
        if dtype is not None and dtype != self.dtype:
            raise InputError(f"model {self.name!r} was loaded in {self.dtype}, and dtype {dtype!r} was asked for; load "
                             f"it with dtype={dtype!r}")
        return self

    @property
    def asks_for_attention(self) -> bool:
        """Whether its attention modules return their maps only when asked (the family's entry: DeBERTa)."""
        return self.family is not None and self.family.asks_for_attention

    def _backend(self, capture: str | None) -> CaptureBackend:
        """The backend named `capture` (None: the encoder's own), refused (InputError) where this model's attention
        implementation does not fit it."""
        backend = backend_named(capture or self.capture)
        implementation = self.model.config._attn_implementation
        refusal = backend.refusal(self.model) if backend.implementation == implementation else (
            f"capture {backend.name!r} reads a model loaded with {backend.implementation} attention, and this one runs "
            f"{implementation}; load it with capture={backend.name!r}")
        if refusal is not None:
            raise InputError(f"model {self.name!r}: {refusal}")
        return backend

    @torch.inference_mode()
    def copying_scores(self, vocabulary: str = "no-special", norms: str = "ignore") -> torch.Tensor | None:
        """[L,H] the OV circuit's copying score of every head of a causal model (probes.capture.causal_families.
        copying_scores); None for an encoder. vocabulary (COPYING_VOCABULARIES): "no-special", the special tokens
        left out, or "all"; norms (COPYING_NORMS): "ignore", the layer norms left out, or "fold", each layer's input
        norm and the final norm folded into W_V and W_U as TransformerLens' fold_ln does (the family's ``norms``).
        Computed once per loaded model and choice, and kept: the weights it reads do not change."""
        if vocabulary not in COPYING_VOCABULARIES or norms not in COPYING_NORMS:
            raise InputError(f"the copying score's vocabulary is one of {', '.join(COPYING_VOCABULARIES)} and its "
                             f"norms one of {', '.join(COPYING_NORMS)}, not {vocabulary!r} and {norms!r}")
        if not self.causal:
            return None
        if (vocabulary, norms) not in self._copying:  # [L,H] on the host, where the probes' results are made
            self._copying[vocabulary, norms] = self._copying_scores(vocabulary, norms).cpu()
        return self._copying[vocabulary, norms].clone()

    def _copying_scores(self, vocabulary: str, norms: str) -> torch.Tensor:
        embedding = self.model.get_input_embeddings().weight  # [V,D]
        unembedding = self.model.get_output_embeddings().weight  # [V,D]
        size = min(len(embedding), len(unembedding))
        special = torch.tensor(sorted(set(self.tokenizer.all_special_ids)), dtype=torch.long)
        excluded = special[special < size] if vocabulary == "no-special" else None
        if norms == "fold" and self.family.norms is None:
            raise InputError(f"--copying-norms fold folds each layer's norms into the weights, which a decoder "
                             f"family's entry says where to find (norms), and the {self.family.name} family's entry "
                             "gives none")
        folded = self.family.norms(self.model.base_model) if norms == "fold" else None
        return copying_scores(self.family, self.attention_modules, embedding[:size], unembedding[:size], self.heads,
                              kv_heads(self.model.config), excluded=excluded, norms=folded)

    @property
    def causal(self) -> bool:
        """Whether the model is decoder-only (its family's entry says so; probes.capture.families.Family.causal)."""
        return self.family is not None and self.family.causal

    def _norm_weights(self, weights: str) -> NormWeights | None:
        """The value-norm capture for weights "norm" (refused where the family's layout is unknown), else None."""
        check_weights(weights)
        if weights != "norm":
            return None
        if self.causal:
            raise InputError(f"model {self.name!r} is a decoder-only model: weights {weights!r} is read from encoders "
                             "only; use weights \"attention\"")
        return NormWeights(self.model, self.attention_modules, self.heads, self.head_dim, self.name, self._factors)

    @torch.inference_mode()
    def bare_forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The plain forward pass (eager for an encoder, SDPA for a causal model's body), no capture: the benchmarks'
        reference."""
        return self.model.base_model(input_ids=input_ids.to(self.device), attention_mask=attention_mask.to(self.device)).last_hidden_state


def load_encoder(name: str | None = None, *, device: str = "cpu", max_length: int | None = None,
                 capture: str | None = None, gguf_file: str | None = None, dtype: str = "float32") -> Encoder:
    """Load a local checkpoint directory, a GGUF file or a hub name as an encoder whose maps capture backend
    `capture` reads (probes.capture: "hooks", "outputs" or "sdpa-qk"; None: ``default_capture``), with the attention
    implementation that backend needs (eager, or SDPA for sdpa-qk); without a name, the packaged MiniLM
    (probes.base.defaults.default_model(), as ``run()`` uses).

    dtype (probes.base.choices.DTYPES): the weights' and the forward pass's, "float32", "bfloat16" or "float16"
    (from_pretrained's ``dtype``; a GGUF file's weights dequantised to it). The maps the probes read are float32
    whatever it is (see the module docstring, Half precision); in half precision an eager capture ("hooks",
    "outputs") is refused for a model that can run SDPA.

    A GGUF file (`name` the file, or `name` its folder and `gguf_file` its name in it; probes.base.gguf_file) is loaded
    by transformers (``from_pretrained(folder, gguf_file=name)``: config, tokenizer and weights from the one file,
    dequantised to `dtype`), for any architecture transformers reads GGUF files of; its header's quantisation type
    is kept (``Encoder.gguf``) for the results' provenance. Without the ``gguf`` or ``accelerate`` package:
    InputError naming the extra attention-probes[gguf].

    Task checkpoints (``...ForSequenceClassification`` etc.) give their encoder. Raises InputError,
    naming the folder or file, for a model that cannot be right: a path that does not exist, an empty
    folder, a folder without config.json, weights or tokenizer files (probes.base.checkpoint), a truncated
    or corrupt weights file, weights that do not fit config.json, a tokenizer that is not a fast one
    (word alignment needs ``word_ids``) or whose ids do not fit the embedding table, and a model that
    is not a model whose attention can be read (no attention layers, an encoder-decoder, causal
    attention of a family that is not a decoder family of the table, attention that is not finite).

    The model's family (probes.capture.families) is found once, from its config's model_type. A decoder-only family's
    model (``Family.causal``: GPT-2, GPT-NeoX, Llama, Qwen2, Mistral) is loaded with its language-model head (the
    causal detectors read its unembedding). With capture "hooks" (the default for encoders in float32), an encoder of
    no family or one whose hooks do not give exactly the maps of "outputs" is read with "outputs". The tokenizer gets
    its family's quirks (``_fit_tokenizer``).
    """
    import transformers

    check_dtype(dtype)
    name = default_model() if name is None else name
    if gguf_file is not None:
        name = str(Path(name) / gguf_file)
    source, folder, gguf = _source(transformers, name)
    where = folder or (gguf.path if gguf is not None else name)
    with _load_errors(name, where):
        tokenizer, family = _tokenizer_and_family(transformers, source, folder, gguf)
        if folder is not None:
            check_weight_files(folder)
        causal = family is not None and family.causal
        auto = transformers.AutoModelForCausalLM if causal else transformers.AutoModel
        capture = capture or default_capture(family, dtype)
        path, files = pretrained_files(source, gguf)
        try:
            model, loading = auto.from_pretrained(path, attn_implementation=backend_named(capture).implementation,
                                                  dtype=getattr(torch, dtype), output_loading_info=True,
                                                  ignore_mismatched_sizes=True, **files)
        except _LOAD_ERRORS as e:
            if capture == "sdpa-qk" and "scaled_dot_product_attention" in str(e):
                raise InputError(f"model {name!r}: its attention does not run through SDPA, whose queries and keys "
                                 "capture \"sdpa-qk\" reads; use capture \"hooks\" or \"outputs\"") from None
            raise
    tied = bool(getattr(model.config, "tie_word_embeddings", False))
    if tied:
        tie_output_embedding(model)
    check_weights_fit(loading, where, tied=tied, empty=[n for n, t in model.state_dict().items() if t.is_meta])
    _check_half_capture(model, name, capture, dtype)
    dev = to_device(model, device)
    config = model.config
    if getattr(config, "is_encoder_decoder", False):
        raise InputError(f"model {name!r} ({type(model).__name__}, family {config.model_type}) is an encoder-decoder; "
                         "the probes read an encoder's self-attention (BERT, RoBERTa, ELECTRA, DeBERTa, ...) or a "
                         f"decoder-only model's ({', '.join(decoder_families())})")
    layers = getattr(config, "num_hidden_layers", None)
    heads = getattr(config, "num_attention_heads", None)
    if not layers or not heads:
        raise InputError(f"model {name!r} ({type(model).__name__}) has no attention layers; its attention cannot be captured")
    _check_vocabulary(tokenizer, model, where)
    _fit_token_types(tokenizer, config)
    head_dim = getattr(config, "attention_head_size", None) or (causal and getattr(config, "head_dim", None)) \
        or config.hidden_size // heads
    attention = family.blocks(model.base_model) if causal else self_attention_modules(model)
    encoder = Encoder(name=name, model=model, tokenizer=tokenizer, layers=layers, heads=heads, head_dim=head_dim,
                      max_length=length_limit(config, tokenizer, max_length), device=dev, capture=capture,
                      attention_modules=attention, family=family,
                      windows=[family.window(m, config) for m in attention] if causal else [], gguf=gguf,
                      dtype=dtype)
    if family is None:
        warn_unknown(config.model_type, name)
    _check_capture(encoder)
    return encoder


def default_capture(family: Family | None, dtype: str) -> str:
    """The capture backend a model of `family` is read with when none is named: "sdpa-qk" for a decoder, and in half
    precision for an encoder whose attention runs through SDPA (the maps computed in float32 from its queries and
    keys), else "hooks" (float32, or a family whose attention modules are its own: DeBERTa)."""
    if family is not None and family.causal:
        return "sdpa-qk"
    if dtype != "float32" and not (family is not None and family.asks_for_attention):
        return "sdpa-qk"
    return "hooks"


def _check_half_capture(model: torch.nn.Module, name: str, capture: str, dtype: str) -> None:
    """Refuse (InputError) an eager capture in half precision for a model that can run SDPA: its maps would be the
    model's own half-precision softmax, where "sdpa-qk" computes them in float32 from the queries and keys."""
    if dtype != "float32" and backend_named(capture).implementation == "eager" and getattr(model, "_supports_sdpa",
                                                                                            False):
        raise InputError(f"model {name!r}: capture {capture!r} in {dtype} would hand on the model's own {dtype} "
                         "maps; in half precision they are computed in float32 from the queries and keys: use capture "
                         "\"sdpa-qk\" (the default in half precision), or dtype \"float32\"")


def to_device(model: torch.nn.Module, device: str) -> torch.device:
    """Move a model to `device` in eval mode; an unavailable device is a bad argument (InputError)."""
    try:
        dev = torch.device(device)
        model.to(dev)
    except (RuntimeError, AssertionError) as e:
        raise InputError(f"device {device!r} is not available: {first_line(e)}") from None
    model.eval()
    return dev


def model_tokenizer(name: str | None = None):
    """The tokenizer of model `name` (default: the packaged MiniLM) as ``load_encoder`` gives it, its family's
    quirks applied, without reading the weights (e.g. to draw the detectors' sequences from its vocabulary)."""
    import transformers

    name = default_model() if name is None else name
    source, folder, gguf = _source(transformers, name)
    with _load_errors(name, folder or (gguf.path if gguf is not None else name)):
        return _tokenizer_and_family(transformers, source, folder, gguf)[0]


def _source(transformers, name: str) -> tuple[str, Path | None, GgufFile | None]:
    """What transformers loads `name` from (probes.base.checkpoint.resolve_source), its folder (None: a hub name or a
    file) and its GGUF file (None: not one); transformers' and the hub's logging quietened."""
    transformers.utils.logging.set_verbosity_error()
    import huggingface_hub

    huggingface_hub.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    source = resolve_source(name)
    return source, Path(source) if Path(source).is_dir() else None, read_gguf(source) if is_gguf(source) else None


def pretrained_files(source: str, gguf: GgufFile | None) -> tuple[str, dict[str, str]]:
    """from_pretrained's arguments for `source`: a GGUF file is named in its folder (``gguf_file=``)."""
    return (str(gguf.path.parent), {"gguf_file": gguf.path.name}) if gguf is not None else (source, {})


@contextmanager
def _load_errors(name: str, where: Path | str) -> Iterator[None]:
    """What reading a bad checkpoint raises inside transformers, torch.load and safetensors, as an InputError naming
    the folder or file (`where` a Path), or the hub name."""
    try:
        yield
    except InputError:
        raise
    except _LOAD_ERRORS as e:
        if isinstance(where, Path):
            raise InputError(f"cannot load the checkpoint ({type(e).__name__}: {first_line(e)})", where) from None
        raise InputError(f"cannot load model {name!r} (not a local directory, so it was looked up as a hub name): "
                         f"{first_line(e)}") from None


def _tokenizer_and_family(transformers, source: str, folder: Path | None,
                          gguf: GgufFile | None) -> tuple[object, Family | None]:
    """The model's tokenizer, checked (``load_tokenizer``) and fitted to its family (``_fit_tokenizer``), and the
    family (probes.capture.families), from its config's model_type."""
    path, files = pretrained_files(source, gguf)
    tokenizer = load_tokenizer(path, folder, **files)
    family = family_of(transformers.AutoConfig.from_pretrained(path, **files).model_type)
    # a GGUF file's tokenizer takes the file's own add_prefix_space, whatever it is given: no reload
    return _fit_tokenizer(tokenizer, family, (lambda: tokenizer) if gguf is not None else (
        lambda: transformers.AutoTokenizer.from_pretrained(source, add_prefix_space=True))), family


def load_tokenizer(source: str, folder: Path | None, **files: str):
    """The fast tokenizer of `source` (a hub name, or the checkpoint `folder`; `files`: from_pretrained's
    ``gguf_file``), checked: its files are there (probes.base.checkpoint) and its vocabulary is not empty. The tokenizers library's own errors (a plain Exception: an
    empty vocab.json with its merges.txt, ...) are an InputError naming the folder's tokenizer files."""
    import transformers

    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(source, **files)
    except Exception as e:
        if type(e) is not Exception:  # transformers' and Python's own errors: the caller's _LOAD_ERRORS
            raise
        if folder is None:
            raise InputError(f"model {source!r}: its tokenizer cannot be read ({first_line(e)})") from None
        raise unreadable_tokenizer(folder, first_line(e)) from None
    if not getattr(tokenizer, "is_fast", False):
        raise InputError(f"model {source!r}: its tokenizer is not a fast tokenizer; word alignment needs word_ids()")
    if folder is not None:
        check_tokenizer_files(folder, tokenizer)
    check_vocabulary(tokenizer, tokenizer_files(folder, tokenizer) if folder else [], folder or source)
    return tokenizer


def _fit_tokenizer(tokenizer, family: Family | None, with_prefix_space: Callable[[], object]):
    """The tokenizer as the probes use it, given its family's tokenizer quirks (probes.capture.families.Family):
    byte-level BPE must see pre-split words with a leading space (``prefix_space``; where the entry leaves it
    open, or for a model of no family, when its pre-tokenizer is ByteLevel): `with_prefix_space()` loads it again
    so, and where its byte-level pre-tokenizer still adds no space (a tokenizer read from a GGUF file ignores the
    argument) it is set on that pre-tokenizer; a tokenizer without a padding token pads with the family's
    ``pad_with`` (decoders: end of sequence, else unknown). Padding goes on the right."""
    prefix_space = family.prefix_space if family is not None else None
    if prefix_space is None:
        pre = getattr(tokenizer.backend_tokenizer, "pre_tokenizer", None)
        prefix_space = pre is not None and "ByteLevel" in repr(pre)
    if prefix_space:
        tokenizer = with_prefix_space()
        pre = tokenizer.backend_tokenizer.pre_tokenizer
        if isinstance(pre, ByteLevel) and not pre.add_prefix_space:
            pre.add_prefix_space = True
    pad = next(filter(None, (getattr(tokenizer, n, None) for n in family.pad_with)), None) if family else None
    if tokenizer.pad_token is None and pad is not None:
        tokenizer.pad_token = pad
    tokenizer.padding_side = "right"
    return tokenizer


def tie_output_embedding(model: torch.nn.Module) -> None:
    """The output embedding of a model whose config ties it to the input one (tie_word_embeddings) made that one
    where loading left it empty (on "meta"): transformers lists it as missing and, in some runs of a process, leaves
    it so (tests/test_token_ids.py's GPT-2 met it in full test runs, never alone)."""
    output, embedding = model.get_output_embeddings(), model.get_input_embeddings()
    if output is not None and embedding is not None and output.weight.is_meta \
            and output.weight.shape == embedding.weight.shape:
        output.weight = embedding.weight


def check_weights_fit(loading: dict, where, tied: bool = False, empty: list[str] | None = None) -> None:
    """Weights that lack some of the model's tensors (or have them in other shapes) leave those randomly
    initialised, or empty (`empty`: the tensors left on the "meta" device): refused. A missing pooler is fine (MLM
    checkpoints have none; the probes never use it)."""
    # tied: the output embedding is the input one (tie_word_embeddings), which some transformers versions list as
    # missing though it is filled by the tie
    missing = sorted(k for k in loading.get("missing_keys", ()) if "pooler" not in k.split(".")
                     and not (tied and k.split(".")[0] == "lm_head"))
    missing += sorted(set(empty or ()) - set(missing))
    mismatched = sorted(str(k[0] if isinstance(k, tuple) else k) for k in loading.get("mismatched_keys", ()))
    if missing or mismatched:
        wrong = [f"{len(missing)} of the model's tensors are missing"] if missing else []
        wrong += [f"{len(mismatched)} have another shape"] if mismatched else []
        raise InputError(f"the weights do not fit config.json: {' and '.join(wrong)} (e.g. {[*missing, *mismatched][0]}); "
                         "they would be random", where)


def _check_vocabulary(tokenizer, model: torch.nn.Module, where) -> None:
    """Every id the tokenizer can produce must index a row of the model's embedding table."""
    rows = getattr(model.get_input_embeddings(), "num_embeddings", None)
    top = max(tokenizer.get_vocab().values())
    if rows is not None and top >= rows:
        raise InputError(f"the tokenizer's ids reach {top} but the model's embedding table has {rows} rows; "
                         "the tokenizer does not belong to this model", where)


def _fit_token_types(tokenizer, config) -> None:
    """A model with fewer than two token-type rows (RoBERTa: one) takes no segment ids: sentence pairs are
    then encoded without them, as such a model's own tokenizer does (a type id of 1 would not fit)."""
    if getattr(config, "type_vocab_size", 2) < 2 and "token_type_ids" in tokenizer.model_input_names:
        tokenizer.model_input_names = [n for n in tokenizer.model_input_names if n != "token_type_ids"]


def length_limit(config, tokenizer, requested: int | None) -> int:
    """Most subword positions (special tokens included) the model and tokenizer accept, at most `requested`."""
    limits = []
    positions = getattr(config, "max_position_embeddings", None)
    if positions and getattr(config, "position_embedding_type", "absolute") != "none":
        family = family_of(config.model_type)
        offset = (config.pad_token_id or 0) + 1 if family is not None and family.offset_positions else 0
        limits.append(positions - offset)
    if 0 < tokenizer.model_max_length < 1_000_000:
        limits.append(tokenizer.model_max_length)
    limit = min(limits) if limits else 512
    return limit if requested is None else min(limit, requested)


def self_attention_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The per-layer self-attention modules whose first output is the per-head context [B,T,H*d]: the class
    transformers records the attentions of, else those whose class name ends as the family's entry says
    (probes.capture.families.Family.attention; "SelfAttention" for a model of no family)."""
    target = (getattr(model, "_can_record_outputs", None) or {}).get("attentions")
    target = getattr(target, "target_class", target)
    if isinstance(target, type):
        return [m for m in model.modules() if isinstance(m, target)]
    family = model_family(model)
    suffix = family.attention if family is not None else Family.attention
    return [m for m in model.modules() if type(m).__name__.endswith(suffix) and "Cross" not in type(m).__name__]


def _check_capture(encoder: Encoder) -> None:
    """One forward pass on two words: every layer's attention comes back, finite, and looks both ways."""
    enc = encoder.tokenizer([["probe", "heads"]], is_split_into_words=True, return_tensors="pt")
    kind = f"model {encoder.name!r} ({type(encoder.model).__name__})"
    vectors = not encoder.causal or encoder.capture == "sdpa-qk"  # a decoder's only beside SDPA
    try:
        capture = encoder.forward(enc["input_ids"], enc["attention_mask"], vectors=vectors)
    except InputError:
        raise
    except Exception as e:  # an architecture that will not run here is a bad model argument
        raise InputError(f"{kind} cannot be run: {first_line(e)}") from None
    maps = torch.stack(capture.attentions)  # [L,1,H,T,T]
    if not torch.isfinite(maps).all():
        raise InputError(f"{kind} gives attention that is not finite (NaN or inf): its weights are corrupt")
    if encoder.causal:
        return  # causal by construction
    if not torch.triu(maps, diagonal=1).any():
        raise InputError(f"{kind} attends only to earlier tokens (a decoder's causal attention) and its family "
                         f"{encoder.model.config.model_type!r} is not one probes reads decoders of "
                         f"({', '.join(decoder_families())})")
    if encoder.capture == "hooks" and (encoder.family is None or not _hooks_match(encoder, enc, capture)):
        encoder.capture = "outputs"


def _hooks_match(encoder: Encoder, enc, reference: Capture) -> bool:
    """Whether capture "hooks" gives, layer by layer, exactly the maps and context of capture "outputs"."""
    hooked: list[tuple[torch.Tensor, torch.Tensor]] = []
    try:
        encoder.layerwise(enc["input_ids"], enc["attention_mask"], lambda _, a, c: hooked.append((a.clone(), c.clone())),
                          vectors=True, capture="hooks")
    except InputError:
        return False
    return all(torch.equal(a, ref_a) and torch.equal(c, ref_c)
               for (a, c), ref_a, ref_c in zip(hooked, reference.attentions, reference.context, strict=True))


def first_line(e: Exception) -> str:
    """The first line of an exception's message (its type name if it has none): for one-line errors."""
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__
