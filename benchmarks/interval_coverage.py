"""Coverage of the 95% intervals (issue 26): does each interval cover the score it claims to, on real data?

A pooled corpus (EWT dev + test: 4,078 sentences) is shuffled by whole sentences with a fixed seed into 20
disjoint chunks. Each chunk is scored on its own, with intervals (1,000 replicates, seed 0); the truth for a
chunk is the same head's score on the other 19 chunks, from counts (the probes' state is additive: the pooled
sums minus the chunk's). Every sentence is forwarded once: the chunks are fed one after the other, each to a
probe of its own, and the pooled result is their merge (``Probe.merge``). A probe with a fit phase (pos) is
fitted once, on the pooled corpus, and every chunk's probe scores with those centroids.

What is measured, over the (label, chunk) pairs with at least --min-count instances in the chunk:
- every head's interval (ci_low, ci_high) against its complement score, by the label's count and by score;
- the share of intervals of width 0;
- the best head's interval (``LabelScores.best``) against the complement score of the head named best on the chunk;
- the margin's interval against that head's complement score minus the complement's best offset score (dep, srl);
- with --paired MODEL: the paired interval of the change of the best score (``paired_delta``, as in `probes
  compare` and the study deltas) against the change on the complement (each side's chunk-best head).

Run (minutes a probe on a 2-core CPU, twice that with --paired):
    PYTHONPATH=. python benchmarks/interval_coverage.py dep srl pos [--paired sre] [--chunks 20] [--seed 0]
or as a benchmark (dep; the coverages in extra_info): pytest benchmarks/test_coverage_bench.py --benchmark-enable -s
"""
from __future__ import annotations

import argparse
import copy
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import probes  # noqa: E402
from probes.results.intervals import paired_delta  # noqa: E402
from probes.running.chunks import Pass  # noqa: E402
from probes.corpus import read_corpus  # noqa: E402
from probes.base.defaults import default_model  # noqa: E402
from probes.settings.registry import get_probe  # noqa: E402
from probes.base.files import short_model_name  # noqa: E402
from probes.results.probe_result import ProbeResult, RunInfo  # noqa: E402
from probes.running.runner import Feed  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / "shared" / "corpora"
CORPORA = {  # probe -> the pooled files (dev + test)
    "dep": [SHARED / "ud-english-ewt" / f"en_ewt-ud-{s}.conllu" for s in ("dev", "test")],
    "pos": [SHARED / "ud-english-ewt" / f"en_ewt-ud-{s}.conllu" for s in ("dev", "test")],
    "trees": [SHARED / "ud-english-ewt" / f"en_ewt-ud-{s}.conllu" for s in ("dev", "test")],
    "srl": [SHARED / "up-english-ewt" / f"en_ewt-up-{s}.conllu" for s in ("dev", "test")],
}
COUNT_BUCKETS = ((50, 100), (100, 300), (300, None))
BATCH = 32


def sre_model() -> str:
    """The second checkpoint of the paired check: sre-embedding-model's weights (as tests/test_analyses_minilm.py)."""
    import sre_embedding_model

    return str(Path(sre_embedding_model.__file__).parent / "model_weights")


def chunk_results(name: str, files: list[Path], encoder, chunks: int = 20, seed: int = 0, replicates: int = 1000,
                  states: Path | None = None, limit: int | None = None) -> tuple[list[ProbeResult], ProbeResult]:
    """The results of probe `name` on each of `chunks` disjoint chunks of the pooled `files` (whole sentences,
    shuffled with `seed`), and on the pooled corpus (the chunks' probes merged); each sentence forwarded once.
    states: a folder keeping the chunks' probe states, read back instead of forwarding again where there (to
    measure a change of the interval code alone). limit: the first sentences of the pooled corpus only (a
    quick try of the script)."""
    cls = get_probe(name)
    reader_options = cls(1, 1).reader_options()
    sentences = read_corpus([str(f) for f in files], **reader_options).sentences[:limit]
    order = np.random.default_rng(seed).permutation(len(sentences))
    parts = [[sentences[i] for i in sorted(part)] for part in np.array_split(order, chunks)]

    def fresh():
        probe = cls(encoder.layers, encoder.heads, replicates=replicates, bootstrap_seed=0)
        probe.prepare(sentences)
        return probe

    saved = None if states is None else \
        states / f"{name}-{short_model_name(encoder.name)}-{chunks}-{seed}-{replicates}-{limit}.pt"
    if saved is not None and saved.exists():
        scored = [fresh() for _ in parts]
        for probe, (state, _) in zip(scored, kept := torch.load(saved, weights_only=False)):
            probe.load_state_dict(state)
        results = [p.compute(_info(encoder, f"chunk {c}", n, replicates)) for c, (p, (_, n)) in enumerate(zip(scored, kept))]
    else:
        scored, results = _score_chunks(fresh, parts, sentences, encoder, replicates)
        if saved is not None:
            saved.parent.mkdir(parents=True, exist_ok=True)
            torch.save([(p.state_dict(), r.info.sentences) for p, r in zip(scored, results)], saved)
    pooled = copy.deepcopy(scored[0])
    for probe in scored[1:]:
        pooled.merge(probe)
    return results, pooled.compute(_info(encoder, "pooled", sum(r.info.sentences for r in results), replicates))


def _score_chunks(fresh, parts: list[list], sentences: list, encoder, replicates: int) -> tuple[list, list[ProbeResult]]:
    """Each part scored by a probe of its own (``fresh()``), every sentence forwarded once; a probe with a fit
    phase is fitted once, on every sentence, and each part's probe gets that fit."""
    feed = Feed(encoder, "mean-sum")
    budget = BATCH * encoder.max_length
    fitted = None
    if getattr(fresh(), "needs_fit", False):
        fitted = fresh()
        fit = Pass(sentences, restore=True)
        fit.start([fitted], encoder, "words")
        feed.all([fitted], "fit_update", fit, BATCH, budget, False)
    scored, results = [], []
    for c, part in enumerate(parts):
        probe = fresh()
        if fitted is not None:
            probe.merge_fit(fitted)
        chunk = Pass(part)
        chunk.start([probe], encoder, "words")
        feed.all([probe], "update", chunk, BATCH, budget, False)
        scored.append(probe)
        results.append(probe.compute(_info(encoder, f"chunk {c}", chunk.scored, replicates)))
    return scored, results


def _info(encoder, corpus: str, sentences: int, replicates: int) -> RunInfo:
    return RunInfo(model=encoder.name, corpus=[corpus], layers=encoder.layers, heads=encoder.heads,
                   sentences=sentences, skipped={}, settings={"replicates": replicates, "bootstrap_seed": 0,
                                                               "min_count": 0}, provenance={})


def complement(chunk_scores: np.ndarray, chunk_count: int, pooled_scores: np.ndarray, pooled_count: int) -> np.ndarray:
    """The scores on the pooled corpus less the chunk, from counts: (pooled sums − chunk sums) / (pooled count −
    chunk count); sums = score × count, rounded where they are whole (hits) so that a score of 0 stays 0."""
    def sums(scores, count):
        s = np.nan_to_num(np.asarray(scores, dtype=float)) * count
        whole = np.round(s)
        return np.where(np.abs(s - whole) < 1e-6, whole, s)

    return (sums(pooled_scores, pooled_count) - sums(chunk_scores, chunk_count)) / (pooled_count - chunk_count)


def bucket_name(low: int, high: int | None) -> str:
    return f"labels with {low}–{high} instances" if high else f"labels with {low}+ instances"


@dataclass
class Tally:
    """Covered / total, with how often the truth fell below and above the interval, per chunk (for the
    chunk-resampled range)."""

    covered: dict[int, int] = field(default_factory=dict)
    total: dict[int, int] = field(default_factory=dict)
    below: int = 0
    above: int = 0
    zero_width: int = 0

    def add(self, chunk: int, low: np.ndarray, high: np.ndarray, truth: np.ndarray) -> None:
        low, high, truth = (np.asarray(x, dtype=float).ravel() for x in (low, high, truth))
        self.covered[chunk] = self.covered.get(chunk, 0) + int(((low <= truth) & (truth <= high)).sum())
        self.total[chunk] = self.total.get(chunk, 0) + truth.size
        self.below += int((truth < low).sum())
        self.above += int((truth > high).sum())
        self.zero_width += int((high == low).sum())

    @property
    def cells(self) -> int:
        return sum(self.total.values())

    def coverage(self) -> float:
        return sum(self.covered.values()) / max(self.cells, 1)

    def chunk_range(self, draws: int = 1000, seed: int = 0) -> tuple[float, float]:
        """2.5–97.5% of the coverage with the chunks resampled with replacement."""
        chunks = sorted(self.total)
        covered = np.array([self.covered[c] for c in chunks], dtype=float)
        total = np.array([self.total[c] for c in chunks], dtype=float)
        picks = np.random.default_rng(seed).integers(0, len(chunks), (draws, len(chunks)))  # [D,C]
        shares = covered[picks].sum(1) / np.maximum(total[picks].sum(1), 1)
        return float(np.quantile(shares, 0.025)), float(np.quantile(shares, 0.975))

    def row(self, what: str) -> str:
        low, high = self.chunk_range()
        return (f"| {what} | {self.cells:,} | **{self.coverage():.3f}** ({low:.3f}–{high:.3f}) | "
                f"{self.below / self.cells:.3f} | {self.above / self.cells:.3f} | {self.zero_width / self.cells:.3f} |")


def coverage(results: list[ProbeResult], pooled: ProbeResult, min_count: int = 50) -> dict[str, Tally]:
    """Tallies of every interval of the chunks' results against the complement's scores (see the module)."""
    rows = ["every per-head interval", *(bucket_name(low, high) for low, high in COUNT_BUCKETS),
            "heads with 0 or all hits (score 0 or 1)", "heads with some hits and some misses",
            "heads scoring in (0.1, 0.9)", "overall, per head", "best-head interval", "best-head margin interval"]
    t: dict[str, Tally] = {row: Tally() for row in rows}

    def tally(key: str) -> Tally:
        return t[key]

    for c, result in enumerate(results):
        for name, entry in [*result.labels.items(), ("overall", result.overall)]:
            if entry.count < min_count or entry.ci_low is None:
                continue
            whole = pooled.entry(name)
            truth = complement(entry.scores, entry.count, whole.scores, whole.count)  # [L,H]
            if name == "overall":
                tally("overall, per head").add(c, entry.ci_low, entry.ci_high, truth)
                continue
            tally("every per-head interval").add(c, entry.ci_low, entry.ci_high, truth)
            for low, high in COUNT_BUCKETS:
                if entry.count >= low and (high is None or entry.count < high):
                    tally(bucket_name(low, high)).add(c, entry.ci_low, entry.ci_high, truth)
            s = entry.scores
            for what, cells in (("heads with 0 or all hits (score 0 or 1)", (s == 0) | (s == 1)),
                                ("heads with some hits and some misses", (s > 0) & (s < 1)),
                                ("heads scoring in (0.1, 0.9)", (s > 0.1) & (s < 0.9))):
                tally(what).add(c, entry.ci_low[cells], entry.ci_high[cells], truth[cells])
            best = entry.best
            if best is None or best.layer is None:  # no single head named (a tie at the top): no head to check
                continue
            head_truth = truth[best.layer, best.head]
            tally("best-head interval").add(c, best.ci_low, best.ci_high, head_truth)
            base, whole_base = (r.baselines.get("labels", {}).get(name) for r in (result, pooled))
            if base and best.margin_low is not None:
                offsets = complement(np.array(base["either"]), base["count"], np.array(whole_base["either"]),
                                     whole_base["count"])  # [K] the offsets' scores on the complement
                tally("best-head margin interval").add(c, best.margin_low, best.margin_high, head_truth - offsets.max())
    return t


def paired_coverage(a: list[ProbeResult], pooled_a: ProbeResult, b: list[ProbeResult], pooled_b: ProbeResult,
                    min_count: int = 50) -> Tally:
    """The paired interval of A's best score − B's (``paired_delta``) on each chunk against the same heads' change
    on the complement."""
    t = Tally()
    for c, (ra, rb) in enumerate(zip(a, b)):
        for name in [n for n in ra.labels if n in rb.labels] + ["overall"]:
            ea, eb = ra.entry(name), rb.entry(name)
            if ea.count < min_count or ea.best is None or eb.best is None or None in (ea.best.layer, eb.best.layer):
                continue
            truths = []
            for entry, whole in ((ea, pooled_a.entry(name)), (eb, pooled_b.entry(name))):
                truth = complement(entry.scores, entry.count, whole.scores, whole.count)
                truths.append(truth[entry.best.layer, entry.best.head])
            _, low, high = paired_delta(ra, rb, name)
            t.add(c, low, high, truths[0] - truths[1])
    return t


def table(name: str, tallies: dict[str, Tally]) -> str:
    lines = [f"{name}: coverage of the 95% intervals (truth: the same head's score on the other chunks)", "",
             "| what | cells | coverage (chunk-resampled 95%) | truth below | truth above | width 0 |",
             "|---|---|---|---|---|---|"]
    return "\n".join([*lines, *(t.row(what) for what, t in tallies.items() if t.cells)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("probes", nargs="*", default=["dep", "srl", "pos"], choices=sorted(CORPORA))
    parser.add_argument("--chunks", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0, help="the shuffle's seed")
    parser.add_argument("--replicates", type=int, default=1000)
    parser.add_argument("--min-count", type=int, default=50, help="fewest instances of a label in a chunk")
    parser.add_argument("--states", type=Path, help="a folder to keep the chunks' probe states in and read them "
                        "back from (a change of the interval code measured without forwarding again)")
    parser.add_argument("--limit", type=int, help="the first N sentences of the pooled corpus only (a quick try)")
    parser.add_argument("--paired", metavar="MODEL", help="a second checkpoint ('sre': sre-embedding-model) for the "
                        "paired intervals, on the first probe")
    args = parser.parse_args(argv)
    encoder = probes.load_encoder(default_model())
    for i, name in enumerate(args.probes):
        results, pooled = chunk_results(name, CORPORA[name], encoder, args.chunks, args.seed, args.replicates,
                                        args.states, args.limit)
        tallies = coverage(results, pooled, args.min_count)
        if args.paired and i == 0:
            other = probes.load_encoder(sre_model() if args.paired == "sre" else args.paired)
            other_results, other_pooled = chunk_results(name, CORPORA[name], other, args.chunks, args.seed,
                                                        args.replicates, args.states, args.limit)
            tallies[f"paired change of the best score ({short_model_name(encoder.name)} − "
                    f"{short_model_name(other.name)})"] = paired_coverage(
                results, pooled, other_results, other_pooled, args.min_count)
        print(table(f"{name} ({pooled.info.sentences} sentences, {args.chunks} chunks, seed {args.seed})", tallies),
              "\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
