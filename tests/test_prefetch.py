"""Reading and batching ahead of the model (probes.running.prefetch, probes.running.chunks.Pass.ahead, probes.running.runner.Feed) and the
batches' way to the device (probes.encoding.batching.transfer): the same results with and without the worker threads, a
reader's error in a later chunk reaches the caller as the same one line, and no thread outlives a run."""
from __future__ import annotations

import contextlib
import io
import threading

import pytest
import torch
from probe_corpora import grids, same

import probes
from probes.running import chunks
from probes.encoding.batching import transfer
from probes.cli import main
from probes.base.errors import InputError
from probes.running.prefetch import Ahead
from probes.running.runner import Feed

TINY = 7  # sentences a chunk: the runs below read several chunks
SENTENCE = "# sent_id = s{}\n1\tDogs\tdog\tNOUN\tNNS\t_\t2\tnsubj\t_\t_\n2\tbark\tbark\tVERB\tVB\t_\t0\troot\t_\t_\n\n"


def test_work_ahead_runs_in_order_and_hands_back_values_and_errors():
    seen: list[int] = []
    problem = InputError("bad row", "c.conllu", 12)

    def work(i: int) -> int:
        seen.append(i)
        if i == 3:
            raise problem
        return i * i

    for enabled in (True, False):
        seen.clear()
        with Ahead(enabled) as ahead:
            futures = [ahead.submit(work, i) for i in range(5)]
            assert [f.result() for f in futures[:3]] == [0, 1, 4]
            with pytest.raises(InputError) as e:
                futures[3].result()
            assert e.value is problem and str(e.value) == "c.conllu:12: bad row"  # the same error, its line intact
            assert futures[4].result() == 16
        assert seen == [0, 1, 2, 3, 4]


def test_leaving_the_block_joins_the_worker_and_drops_what_had_not_started():
    before = set(threading.enumerate())
    started, release = threading.Event(), threading.Event()
    ran: list[int] = []

    def slow(i: int) -> None:
        started.set()
        release.wait(5)
        ran.append(i)

    with pytest.raises(RuntimeError, match="the caller failed"):
        with Ahead() as ahead:
            first = ahead.submit(slow, 0)
            later = [ahead.submit(slow, i) for i in (1, 2)]
            started.wait(5)
            assert len(set(threading.enumerate()) - before) == 1  # one worker thread while the block runs
            release.set()
            raise RuntimeError("the caller failed")
    assert set(threading.enumerate()) == before  # joined on the way out
    assert first.done() and ran[0] == 0 and all(f.cancelled() or f.done() for f in later)


def test_runs_with_and_without_prefetch_are_identical(monkeypatch, minilm):
    """dep, pos fitted on the same corpus (its own pass over the chunks) and word_order (each batch built with its
    word-shuffled twin): 30 sentences of the EWT sample in chunks of 7, small
    batches. Every count and score equal, bit for bit; no thread left behind."""
    names = ["dep", "pos", "word_order"]
    monkeypatch.setattr(chunks, "CHUNK_SENTENCES", TINY)
    kwargs = dict(encoder=minilm, limit=30, fit_on="same", views=6, batch_size=4, progress=False)
    threads = set(threading.enumerate())
    ahead = probes.run(names, **kwargs)
    assert set(threading.enumerate()) == threads
    monkeypatch.setattr(Feed, "prefetch", False)
    inline = probes.run(names, **kwargs)
    for name in names:
        assert ahead[name].info.sentences == inline[name].info.sentences >= 25
        same(grids(ahead[name]), grids(inline[name]), name, atol=0)
        assert ahead[name].extra == inline[name].extra, name


def _broken_second_chunk(path) -> tuple[str, int]:
    """A CoNLL-U file of 12 good sentences, a row of five columns in the 10th (chunk 2 of 7-sentence chunks), then
    more good ones; the file and the bad row's line."""
    blocks = [SENTENCE.format(i) for i in range(14)]
    blocks[9] = "# sent_id = s9\n1\tonly five\tcols\t_\t_\n\n"
    path.write_text("".join(blocks), encoding="utf-8")
    return str(path), sum(b.count("\n") for b in blocks[:9]) + 2


def test_an_error_in_the_second_chunk_reaches_the_caller_as_the_same_line(monkeypatch, minilm, tmp_path):
    path, line = _broken_second_chunk(tmp_path / "broken.conllu")
    monkeypatch.setattr(chunks, "CHUNK_SENTENCES", TINY)
    threads = set(threading.enumerate())
    said, build = {}, Feed.build
    for prefetch in (True, False):
        monkeypatch.setattr(Feed, "prefetch", prefetch)
        fed: list[int] = []  # the sentences built into batches before the error: the whole first chunk, either way
        monkeypatch.setattr(Feed, "build", lambda self, s, items, seed: fed.append(len(items)) or build(self, s, items,
                                                                                                        seed))
        with pytest.raises(InputError) as e:
            probes.run(["dep"], encoder=minilm, corpus=path, progress=False)
        assert (e.value.path, e.value.line) == (path, line) and sum(fed) == TINY
        assert set(threading.enumerate()) == threads  # the reading thread that found it is joined
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            assert main(["run", "dep", "--corpus", path, "--out", str(tmp_path / f"out-{prefetch}")]) == 2
        said[prefetch] = stderr.getvalue()
        assert not (tmp_path / f"out-{prefetch}").exists()
    assert said[True] == said[False] == f"probes: error: {path}:{line}: {e.value.problem}\n"


class _Recorded:
    """Stands for a host tensor: records what transfer asks of it."""

    device = torch.device("cpu")

    def __init__(self):
        self.calls: list[tuple] = []

    def pin_memory(self) -> "_Recorded":
        self.calls.append(("pin_memory",))
        return self

    def to(self, device, non_blocking: bool = False) -> "_Recorded":
        self.calls.append(("to", torch.device(device), non_blocking))
        return self


def test_transfer_pins_and_copies_without_blocking_only_to_a_cuda_device():
    for device, calls in [("cuda", [("pin_memory",), ("to", torch.device("cuda"), True)]),
                          ("cuda:1", [("pin_memory",), ("to", torch.device("cuda:1"), True)]),
                          ("cpu", [("to", torch.device("cpu"), False)]),
                          ("mps", [("to", torch.device("mps"), False)])]:
        tensor = _Recorded()
        assert transfer(tensor, torch.device(device)) is tensor
        assert tensor.calls == calls, device
    ids = torch.tensor([[101, 7, 102], [101, 102, 0]])
    assert transfer(ids, torch.device("cpu")) is ids  # the CPU path: the tensor itself, no copy
