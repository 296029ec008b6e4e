"""Output that says what it is (issue 42 items 3, 7, 8): what a result scored and what it compares its heads with,
named by the result itself in the table, its warning and the figure's title; `run --out` prints the table, and a
run without a terminal prints progress lines; `run --help` in sections with one meaning per flag; the model's own
special tokens named in `probes show` and the report; counts, signs and columns written right."""
from __future__ import annotations

import io
import json
import re

import numpy as np
from PIL import Image

import probes
from probes.tools.arguments import chosen_options, chosen_settings
from probes.builtin.coref import BASELINE_NAME
from probes.cli import build_parser, main
from probes.results.presentation import Presentation
from probes.base.progress import LINE_SECONDS, ProgressLines, progress_bar
from probes.results.probe_result import LabelScores, ProbeResult, RunInfo, load_result
from probes.settings.run_settings import GROUPS, RunSettings, flag_of
from probes.tools.show import format_result, format_table
from probes.base.wording import counted, fixed

SENTENCE = "1\tDogs\tdog\tNOUN\tNNS\t_\t2\tnsubj\t_\t_\n2\tbark\tbark\tVERB\tVBP\t_\t0\troot\t_\t_\n\n"


def coref_like(margin_below: bool = True) -> ProbeResult:
    """A coref-shaped result on 1 layer × 2 heads, 24 windows of 3 documents: pronoun's best head L0-H0 0.4 against
    head_match 0.6 (not above it), overall L0-H1 0.7 against nearest 0.5, its 95% interval [0.6, 0.8] above it."""
    info = RunInfo("m", ["a.conll"], 1, 2, 24, {}, {"replicates": 100}, {})
    pronoun = LabelScores(40, np.array([[0.4, 0.1]]), ci_low=np.array([[0.3, 0.0]]), ci_high=np.array([[0.5, 0.2]]))
    overall = LabelScores(60, np.array([[0.2, 0.7]]), ci_low=np.array([[0.1, 0.6]]), ci_high=np.array([[0.3, 0.8]]))
    baselines = {"kinds": ["nearest", "head_match"],
                 "labels": {"pronoun": {"count": 40, "best": 0.6, "best_offset": "head_match"}},
                 "overall": {"count": 60, "best": 0.5, "best_offset": "nearest"}}
    return ProbeResult("coref", info, {}, {"pronoun": pronoun}, overall, baselines=baselines, unit="windows",
                       documents=3, baseline_name=BASELINE_NAME)


def test_a_result_names_what_it_scored_and_what_it_compares_with(tmp_path):
    result = coref_like()
    assert result.scored() == "24 windows of 3 documents"
    assert BASELINE_NAME == "best baseline (nearest, head_match or an offset)"
    table = format_table(result).splitlines()
    assert table[0].startswith("coref · m · 24 windows of 3 documents scored, 0 skipped · ")
    assert table[-1] == ("warning: best head not above its best baseline (nearest, head_match or an offset): "
                         "pronoun (L0-H0 0.400 ≤ head_match 0.600)")
    result.save(tmp_path)  # the names travel with the result: `probes show` reads them from the file
    back = load_result(tmp_path / "coref.json")
    assert (back.unit, back.documents, back.baseline_name) == ("windows", 3, BASELINE_NAME)
    assert format_table(back) == format_table(result)
    png = Presentation.figures(result)["coref.png"]
    title = Image.open(io.BytesIO(png)).text["Title"]
    assert title.endswith("· dot: 95% interval above its best baseline (nearest, head_match or an offset)")
    sentences = ProbeResult("dep", RunInfo("m", ["c.conllu"], 1, 2, 1, {}, {}, {}), {}, {}, result.overall)
    assert (sentences.scored(), sentences.compared_with()) == ("1 sentence", "best baseline")  # names none


def test_dep_compares_with_its_best_offset(tmp_path, tiny_model):
    corpus = tmp_path / "c.conllu"
    corpus.write_text(SENTENCE * 4, encoding="utf-8")
    result = probes.run("dep", model=str(tiny_model("bert")), corpus=corpus, replicates=0, progress=False)["dep"]
    assert (result.unit, result.documents, result.baseline_name) == ("sentences", None, "best offset baseline")
    assert result.scored() == "4 sentences"


def test_run_out_prints_the_table_then_the_files(tmp_path, capsys, tiny_model):
    corpus = tmp_path / "c.conllu"
    corpus.write_text(SENTENCE * 3, encoding="utf-8")
    argv = ["run", "dep", "--model", str(tiny_model("bert")), "--corpus", str(corpus), "--replicates", "0",
            "--quiet"]
    assert main(argv) == 0
    plain = capsys.readouterr().out
    out = tmp_path / "out"
    assert main([*argv, "--out", str(out), "--no-plots"]) == 0
    printed = capsys.readouterr().out
    assert printed == plain + f"dep: wrote 2 files to {out}\n"
    assert plain == format_result(load_result(out / "dep.json")) + "\n"
    assert plain.startswith("dep · ") and "3 sentences scored" in plain.splitlines()[0]
    assert load_result(out / "dep.json").info.annotation == "gold" and "  gold nsubj " in plain  # a treebank's


def test_progress_lines_at_each_tenth_or_after_a_while(capsys):
    now = [0.0]
    lines = ProgressLines(20, "probing", "sent", clock=lambda: now[0])
    for _ in range(20):
        now[0] += 1
        lines.update(1)
    err = capsys.readouterr().err.splitlines()
    assert err == [f"probing: {2 * k}/20 sent ({10 * k}%), {2 * k} s" for k in range(1, 11)]
    slow = ProgressLines(1000, "probing", "sent", clock=lambda: now[0])
    slow.update(1)  # 0.1%, at once: nothing yet
    now[0] += LINE_SECONDS
    slow.update(1)  # no tenth passed, but LINE_SECONDS since the last line
    unknown = ProgressLines(None, "study", "unit", clock=lambda: now[0])
    unknown.update(3)
    now[0] += LINE_SECONDS
    unknown.update(1)
    assert capsys.readouterr().err.splitlines() == ["probing: 2/1000 sent (0%), 30 s", "study: 4 unit, 30 s"]


def test_a_run_without_a_terminal_prints_progress_lines(tmp_path, capsys, tiny_model):
    """Under pytest stderr is not a terminal: the default progress is lines, one a batch of one sentence here (a
    tenth of ten each), none with progress=False."""
    corpus = tmp_path / "c.conllu"
    corpus.write_text(SENTENCE * 10, encoding="utf-8")
    encoder = probes.load_encoder(str(tiny_model("bert")))
    probes.run(["dep"], encoder=encoder, corpus=corpus, batch_size=1, replicates=0)
    err = capsys.readouterr().err.splitlines()
    assert [line.split(", ")[0] for line in err] == [f"probing: {k}/10 sent ({10 * k}%)" for k in range(1, 11)]
    probes.run(["dep"], encoder=encoder, corpus=corpus, batch_size=1, replicates=0, progress=False)
    assert capsys.readouterr().err == ""
    with progress_bar(10, None) as bar:  # stderr is no terminal: lines, not tqdm
        assert not bar.enabled and bar.lines is not None
    with progress_bar(10, False) as bar:
        assert bar.lines is None


def test_run_help_in_sections_and_one_meaning_per_flag():
    run = build_parser().commands["run"]
    titles = [g.title for g in run._action_groups]
    assert titles[2:7] == list(GROUPS)  # after positional arguments and options
    assert "dep options" in titles and "seg options" in titles and "head_distance, word_order options" in titles
    where = {a.option_strings[0]: g.title for g in run._action_groups for a in g._group_actions if a.option_strings}
    for f in RunSettings.__dataclass_fields__.values():
        flag = flag_of(f.name)
        if flag is not None:
            assert where[flag] == (f.metadata["group"] or "options"), flag
    assert (where["--corpus"], where["--model"], where["--out"], where["--subtypes"]) == (
        "reading", "capture", "output", "dep options")
    flags = [s for a in run._actions for s in a.option_strings]
    assert len(flags) == len(set(flags))
    help_text = run.format_help()
    assert help_text.count("  --examples N ") == 1 and help_text.count("  --seg-examples N ") == 1


def test_examples_is_the_views_and_seg_has_its_own():
    parser = build_parser()
    args = parser.parse_args(["run", "seg", "--examples", "5"])
    assert chosen_settings(args)["views"] == 5 and "examples" not in chosen_options(args)
    args = parser.parse_args(["run", "seg", "--seg-examples", "4"])
    assert chosen_settings(args)["views"] == 20 and chosen_options(args) == {"seg_examples": 4}


def test_show_and_report_name_the_models_special_tokens(tmp_path, capsys, tiny_model):
    from probes.tools.report import build_report

    corpus = tmp_path / "c.conllu"
    corpus.write_text(SENTENCE * 2, encoding="utf-8")
    for family, start, end in (("bert", "[CLS]", "[SEP]"), ("roberta", "<s>", "</s>")):
        out = tmp_path / family
        assert main(["run", "dep", "--model", str(tiny_model(family)), "--corpus", str(corpus), "--replicates", "0",
                     "--quiet", "--no-plots", "--out", str(out)]) == 0
        shown = capsys.readouterr().out
        assert f"→   0 {start}" in shown and "[ROOT]" not in shown  # the root arc of "bark"
        assert load_result(out / "dep.json").extra["sentence_views"]["specials"] == [start, end]
        html = build_report([out])
        data = json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>', html, re.S)[1])
        assert {tuple(s["specials"]) for s in data["models"][0]["sentences"].values()} == {(start, end)}


def test_counts_signs_and_columns():
    assert (counted(1, "label"), counted(2, "label"), counted(1, "window"), counted(3, "entry", "entries")) == (
        "1 label", "2 labels", "1 window", "3 entries")
    assert (fixed(-0.0004), fixed(-0.0004, "+.3f"), fixed(-0.0006), fixed(0.0), fixed(float("nan"))) == (
        "0.000", "+0.000", "-0.001", "0.000", "nan")
    info = RunInfo("m", ["c"], 1, 2, 10, {}, {"min_count": 20}, {})
    labels = {"prefix_matching": LabelScores(30, np.array([[0.5, 0.2]])),
              "rare": LabelScores(3, np.array([[0.5, 0.2]]))}
    base = {"labels": {"prefix_matching": {"best": 0.5004, "best_offset": -1}},
            "overall": {"best": 0.0, "best_offset": 1}}
    result = ProbeResult("induction", info, {}, labels, LabelScores(33, np.array([[-0.0001, 0.0]])), baselines=base)
    lines = format_table(result).splitlines()
    header, rows = lines[1], lines[3:5]
    assert {count_end(line) for line in rows} == {header.index("count") + len("count")}
    assert rows[0].split()[:6] == ["prefix_matching", "30", "L0-H0", "0.500", "offset", "-1"]
    assert rows[0].split()[6:] == ["0.500", "+0.000"]  # 0.5 - 0.5004 is not written -0.000
    assert rows[1].split()[1:] == ["33", "no", "best", "head:", "the", "top", "score", "is", "0"]
    assert "1 label below the minimum count (20 instances) not shown; --all-labels shows them" in lines
    assert "-0.000" not in "\n".join(lines)


def test_the_decoders_table_keeps_its_columns(tmp_path):
    from causal_models import make_checkpoint

    from probes.tools.detect import DETECTORS, detect

    folder = make_checkpoint("gpt2", tmp_path / "gpt2")
    induction = detect(DETECTORS, str(folder), count=6, length=10, sequence_seed=5, replicates=20)["induction"]
    lines = format_table(induction, all_labels=True).splitlines()
    header = lines[1]
    rows = [line for line in lines[3:] if line.split()[0] in (*induction.labels, "overall")]
    assert {line.split()[0] for line in rows} == {"copying", "prefix_matching", "overall"}
    for line in rows:  # the count column ends, and the head column starts, where the header's do
        assert count_end(line) == header.index("count") + len("count"), line
        assert line.index(line.split()[2]) == header.index("best head"), line


def count_end(line: str) -> int:
    """Where a table row's count ends (the label, then spaces, then the count)."""
    return re.match(r"\S+\s+\d+", line).end()
