"""A sequence-classification checkpoint as an ablation target: accuracy and macro-F1 per mask.

State is one confusion matrix per mask, counts[m, gold, predicted] ([M,K,K], int64): additive,
so shards of the data combine by adding. From it:

    accuracy  = trace / total
    macro-F1  = mean over classes c of F1_c = 2·TP_c / (2·TP_c + FP_c + FN_c), over the classes that
                occur as a gold label or a prediction (scikit-learn's default label set), so a class
                predicted but never gold counts with F1 = 0.

Examples whose tokens (special tokens included) exceed the model's limit are skipped and counted,
never cut.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from probes.tools.ablation.labelled import Example, read_labelled
from probes.capture.sharing import SharedPrefix, by_first_layer, mask_passes
from probes.base.checkpoint import resolve_source
from probes.base.errors import InputError
from probes.capture.model import first_line, length_limit, load_tokenizer, self_attention_modules, to_device
from probes.results.probe_result import RunInfo
from probes.base.provenance import provenance

@dataclass
class Classifier:
    """A loaded sequence classifier with the facts masking needs."""

    name: str
    model: torch.nn.Module
    tokenizer: object
    labels: list[str]  # id -> label name
    layers: int
    heads: int
    head_dim: int
    max_length: int
    device: torch.device
    modules: list[torch.nn.Module]  # the L self-attention modules


@dataclass
class Chunk:
    """Length-sorted examples padded into one batch: inputs [B,T] and gold label ids [B]."""

    inputs: dict[str, torch.Tensor]
    gold: torch.Tensor


def load_classifier(name: str, *, device: str = "cpu", max_length: int | None = None) -> Classifier:
    """A ``...ForSequenceClassification`` checkpoint; InputError for one without a trained classification head."""
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    source = resolve_source(name)
    try:
        config = transformers.AutoConfig.from_pretrained(source)
        architectures = list(getattr(config, "architectures", None) or [])
        if not any(a.endswith("ForSequenceClassification") for a in architectures):
            raise InputError(f"checkpoint has no sequence-classification head (architectures: "
                             f"{', '.join(architectures) or 'none'}); a classify target needs a fine-tuned "
                             "...ForSequenceClassification checkpoint", name)
        model, loading = transformers.AutoModelForSequenceClassification.from_pretrained(source,
                                                                                        output_loading_info=True)
        tokenizer = load_tokenizer(source, Path(source) if Path(source).is_dir() else None)
    except InputError:
        raise
    except (OSError, ValueError, KeyError, ImportError) as e:
        raise InputError(f"cannot load classifier {name!r}: {first_line(e)}") from None
    if loading.get("missing_keys"):
        raise InputError(f"checkpoint lacks trained weights for {', '.join(sorted(loading['missing_keys'])[:3])}; "
                         "a classify target needs a fine-tuned classification head", name)
    dev = to_device(model, device)
    layers, heads = config.num_hidden_layers, config.num_attention_heads
    modules = self_attention_modules(model)
    if len(modules) != layers:
        raise InputError(f"model {name!r} ({type(model).__name__}): found {len(modules)} self-attention modules "
                         f"for {layers} layers; its heads cannot be masked")
    head_dim = getattr(config, "attention_head_size", None) or config.hidden_size // heads
    labels = [config.id2label[i] for i in range(config.num_labels)]
    return Classifier(name=name, model=model, tokenizer=tokenizer, labels=labels, layers=layers, heads=heads,
                      head_dim=head_dim, max_length=length_limit(config, tokenizer, max_length), device=dev,
                      modules=modules)


class ClassifierTarget:
    """Evaluate a classifier on labelled data under many head masks at once."""

    def __init__(self, model: str, data: list[str | Path], *, format: str | None = None, label_from: str = "label",
                 limit: int | None = None, device: str = "cpu", max_length: int | None = None):
        examples = read_labelled(data, format=format, label_from=label_from)
        self.examples = examples[:limit] if limit else examples
        self.files = [str(p) for p in data]
        self.classifier = c = load_classifier(model, device=device, max_length=max_length)
        self.model, self.modules = c.model, c.modules
        self.layers, self.heads, self.head_dim = c.layers, c.heads, c.head_dim
        self.gold = _label_ids(self.examples, c.labels)  # [N]
        self.ids, self.skipped = _tokenize(c.tokenizer, self.examples, c.max_length)  # usable example index -> ids
        self.counts: torch.Tensor | None = None  # [M,K,K] after evaluate()
        if not self.ids:
            raise InputError(f"no example can be scored (of {len(self.examples)}: all longer than the model's "
                             f"limit of {c.max_length} tokens)", self.files[0])

    @property
    def name(self) -> str:
        return self.classifier.name

    @property
    def scored(self) -> int:
        return len(self.ids)

    @property
    def units(self) -> int:  # progress: examples per mask
        return len(self.ids)

    def chunks(self, batch_size: int) -> list[Chunk]:
        """Length-sorted batches of `batch_size` examples (ties in data order)."""
        order = sorted(self.ids, key=lambda i: (len(self.ids[i]["input_ids"]), i))
        tokenizer = self.classifier.tokenizer
        out = []
        for start in range(0, len(order), batch_size):
            picked = order[start:start + batch_size]
            inputs = tokenizer.pad([self.ids[i] for i in picked], padding=True, return_tensors="pt")
            out.append(Chunk(dict(inputs), self.gold[picked]))
        return out

    def new_state(self, masks: int) -> torch.Tensor:
        k = len(self.classifier.labels)
        return torch.zeros(masks, k, k, dtype=torch.long)  # [M, gold, predicted]

    @torch.inference_mode()
    def predict(self, chunk: Chunk, copies: int = 1, prefix: SharedPrefix | None = None, start: int = 0) -> torch.Tensor:
        """Predicted label ids [copies, B] for the chunk repeated `copies` times along the batch (rows copy-major).

        With a usable `prefix`, blocks below `start` run once on the B rows and the batch is repeated at block
        `start`; otherwise the inputs are repeated.
        """
        dev = self.classifier.device
        shared = copies > 1 and start > 0 and prefix is not None and prefix.usable
        inputs = {k: v.to(dev) if shared else v.to(dev).repeat(copies, 1) for k, v in chunk.inputs.items()}
        if shared:
            prefix.set(copies, start)
        try:
            logits = self.classifier.model(**inputs).logits  # [copies·B, K]
        finally:
            if shared:
                prefix.set(1, 0)
        return logits.argmax(-1).view(copies, -1).cpu()

    def evaluate(self, masks: torch.Tensor, masker, bar, *, batch_size: int, masks_per_pass: int,
                 tokens_per_pass: int) -> None:
        """Confusion counts for every mask (masks [M,L,H]); each pass runs one batch under G masks at once.

        Masks are grouped by their first layer with a disabled head, so a pass shares the layers below it
        (see probes.capture.sharing); G = masks_per_pass, lowered so that a pass holds at most
        tokens_per_pass padded tokens.
        """
        self.counts = self.new_state(masks.shape[0])
        groups = by_first_layer(masks)
        with SharedPrefix(self.model, self.modules) as prefix:
            for chunk in self.chunks(batch_size):
                rows, length = chunk.inputs["input_ids"].shape
                for start, picked in mask_passes(groups, rows * length, masks_per_pass, tokens_per_pass):
                    self.update(self.counts, chunk, picked, masks[picked], masker, prefix, start)
                    bar.update(rows * len(picked))

    def update(self, state: torch.Tensor, chunk: Chunk, ids: list[int], masks: torch.Tensor, masker,
               prefix: SharedPrefix | None = None, start: int = 0) -> None:
        """Add the chunk's confusion counts under masks `ids` (masks [G,L,H]; none before layer `start`), one pass."""
        g, b = masks.shape[0], chunk.gold.shape[0]
        masker.set(masks.repeat_interleave(b, dim=0))  # [G·B,L,H], rows mask-major
        predicted = self.predict(chunk, g, prefix, start)  # [G,B]
        k = state.shape[1]
        mask_ids = torch.tensor(ids)[:, None]
        cells = (mask_ids * k + chunk.gold[None, :]) * k + predicted  # [G,B] flat index into [M,K,K]
        state.view(-1).index_add_(0, cells.flatten(), torch.ones(cells.numel(), dtype=torch.long))

    def finish(self, settings: dict, elapsed: float) -> tuple[dict[str, np.ndarray], None, dict, RunInfo]:
        """Metrics [M], no grids, the labels and baseline confusion matrix to record, the run's info."""
        c = self.classifier
        info = RunInfo(model=c.name, corpus=self.files, layers=c.layers, heads=c.heads, sentences=self.scored,
                       skipped=dict(self.skipped), settings={**settings, "max_length": c.max_length},
                       provenance=provenance(c, self.files, elapsed))
        extra = {"labels": c.labels, "confusion": self.counts[0].tolist()}
        return confusion_scores(self.counts), None, extra, info


def confusion_scores(counts: torch.Tensor) -> dict[str, np.ndarray]:
    """Accuracy and macro-F1 [M] from confusion matrices counts[m, gold, predicted] ([M,K,K])."""
    c = counts.double()
    total = c.sum(dim=(1, 2))
    tp = torch.diagonal(c, dim1=1, dim2=2)  # [M,K]
    gold, predicted = c.sum(2), c.sum(1)  # [M,K]
    present = (gold + predicted) > 0
    f1 = torch.where(present, 2 * tp / (gold + predicted).clamp(min=1), torch.zeros_like(tp))
    accuracy = tp.sum(1) / total
    macro = f1.sum(1) / present.sum(1)
    return {"accuracy": accuracy.numpy(), "macro_f1": macro.numpy()}


def _label_ids(examples: list[Example], labels: list[str]) -> torch.Tensor:
    """Each example's label id; InputError at the first label the model does not know."""
    index = {name: i for i, name in enumerate(labels)}
    if all(name == f"LABEL_{i}" for i, name in enumerate(labels)):  # a checkpoint without label names
        index.update({str(i): i for i in range(len(labels))})
    ids = []
    for e in examples:
        if e.label not in index:
            raise InputError(f"label {e.label!r} is not one the model knows (its labels: {', '.join(labels)})",
                             e.source, e.line)
        ids.append(index[e.label])
    return torch.tensor(ids, dtype=torch.long)


def _tokenize(tokenizer, examples: list[Example], max_length: int) -> tuple[dict[int, dict], dict[str, int]]:
    """Token ids of each example that fits (by example index), and the skipped counts by reason."""
    texts = [e.text for e in examples]
    pairs = [e.pair for e in examples]
    if len({p is None for p in pairs}) > 1:
        raise InputError("some examples have a text pair and some do not; give data of one kind",
                         next(e.source for e in examples if e.pair is None))
    enc = tokenizer(texts, pairs if pairs[0] is not None else None, truncation=False,
                    return_attention_mask=False)
    kept, skipped = {}, {}
    for i in range(len(examples)):
        row = {k: enc[k][i] for k in enc.keys()}
        if len(row["input_ids"]) > max_length:
            skipped["too_long"] = skipped.get("too_long", 0) + 1
        else:
            kept[i] = row
    return kept, skipped
