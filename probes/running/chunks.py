"""Reading a run's sentences in bounded chunks, so that its memory does not grow with the corpus.

A pass (``Pass``) takes sentences from a stream (probes.corpus.CorpusStream, or a shard of one: probes.
state_files.ShardStream) CHUNK_SENTENCES at a time. Each chunk is filtered (a sentence some probe cannot
score, ``Probe.skip_reason``, is counted and dropped), tokenised (probes.encoding.subwords.encode: too long and
the like counted and dropped), length-sorted and cut into batches (probes.encoding.batching.length_sorted_batches)
by the runner's Feed, fed, and dropped; the next chunk's sentences are read on a worker thread meanwhile
(``Pass.ahead``). So a run holds two chunks' sentences and one chunk's subwords at a time besides the model,
whatever the corpus' size.

A corpus of at most CHUNK_SENTENCES sentences is one chunk: its batches are exactly those of a
whole-corpus sort, and every score is bit-identical to it. Across chunks each chunk is sorted on its own:
the batches differ, so scores may differ by float32 batching effects (about 1e-7); every count is the same.
What spans chunks is kept run-wide: the index of a usable sentence (``Encoded.index`` counts the pass's
usable sentences, so the per-sentence views of probes.results.examples keep the first N of the run), the skip
counts (``Skips``, in the order a whole-corpus pass gives them) and the unknown-word statistics (added).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import islice
from typing import Any, Iterable, Iterator

from probes.base.argtypes import Shard
from probes.corpus import CorpusStream
from probes.corpus.readers import formats_giving
from probes.corpus.sentence import Sentence
from probes.encoding.subwords import Encoded, UnknownWords, encode, unknown_words
from probes.base.errors import InputError
from probes.results.fitting import FitPlan
from probes.capture.model import Encoder
from probes.running.prefetch import Ahead
from probes.scoring.probe import Probe
from probes.results.probe_result import skip_summary
from probes.running.state_files import ShardStream

# Sentences read, filtered and tokenised at a time: UD English EWT's dev and test (2,001 and 2,077 sentences)
# are one chunk. A chunk of EWT holds about 5 kB of Sentence objects and 6 kB of tokenizer output a sentence.
CHUNK_SENTENCES = 4096


@dataclass
class Skips:
    """Sentences a pass set aside, by reason: those a probe cannot score (``Probe.skip_reason``), then those
    the tokenizer cannot use (probes.encoding.subwords), each in the order of first appearance: the order one
    whole-corpus pass gives."""

    by_probes: dict[str, int] = field(default_factory=dict)
    by_tokenizer: dict[str, int] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        """Every reason's count, probes' reasons first."""
        return with_counts(self.by_probes, self.by_tokenizer)


@dataclass
class Chunk:
    """The usable sentences of one chunk, tokenised: usable[e.index] is the sentence of each e in encoded."""

    usable: dict[int, Sentence]  # run-wide index among the pass's usable sentences -> sentence
    encoded: list[Encoded]  # the usable sentences that fit the model, in order; index run-wide


class Pass:
    """One pass over `sentences` in chunks, filtered by the probes given to ``start``: an iterator of Chunks,
    each read and prepared when it is asked for, the earlier ones dropped.

    The first chunk is read at once (so a reader's error in a corpus of one chunk comes before the model
    loads); ``start`` then filters and tokenises it (``first``), and iterating yields it and every later
    chunk. restore: undo what skip_reason adds to the probes' state (a pass that must not count its skips,
    e.g. a fit on the scored corpus beside its scoring pass).

    After a pass: read (sentences taken from the stream), scored (rows tokenised, fed: the sentences, or the
    windows a probe cuts them into, ``Probe.rows``), units (what the bootstrap resamples among the rows fed: a
    sentence, or the document whose windows they are, ``Sentence.unit``; unit names which), skips,
    unknown (probes.encoding.subwords.UnknownWords of the tokenised sentences).
    """

    def __init__(self, sentences: Iterable[Sentence], *, restore: bool = False):
        self.restore = restore
        self.probes: list[Probe] = []
        self._stream = iter(sentences)
        self._carry = list(islice(self._stream, CHUNK_SENTENCES + 1))  # read, not yet prepared
        self.single = len(self._carry) <= CHUNK_SENTENCES  # whether the stream is one chunk
        self.read = self.scored = self.rows = 0  # rows: usable sentences (or their windows, Probe.rows) so far
        self.units, self.unit = 0, "sentence"
        self.skips = Skips()
        self.unknown = UnknownWords(0, 0, [])
        self._encoder: Encoder | None = None
        self._tokenize = "words"
        self.first: Chunk | None = None  # the first chunk, prepared by start and not yet yielded

    def start(self, probes: list[Probe], encoder: Encoder, tokenize: str) -> Chunk:
        """Filter the first chunk by `probes` and tokenise it with `encoder`'s tokenizer (see probes.encoding.subwords
        for `tokenize`); so every later chunk."""
        self.probes, self._encoder, self._tokenize = probes, encoder, tokenize
        self.first = self._prepare(self._take())
        return self.first

    def __iter__(self) -> Iterator[Chunk]:
        return self

    def __next__(self) -> Chunk:
        """The next chunk, prepared (``start`` must have run): no reference to it stays here."""
        if self.first is not None:
            chunk, self.first = self.first, None
            return chunk
        sentences = self._take()
        if not sentences:
            raise StopIteration
        return self._prepare(sentences)

    def ahead(self, reading: Ahead) -> Iterator[Chunk]:
        """The chunks, as iterating the pass gives them, with the next chunk's sentences read from the stream on
        `reading`'s worker (probes.running.prefetch) while the caller feeds the current one: a run then holds two chunks'
        sentences at most. Each chunk is filtered and tokenised here, in the caller (``Probe.skip_reason`` may change
        a probe's state, which only the caller's thread touches). A reader's error in a later chunk (InputError,
        FILE:LINE) is raised when that chunk is asked for, as without the worker."""
        upcoming = reading.submit(self._take)
        if self.first is not None:
            chunk, self.first = self.first, None
            yield chunk
        while sentences := upcoming.result():
            upcoming = reading.submit(self._take)
            yield self._prepare(sentences)

    def _take(self) -> list[Sentence]:
        """The next chunk's sentences from the stream (none at its end)."""
        taken = self._carry[:CHUNK_SENTENCES]
        taken += islice(self._stream, CHUNK_SENTENCES - len(taken))
        self._carry = self._carry[CHUNK_SENTENCES:]
        return taken

    def _prepare(self, sentences: list[Sentence]) -> Chunk:
        """The chunk's usable sentences (the others counted in ``skips``), tokenised, indices run-wide."""
        offset = self.rows  # usable rows of the earlier chunks
        self.read += len(sentences)
        before = [p.state_dict() for p in self.probes] if self.restore else []
        usable = []
        for s in sentences:
            reason = next((r for p in self.probes if (r := p.skip_reason(s))), None)
            if reason:
                self.skips.by_probes[reason] = self.skips.by_probes.get(reason, 0) + 1
            else:
                usable.append(s)
        for p, saved in zip(self.probes, before):
            p.load_state_dict(saved)
        for p in self.probes:  # a document longer than the model becomes windows (probes.encoding.windows)
            usable = [row for s in usable for row in p.rows(s, self._encoder.tokenizer, self._encoder.max_length)]
        self.rows += len(usable)
        encoded, unfit = encode(self._encoder.tokenizer, usable, self._encoder.max_length, self._tokenize)
        for reason, n in unfit.items():
            self.skips.by_tokenizer[reason] = self.skips.by_tokenizer.get(reason, 0) + n
        self.unknown = self.unknown + unknown_words(self._encoder.tokenizer.unk_token_id, usable, encoded)
        self.scored += len(encoded)
        fed = [usable[e.index] for e in encoded]  # a document's windows are all cut here, in this chunk
        self.units += len({id(s.unit()) for s in fed})
        if any(s.unit() is not s for s in fed):
            self.unit = "document"
        for e in encoded:
            e.index += offset
        return Chunk(dict(enumerate(usable, offset)), encoded)


class RunCorpus:
    """The corpora of one run, read in chunks: the scored corpus (the first `limit` sentences, the shard's
    share of them) and the fit corpus of probes with a fit phase (probes.results.fitting), each a CorpusStream.

    Built before the model loads, it reads the first chunk of each (a reader's error in a corpus of one
    chunk comes before the model's, as from a whole read; in a later chunk, when the reading reaches it).
    Then ``start`` (whole-corpus pre-pass and first chunk), ``fit_chunks`` (the fit phase's chunks),
    ``scoring`` (the scoring pass, a Pass) and ``finish``. A corpus most of whose words tokenize only to the
    unknown token is refused (probes.encoding.subwords.UnknownWords.refuse) unless `allow_unknown`: a corpus of one chunk
    when its chunk is tokenised, before any forward pass; a longer one when every chunk is read.
    """

    def __init__(self, paths: list[str], format: str, *, limit: int | None, invalid_trees: str,
                 reader_options: dict[str, Any], shard: Shard, fit_paths: list[str], fit_format: str | None,
                 allow_unknown: bool = False):
        self.paths, self.shard, self.allow_unknown = paths, shard, allow_unknown
        self.source = CorpusStream(paths, format, limit=limit, invalid_trees=invalid_trees, **reader_options)
        self.sharding = ShardStream(shard)
        self.scoring = Pass(self.sharding.select(self.source))
        self.fit_source = CorpusStream(fit_paths, fit_format, limit=limit, invalid_trees=invalid_trees,
                                       **reader_options) if fit_paths else None
        # the fit phase's own pass (None: it fits on the scoring pass's first chunk)
        self.fit_pass = None if self.fit_source is None else Pass(self.fit_source)
        self.fit_fed: Chunk | None = None  # a fit corpus of one chunk: what the fit phase feeds of it

    def start(self, probes: list[Probe], encoder: Encoder, tokenize: str) -> None:
        """``Probe.prepare`` of each probe with a streamed pass over the whole corpus (after limit, every
        shard), then the scoring pass's first chunk; InputError where an unsharded run can score nothing."""
        for p in probes:
            p.prepare(self.source)
        first = self.scoring.start(probes, encoder, tokenize)
        if self.scoring.single and not first.encoded:
            self._check_scored(encoder)
        if self.scoring.single and not self.allow_unknown:
            self.scoring.unknown.refuse(self.paths[0])

    def longest(self, default: int) -> int:
        """The longest tokenised sentence of a one-chunk corpus (`default` where none is), else `default`:
        the longest a later chunk may hold."""
        first = self.scoring.first.encoded if self.scoring.single else []
        return max((len(e.input_ids) for e in first), default=default)

    def total(self, done: Pass) -> int | None:
        """Sentences a pass will feed, where it is one chunk (known ahead), else None."""
        return len(done.first.encoded) if done.single and done.first is not None else None

    def fit_chunks(self, fitting: list[Probe], probes: list[Probe], encoder: Encoder, tokenize: str) -> Iterable[Chunk]:
        """The chunks of the fit phase: of the fit corpus, filtered by the probes that fit; or (fit on the
        scored corpus) of the whole scored corpus (every shard), filtered by every probe (`probes`) as the
        scoring pass is, without counting its skips again: the scoring pass's first chunk where it is all.
        A fit corpus of one chunk is cut to the sentences the fitting probes read (``fitted_part``)."""
        if self.fit_source is None and self.shard.count == 1 and self.scoring.single:
            self.fit_fed = fitted_part(self.scoring.first, fitting)
            return [self.fit_fed]
        if self.fit_pass is not None:
            first = self.fit_pass.start(fitting, encoder, tokenize)
            if self.fit_pass.single and not first.encoded:
                self._check_fit()
        else:
            self.fit_pass = Pass(self.source, restore=True)
            self.fit_pass.start(probes, encoder, tokenize)
        if self.fit_pass.single:
            self.fit_fed = fitted_part(next(iter(self.fit_pass)), fitting)
            return [self.fit_fed]
        return self.fit_pass

    def scored_as_fit(self) -> list[Sentence] | None:
        """The sentences the scoring pass will feed, where they are also the fit phase's (no fit corpus of its own, an
        unsharded scored corpus of one chunk: ``fit_chunks`` would feed that chunk again), else None."""
        if self.fit_source is not None or self.shard.count != 1 or not self.scoring.single:
            return None
        first = self.scoring.first
        return [first.usable[e.index] for e in first.encoded]

    def fit_total(self) -> int | None:
        """Sentences the fit phase will feed, where known ahead (see ``total``)."""
        return None if self.fit_fed is None else len(self.fit_fed.encoded)

    def fit_settings(self, plan: FitPlan) -> dict:
        """What the results record of the fit (after the fit phase); InputError where the fit corpus had no
        usable sentence."""
        if self.fit_pass is None:
            return plan.settings(self.source.counts.files, self.scoring.scored, {})
        if self.fit_source is None:
            return plan.settings(self.source.counts.files, self.fit_pass.scored, {})
        self._check_fit()
        return plan.settings(self.fit_source.counts.files, self.fit_pass.scored,
                             with_counts(self.fit_source.counts.skipped, self.fit_pass.skips.counts()))

    def finish(self, encoder: Encoder) -> None:
        """After the scoring pass: InputError where an unsharded run scored nothing, or where most words tokenize
        only to the unknown token (unless allow_unknown); the unknown-word warning."""
        self._check_scored(encoder)
        if not self.allow_unknown:
            self.scoring.unknown.refuse(self.paths[0])
        self.scoring.unknown.warn(self.paths[0])

    def skipped(self) -> dict[str, int]:
        """The sentences set aside by the reader, then by the probes and the tokenizer (this shard's), by reason."""
        return with_counts(self.source.counts.skipped, self.scoring.skips.counts())

    def _check_scored(self, encoder: Encoder) -> None:
        if not self.scoring.scored and self.shard.count == 1:
            skipped = self.skipped()
            raise InputError(f"no sentence can be scored (of {self.scoring.read}: {skip_summary(skipped)}; "
                             f"model limit {encoder.max_length} subwords){missing_annotations(skipped)}", self.paths[0])

    def _check_fit(self) -> None:
        if not self.fit_pass.scored:
            skipped = with_counts(self.fit_source.counts.skipped, self.fit_pass.skips.counts())
            raise InputError(f"no sentence of the fit corpus can be used ({skip_summary(skipped)})",
                             self.fit_source.paths[0])


def missing_annotations(skipped: dict[str, int]) -> str:
    """For each skip reason ``no_<annotation>`` (``Probe.skip_reason``: the corpus lacks what a probe needs),
    "; <annotation> comes from --format <the formats that give it, and where>"; "" where there is none."""
    hints = [f"; {reason[3:]} comes from --format {formats}" for reason in skipped
             if reason.startswith("no_") and (formats := formats_giving(reason[3:]))]
    return "".join(hints)


def fitted_part(chunk: Chunk, fitting: list[Probe]) -> Chunk:
    """The sentences of a fit corpus's one chunk that some fitting probe reads (``Probe.fit_subset``), in order; all of
    them where any of the probes reads all. The fit of the others would compute their maps and drop them."""
    sentences = [chunk.usable[e.index] for e in chunk.encoded]
    tests = [p.fit_subset(sentences) for p in fitting]
    if any(test is None for test in tests):
        return chunk
    return Chunk(chunk.usable, [e for e, s in zip(chunk.encoded, sentences) if any(test(s) for test in tests)])


def with_counts(first: dict[str, int], then: dict[str, int]) -> dict[str, int]:
    """Counts by reason: `first`'s, `then`'s added (new reasons after)."""
    merged = dict(first)
    for reason, n in then.items():
        merged[reason] = merged.get(reason, 0) + n
    return merged
