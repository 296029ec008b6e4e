"""What the command line says (issue 25 item 5): the skip reasons under a run's summary line, the formats that give
what a probe needs, the command's own usage and the closest option for an unknown one, and compare's --sort."""
from __future__ import annotations

import numpy as np
import pytest

from probes.cli import main
from probes.corpus.readers import GIVES
from probes.results.probe_result import LabelScores, ProbeResult, RunInfo

SENTENCE = "1\tDogs\tdog\tNOUN\tNNS\t_\t2\tnsubj\t_\t_\n2\tbark\tbark\tVERB\tVBP\t_\t0\troot\t_\t_\n\n"
LONG = "".join(f"{i}\tw{i}\t_\tNOUN\tNN\t_\t{0 if i == 1 else 1}\t{'root' if i == 1 else 'dep'}\t_\t_\n"
               for i in range(1, 9)) + "\n"  # 8 words: 10 subwords with [CLS] and [SEP], more than --max-length 8


def info(sentences: int, skipped: dict[str, int]) -> RunInfo:
    return RunInfo("m", ["c.conllu"], 1, 2, sentences, skipped, {}, {})


def test_skip_note_names_the_reasons_above_a_tenth():
    frames = info(67, {"longer_than_12_words": 1445, "no_frame_elements": 405, "no_frame_instance_left": 83})
    assert frames.skip_note() == ("skipped: 1445 longer than 12 words, 405 no frame elements, 83 no frame instance "
                                  "left (97% of the 2000 sentences read)")
    assert info(90, {"too_long": 10}).skip_note() is None  # 10 of 100: not more than a tenth
    assert info(89, {"too_long": 11}).skip_note() == "skipped: 11 too long (11% of the 100 sentences read)"
    assert info(5, {}).skip_note() is None


def test_run_prints_the_skip_reasons_under_its_summary(tmp_path, capsys, tiny_model):
    corpus = tmp_path / "c.conllu"
    corpus.write_text(SENTENCE + LONG * 3, encoding="utf-8")
    out = tmp_path / "out"
    assert main(["run", "dep", "--model", str(tiny_model("bert")), "--corpus", str(corpus), "--out", str(out),
                 "--max-length", "8", "--replicates", "0", "--no-plots", "--quiet"]) == 0
    lines = capsys.readouterr().out.splitlines()  # the table, as `probes show` prints it, then the files written
    assert lines[0].startswith("dep · ") and " · 1 sentence scored, 3 skipped · " in lines[0]
    assert lines[1] == "  skipped: 3 too long (75% of the 4 sentences read)"
    assert lines[-1] == f"dep: wrote 2 files to {out}"
    assert main(["show", str(out / "dep.json")]) == 0
    assert capsys.readouterr().out.splitlines() == lines[:-1]


def test_a_corpus_without_what_the_probe_needs_names_the_formats_that_give_it(tmp_path, capsys, tiny_model):
    corpus = tmp_path / "c.conllu"
    corpus.write_text(SENTENCE * 2, encoding="utf-8")
    assert main(["run", "srl", "--model", str(tiny_model("bert")), "--corpus", str(corpus), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"probes: error: {corpus}: no sentence can be scored (of 2: 2 no srl; model limit 64 subwords); "
                   "srl comes from --format propbank (Universal PropBank: column 11 each predicate's roleset, then "
                   "one column of roles per predicate) or conll2012 (CoNLL-2012: one column per predicate from "
                   "column 11)")
    assert [name for name, gives in GIVES.items() if "srl" in gives] == ["propbank", "conll2012"]


@pytest.mark.parametrize("argv, error", [
    (["run", "dep", "--limt", "50"], "probes run: error: unrecognized arguments: --limt 50; did you mean --limit?"),
    (["run", "dep", "--limt=50", "--corpsu", "x"],
     "probes run: error: unrecognized arguments: --limt=50 --corpsu x; did you mean --limit for --limt, --corpus "
     "for --corpsu?"),
    (["compare", "--sortt", "score"], "probes compare: error: unrecognized arguments: --sortt score; did you mean "
                                       "--sort?"),
    (["list", "--bogus"], "probes list: error: unrecognized arguments: --bogus"),
])
def test_unknown_option_gets_its_commands_usage_and_the_closest_option(capsys, argv, error, tmp_path):
    if argv[0] == "compare":
        argv = [argv[0], str(tmp_path), str(tmp_path), *argv[1:]]
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: probes {argv[0]} ") and err.splitlines()[-1] == error


def _result(model: str, bests: dict[str, tuple[int, float]]) -> ProbeResult:
    """dep on 1 layer × 2 heads: each label's (count, best score at L0-H0; L0-H1 scores 0.01)."""
    labels = {label: LabelScores(count, np.array([[score, 0.01]])) for label, (count, score) in bests.items()}
    return ProbeResult("dep", RunInfo(model, ["c.conllu"], 1, 2, 50, {}, {}, {}), {}, labels,
                       LabelScores(300, np.array([[0.5, 0.01]])))


@pytest.mark.parametrize("sort, order", [
    ("count", ["amod", "det", "nsubj", "overall"]),  # 100, 80, 60 instances in A and B
    ("score", ["nsubj", "det", "amod", "overall"]),  # B's best 0.9, 0.7, 0.5
    ("delta", ["det", "nsubj", "amod", "overall"]),  # |Δbest| 0.5, 0.4, 0.1
    ("label", ["amod", "det", "nsubj", "overall"]),
])
def test_compare_sorts_the_labels(tmp_path, capsys, sort, order):
    a = _result("a", {"nsubj": (30, 0.5), "amod": (50, 0.6), "det": (40, 0.2)})  # corpus order: nsubj, amod, det
    b = _result("b", {"nsubj": (30, 0.9), "amod": (50, 0.5), "det": (40, 0.7)})
    a.save(tmp_path / "A")
    b.save(tmp_path / "B")
    assert main(["compare", str(tmp_path / "A"), str(tmp_path / "B"), "--sort", sort]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.startswith("dep ")]
    assert [row[1] for row in rows] == order
    if sort == "count":  # the default
        assert main(["compare", str(tmp_path / "A"), str(tmp_path / "B")]) == 0
        assert [line.split()[1] for line in capsys.readouterr().out.splitlines() if line.startswith("dep ")] == order
