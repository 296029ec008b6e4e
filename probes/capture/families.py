"""The family table: one entry per model family saying where probes finds what it reads in that family's
modules, and what its tokenizer needs (docs/writing-a-probe.md, "A model family"). Loading (probes.capture.model), capture, the
norm-based weights (probes.capture.norms), head masking and the shared prefix of ablation (probes.tools.ablation) and the OV
circuits of decoders (probes.capture.causal_families) read a model through its family's entry.

A model's family is the entry whose ``model_types`` holds its config's ``model_type``. Encoder entries (BERT,
RoBERTa, ELECTRA, DeBERTa v1/v2, ...) name the modules a forward hook reads the maps from; decoder-only entries
(``causal``: GPT-2, GPT-NeoX, Llama, Qwen2, Mistral) the per-layer attention modules whose queries and keys the
capture computes the maps from (probes.capture.sdpa_qk), their sliding window and their OV weights.

A model of no family in the table runs in all-maps mode (capture "outputs": the model returns its L maps, held
at once) with a one-line warning, its tokenizer given a prefix space where its pre-tokenizer is byte-level; a
decoder of no family is refused (its causal maps are not read without an entry); what needs the table
(norm-based weights, head ablation) is refused naming the entry missing. Entries come from ``FAMILIES`` (a
``probes.base.registries.Registry``): the built-ins below, a ``--code`` file or module calling ``register_family``,
and the entry-point group ``probes.capture.families``.

Decoder shapes: H query heads, K key/value heads (H = K·g, grouped-query attention; K = H without it), d head
size, D model width. Every built-in decoder family calls transformers' attention function
(``ALL_ATTENTION_FUNCTIONS``) with the layer's queries [B,H,T,d] and keys [B,K,T,d] after its own position
encoding (rotary for GPT-NeoX, Llama, Qwen2, Mistral, applied to the first ``rotary_pct`` of each head's
dimensions for GPT-NeoX; learned absolute positions added to the input for GPT-2), which is what a decoder
entry must be able to say of its family. Their windows: Mistral config.sliding_window on every layer; Qwen2
the module's own (only the layers that config.layer_types marks "sliding_attention", with use_sliding_window);
GPT-2, GPT-NeoX, Llama none. Start tokens are the tokenizer's own (Llama's and Mistral's add <s>; Qwen2's,
GPT-2's and GPT-NeoX's nothing): the encoding (probes.encoding.subwords) makes one, where there is one, word column 0.
"""
from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from probes.base.errors import InputError
from probes.base.registries import Registry

if TYPE_CHECKING:
    import torch

BLOCK = r"^(.*?\.\d+)\."  # a layer's transformer block: its attention module's path up to the first number
PAD_WITH_END = ("eos_token", "unk_token")  # a decoder's tokenizer without a padding token pads with these, in order

# (W_V [H,d,D], W_O [H,D,d]) of one attention module, given H and K
OVWeights = Callable[["torch.nn.Module", int, int], "tuple[torch.Tensor, torch.Tensor]"]
# base model → (the L norms the attention modules' inputs go through, layers 0..L-1; the final norm before W_U)
NormModules = Callable[["torch.nn.Module"], "tuple[list[torch.nn.Module], torch.nn.Module]"]


def no_window(attention: torch.nn.Module, config) -> None:
    """A decoder layer without a sliding window: causal only."""
    return None


def module_window(attention: torch.nn.Module, config) -> int | None:
    """The attention module's own ``sliding_window`` (Qwen2: set on the sliding layers only, else None)."""
    return attention.sliding_window


def config_window(attention: torch.nn.Module, config) -> int | None:
    """``config.sliding_window`` on every layer (Mistral), None where the config has none."""
    return getattr(config, "sliding_window", None)


def layers_self_attn(base: torch.nn.Module) -> list[torch.nn.Module]:
    """``base.layers[i].self_attn``: the attention modules of Llama, Qwen2, Mistral (and most later decoders)."""
    return [layer.self_attn for layer in base.layers]


def separate_ov(attention: torch.nn.Module, heads: int, kv_heads: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Llama, Qwen2, Mistral: v_proj [K·d, D], o_proj [D, H·d]; value head h // g for query head h."""
    width = attention.o_proj.weight.shape[0]
    value = attention.v_proj.weight.view(kv_heads, -1, width).repeat_interleave(heads // kv_heads, 0)  # [H,d,D]
    output = attention.o_proj.weight.view(width, heads, -1).transpose(0, 1)  # [H,D,d]
    return value, output


def layers_input_norms(base: torch.nn.Module) -> tuple[list[torch.nn.Module], torch.nn.Module]:
    """``base.layers[i].input_layernorm`` and ``base.norm``: Llama's, Qwen2's, Mistral's RMS norms."""
    return [layer.input_layernorm for layer in base.layers], base.norm


def _gpt2_blocks(base: torch.nn.Module) -> list[torch.nn.Module]:
    return [block.attn for block in base.h]


def _gpt2_norms(base: torch.nn.Module) -> tuple[list[torch.nn.Module], torch.nn.Module]:
    return [block.ln_1 for block in base.h], base.ln_f


def _gpt2_ov(attention: torch.nn.Module, heads: int, kv_heads: int) -> tuple[torch.Tensor, torch.Tensor]:
    """GPT-2's Conv1D weights act as x @ W: c_attn [D, 3D] (q, k, v side by side), c_proj [H·d, D]."""
    width = attention.c_attn.weight.shape[0]
    value = attention.c_attn.weight[:, 2 * width:].reshape(width, heads, -1).permute(1, 2, 0)  # [H,d,D]
    output = attention.c_proj.weight.reshape(heads, -1, width).transpose(1, 2)  # [H,D,d]
    return value, output


def _neox_blocks(base: torch.nn.Module) -> list[torch.nn.Module]:
    return [layer.attention for layer in base.layers]


def _neox_norms(base: torch.nn.Module) -> tuple[list[torch.nn.Module], torch.nn.Module]:
    return [layer.input_layernorm for layer in base.layers], base.final_layer_norm


def _neox_ov(attention: torch.nn.Module, heads: int, kv_heads: int) -> tuple[torch.Tensor, torch.Tensor]:
    """GPT-NeoX's fused query_key_value [3D, D] has its outputs grouped per head: [H, (q, k, v), d]."""
    weight = attention.query_key_value.weight  # [3D, D]
    value = weight.view(heads, 3, -1, weight.shape[1])[:, 2]  # [H,d,D]
    output = attention.dense.weight.view(weight.shape[1], heads, -1).transpose(0, 1)  # [H,D,d]
    return value, output


@dataclass(frozen=True)
class Family:
    """One family's entry in the table.

    name: the family's name; model_types: the ``config.model_type`` values it covers.

    Encoders (``causal`` False; the decoder fields below are unused):
    attention: the end of the class name of the per-layer self-attention module, whose forward returns
    (per-head context [B,T,H·d] before the output projection, probabilities [B,H,T,T], ...); the model's own
    ``_can_record_outputs["attentions"]`` class where transformers declares one.
    asks_for_attention: the module returns its probabilities only when its own ``output_attentions`` argument
    is true (DeBERTa): a forward pre-hook sets it for that module alone.
    values: the attribute of the attention module holding the value projection (H·d outputs), tried in order;
    fused_values: (projection, bias) where the values come from a fused per-head [q | k | v] projection with a
    separate value bias (DeBERTa v1). output: the attention output projection W_O, as a path from the
    attention module's parent.
    block: a regular expression whose first group cuts a layer's transformer block out of its attention
    module's path (the ablation's shared prefix starts there).
    offset_positions: position ids start after the padding index (pad_token_id + 1 + i): the length limit is
    that many positions shorter.

    Decoder-only models (``causal`` True): loaded with their language-model head and SDPA attention; the
    attention modules must call transformers' ``ALL_ATTENTION_FUNCTIONS`` with their queries [B,H,T,d] and keys
    [B,K,T,d] after their position encoding (the capture computes the maps there, probes.capture.sdpa_qk).
    blocks: base model → its L per-layer attention modules, layers 0..L-1 in order (required).
    window: (attention module, config) → the layer's sliding window (a query i sees keys j with i - j <
    window), or None: causal only.
    ov: (attention module, H, K) → the layer's value and output weights per query head, W_V [H,d,D] and W_O
    [H,D,d] (grouped-query families: the K value heads repeated g times, as repeat_kv does), read by the OV
    copying score (probes.capture.causal_families); None: the family's copying score is refused.
    norms: base model → (the L norms each attention module's input goes through, the final norm before the
    unembedding), whose scales (``weight``; and the mean subtracted, for a torch.nn.LayerNorm) the copying score
    folds into W_V and W_U with ``--copying-norms fold``; None: that option is refused for the family.

    Tokenizer quirks:
    prefix_space: the tokenizer is byte-level BPE, whose words (handed over pre-split) must each get a leading
    space as in running text: it is loaded with ``add_prefix_space=True``. None: read from the tokenizer (its
    pre-tokenizer is ByteLevel), for families whose model types use several kinds (Llama 2's SentencePiece,
    Llama 3's byte-level BPE) and for a model of no family.
    pad_with: a tokenizer without a padding token pads with the first of these special tokens it has
    (decoders: end of sequence, else unknown; padding is masked out); () : it must have one.
    """

    name: str
    model_types: tuple[str, ...]
    attention: str = "SelfAttention"
    asks_for_attention: bool = False
    values: tuple[str, ...] = ("value",)
    fused_values: tuple[str, str] | None = None
    output: str = "output.dense"
    block: str = BLOCK
    offset_positions: bool = False
    causal: bool = False
    blocks: Callable[[torch.nn.Module], list[torch.nn.Module]] | None = None
    window: Callable[[torch.nn.Module, object], int | None] = no_window
    ov: OVWeights | None = None
    norms: NormModules | None = None
    prefix_space: bool | None = None
    pad_with: tuple[str, ...] = ()

    def block_path(self, attention_path: str) -> str | None:
        """The path of the transformer block holding the attention module at `attention_path`, or None."""
        found = re.match(self.block, attention_path)
        return found.group(1) if found else None


def _decoder(name: str, blocks: Callable, ov: OVWeights, norms: NormModules, *, window: Callable = no_window,
             prefix_space: bool | None = None) -> Family:
    return Family(name, (name,), causal=True, blocks=blocks, window=window, ov=ov, norms=norms,
                  prefix_space=prefix_space, pad_with=PAD_WITH_END)


BUILTIN_FAMILIES = {f.name: f for f in (
    Family("bert", ("bert",), prefix_space=False),
    Family("roberta", ("roberta", "data2vec-text"), offset_positions=True, prefix_space=True),
    Family("xlm-roberta", ("xlm-roberta", "camembert", "xlm-roberta-xl"), offset_positions=True,
           prefix_space=False),  # SentencePiece
    Family("longformer", ("longformer",), offset_positions=True, prefix_space=True),
    Family("electra", ("electra",), prefix_space=False),
    Family("deberta-v2", ("deberta-v2",), asks_for_attention=True, values=("value_proj",), prefix_space=False),
    Family("deberta", ("deberta",), asks_for_attention=True, values=(), fused_values=("in_proj", "v_bias"),
           prefix_space=True),
    _decoder("gpt2", _gpt2_blocks, _gpt2_ov, _gpt2_norms, prefix_space=True),
    _decoder("gpt_neox", _neox_blocks, _neox_ov, _neox_norms, prefix_space=True),
    # Llama 2: SentencePiece, Llama 3: byte-level BPE
    _decoder("llama", layers_self_attn, separate_ov, layers_input_norms),
    _decoder("qwen2", layers_self_attn, separate_ov, layers_input_norms, window=module_window, prefix_space=True),
    # SentencePiece, later Tekken BPE
    _decoder("mistral", layers_self_attn, separate_ov, layers_input_norms, window=config_window),
)}


def _a_family(name: str, obj: object, value: str) -> Family:
    if not isinstance(obj, Family):
        raise InputError(f"model family {name!r}: {value} is not a probes.capture.families.Family")
    return checked(obj)


def checked(family: Family) -> Family:
    """`family`, or InputError where its entry cannot be read: a decoder-only entry without ``blocks``."""
    if family.causal and family.blocks is None:
        raise InputError(f"model family {family.name!r}: a decoder-only entry (causal) must say where its attention "
                         "modules are (blocks: base model → the L per-layer attention modules)")
    return family


FAMILIES: Registry[Family] = Registry("model family", "probes.capture.families", BUILTIN_FAMILIES, check=_a_family)


def register_family(family: Family) -> Family:
    """Add `family` to the table (a later entry of the same name replaces it); InputError for an entry that
    cannot be read (``checked``)."""
    return FAMILIES.add(family.name, checked(family))


def family_of(model_type: str) -> Family | None:
    """The family covering ``config.model_type`` `model_type`, or None."""
    return next((f for f in FAMILIES.load_all().values() if model_type in f.model_types), None)


def model_family(model) -> Family | None:
    """The family of a loaded model (its ``config.model_type``), or None."""
    return family_of(getattr(getattr(model, "config", None), "model_type", ""))


def decoder_families() -> list[str]:
    """The names of the decoder-only families in the table (for messages)."""
    return [name for name, f in FAMILIES.load_all().items() if f.causal]


def warn_unknown(model_type: str, name: str) -> None:
    """The one-line warning for a model of no family: it runs in all-maps mode."""
    warnings.warn(f"model {name!r}: model type {model_type!r} is in no family of the table (probes.capture.families); its "
                  "maps are read in all-maps mode (all layers held at once), and norm-based weights and head ablation "
                  "are unavailable until a family entry says where its modules are", UnknownFamilyWarning, stacklevel=3)


class UnknownFamilyWarning(UserWarning):
    """A model whose type no family of the table covers (see ``warn_unknown``)."""
