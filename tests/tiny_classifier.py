"""Fine-tune a sequence classifier for a few steps inside a test (tiny random encoder or the packaged MiniLM).

Data: short sentences labelled with their genre (the ``sent_id`` prefix), the same number of each
genre; by default from the bundled UD English EWT sample (email, weblog). The result is a real
``...ForSequenceClassification`` checkpoint directory with id2label set; what it learns in a few
steps does not matter to the tests, only that it is a trained classifier that ablation can evaluate.
"""
from __future__ import annotations

from pathlib import Path

import torch

from probes.tools.ablation.labelled import SENT_ID_PREFIX, Example, read_labelled
from probes.base.defaults import bundled_corpus

GENRES = ("email", "weblog")


def genre_examples(per_genre: int, data: str | Path | None = None, genres: tuple[str, ...] = GENRES) -> list[Example]:
    """The `per_genre` shortest sentences of each genre of `data` (default: the bundled sample), alternating."""
    examples = read_labelled([data or bundled_corpus()], label_from=SENT_ID_PREFIX)
    by_genre = [sorted((e for e in examples if e.label == g), key=lambda e: len(e.text))[:per_genre] for g in genres]
    return [e for group in zip(*by_genre) for e in group]


def genre_split(per_genre: int, train: int, folder: Path) -> tuple[list[Example], Path]:
    """The first `train` of genre_examples(per_genre) to train on, the rest written to folder/test.tsv."""
    examples = genre_examples(per_genre)
    return examples[:train], write_tsv(examples[train:], folder / "test.tsv")


def write_tsv(examples: list[Example], path: Path) -> Path:
    path.write_text("".join(f"{e.text}\t{e.label}\n" for e in examples), encoding="utf-8")
    return path


def fine_tune(base: str | Path, out: Path, examples: list[Example], *, steps: int = 20, batch_size: int = 8,
              lr: float = 3e-3, seed: int = 0, head_only: bool = False) -> Path:
    """Train `base` for `steps` AdamW steps on the examples' labels (sorted: the label ids); save it into `out`.

    head_only: train the classification head (and pooler) only, the encoder frozen (fast for MiniLM).
    """
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    labels = sorted({e.label for e in examples})
    tokenizer = transformers.AutoTokenizer.from_pretrained(base)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = transformers.AutoModelForSequenceClassification.from_pretrained(
            base, num_labels=len(labels), id2label=dict(enumerate(labels)),
            label2id={g: i for i, g in enumerate(labels)})
        if head_only:
            model.base_model.encoder.requires_grad_(False)
            model.base_model.embeddings.requires_grad_(False)
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
        model.train()
        for _ in range(steps):
            picked = [examples[i] for i in torch.randperm(len(examples)).tolist()[:batch_size]]
            batch = tokenizer([e.text for e in picked], padding=True, truncation=True, max_length=60,
                              return_tensors="pt")
            target = torch.tensor([labels.index(e.label) for e in picked])
            model(**batch, labels=target).loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    model.eval()
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
