"""Fine-tune the packaged MiniLM on UD English EWT genre classification, on the CPU in a few minutes.

A sentence's genre is the prefix of its ``sent_id`` (answers, email, newsgroup, reviews, weblog).
The train split is not at hand (../shared/corpora has dev and test only), so the classifier is
trained on dev and evaluated on test. The checkpoint is a BertForSequenceClassification with
id2label set, ready for ``probes ablate classify --label-from sent_id-prefix``.

    python benchmarks/finetune_genre.py --out results/genre-minilm
    python benchmarks/finetune_genre.py --out results/genre-trajectory --save-every 126   # + step-0000 ... step-0378
    probes ablate classify --model results/genre-minilm \
        --corpus ../shared/corpora/ud-english-ewt/en_ewt-ud-test.conllu --label-from sent_id-prefix \
        --sweep heads --sweep layers --out results/genre-ablation
    probes ablate classify --model results/genre-minilm \
        --corpus ../shared/corpora/ud-english-ewt/en_ewt-ud-test.conllu --label-from sent_id-prefix \
        --order importance --order random --order probe:dep --order probe:dep:nsubj \
        --order-corpus ../shared/corpora/ud-english-ewt/en_ewt-ud-dev.conllu --out results/genre-pruning
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from probes.tools.ablation.classifier import ClassifierTarget, confusion_scores
from probes.tools.ablation.labelled import SENT_ID_PREFIX, read_labelled
from probes.base.defaults import default_model

CORPORA = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "ud-english-ewt"
GENRES = ("answers", "email", "newsgroup", "reviews", "weblog")


def fine_tune(out: Path, *, train: Path, epochs: int = 3, lr: float = 1e-4, batch_size: int = 16,
              max_length: int = 128, seed: int = 0, base: str | None = None, save_every: int = 0) -> dict:
    """Train on `train` (CoNLL-U, genre = sent_id prefix), save the checkpoint in `out`; return timings.

    save_every K > 0: also save the trajectory, ``out/step-NNNN`` every K optimizer steps, step 0 being the
    packaged encoder (with the new, untrained classifier layer) and the last step the final model."""
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    torch.manual_seed(seed)
    examples = read_labelled([train], label_from=SENT_ID_PREFIX)
    label2id = {g: i for i, g in enumerate(GENRES)}
    base = base or default_model()
    tokenizer = transformers.AutoTokenizer.from_pretrained(base)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(
        base, num_labels=len(GENRES), id2label=dict(enumerate(GENRES)), label2id=label2id)
    enc = tokenizer([e.text for e in examples], truncation=True, max_length=max_length)
    gold = torch.tensor([label2id[e.label] for e in examples])
    steps = epochs * -(-len(examples) // batch_size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    schedule = transformers.get_linear_schedule_with_warmup(optimizer, steps // 10, steps)
    generator = torch.Generator().manual_seed(seed)
    model.train()
    saved = []

    def save_step(step: int) -> None:
        if save_every > 0 and (step % save_every == 0 or step == steps):
            where = out / f"step-{step:04d}"
            model.save_pretrained(where)
            tokenizer.save_pretrained(where)
            saved.append(where.name)

    step = 0
    save_step(step)
    started = time.perf_counter()
    lengths = [len(ids) for ids in enc["input_ids"]]
    for epoch in range(epochs):
        order = _length_buckets(lengths, batch_size, generator)
        total = 0.0
        for picked in order:
            batch = tokenizer.pad([{k: enc[k][i] for k in enc.keys()} for i in picked], return_tensors="pt")
            loss = model(**batch, labels=gold[picked]).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            total += loss.item() * len(picked)
            step += 1
            save_step(step)
        elapsed = time.perf_counter() - started
        print(f"epoch {epoch + 1}/{epochs}: mean loss {total / len(examples):.4f} ({elapsed:.0f}s)", flush=True)
    model.eval()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return {"train_sentences": len(examples), "epochs": epochs, "steps": steps,
            "train_seconds": round(time.perf_counter() - started, 1), **({"trajectory": saved} if saved else {})}


def _length_buckets(lengths: list[int], batch_size: int, generator: torch.Generator) -> list[list[int]]:
    """Shuffled batches of similar length (little padding): shuffle, sort within pools of 50 batches, cut, shuffle."""
    order = torch.randperm(len(lengths), generator=generator).tolist()
    pool = 50 * batch_size
    batches = []
    for start in range(0, len(order), pool):
        ranked = sorted(order[start:start + pool], key=lambda i: lengths[i])
        batches += [ranked[i:i + batch_size] for i in range(0, len(ranked), batch_size)]
    return [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]


def evaluate(checkpoint: Path, test: Path) -> dict:
    """Accuracy and macro-F1 of the checkpoint on `test` (no heads disabled)."""
    target = ClassifierTarget(str(checkpoint), [test], label_from=SENT_ID_PREFIX)
    counts = target.new_state(1)
    for chunk in target.chunks(32):
        predicted = target.predict(chunk)[0]
        counts[0].index_put_((chunk.gold, predicted), torch.ones(len(predicted), dtype=torch.long), accumulate=True)
    scores = confusion_scores(counts)
    return {"test_sentences": target.scored, "accuracy": float(scores["accuracy"][0]),
            "macro_f1": float(scores["macro_f1"][0])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("results/genre-minilm"), help="checkpoint directory")
    parser.add_argument("--corpora", type=Path, default=CORPORA, help="folder with en_ewt-ud-{dev,test}.conllu")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save-every", type=int, default=0, metavar="K",
                        help="also save OUT/step-NNNN every K steps (step 0: the packaged encoder; 126 steps = 1 epoch)")
    args = parser.parse_args()
    report = fine_tune(args.out, train=args.corpora / "en_ewt-ud-dev.conllu", epochs=args.epochs, lr=args.lr,
                       batch_size=args.batch_size, seed=args.seed, save_every=args.save_every)
    report.update(evaluate(args.out, args.corpora / "en_ewt-ud-test.conllu"))
    (args.out / "finetune.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
