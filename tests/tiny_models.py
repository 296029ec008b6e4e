"""Tiny, randomly initialised encoder checkpoints for tests, built offline in-process.

`build_tiny_model(family, out_dir)` writes a complete Hugging Face checkpoint directory
(config.json + model.safetensors via `save_pretrained`, plus a fast tokenizer trained here with the
`tokenizers` library) that `AutoTokenizer.from_pretrained(dir)` and
`AutoModel.from_pretrained(dir, attn_implementation="eager")` load with no network.

Every model: 2 layers, 4 heads, hidden 32, intermediate 64, max_position_embeddings 64, and a
tokenizer with model_max_length 64. Weights come from a fixed torch seed and the tokenizers from
deterministic training, so two builds with the same seed are byte-identical.

Tokenizer training text: tests/data/tokenizer_text.txt, the first 200 `# text =` lines (>= 3 words)
of UD English EWT en_ewt-ud-dev.conllu (UD_English-EWT v2.15, CC BY-SA 4.0, Silveira et al. / UD).
"""
from __future__ import annotations

import json
from pathlib import Path

FAMILIES = ("bert", "roberta", "electra", "deberta-v2", "deberta", "fnet")

DATA_FILE = Path(__file__).parent / "data" / "tokenizer_text.txt"

N_LAYERS = 2
N_HEADS = 4
HIDDEN = 32
INTERMEDIATE = 64
MAX_POSITIONS = 64
VOCAB_SIZE = 600  # small on purpose: many words split into several subwords

# Special tokens, in id order (the mask token is appended after training where it must come last).
BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]  # ids 0..4 (bert-base-uncased: 0, 100..103)
ROBERTA_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>"]  # 0,1,2,3 as in roberta-base; <mask> = last id
DEBERTA_SPECIALS = ["[PAD]", "[CLS]", "[SEP]", "[UNK]"]  # 0,1,2,3 as in deberta(-v3); [MASK] = last id


def training_lines() -> list[str]:
    """The fixture sentences the tokenizers are trained on."""
    lines = DATA_FILE.read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.strip()]


# ---------------------------------------------------------------------------------------------
# Tokenizers. Each is trained with the bare `tokenizers` library, then its vocab (and merges) are
# handed to the transformers tokenizer class of the family, so the saved pipeline is exactly what
# that class rebuilds on `from_pretrained` (transformers 5 rebuilds normalizer / pre-tokenizer /
# post-processor from the class's own __init__ and only takes vocab/merges from tokenizer.json).
# ---------------------------------------------------------------------------------------------

def _train_bpe(texts, pre_tokenizer, vocab_size, *, normalizer=None, specials=(), alphabet=()):
    """A BPE model trained with the `tokenizers` library; returns the trained Tokenizer.

    The BPE trainer is deterministic (sorted alphabet, ties broken by ids). The WordPiece and Unigram
    trainers are not (hash-map order decides ties and float sums), so the WordPiece and Unigram
    vocabularies below are derived from BPE training instead, to keep repeated builds identical.
    """
    from tokenizers import Tokenizer
    from tokenizers.models import BPE
    from tokenizers.trainers import BpeTrainer

    tok = Tokenizer(BPE())
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    trainer = BpeTrainer(
        vocab_size=vocab_size, special_tokens=list(specials), initial_alphabet=list(alphabet), show_progress=False
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def _wordpiece_vocab(lines: list[str]) -> dict[str, int]:
    """WordPiece vocab (BERT uncased style): [PAD],[UNK],[CLS],[SEP],[MASK] = 0..4, then characters,
    "##" characters, then word-initial pieces and "##" continuations in BPE merge order.

    BPE is trained on BERT-normalised, BERT-pre-tokenised words each marked with a leading "▁", so
    a piece starting with "▁" is word-initial ("▁the" -> "the") and any other is a continuation
    ("ing" -> "##ing"). WordPiece encodes by greedy longest match, so any such vocab is valid.
    """
    from tokenizers import normalizers, pre_tokenizers

    norm = normalizers.BertNormalizer(lowercase=True)
    pre = pre_tokenizers.BertPreTokenizer()
    words = ["▁" + w for line in lines for w, _ in pre.pre_tokenize_str(norm.normalize_str(line))]
    bpe = _train_bpe(words, pre_tokenizers.WhitespaceSplit(), VOCAB_SIZE + 300)
    pieces = [p for p, _ in sorted(bpe.get_vocab().items(), key=lambda kv: kv[1])]
    chars = sorted({c for p in pieces for c in p} - {"▁"})
    ordered = list(BERT_SPECIALS) + chars + ["##" + c for c in chars]
    for p in pieces:
        if len(p) > 1:
            ordered.append(p[1:] if p.startswith("▁") else "##" + p)
    vocab: dict[str, int] = {}
    for p in ordered:
        if p and p not in vocab and len(vocab) < VOCAB_SIZE:
            vocab[p] = len(vocab)
    return vocab


def _byte_level_bpe(lines: list[str], specials: list[str], last: str) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Byte-level BPE as in GPT-2 / RoBERTa; `specials` get ids 0.., `last` gets the last id."""
    from tokenizers import pre_tokenizers

    tok = _train_bpe(
        lines,
        pre_tokenizers.ByteLevel(add_prefix_space=False),
        VOCAB_SIZE,
        specials=specials,
        alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    model = json.loads(tok.to_str())["model"]
    vocab = dict(model["vocab"])
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    vocab[last] = len(vocab)
    return vocab, merges


def _metaspace_unigram(lines: list[str]) -> list[tuple[str, float]]:
    """SentencePiece-style Unigram vocab ("▁" marks a word start), cased like deberta-v3:
    [PAD],[CLS],[SEP],[UNK] = 0..3 (score 0.0), pieces by descending score, [MASK] last.

    Pieces are those of a BPE trained with the Metaspace pre-tokenizer; a piece's score is the log
    of its relative frequency when the BPE segments the training text (unused pieces get a floor).
    """
    import math

    from tokenizers import normalizers, pre_tokenizers

    bpe = _train_bpe(
        lines,
        pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always"),
        VOCAB_SIZE - len(DEBERTA_SPECIALS) - 1,
        normalizer=normalizers.Sequence([normalizers.NFC(), normalizers.Strip(left=False, right=True)]),
    )
    counts = dict.fromkeys(bpe.get_vocab(), 0)
    for enc in bpe.encode_batch(lines):
        for t in enc.tokens:
            counts[t] += 1
    total = sum(counts.values())
    floor = math.log(0.5 / total)
    scored = {p: (round(math.log(c / total), 6) if c else floor) for p, c in counts.items()}
    pieces = sorted(scored.items(), key=lambda ps: (-ps[1], ps[0]))
    # Specials score 0.0: DebertaV2Tokenizer finds unk_id by looking up ("[UNK]", 0.0).
    return [(p, 0.0) for p in DEBERTA_SPECIALS] + pieces + [("[MASK]", 0.0)]


def build_tokenizer(family: str):
    """The family's transformers fast tokenizer, trained on the fixture text (not yet saved)."""
    import transformers as tf

    lines = training_lines()
    common = {"model_max_length": MAX_POSITIONS}
    if family in ("bert", "fnet"):
        return tf.BertTokenizerFast(vocab=_wordpiece_vocab(lines), do_lower_case=True, **common)
    if family == "electra":
        return tf.ElectraTokenizerFast(vocab=_wordpiece_vocab(lines), do_lower_case=True, **common)
    if family == "roberta":
        vocab, merges = _byte_level_bpe(lines, ROBERTA_SPECIALS, "<mask>")
        return tf.RobertaTokenizerFast(vocab=vocab, merges=merges, **common)
    if family == "deberta":
        vocab, merges = _byte_level_bpe(lines, DEBERTA_SPECIALS, "[MASK]")
        return tf.DebertaTokenizerFast(vocab=vocab, merges=merges, **common)
    if family == "deberta-v2":
        return tf.DebertaV2TokenizerFast(vocab=_metaspace_unigram(lines), do_lower_case=False, **common)
    raise ValueError(f"unknown family {family!r}; expected one of {FAMILIES}")


# ---------------------------------------------------------------------------------------------
# Models.
# ---------------------------------------------------------------------------------------------

def build_config(family: str, tokenizer):
    import transformers as tf

    common = dict(
        vocab_size=len(tokenizer),
        hidden_size=HIDDEN,
        num_hidden_layers=N_LAYERS,
        intermediate_size=INTERMEDIATE,
        max_position_embeddings=MAX_POSITIONS,
        pad_token_id=tokenizer.pad_token_id,
    )
    if family == "fnet":  # no attention at all: Fourier mixing instead
        return tf.FNetConfig(
            **common,
            type_vocab_size=4,
            use_tpu_fourier_optimizations=False,
            bos_token_id=tokenizer.cls_token_id,
            eos_token_id=tokenizer.sep_token_id,
        )
    common["num_attention_heads"] = N_HEADS
    if family == "bert":
        return tf.BertConfig(**common, type_vocab_size=2)
    if family == "roberta":
        # As in roberta-base: one token type, <s>/</s> as bos/eos; positions start at pad_token_id + 1,
        # so only max_position_embeddings - 2 = 62 tokens fit.
        return tf.RobertaConfig(
            **common, type_vocab_size=1, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id
        )
    if family == "electra":
        # Discriminator with factorised embeddings (embedding_size < hidden_size -> embeddings_project).
        return tf.ElectraConfig(**common, embedding_size=16, type_vocab_size=2)
    if family == "deberta-v2":
        # Like microsoft/deberta-v3-base, scaled down.
        return tf.DebertaV2Config(
            **common,
            type_vocab_size=0,
            relative_attention=True,
            max_relative_positions=-1,
            position_buckets=32,
            pos_att_type=["p2c", "c2p"],
            norm_rel_ebd="layer_norm",
            share_att_key=True,
            position_biased_input=False,
            hidden_act="gelu",
            layer_norm_eps=1e-7,
        )
    if family == "deberta":
        # Like microsoft/deberta-base, scaled down.
        return tf.DebertaConfig(
            **common,
            type_vocab_size=0,
            relative_attention=True,
            max_relative_positions=-1,
            pos_att_type=["c2p", "p2c"],
            position_biased_input=False,
            hidden_act="gelu",
            layer_norm_eps=1e-7,
        )
    raise ValueError(f"unknown family {family!r}; expected one of {FAMILIES}")


_MODEL_CLASSES = {
    "bert": "BertModel",
    "roberta": "RobertaModel",
    "electra": "ElectraModel",
    "deberta-v2": "DebertaV2Model",
    "deberta": "DebertaModel",
    "fnet": "FNetModel",
}


def build_tiny_model(family: str, out_dir: Path, *, seed: int = 0) -> Path:
    """Write a tiny random `family` checkpoint (model + tokenizer) into out_dir; return out_dir.

    family: one of FAMILIES. The directory is created if needed; existing files are overwritten.
    """
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; expected one of {FAMILIES}")
    import torch
    import transformers as tf

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(family)
    config = build_config(family, tokenizer)
    model_cls = getattr(tf, _MODEL_CLASSES[family])
    # Seed and build on a private RNG state so callers' torch RNG is left as it was.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_cls(config)
    model.eval()
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir


def with_layers(folder: Path, layers: int, positions: int, *, causal: bool = False, seed: int = 0) -> Path:
    """The checkpoint in `folder` (any family's, tests/causal_models.py's too: causal=True) rebuilt in place with
    `layers` layers (random weights, `seed`), taking at least `positions` positions, its tokenizer that many
    subwords. Returns `folder`."""
    import torch
    import transformers as tf

    config = tf.AutoConfig.from_pretrained(folder)
    config.num_hidden_layers = layers
    config.max_position_embeddings = max(config.max_position_embeddings, positions)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        (tf.AutoModelForCausalLM if causal else tf.AutoModel).from_config(config).save_pretrained(folder)
    tokenizer = tf.AutoTokenizer.from_pretrained(folder)
    tokenizer.model_max_length = positions
    tokenizer.save_pretrained(folder)
    return folder


if __name__ == "__main__":  # python tests/tiny_models.py OUT_DIR [family ...]
    import sys

    root = Path(sys.argv[1])
    for fam in sys.argv[2:] or FAMILIES:
        print(build_tiny_model(fam, root / fam))
