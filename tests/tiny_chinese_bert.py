"""A tiny, randomly initialised character-level Chinese BERT, built offline from a corpus's characters.

`build_tiny_chinese_bert(out_dir, conllu_files)` writes a checkpoint that AutoTokenizer/AutoModel
load with no network: a BertTokenizerFast whose WordPiece vocabulary is [PAD] [UNK] [CLS] [SEP]
[MASK], then every character of the files' `# text` lines (sorted), then "##" + each character
that is not a CJK ideograph (BERT's normaliser isolates ideographs, so only Latin letters, digits
and other symbols ever continue a word). Cased (do_lower_case=False), like a production Chinese
BERT (bert-base-chinese) but tiny: 2 layers, 4 heads, hidden 32, 128 positions (longer sentences
are skipped). Weights from a fixed seed, so two builds are identical.
"""
from __future__ import annotations

from pathlib import Path

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
MAX_POSITIONS = 128


def corpus_characters(conllu_files: list[Path]) -> list[str]:
    """Sorted distinct non-blank characters of the files' `# text = ...` lines."""
    chars: set[str] = set()
    for path in conllu_files:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            if line.startswith("# text = "):
                chars.update(c for c in line[len("# text = "):] if not c.isspace())
    return sorted(chars)


def _is_ideograph(c: str) -> bool:
    cp = ord(c)
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2FA1F
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def build_tiny_chinese_bert(out_dir: Path, conllu_files: list[Path], *, seed: int = 0) -> Path:
    """Write the checkpoint into out_dir (created if needed) and return out_dir."""
    import torch
    import transformers as tf

    chars = corpus_characters(conllu_files)
    vocab = {t: i for i, t in enumerate(SPECIALS + chars + ["##" + c for c in chars if not _is_ideograph(c)])}
    tokenizer = tf.BertTokenizerFast(vocab=vocab, do_lower_case=False, tokenize_chinese_chars=True,
                                     model_max_length=MAX_POSITIONS)
    config = tf.BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                           intermediate_size=64, max_position_embeddings=MAX_POSITIONS, type_vocab_size=2,
                           pad_token_id=0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = tf.BertModel(config)
    model.eval()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir
