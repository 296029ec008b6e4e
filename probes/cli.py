"""The `probes` command: thin wrappers over the library functions.

Bad input (a corpus, model or option the run cannot use) prints one line, ``probes: error:
FILE:LINE: problem``, and exits with code 2, leaving no output files behind.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from probes.errors import InputError

EPILOG_RUN = """\
examples:
  probes run dep                                   # bundled EWT sample + packaged MiniLM
  probes run dep --model bert-base-cased --corpus en_ewt-ud-test.conllu --out results/
  probes run dep --model ./my-finetuned-checkpoint --corpus dev.conllu --batch-size 64 --subtypes

Several probes in one run share one forward pass. Sentences longer than the model accepts are
skipped and counted (never cut). Results: DIR/<probe>.json, .csv and heatmaps (see README).
"""


def build_parser() -> argparse.ArgumentParser:
    from probes import __version__
    from probes.pooling import POOLING_RULES
    from probes.registry import available

    parser = argparse.ArgumentParser(prog="probes", description="Parameter-free probing of transformer attention "
                                     "heads: which heads encode which linguistic relations, with no classifier trained.")
    parser.add_argument("--version", action="version", version=f"probes {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    run = sub.add_parser("run", help="score every attention head with one or more probes",
                         description="Score every attention head of a model with one or more probes on a corpus.",
                         epilog=EPILOG_RUN, formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("probes", nargs="+", metavar="PROBE", help="probe names (see `probes list`)")
    run.add_argument("--model", help="checkpoint directory or hub name (default: the packaged all-MiniLM-L6-v2)")
    run.add_argument("--corpus", action="append", metavar="FILE",
                     help="corpus file; repeat for several (default: the bundled UD English EWT sample)")
    run.add_argument("--format", help="corpus format (default: from the file name; e.g. conllu)")
    run.add_argument("--out", metavar="DIR", help="write DIR/<probe>.json, .csv and heatmaps (default: print a table)")
    run.add_argument("--batch-size", type=int, default=32, help="sentences per forward pass (default 32)")
    run.add_argument("--max-length", type=int, help="most subwords per sentence incl. special tokens "
                     "(default: the model's limit); longer sentences are skipped and counted")
    run.add_argument("--limit", type=int, help="use only the first N sentences of the corpus")
    run.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    run.add_argument("--pool", default="mean-sum", choices=POOLING_RULES,
                     help="subword→word pooling, QUERY-KEY (default mean-sum: a word's row is the mean of its "
                     "subwords' rows, its column the sum of their columns, as in Clark et al. 2019)")
    run.add_argument("--code", action="append", metavar="FILE.py", help="import a Python file that registers probes")
    run.add_argument("--no-plots", action="store_true", help="write JSON and CSV only, no heatmaps")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    seen: dict[str, str] = {}
    group = run.add_argument_group("probe options")
    for cls in available().values():
        for option in cls.options:
            if option.name in seen:
                continue
            seen[option.name] = cls.name
            flag = "--" + option.name.replace("_", "-")
            text = f"[{cls.name}] {option.help}"
            if option.type is bool:
                group.add_argument(flag, dest=f"opt_{option.name}", action="store_true", default=None, help=text)
            else:
                group.add_argument(flag, dest=f"opt_{option.name}", type=option.type, choices=option.choices,
                                   default=None, help=f"{text} (default {option.default})")

    sub.add_parser("list", help="list the registered probes", description="List the registered probes.")

    show = sub.add_parser("show", help="print the best heads of a results file",
                          description="Print a table of the best head per label, with counts and baselines.")
    show.add_argument("results", metavar="DIR/PROBE.json", help="a results file written by `probes run --out`")
    show.add_argument("--top", type=int, default=0, help="only the N most frequent labels (default: all)")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        _preload_code(argv)
        args = build_parser().parse_args(argv)
        return COMMANDS[args.command](args)
    except InputError as e:
        print(f"probes: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("probes: interrupted; nothing written", file=sys.stderr)
        return 130


def _preload_code(argv: list[str]) -> None:
    """Import --code files before building the parser, so their probes and options are known."""
    from probes.registry import load_code

    for i, arg in enumerate(argv):
        if arg == "--code" and i + 1 < len(argv):
            load_code(argv[i + 1])
        elif arg.startswith("--code="):
            load_code(arg.split("=", 1)[1])


def cmd_run(args: argparse.Namespace) -> int:
    from probes.runner import run
    from probes.show import format_table

    options = {k[4:]: v for k, v in vars(args).items() if k.startswith("opt_") and v is not None}
    results = run(args.probes, model=args.model, corpus=args.corpus, format=args.format, batch_size=args.batch_size,
                  max_length=args.max_length, limit=args.limit, device=args.device, pool=args.pool,
                  progress=False if args.quiet else None, **options)
    for name, result in results.items():
        if args.out:
            written = result.save(Path(args.out), plots=not args.no_plots)
            print(f"{name}: {result.info.sentences} sentences scored, {sum(result.info.skipped.values())} skipped; "
                  f"wrote {len(written)} files to {args.out}")
        else:
            print(format_table(result))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from probes.registry import available

    probes = available()
    width = max(len(n) for n in probes)
    for name, cls in probes.items():
        print(f"{name:<{width}}  {cls.description}")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from probes.results import load_result
    from probes.show import format_table

    print(format_table(load_result(args.results), top=args.top))
    return 0


COMMANDS = {"run": cmd_run, "list": cmd_list, "show": cmd_show}

if __name__ == "__main__":
    sys.exit(main())
