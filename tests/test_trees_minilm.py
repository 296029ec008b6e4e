"""trees end to end with the packaged MiniLM: the bundled EWT sample, and EWT dev → test with --select-on."""
from __future__ import annotations

import numpy as np
import pytest

import probes
from probes.corpus import read_corpus
from probes.base.defaults import bundled_corpus
from state_checks import assert_same

pytestmark = pytest.mark.integration


def _branching(limit: int) -> dict[str, tuple[float, float]]:
    """Right- and left-branching UAS (directed, undirected) counted word by word, independently of the probe."""
    hits = {"right_branching": [0, 0], "left_branching": [0, 0]}
    arcs = 0
    for s in read_corpus([bundled_corpus()], format="conllu").sentences[:limit]:
        n, gold = len(s.words), s.ann["head"]
        trees = {"right_branching": [d - 1 for d in range(1, n + 1)],
                 "left_branching": [d + 1 if d < n else 0 for d in range(1, n + 1)]}
        for name, pred in trees.items():
            for d, g in enumerate(gold, start=1):
                hits[name][0] += pred[d - 1] == g
                hits[name][1] += pred[d - 1] == g or (g > 0 and pred[g - 1] == d)
        arcs += n
    return {k: (v[0] / arcs, v[1] / arcs) for k, v in hits.items()}


def test_bundled_sample(minilm):
    runs = {bs: probes.run(["trees"], encoder=minilm, limit=24, batch_size=bs, progress=False)["trees"] for bs in (1, 16)}
    r = runs[16]
    words = sum(len(s.words) for s in read_corpus([bundled_corpus()], format="conllu").sentences[:24])
    assert r.overall.count == words and r.info.sentences == 24
    for grid in [r.overall.scores, *r.overall.extra.values()]:
        assert grid.shape == (6, 12) and np.all((grid >= 0) & (grid <= 1))
    for name, (uas, undirected) in _branching(24).items():
        assert r.baselines[name] == {"uas": uas, "undirected_uas": undirected, "count": words}
    e = r.extra["ensemble"]
    assert 1 <= len(e["heads"]) <= 4 and e["selected_on"]["on"] == "same" and e["sample_sentences"] == 24
    best = r.best()
    assert e["selection_uas"][0] == best.score  # selected on the scored sentences: the best head comes first
    assert_same(runs[1], r)  # one sentence per batch or sixteen padded together: every tree the same


@pytest.mark.slow
@pytest.mark.shared
def test_ewt_dev_to_test(minilm, shared_corpora):
    ewt = shared_corpora / "ud-english-ewt"
    r = probes.run(["trees"], encoder=minilm, corpus=ewt / "en_ewt-ud-test.conllu", fit=ewt / "en_ewt-ud-dev.conllu",
                   limit=60, progress=False)["trees"]
    e = r.extra["ensemble"]
    assert e["selected_on"]["on"] == "fit" and e["selected_on"]["corpus"][0].endswith("en_ewt-ud-dev.conllu")
    assert e["sample_sentences"] == 60 and e["count"] == r.overall.count
    assert max(r.overall.scores.max(), e["uas"]) > max(b["uas"] for b in r.baselines.values())


@pytest.mark.shared
def test_decoded_on_the_device_as_on_the_host(minilm, shared_corpora):
    """--tree-decoding device (here the CPU's tensors) on the first 64 sentences of EWT dev: every number of the
    result equal to the host's decoding, the head ensemble's too (only the option itself differs)."""
    corpus = shared_corpora / "ud-english-ewt" / "en_ewt-ud-dev.conllu"
    host, device = (probes.run(["trees"], encoder=minilm, corpus=corpus, limit=64, progress=False,
                               tree_decoding=where)["trees"] for where in ("host", "device"))
    assert host.options.pop("tree_decoding") == "host" and device.options.pop("tree_decoding") == "device"
    assert host.overall.count == device.overall.count > 900
    assert_same(host, device)


@pytest.mark.parametrize("fit", [None, "bundled"])
def test_the_fit_feeds_the_selection_sample_alone(minilm, fit):
    """A fit corpus of one chunk is cut to the sentences trees' selection sample keeps (the 8 of smallest key of 40):
    the fit phase feeds those alone, and the result is the one of a fit fed every sentence; beside pos fitting on
    a fit corpus of its own (its centroids read every sentence) the fit feeds all 40."""
    from unittest import mock

    from probes.builtin.trees.probe import TreesProbe
    from probes.builtin.pos import PosProbe
    from probes.running import chunks

    settings = {"limit": 40, "select_sentences": 8, "progress": False,
                **({} if fit is None else {"fit": bundled_corpus()})}
    fed: dict[str, int] = {}

    def counted(cls):
        plain = cls.fit_update

        def fit_update(self, batch, maps):
            if maps.layer == 0:
                fed[cls.name] = fed.get(cls.name, 0) + len(batch.sentences)
            return plain(self, batch, maps)
        return mock.patch.object(cls, "fit_update", fit_update)

    with counted(TreesProbe):
        cut = probes.run(["trees"], encoder=minilm, **settings)["trees"]
    assert fed == {"trees": 8} and cut.extra["ensemble"]["sample_sentences"] == 8
    fed.clear()
    with counted(TreesProbe), mock.patch.object(chunks, "fitted_part", lambda chunk, fitting: chunk):
        whole = probes.run(["trees"], encoder=minilm, **settings)["trees"]
    assert fed == {"trees": 40}
    assert_same(cut, whole)
    fed.clear()
    with counted(TreesProbe), counted(PosProbe):
        probes.run(["trees", "pos"], encoder=minilm, **settings)
    # on the scored corpus pos fits in the scoring pass (Probe.fit_beside): the fit phase is trees' sample alone
    assert fed == ({"trees": 8} if fit is None else {"trees": 40, "pos": 40})
