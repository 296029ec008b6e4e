"""The family table: one entry per model family saying where probes finds what it reads in that family's
modules (README, "Adding a model family"). Capture (probes.model), the norm-based weights (probes.norms), head
masking and the shared prefix of ablation (probes.ablation) read a model through its family's entry.

A model's family is the entry whose ``model_types`` holds its config's ``model_type``. A model of no family
in the table runs in all-maps mode (capture "outputs": the model returns its L maps, held at once) with a
one-line warning; what needs the table (norm-based weights, head ablation) is refused naming the entry
missing. Entries come from ``FAMILIES`` (a ``probes.registries.Registry``): the built-ins below, a
``--code`` file or module calling ``register_family``, and the entry-point group ``probes.families``.
"""
from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from typing import Callable

from probes.errors import InputError
from probes.registries import Registry

BLOCK = r"^(.*?\.\d+)\."  # a layer's transformer block: its attention module's path up to the first number


@dataclass(frozen=True)
class Family:
    """One family's entry in the table.

    name: the family's name; model_types: the ``config.model_type`` values it covers.
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
    probabilities: for a family whose attention module returns no probabilities (decoders under a fused
    kernel): ``probabilities(module, args, kwargs, output) -> [B,H,T,T]`` computed from the layer's own
    queries and keys in the module's forward hook; None: they are the module's second output.
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
    probabilities: Callable | None = None

    def block_path(self, attention_path: str) -> str | None:
        """The path of the transformer block holding the attention module at `attention_path`, or None."""
        found = re.match(self.block, attention_path)
        return found.group(1) if found else None


BUILTIN_FAMILIES = {f.name: f for f in (
    Family("bert", ("bert",)),
    Family("roberta", ("roberta", "xlm-roberta", "camembert", "xlm-roberta-xl", "data2vec-text"),
           offset_positions=True),
    Family("longformer", ("longformer",), offset_positions=True),
    Family("electra", ("electra",)),
    Family("deberta-v2", ("deberta-v2",), asks_for_attention=True, values=("value_proj",)),
    Family("deberta", ("deberta",), asks_for_attention=True, values=(), fused_values=("in_proj", "v_bias")),
)}


def _a_family(name: str, obj: object, value: str) -> Family:
    if not isinstance(obj, Family):
        raise InputError(f"model family {name!r}: {value} is not a probes.families.Family")
    return obj


FAMILIES: Registry[Family] = Registry("model family", "probes.families", BUILTIN_FAMILIES, check=_a_family)


def register_family(family: Family) -> Family:
    """Add `family` to the table (a later entry of the same name replaces it)."""
    return FAMILIES.add(family.name, family)


def family_of(model_type: str) -> Family | None:
    """The family covering ``config.model_type`` `model_type`, or None."""
    return next((f for f in FAMILIES.load_all().values() if model_type in f.model_types), None)


def model_family(model) -> Family | None:
    """The family of a loaded model (its ``config.model_type``), or None."""
    return family_of(getattr(getattr(model, "config", None), "model_type", ""))


def warn_unknown(model_type: str, name: str) -> None:
    """The one-line warning for a model of no family: it runs in all-maps mode."""
    warnings.warn(f"model {name!r}: model type {model_type!r} is in no family of the table (probes.families); its "
                  "maps are read in all-maps mode (all layers held at once), and norm-based weights and head ablation "
                  "are unavailable until a family entry says where its modules are", UnknownFamilyWarning, stacklevel=3)


class UnknownFamilyWarning(UserWarning):
    """A model whose type no family of the table covers (see ``warn_unknown``)."""
