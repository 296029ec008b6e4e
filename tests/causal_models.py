"""Tiny random decoder-only checkpoints of every built-in decoder family (probes.capture.families), made in the tests.

Each is a folder a loader accepts: config.json, safetensors weights and a fast tokenizer. Qwen2's is a byte-level
BPE (its own tokenizer class reads it, as a real Qwen2 checkpoint's), "<|endoftext|>" id 0, the 256 byte symbols
and "<s>" (id 257); the others' a word-level one over "<|endoftext|>" (id 0, also end of sequence), "<s>" (id 1)
and t2..t63. ``byte_level=True`` gives any family the byte-level one (a vocabulary of 300), as real decoders'
(words of several subwords, any script). The Llama and Mistral tokenizers add <s> at the start of every sequence,
as those families' do; the others add nothing.
"""
from __future__ import annotations

from pathlib import Path

import torch

VOCAB = 64
# Mistral's window of 3 positions and Qwen2's of 4 (its second layer only) are shorter than the test sequences
CONFIGS = {
    "gpt2": ("GPT2Config", dict(n_embd=32, n_layer=2, n_head=4, n_positions=128)),
    "gpt_neox": ("GPTNeoXConfig", dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                       intermediate_size=64, rotary_pct=0.5, max_position_embeddings=128)),
    "llama": ("LlamaConfig", dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                  intermediate_size=64, max_position_embeddings=128)),
    "qwen2": ("Qwen2Config", dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1,
                                  intermediate_size=64, max_position_embeddings=128, use_sliding_window=True,
                                  sliding_window=4, max_window_layers=1)),
    "mistral": ("MistralConfig", dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, intermediate_size=64, max_position_embeddings=128,
                                      sliding_window=3)),
}
ADDS_BOS = {"llama", "mistral"}


def byte_level_tokenizer(bos: bool = False, positions: int = 128):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    symbols = sorted(pre_tokenizers.ByteLevel.alphabet())
    backend = Tokenizer(models.BPE({"<|endoftext|>": 0, **{c: i + 1 for i, c in enumerate(symbols)},
                                    "<s>": len(symbols) + 1}, []))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    if bos:
        backend.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A $B",
                                                               special_tokens=[("<s>", len(symbols) + 1)])
    return PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="<|endoftext|>",
                                   model_max_length=positions)


def tokenizer(bos: bool, size: int = VOCAB):
    """The word-level tokenizer over `size` ids (see the module docstring: t2..t{size - 1})."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {"<|endoftext|>": 0, "<s>": 1, **{f"t{i}": i for i in range(2, size)}}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<|endoftext|>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if bos:
        backend.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A $B",
                                                               special_tokens=[("<s>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="<|endoftext|>",
                                   unk_token="<|endoftext|>", model_max_length=128)


def make_checkpoint(family: str, folder: Path, seed: int = 0, byte_level: bool | None = None,
                    positions: int = 128) -> Path:
    """Write a tiny random checkpoint of `family` (a key of CONFIGS) into `folder`; return it. byte_level: the
    byte-level tokenizer (None: Qwen2's only); positions: the most positions the model and tokenizer take."""
    import transformers

    byte_level = family == "qwen2" if byte_level is None else byte_level
    config_class, fields = CONFIGS[family]
    fields = {**fields, "n_positions" if family == "gpt2" else "max_position_embeddings": positions}
    config = getattr(transformers, config_class)(vocab_size=300 if byte_level else VOCAB,
                                                 bos_token_id=257 if byte_level else 1, eos_token_id=0, pad_token_id=0,
                                                 tie_word_embeddings=family == "gpt2", **fields)
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config)
    model.save_pretrained(folder)
    bos = family in ADDS_BOS
    (byte_level_tokenizer(bos, positions) if byte_level else tokenizer(bos)).save_pretrained(folder)
    return folder
