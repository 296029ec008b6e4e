"""pos, ner and con fitted in the scoring pass itself (probes.running.runner._beside, Probe.fit_beside): where the fit
corpus is the scored corpus of one chunk, the run makes one forward pass instead of two, and every result, its
per-sentence views included, is that of the fit phase followed by the scoring pass (the same batches in the same
order: the same vectors, the same centroids), with MiniLM on the bundled EWT sample and on EWT dev (pos), on UNER
English EWT (ner) and on a CRAFT article (con)."""
from __future__ import annotations

import pytest
from probe_corpora import probe_run_arguments
from rows_alone import rows_alone
from state_checks import assert_same

import probes
from probes.base.defaults import bundled_corpus
from probes.running import runner
from probes.running.runner import Feed
from test_capture_invariance import short_of_memory


def _run(names, minilm, monkeypatch, *, beside: bool, **settings):
    """The run's results and the method of every Feed.all it made, fitting beside the scoring pass or not."""
    passes: list[str] = []
    plain = Feed.all

    def counted(self, probes_, method, *args, **kwargs):
        passes.append(method)
        return plain(self, probes_, method, *args, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(Feed, "all", counted)
        if not beside:
            patched.setattr(runner, "BESIDE_SHARE", 0.0)
        results = probes.run(names, encoder=minilm, progress=False, **settings)
    return results, passes


@pytest.mark.parametrize("names", [["pos"], ["dep", "pos"], ["pos", "trees"]])
def test_pos_fitted_beside_the_scoring_pass_gives_the_two_pass_results(names, minilm, monkeypatch):
    beside, one = _run(names, minilm, monkeypatch, beside=True, views=6)
    apart, two = _run(names, minilm, monkeypatch, beside=False, views=6)
    assert two == ["fit_update", "update"]
    assert one == (["fit_update", "update"] if "trees" in names else ["update"])  # trees still fits first, alone
    for name in names:
        assert_same(beside[name], apart[name], name)
    assert beside["pos"].extra["sentence_views"]["sentences"][0]["marks"]  # pos's own view, scored after the pass
    assert beside["pos"].extra["fit"] == apart["pos"].extra["fit"]


@pytest.mark.parametrize("name", ["ner", "con"])
def test_ner_and_con_fitted_beside_the_scoring_pass_give_the_two_pass_results(name, minilm, monkeypatch, tmp_path,
                                                                               request):
    """ner on 40 sentences of UNER English EWT, con on a CRAFT article's Penn trees, both on the same split."""
    kwargs = probe_run_arguments(name, tmp_path, lambda: request.getfixturevalue("shared_corpora"))
    beside, one = _run([name], minilm, monkeypatch, beside=True, views=6, **kwargs)
    apart, two = _run([name], minilm, monkeypatch, beside=False, views=6, **kwargs)
    assert (one, two) == (["update"], ["fit_update", "update"])
    assert beside[name].overall.count > 0 and beside[name].extra["sentence_views"]["sentences"]
    assert_same(beside[name], apart[name], name)


def test_a_word_shuffled_twin_or_a_fit_corpus_keeps_the_fit_phase(minilm, monkeypatch, tmp_path):
    """Beside a probe that runs a word-shuffled twin the scoring batches are not the fit's (half the sentences a
    batch), and a fit corpus of its own is another corpus: the fit phase runs first, as before."""
    _, passes = _run(["pos", "word_order"], minilm, monkeypatch, beside=True, limit=20)
    assert passes == ["fit_update", "update"]
    _, passes = _run(["pos"], minilm, monkeypatch, beside=True, limit=20, fit=[bundled_corpus()])
    assert passes == ["fit_update", "update"]


def test_a_batch_out_of_memory_under_fit_beside_is_kept_once(minilm, monkeypatch, capsys):
    """A scoring batch of 12 fails at its layer 2 (pos has fitted and kept its first layers): the state and the kept
    vectors go back to before it, its halves are fed, and the results are those of an undisturbed run."""
    settings = {"limit": 12, "batch_size": 12, "views": 4}
    rows_alone(monkeypatch)  # the same maps in the batch of 12 and its halves
    undisturbed, _ = _run(["dep", "pos"], minilm, monkeypatch, beside=True, **settings)
    tried = short_of_memory(monkeypatch, 6)
    split, passes = _run(["dep", "pos"], minilm, monkeypatch, beside=True, **settings)
    assert passes == ["update"] and tried == [12, 6, 6]
    assert capsys.readouterr().err.count("ran out of memory") == 1
    for name in ("dep", "pos"):
        assert_same(split[name], undisturbed[name], name)


@pytest.mark.slow
def test_pos_on_ewt_dev_fitted_beside_is_the_two_pass_run(minilm, monkeypatch, shared_corpora):
    corpus = str(shared_corpora / "ud-english-ewt" / "en_ewt-ud-dev.conllu")
    beside, one = _run(["pos"], minilm, monkeypatch, beside=True, corpus=corpus)
    apart, two = _run(["pos"], minilm, monkeypatch, beside=False, corpus=corpus)
    assert (one, two) == (["update"], ["fit_update", "update"])
    assert_same(beside["pos"], apart["pos"], "pos")
    assert beside["pos"].overall.count == 25_147  # the tagged words of EWT dev
