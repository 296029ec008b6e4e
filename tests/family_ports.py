"""MiniLM's real weights in a RoBERTa and an ELECTRA checkpoint, for cross-family identity tests.

The packaged all-MiniLM-L6-v2 is a BERT (6 layers, 12 heads, hidden 384). `port(family, source, out)`
writes the same weights as a `RobertaModel` or an `ElectraModel` checkpoint with its own config.json
and the same BERT WordPiece tokenizer files, so the three checkpoints run the same computation through
three family code paths:

- RoBERTa numbers positions from padding_idx + 1 (padding_idx = pad_token_id = 0 here): its position
  table is BERT's shifted down by padding_idx + 1 rows (the rows before are zero and only ever used by
  padding), so max_position_embeddings = 512 + padding_idx + 1. It has one token-type row: BERT's row 0.
- ELECTRA has BERT's layout; embedding_size = hidden_size, so there is no embeddings_project. It has
  no pooler (BERT's is dropped; the probes never read it).

Any difference in the attention maps or the probes' scores between the three therefore comes from
family-specific handling (position ids, the start token, token types, the length limit).
"""
from __future__ import annotations

import shutil
from pathlib import Path

PORTED = ("roberta", "electra")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")
_SHARED = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
           "hidden_act", "layer_norm_eps", "pad_token_id", "initializer_range")


def port(family: str, source: Path, out: Path) -> Path:
    """Write BERT checkpoint `source`'s weights as a `family` ("roberta" or "electra") checkpoint into `out`."""
    import torch
    import transformers as tf

    tf.utils.logging.disable_progress_bar()
    bert = tf.BertModel.from_pretrained(str(source))
    shared = {k: getattr(bert.config, k) for k in _SHARED}
    state = bert.state_dict()
    positions = state["embeddings.position_embeddings.weight"]  # [P,hidden]
    if family == "roberta":
        offset = bert.config.pad_token_id + 1
        config = tf.RobertaConfig(**shared, type_vocab_size=1, max_position_embeddings=positions.shape[0] + offset)
        state["embeddings.position_embeddings.weight"] = torch.cat([positions.new_zeros(offset, positions.shape[1]),
                                                                    positions])
        state["embeddings.token_type_embeddings.weight"] = state["embeddings.token_type_embeddings.weight"][:1]
        model = tf.RobertaModel(config)
    elif family == "electra":
        config = tf.ElectraConfig(**shared, embedding_size=shared["hidden_size"],
                                  type_vocab_size=bert.config.type_vocab_size,
                                  max_position_embeddings=bert.config.max_position_embeddings)
        state = {k: v for k, v in state.items() if not k.startswith("pooler.")}
        model = tf.ElectraModel(config)
    else:
        raise ValueError(f"unknown family {family!r}; expected one of {PORTED}")
    model.load_state_dict(state, strict=True)  # every tensor of the family's model comes from BERT
    model.eval()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    for name in TOKENIZER_FILES:
        shutil.copy(source / name, out / name)
    return out
